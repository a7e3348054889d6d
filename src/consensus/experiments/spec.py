"""Sweep specs: load, validate, resolve and expand into trials (format in ``consensus.experiments.study``).

Resolution (``resolve_spec``), every error a ``ConfigError`` raised before anything runs:

* top-level keys ⊆ {study, trials, seed, workers, llm, params, sweep}; ``study`` is a registered name;
* ``trials`` (default ``Study.default_trials``) is an integer >= 1, ``workers`` (default: the CPU count)
  an integer in [1, ``MAX_WORKERS``], ``seed`` (default 0) an integer >= 0;
* the sweep holds at most ``MAX_TRIALS`` trials (grid points x ``trials``);
* ``params`` and ``sweep`` keys ⊆ ``Study.defaults`` (an old name in ``Study.renamed``: refused, naming the new
  one); a key may not be in both; ``sweep`` (default
  ``Study.default_sweep``) maps each axis to a non-empty list without repeated values;
* every value must fit the type of its default (bool / number / string / list / mapping; a default of
  None accepts anything); numbers must be finite (YAML's .nan/.inf are refused) and are normalised to
  the default's type (``rounds: 10.0`` -> 10, ``llm_temperature: 0`` -> 0.0), so equal values give equal
  trial keys and seeds;
* ``llm`` keys ⊆ ``LLM_DEFAULTS`` (defaults from ``consensus.settings.LLMParams``), checked
  for range; the block is kept only when some trial uses an LLM (``Study.uses_llm``); ``llm.endpoints`` (a pool,
  ``consensus.llm.pool``) is a list of {base_url, model, concurrency} and makes ``concurrency`` their sum;
* ``Study.validate`` is called once per grid point with the full parameters.

Expansion (``expand``): the grid is the cartesian product of the sweep axes in the spec's order; each
grid point is repeated ``trials`` times (index 0..trials-1). A trial's

* ``params`` = study defaults, updated with ``params``, updated with the grid point;
* ``key`` = ``"axis=value,axis=value#index"`` (``"#index"`` without sweep axes), values as compact JSON
  (strings bare) — unique within a sweep, stable across runs, used by resume;
* ``seed`` = the first 8 bytes of SHA-256 over ``"<spec seed>\\n<full params as compact JSON, sorted
  keys>\\n<index>"``, as an integer below 2**63. It depends on nothing else (not on the trial count,
  worker count or execution order). A study that hands it to a 32-bit seed API reduces it itself.

Identity (``identity``): what must not change when a run directory is resumed — everything except the
execution settings ``workers``, ``trials`` (changing it adds or leaves out indices; keys and seeds of the
others stay) and the LLM endpoint/throughput settings in ``EXECUTION_LLM_KEYS``.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

import yaml

from consensus.errors import ConfigError
from consensus.llm.backends import backend_spec, names as backend_names
from consensus.settings import read_yaml
from consensus.experiments.study import Study, Trial
from consensus.runs.rundir import _jsonable as jsonable

TOP_LEVEL_KEYS = ("study", "trials", "seed", "workers", "llm", "params", "sweep")
LLM_BACKENDS = backend_names()          # consensus.llm.backends
MAX_TRIALS = 1_000_000     # trials of one sweep (all are expanded in memory before anything runs)
MAX_WORKERS = 256           # a worker is a process (CPU sweeps) or a thread (LLM sweeps)
EXECUTION_LLM_KEYS = ("base_url", "api_key_env", "concurrency", "timeout_s", "max_retries", "n_parallel", "endpoints")
ENDPOINT_KEYS = ("base_url", "model", "concurrency")


#: slots of a sweep's embedded server: the most generated tokens per second on a 2-core machine, the setting that
#: gained in every measured run (benchmarks/bench_llm_batch.py; docs/benchmarks.md, 'Why the code is as it is');
#: a sweep asks ``min(concurrency, n_parallel)`` requests at once
EMBEDDED_SLOTS = 2
EMBEDDED_CONTEXT = 8192          # the slots' shared (unified) KV cache: 4096 tokens per slot


def _llm_defaults() -> dict[str, Any]:
    """The ``llm`` block's keys and defaults: the ``llm_*`` fields of ``consensus.settings.LLMParams`` (one source)."""
    from consensus.settings import LLMParams

    d = {f.name: f.default for f in fields(LLMParams)}
    return {"backend": d["llm_backend"], "model": d["llm_model"], "base_url": d["llm_base_url"],
            "api_key_env": d["llm_api_key_env"], "temperature": d["llm_temperature"],
            "max_tokens": d["llm_max_tokens"], "timeout_s": d["llm_timeout_s"],
            "max_retries": d["llm_max_retries"], "concurrency": d["llm_concurrency"],
            "replay_path": d["replay_path"], "n_ctx": EMBEDDED_CONTEXT, "n_parallel": EMBEDDED_SLOTS, "endpoints": []}


