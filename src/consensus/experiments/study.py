"""The contract between the experiment runner and a study (one named preset per study).

A *study* knows its parameters, how to run one trial, and how to report a finished sweep. The runner
(``consensus.experiments.runner``) knows nothing about any paper: it expands the sweep, runs trials on a
worker pool, appends one JSON record per trial to ``results.jsonl``, resumes, replays and calls ``report``.

A sweep spec (YAML, or built from CLI flags) looks like::

    study: consensus-1d          # a registered study name
    trials: 300                  # repetitions per grid point (trial index 0..trials-1)
    seed: 0                      # base seed; each trial gets its own seed derived from (seed, params, index)
    workers: 2                   # worker pool size
    llm:                         # only for studies that call an LLM (backend: openai | embedded | replay)
      backend: openai
      model: gpt-4o-mini
      base_url: http://127.0.0.1:8000/v1
      concurrency: 16            # at most this many LLM requests in flight over the whole sweep
      temperature: 0.7
    params:                      # fixed parameters (override the study's defaults)
      rounds: 10
    sweep:                       # cartesian product of these lists
      num_agents: [2, 4, 6, 8]
      llm_temperature: [0.0, 0.7]

Unknown keys (top level, in ``params`` or in ``sweep``) are errors: a study declares every parameter it
accepts in ``Study.defaults``. A parameter renamed so that a word means one thing in every scenario is listed in
``Study.renamed`` (old name -> new, e.g. its config class's ``FlatParams.renamed_fields()``): the old name is refused
with a message naming the new one (in a spec's ``params``/``sweep`` and in ``--set``/``--sweep``).

Each line of ``results.jsonl`` (what ``Study.report`` receives, failed trials included)::

    {"key": ..., "index": 0, "seed": 123, "params": {...}, "status": "ok" | "failed",
     "reason": "" | "<why it failed>", "result": {...} | null, "elapsed_s": 0.01,
     "llm": {"calls": 12, "errors": 0}}          # "llm" only for trials that were given a client

``Study.report`` receives the records of the sweep's trials in expansion order (grid points in sweep
order, then index); a trial not run yet (interrupted sweep) has no record.

A trial is recorded as "failed" with a reason when ``run_trial`` raises (``TrialFailed``: its message;
any other exception: ``"<Type>: <message>"``), and also when its LLM fell back, so that a fallback
never passes for the model's answer:

* the study reports its planners' fallbacks as ``result[LLM_FALLBACKS_KEY]`` — an int, or a mapping
  ``{reason: count}`` such as ``consensus.scenarios.aggregation.planners.llm`` counters' ``"fallbacks"``; any non-zero
  count
  marks the trial failed with reason ``"LLM fallback (<reasons>)"`` (the result is kept in the record);
* the runner also marks it failed when the client raised ``LLMError`` to the trial at all.

LLM requests: ``TrialContext.llm`` rewrites each request's ``seed`` to a per-call seed derived from
the trial seed and the request's ``tag`` (see ``consensus.experiments.runner``), so give every request
of a trial a distinct ``tag`` (as ``LLMPlanner`` does: ``robot_<i>/round_<r>``) and do not send two
requests with the same tag at the same time; record/replay of the sweep is then exact.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from consensus.errors import ConfigError
from consensus.llm.base import LLMClient


@dataclass(frozen=True)
class Trial:
    """One unit of work. ``key`` is unique and stable in a sweep (used for resume and in results.jsonl)."""
    key: str                   # e.g. "num_agents=4,llm_temperature=0.7#17"
    index: int                 # repetition index at this grid point (0-based)
    seed: int                  # derived deterministically from (spec seed, params, index)
    params: dict[str, Any]     # the study defaults, updated with spec params and this grid point


@dataclass
class TrialContext:
    """What a trial may use besides its parameters."""
    llm: LLMClient | None = None   # shared, concurrency-bounded client (None for studies without LLM)
    llm_settings: dict = field(default_factory=dict)   # the spec's llm block (model, temperature, ...)
    out_dir: Path | None = None    # the run directory (a trial may write side files under trials/<key>/)


#: result key through which a study reports its LLM fallbacks (int or {reason: count}); non-zero -> failed
LLM_FALLBACKS_KEY = "llm_fallbacks"


class TrialFailed(Exception):
    """Raise from ``run_trial`` to record the trial as failed with this reason (not an exception trace)."""


@dataclass(frozen=True)
class Study:
    name: str                                   # CLI preset name, e.g. "consensus-1d"
    description: str                            # one line for --help and the report
    defaults: dict[str, Any]                    # every accepted parameter with its default value
    default_sweep: dict[str, list]              # the paper's sweep (used when the spec gives none)
    default_trials: int                         # repetitions per grid point when the spec gives none
    run_trial: Callable[[Trial, TrialContext], dict]   # returns a JSON-able record of outcomes
    report: Callable[[Sequence[dict], Path], list[str]]  # writes figures into the dir, returns markdown lines
    uses_llm: Callable[[dict], bool] = lambda params: False   # does a trial with these params call an LLM?
    validate: Callable[[dict], None] | None = None   # raise ConfigError for invalid parameter values
    llm_calls: Callable[[dict], int] | None = None   # most LLM requests one trial makes, retries aside (estimate)
    parallel_trial: bool = False                 # a trial uses every core itself (numba threads): no process pool
    renamed: Mapping[str, str] = field(default_factory=dict)   # old parameter name -> new (refused, naming the new)

    def renamed_error(self, key: str, where: str) -> ConfigError | None:
        """The error for a parameter ``key`` this study renamed (None when it is not one of ``renamed``)."""
        if key in self.defaults or key not in self.renamed:
            return None
        return ConfigError(f"{where}: parameter {key!r} is now called {self.renamed[key]!r} (study {self.name}; "
                           f"one meaning per word across scenarios)")


class StudyRegistry(Protocol):
    def __call__(self) -> dict[str, Study]: ...


def config_params(cls, *, exclude: tuple[str, ...] = (), keep: tuple[str, ...] = (), **extra) -> dict:
    """A study's ``defaults`` built from its scenario's config class ``cls``: every field with its default, except
    what is not a study parameter (derived, not listed by hand: the run group's fields, the trial's seed and run
    directory, and the LLM group's transport settings, which come from the spec's ``llm:`` block, but for the LLM
    fields in ``keep``: paper 1 sweeps ``llm_temperature``), except ``exclude``; plus ``extra`` (study-only
    parameters such as ``condition``). The trial's config is then built by the same class, so a study has the same
    names and checks as ``consensus run``."""
    from dataclasses import fields

    from consensus.settings import LLMParams, RunParams

    study_llm = {"parse_retries", "prompt_style", *keep}   # how agents are asked: a study may sweep them
    not_params = {f.name for f in fields(RunParams)} | {f.name for f in fields(LLMParams)} - study_llm
    return {**{k: v for k, v in cls().to_dict().items() if k not in not_params and k not in exclude}, **extra}