LLM_DEFAULTS: dict[str, Any] = _llm_defaults()


def _llm_ranges() -> dict[str, tuple]:
    """(low, high) inclusive bounds of the numeric llm settings: the ranges of ``consensus.settings.LLMParams``'
    fields (one source: ``consensus run``, the nodes and a sweep refuse the same values), plus the embedded server's
    own ``n_ctx`` and ``n_parallel``."""
    from consensus.settings import LLMParams, field_ranges

    ranges = field_ranges(LLMParams)
    return {**{key: ranges[f"llm_{key}"] for key in ("temperature", "max_tokens", "timeout_s", "max_retries",
                                                      "concurrency")},
            "n_ctx": (256, 131072), "n_parallel": (1, 64)}


_LLM_RANGES = _llm_ranges()


@dataclass(frozen=True)
class ExperimentSpec:
    """A resolved, validated sweep spec (see the module docstring)."""
    study: str
    trials: int
    seed: int
    workers: int
    params: dict[str, Any]                 # full fixed parameters: study defaults + spec params (no sweep axes)
    sweep: dict[str, list]                 # axis -> values, in the spec's order
    llm: dict[str, Any] = field(default_factory=dict)   # resolved llm block; empty when no trial uses an LLM

    @property
    def uses_llm(self) -> bool:
        return bool(self.llm)

    def to_dict(self) -> dict[str, Any]:
        """The spec as stored in ``spec.yaml`` (loadable again by ``resolve_spec``)."""
        d: dict[str, Any] = {"study": self.study, "trials": self.trials, "seed": self.seed, "workers": self.workers}
        if self.llm:
            d["llm"] = {k: v for k, v in self.llm.items() if k != "endpoints" or v}   # no endpoint pool: not stored
        d["params"] = dict(self.params)
        d["sweep"] = {k: list(v) for k, v in self.sweep.items()}
        return d

    def identity(self) -> dict[str, Any]:
        """The part of the spec that defines the trials' outcomes (compared on resume)."""
        return spec_identity(self.to_dict())

    def grid_size(self) -> int:
        n = 1
        for values in self.sweep.values():
            n *= len(values)
        return n


def spec_identity(stored: Mapping[str, Any]) -> dict[str, Any]:
    """``ExperimentSpec.identity`` of a stored spec mapping (``spec.yaml``)."""
    d = {k: v for k, v in stored.items() if k not in ("workers", "trials")}
    if isinstance(d.get("llm"), dict):
        d["llm"] = {k: v for k, v in d["llm"].items() if k not in EXECUTION_LLM_KEYS}
    return d


def identity_diff(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Human-readable differences ``"params.rounds: 10 -> 20"`` between two identities."""
    out = []
    for key in list(old) + [k for k in new if k not in old]:
        a, b = old.get(key, "(absent)"), new.get(key, "(absent)")
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(identity_diff(a, b, f"{prefix}{key}."))
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out


# ---------------------------------------------------------------------------------------------
def load_spec_file(path: str | os.PathLike) -> dict[str, Any]:
    """The raw mapping of a spec YAML file (ConfigError if missing, not YAML, or not a mapping)."""
    p = Path(path)
    data = read_yaml(p, "spec file")
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a sweep spec must be a mapping (study: ..., trials: ..., sweep: ...)")
    return data


def dump_spec(spec: ExperimentSpec) -> str:
    return yaml.safe_dump(spec.to_dict(), sort_keys=False, default_flow_style=None, allow_unicode=True)


def _where(source: str, key: str) -> str:
    return f"{source}: {key}" if source else key


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _integer(source: str, key: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not _is_int(value) or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"{_where(source, key)} must be an integer {bound}, got {value!r}")
    return value


def fit_type(where: str, value: Any, default: Any) -> Any:
    """``value`` checked against (and numbers normalised to) the type of ``default``; ConfigError if it does not fit."""
    if default is None:
        return value
    if isinstance(default, bool):
        ok, out = isinstance(value, bool), value
    elif _is_int(default):
        ok = _is_int(value) or (isinstance(value, float) and value.is_integer())
        out = int(value) if ok else value
    elif isinstance(default, float):
        ok = _is_number(value) and math.isfinite(value)
        out = float(value) if ok else value
    elif isinstance(default, str):
        ok, out = isinstance(value, str), value
    elif isinstance(default, (list, tuple)):
        ok, out = isinstance(value, (list, tuple)), list(value) if isinstance(value, (list, tuple)) else value
    elif isinstance(default, dict):
        ok, out = isinstance(value, dict), value
    else:
        ok, out = True, value
    if not ok:
        kind = {bool: "true/false", int: "an integer", float: "a finite number", str: "a string", list: "a list",
                tuple: "a list", dict: "a mapping"}.get(type(default), type(default).__name__)
        raise ConfigError(f"{where} must be {kind} (default {default!r}), got {value!r}")
    return out


def _unknown(source: str, what: str, keys: list[str], known: Mapping[str, Any]) -> ConfigError:
    return ConfigError(f"{_where(source, what)}: unknown key(s) {', '.join(repr(k) for k in keys)}; "
                       f"valid: {', '.join(known) or '(none)'}")


def _parameter_section(source: str, study: Study, raw: Any, section: str, shape: str) -> dict[str, Any]:
    """``raw`` (None = empty) checked to be a mapping whose keys are all parameters of ``study``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{_where(source, section)} must be a mapping of {shape}, got {raw!r}")
    for key in raw:
        renamed = study.renamed_error(key, _where(source, f"{section}.{key}"))
        if renamed is not None:
            raise renamed
    bad = [k for k in raw if k not in study.defaults]
    if bad:
        raise _unknown(source, section, bad, study.defaults)
    return raw


def _resolve_params(source: str, study: Study, raw: Any) -> dict[str, Any]:
    raw = _parameter_section(source, study, raw, "params", "parameter: value")
    return {k: fit_type(_where(source, f"params.{k}"), v, study.defaults[k]) for k, v in raw.items()}


def _resolve_sweep(source: str, study: Study, raw: Any) -> dict[str, list]:
    raw = _parameter_section(source, study, raw, "sweep", "parameter: [values]")
    sweep: dict[str, list] = {}
    for axis, values in raw.items():
        where = _where(source, f"sweep.{axis}")
        if not isinstance(values, (list, tuple)):
            raise ConfigError(f"{where} must be a list of values, got {values!r}")
        if not values:
            raise ConfigError(f"{where} is an empty list: a sweep axis needs at least one value")
        fitted = [fit_type(f"{where}[{i}]", v, study.defaults[axis]) for i, v in enumerate(values)]
        labels = [_label(v) for v in fitted]
        dup = sorted({lab for lab in labels if labels.count(lab) > 1})
        if dup:
            raise ConfigError(f"{where} repeats value(s) {', '.join(dup)}")
        sweep[axis] = fitted
    return sweep


def _resolve_llm(source: str, raw: Any) -> dict[str, Any]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{_where(source, 'llm')} must be a mapping (backend: ..., model: ...), got {raw!r}")
    bad = [k for k in raw if k not in LLM_DEFAULTS]
    if bad:
        raise _unknown(source, "llm", bad, LLM_DEFAULTS)
    llm = dict(LLM_DEFAULTS)
    for key, value in raw.items():
        empty = [] if key == "endpoints" else ""
        llm[key] = fit_type(_where(source, f"llm.{key}"), empty if value is None else value, LLM_DEFAULTS[key])
    if llm["backend"] not in backend_names():
        raise ConfigError(f"{_where(source, 'llm.backend')} must be one of {', '.join(backend_names())}, "
                          f"got {llm['backend']!r}")
    if backend_spec(llm["backend"]).needs_replay_path and not llm["replay_path"]:
        raise ConfigError(f"{_where(source, 'llm.replay_path')} is required with backend 'replay'")
    for key, (low, high) in _LLM_RANGES.items():
        if not low <= llm[key] <= high:
            raise ConfigError(f"{_where(source, f'llm.{key}')} must be in [{low}, {high}], got {llm[key]!r}")
    if llm["endpoints"]:
        llm["endpoints"] = _resolve_endpoints(source, raw, llm)
        llm["concurrency"] = sum(e["concurrency"] for e in llm["endpoints"])
    return llm


def _resolve_endpoints(source: str, raw: Mapping[str, Any], llm: dict[str, Any]) -> list[dict[str, Any]]:
    """``llm.endpoints``: a list of {base_url, model (default llm.model), concurrency (default llm.concurrency)};
    the block's ``concurrency`` becomes their sum (given, it must equal it), and ``base_url`` must be empty."""
    out = []
    for k, entry in enumerate(llm["endpoints"]):
        where = _where(source, f"llm.endpoints[{k}]")
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be a mapping {{base_url, model, concurrency}}, got {entry!r}")
        bad = [key for key in entry if key not in ENDPOINT_KEYS]
        if bad:
            raise _unknown(source, f"llm.endpoints[{k}]", bad, dict.fromkeys(ENDPOINT_KEYS))
        url = entry.get("base_url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}.base_url must be an http(s):// URL, got {url!r}")
        model = fit_type(f"{where}.model", entry.get("model") or llm["model"], "")
        concurrency = _integer(source, f"llm.endpoints[{k}].concurrency",
                               entry.get("concurrency", LLM_DEFAULTS["concurrency"]), 1, _LLM_RANGES["concurrency"][1])
        out.append({"base_url": url, "model": model, "concurrency": concurrency})
    urls = [e["base_url"] for e in out]
    if len(set(urls)) < len(urls):
        raise ConfigError(f"{_where(source, 'llm.endpoints')} lists an endpoint twice")
    if llm["base_url"]:
        raise ConfigError(f"{_where(source, 'llm')}: give either base_url or endpoints, not both")
    total = sum(e["concurrency"] for e in out)
    if "concurrency" in raw and raw["concurrency"] != total:
        raise ConfigError(f"{_where(source, 'llm.concurrency')} is the sum of the endpoints' concurrency ({total}) "
                          f"when llm.endpoints is given; got {raw['concurrency']!r} (leave it out)")
    if total > _LLM_RANGES["concurrency"][1]:
        raise ConfigError(f"{_where(source, 'llm.endpoints')}: their concurrency adds up to {total}, more than "
                          f"{_LLM_RANGES['concurrency'][1]}")
    return out


def resolve_spec(raw: Mapping[str, Any], studies: Mapping[str, Study], *, source: str = "") -> ExperimentSpec:
    """Validate a raw spec mapping against the registered ``studies`` (module docstring); ConfigError if bad."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source or 'spec'}: a sweep spec must be a mapping, got {raw!r}")
    bad = [k for k in raw if k not in TOP_LEVEL_KEYS]
    if bad:
        raise ConfigError(f"{source or 'spec'}: unknown key(s) {', '.join(repr(k) for k in bad)}; "
                          f"valid: {', '.join(TOP_LEVEL_KEYS)}")
    name = raw.get("study")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{_where(source, 'study')} must name a study; available: {', '.join(sorted(studies))}")
    if name not in studies:
        raise ConfigError(f"unknown study {name!r}; available: {', '.join(sorted(studies)) or '(none registered)'}")
    study = studies[name]
    trials = _integer(source, "trials", raw.get("trials", study.default_trials), 1)
    seed = _integer(source, "seed", raw.get("seed", 0), 0)
    workers = _integer(source, "workers", raw.get("workers", min(os.cpu_count() or 1, MAX_WORKERS)), 1,
                       MAX_WORKERS)
    fixed = _resolve_params(source, study, raw.get("params"))
    sweep = _resolve_sweep(source, study, raw["sweep"] if "sweep" in raw else study.default_sweep)
    both = [k for k in sweep if k in fixed]
    if both:
        raise ConfigError(f"{source or 'spec'}: {', '.join(both)} given both in params and in sweep")
    llm = _resolve_llm(source, raw.get("llm"))
    params = jsonable({**study.defaults, **fixed})      # tuples -> lists: what YAML and results.jsonl hold
    for axis in sweep:
        params.pop(axis)
    spec = ExperimentSpec(study=name, trials=trials, seed=seed, workers=workers, params=params, sweep=sweep)
    if spec.grid_size() * trials > MAX_TRIALS:
        raise ConfigError(f"{source or 'spec'}: {spec.grid_size()} grid point(s) x {trials} trials is more than "
                          f"{MAX_TRIALS:,} trials; split the sweep")
    points = grid(spec)
    _validate_points(study, points)
    if not any(study.uses_llm(p) for p in points):
        return spec
    if llm["backend"] == "replay":          # a missing transcript, or one with no valid record: refused now
        from consensus.llm.transcripts import check_replayable

        check_replayable(Path(llm["replay_path"]).expanduser())
    return replace(spec, llm=llm)


def _validate_points(study: Study, points: list[dict]) -> None:
    if study.validate is None:
        return
    for p in points:
        try:
            study.validate(p)
        except ConfigError:
            raise
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"study {study.name}: invalid parameters: {exc}") from None


# ---------------------------------------------------------------------------------------------
def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True)


def grid(spec: ExperimentSpec) -> list[dict[str, Any]]:
    """The full parameters of every grid point, in sweep order (the last axis varies fastest)."""
    axes = list(spec.sweep)
    return [{**spec.params, **dict(zip(axes, values))}
            for values in itertools.product(*(spec.sweep[a] for a in axes))]


def point_label(point: Mapping[str, Any], axes: list[str]) -> str:
    """``"axis=value,axis=value"`` of a grid point ("" without sweep axes)."""
    return ",".join(f"{a}={_label(point[a])}" for a in axes)


def trial_key(point: Mapping[str, Any], axes: list[str], index: int) -> str:
    return f"{point_label(point, axes)}#{index}"


#: a field renamed after trial seeds were published -> the name its seed hashes (``canonical_params``): a rename of
#: a word is no change of behaviour, so every trial keeps its seed and every study its figures
HASHED_AS = {"single_process": "fleet"}


def canonical_params(params: Mapping[str, Any]) -> str:
    """Compact JSON of ``params`` with sorted keys (what the trial seed hashes), a renamed field under the name it
    had when the seeds were fixed (``HASHED_AS``)."""
    params = {HASHED_AS.get(k, k): v for k, v in params.items()}
    return json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def trial_seed(seed: int, params: Mapping[str, Any], index: int, *, canonical: str | None = None) -> int:
    """``SHA-256("<spec seed>\\n<canonical_params(params)>\\n<index>")``, first 8 bytes, below 2**63."""
    blob = f"{seed}\n{canonical if canonical is not None else canonical_params(params)}\n{index}"
    return int.from_bytes(hashlib.sha256(blob.encode("utf-8")).digest()[:8], "big") >> 1


def expand(spec: ExperimentSpec) -> list[Trial]:
    """Every trial of the sweep: grid points in order, each repeated ``spec.trials`` times."""
    axes = list(spec.sweep)
    trials = []
    for point in grid(spec):
        label, canonical = point_label(point, axes), canonical_params(point)
        trials += [Trial(key=f"{label}#{i}", index=i, seed=trial_seed(spec.seed, point, i, canonical=canonical),
                         params=dict(point)) for i in range(spec.trials)]
    return trials


# ---------------------------------------------------------------------------------------------
def parse_value(text: str, default: Any) -> Any:
    """A CLI value: YAML (``4``, ``0.7``, ``true``, ``[1, 2]``), kept as the raw text for string parameters; a
    number for a float parameter also where YAML 1.1 reads a string (``1e300``, ``inf``: then refused by range)."""
    if isinstance(default, str):
        return text
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, str) and isinstance(default, float):     # YAML 1.1 reads 1e300 as a string
        try:
            return float(text)
        except ValueError:
            pass
    return value


def _split_assignment(flag: str, item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"{flag} expects KEY=VALUE, got {item!r}")
    return key.strip(), value.strip()


def apply_overrides(raw: Mapping[str, Any], studies: Mapping[str, Study], *, trials: int | None = None,
                    seed: int | None = None, workers: int | None = None, planner: str | None = None,
                    llm: Mapping[str, Any] | None = None, sets: list[str] = (), sweeps: list[str] = ()
                    ) -> dict[str, Any]:
    """A copy of the raw spec with CLI flags applied (validation is left to ``resolve_spec``).

    ``sets`` (``KEY=VALUE``) fix a parameter and drop its sweep axis; ``sweeps`` (``KEY=V1,V2`` or
    ``KEY=[V1, V2]``) replace or add one axis; ``planner`` is ``--set planner=...``; ``llm`` entries
    (None = not given) update the llm block.
    """
    out = dict(raw)
    for key, value in (("trials", trials), ("seed", seed), ("workers", workers)):
        if value is not None:
            out[key] = value
    given_llm = {k: v for k, v in (llm or {}).items() if v is not None}
    if given_llm:
        block = out.get("llm") or {}
        if not isinstance(block, dict):
            raise ConfigError(f"llm must be a mapping, got {block!r}")
        block = dict(block)
        if given_llm.get("endpoints"):
            block.pop("concurrency", None)          # a new pool: the sum of its endpoints'
        elif given_llm.get("base_url"):
            block.pop("endpoints", None)            # one endpoint instead of the pool
        out["llm"] = {**block, **given_llm}
    sets = list(sets) + ([f"planner={planner}"] if planner is not None else [])
    if not sets and not sweeps:
        return out
    study = studies.get(out.get("study")) if isinstance(out.get("study"), str) else None
    params = out.get("params") or {}
    sweep = out.get("sweep", study.default_sweep if study else {}) or {}
    if study is None or not isinstance(params, dict) or not isinstance(sweep, dict):
        return out                                   # resolve_spec reports the unknown study / bad section
    params, sweep = dict(params), dict(sweep)
    for flag, items in (("--set", sets), ("--sweep", sweeps)):
        for item in items:
            key, text = _split_assignment(flag, item)
            renamed = study.renamed_error(key, f"{flag} {item}")
            if renamed is not None:
                raise renamed
            if key not in study.defaults:
                raise ConfigError(f"{flag} {item}: study {study.name} has no parameter {key!r}; "
                                  f"valid: {', '.join(study.defaults)}")
            default = study.defaults[key]
            if flag == "--set":
                params[key] = parse_value(text, default)
                sweep.pop(key, None)
            else:
                values = parse_value(text, None) if text.startswith("[") else \
                    [parse_value(v.strip(), default) for v in text.split(",") if v.strip()]
                sweep[key] = values
                params.pop(key, None)
    out["params"], out["sweep"] = params, sweep
    return out
