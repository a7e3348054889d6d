"""Run settings: the one parameter set that the CLI, the headless runners and every ROS node share.

A scenario's config is a dataclass that composes the groups below (by inheritance: in Python the fields stay flat,
``cfg.kp``; each is a ROS parameter nested by its group, ``control.kp``: ``ros_names``) and adds its own fields and
checks::

    @dataclass
    class MyConfig(RobotBaseConfig):         # or FlatParams + the groups it needs
        my_field: int = param(3, "what it means", bounds=(1, 10))
        def check(self) -> None:
            need(self.my_field > 0, "my_field must be positive")

The same YAML serves all three users. It is a ROS 2 parameters file with a single ``/**:`` section, its groups as
nested mappings, so ``ros2 launch`` and ``--ros-args --params-file`` read it directly (``fleet.num_robots``) and
``load_flat`` reads it here (``num_robots``; ``--set`` and the launch arguments name the fields too)::

    /**:
      ros__parameters:
        fleet:
          num_robots: 4
        ...

``FlatParams.validate`` runs each group's checks once (``_check_<group>`` of every class in the MRO), then every
field's own rule (``FlatParams.field_problem``: the field's bounds; a float must be finite unless the field is
``nonfinite``; an int fits ROS's 64 bits), then the scenario's ``check``; the first bad field is one
``ConfigError``. The ranges are the one source of the bounds: the CLI (``consensus run``, ``--set``, params files),
the launch arguments, the studies and the nodes' parameter descriptors (``consensus.ros.params.declare_config``)
all check a value through them, so a value one of them accepts no other refuses. Every duration (``*_s``) and rate
(``*_hz``) field has a range with a finite upper bound. Values are coerced by the fields' annotations
(``list[str]``, ``list[float]``, ``bool``, ...), never by their names. A scenario may redeclare a group field to
change its default (e.g. a longer ``llm_timeout_s``); the group's bounds still apply.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import yaml

from consensus.errors import ConfigError
from consensus.llm.embedded import DEFAULT_MODEL_NAME
from consensus.control.motion import KINEMATICS as _KINEMATICS, sim_names as _sim_names, sim_spec
from consensus.llm.backends import names as _backend_names
from consensus.llm.styles import PROMPT_STYLES     # how LLM agents are asked and answer

BACKENDS = _backend_names()          # consensus.llm.backends: the one list of LLM backends
KINEMATICS = _KINEMATICS                 # consensus.control.motion: the one list of kinematics
EXECUTORS = ("events", "single")
SIMS = _sim_names()     # who moves the robots (consensus.control.motion: our simulator, turtlesim, gz sim, hardware)
COLLISION_AVOIDANCE = ("auto", "cbf", "none")       # ControlParams.collision_avoidance


def need(cond: bool, msg: str) -> None:
    """A validation step: ``ConfigError(msg)`` unless ``cond``."""
    if not cond:
        raise ConfigError(msg)


def param(default: Any = dataclasses.MISSING, doc: str = "", *, bounds: tuple[float, float] | None = None,
          unit: str = "", runtime: bool = False, nonfinite: bool = False, group: str = "", leaf: str = "") -> Any:
    """A config field with its metadata, the one place its meaning is written down::

        v_max: float = param(1.0, "speed limit", bounds=(1e-6, 1e2), unit="m/s", runtime=True)

    ``doc`` is the field's meaning (the ROS parameter description, the CLI's and launch arguments' help, the table
    in docs/parameters.md); ``bounds`` its inclusive range (checked by ``validate`` for every entry point and
    published in the ROS descriptors); ``unit`` its unit; ``runtime`` marks a field a running robot applies when it
    changes (every other parameter is read-only once a node has started); ``nonfinite`` a float field whose
    meaning includes .inf or .nan (every other float must be finite). A list default is copied per instance. A
    group or scenario that redeclares a field to change its default writes ``param(new_default)`` and keeps the
    rest of the field's metadata; what it does give (a doc of its own) wins (``field_meta``). ``group`` and ``leaf``
    name its ROS parameter ``<group>.<leaf>`` when they differ from the rule of ``ros_names`` (the class's ``GROUP``;
    the field's name without the group's prefix)."""
    meta = {k: v for k, v in (("doc", doc), ("bounds", bounds), ("unit", unit), ("runtime", runtime),
                              ("nonfinite", nonfinite), ("group", group), ("leaf", leaf)) if v}
    if isinstance(default, list):
        items = list(default)
        return field(default_factory=lambda: list(items), metadata=meta)
    return field(default=default, metadata=meta)


_FIELD_META: dict[type, dict[str, dict[str, Any]]] = {}     # field_meta, per class


def field_meta(cls: type) -> dict[str, dict[str, Any]]:
    """Each field of the config dataclass ``cls`` -> its metadata (``param``: doc, bounds, unit, runtime,
    nonfinite), merged along the MRO: a redeclaration keeps the base's entries and overrides those it gives."""
    meta = _FIELD_META.get(cls)
    if meta is None:
        meta = {}
        for klass in reversed(cls.__mro__):
            for f in (vars(klass).get("__dataclass_fields__") or {}).values():
                meta.setdefault(f.name, {}).update(f.metadata)
        names = {f.name for f in fields(cls)}
        meta = _FIELD_META[cls] = {k: v for k, v in meta.items() if k in names}
    return meta


_ROS_NAMES: dict[type, dict[str, str]] = {}     # ros_names, per class


def field_group(cls: type, name: str) -> str:
    """The group of field ``name`` of the config class ``cls``: its ``param(group=...)``, else the ``GROUP`` of the
    class that declares it first (a scenario that redeclares a group's field to change its default keeps it in the
    group); a class without a ``GROUP`` of its own is named by ``_group_of_class``."""
    meta = field_meta(cls)[name]
    if meta.get("group"):
        return meta["group"]
    for klass in reversed(cls.__mro__):
        if name in vars(klass).get("__annotations__", {}):
            return vars(klass).get("GROUP") or _group_of_class(klass)
    raise KeyError(name)


def _group_of_class(klass: type) -> str:
    """The group of a class without a ``GROUP``: its name in snake case without ``Params``/``Config``
    (``SpacingParams`` -> ``spacing``)."""
    stem = re.sub(r"(Params|Config)$", "", klass.__name__) or klass.__name__
    return re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower()


def ros_names(cls: type) -> dict[str, str]:
    """Each field of the config class ``cls`` -> its ROS parameter name, nested by group: ``<group>.<leaf>``
    (``kp`` -> ``control.kp``, ``llm_backend`` -> ``llm.backend``: the leaf is the field's name without the group's
    ``<group>_`` prefix unless that leaves a bare unit, or what ``param(leaf=...)`` names). The CLI's ``--set`` and
    the launch arguments keep the fields' own names; the parameters files and the nodes' parameters use these
    (docs/parameters.md)."""
    out = _ROS_NAMES.get(cls)
    if out is None:
        out = {}
        for name, meta in field_meta(cls).items():
            group = field_group(cls, name)
            rest = name[len(group) + 1:] if name.startswith(group + "_") else ""
            leaf = meta.get("leaf") or (rest if len(rest) > 2 else name)     # spacing_m stays spacing.spacing_m
            out[name] = f"{group}.{leaf}"
        if len(set(out.values())) != len(out):
            raise TypeError(f"{cls.__name__}: two fields share one ROS parameter name")
        _ROS_NAMES[cls] = out
    return dict(out)


def fields_of_ros(cls: type) -> dict[str, str]:
    """``ros_names`` the other way: ROS parameter name -> field."""
    return {ros: name for name, ros in ros_names(cls).items()}


def flat_names_in(cls: type, keys) -> list[str]:
    """The keys of a parameters file or a node's parameters that are fields' own (flat) names where the ROS name is
    nested: still read for one release, with a warning naming the new names (``renamed_hint``)."""
    names = ros_names(cls)
    return [k for k in keys if k in names and names[k] != k]


def renamed_hint(cls: type, flat: list[str]) -> str:
    """The one warning for ``flat`` parameter names (``flat_names_in``)."""
    names = ros_names(cls)
    pairs = ", ".join(f"{k} -> {names[k]}" for k in flat[:8]) + (", ..." if len(flat) > 8 else "")
    return (f"flat parameter names are deprecated and will be refused in the next release; the parameters are "
            f"nested by group ({pairs}; docs/parameters.md)")


def ros_parameters(cls: type, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` keyed by ROS parameter names: each field of ``cls`` under its nested name, any other key (a node's
    own parameter, e.g. ``robot_id``) as it is."""
    names = ros_names(cls)
    return {names.get(k, k): v for k, v in params.items()}


def field_docs(cls: type) -> dict[str, str]:
    """Each field of ``cls`` -> its documented meaning (its ``param`` doc; a redeclaration's own doc wins)."""
    return {name: m.get("doc", "") for name, m in field_meta(cls).items()}


def field_ranges(cls: type) -> dict[str, tuple[float, float]]:
    """The fields of ``cls`` that have bounds -> their inclusive ``(low, high)`` (``param(bounds=...)``)."""
    return {name: m["bounds"] for name, m in field_meta(cls).items() if "bounds" in m}


def field_units(cls: type) -> dict[str, str]:
    """The fields of ``cls`` that have a unit -> the unit (``param(unit=...)``: m, s, m/s, rad/s, 1/s, Hz)."""
    return {name: m["unit"] for name, m in field_meta(cls).items() if m.get("unit")}


def field_help(cls: type, name: str) -> str:
    """Field ``name`` of ``cls`` in one line: its doc and unit (``"speed limit [m/s]"``): the ROS parameter's
    description, the help of its CLI flag and launch argument."""
    meta = field_meta(cls).get(name, {})
    doc, unit = meta.get("doc", "") or name, meta.get("unit", "")
    return f"{doc} [{unit}]" if unit else doc


def parameter_table(cls: type) -> str:
    """The Markdown table of the fields ``cls`` itself declares (a redeclaration shows its new default), from their
    metadata: docs/parameters.md holds one per group and scenario config, checked by
    tests/unit/settings/test_param_meta.py."""
    meta = field_meta(cls)
    own = [f for f in fields(cls) if f.name in vars(cls).get("__annotations__", {})]
    ros = ros_names(cls)
    lines = ["| parameter (`--set`) | ROS parameter | type | default | range | unit | meaning |",
             "|---|---|---|---|---|---|---|"]
    for f in own:
        m = meta[f.name]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        kind = typing.get_type_hints(cls)[f.name]
        kind = getattr(kind, "__name__", None) if not typing.get_args(kind) else str(kind).replace("typing.", "")
        bounds = m.get("bounds")
        shown = f"[{_bound(bounds[0])}, {_bound(bounds[1])}]" if bounds else ""
        doc = m.get("doc", "") + (" (changeable at run time)" if m.get("runtime") else "")
        lines.append(f"| `{f.name}` | `{ros[f.name]}` | {kind} | `{json.dumps(default)}` | {shown} | "
                     f"{m.get('unit', '')} | {doc.replace('|', '&#124;')} |")
    return "\n".join(lines)


def runtime_fields(cls: type) -> tuple[str, ...]:
    """The fields of ``cls`` a running robot applies when they change (``param(runtime=True)``: ``ros2 param set
    /robot_<i>/agent v_max 0.3``, or on ``/fleet`` for every robot of a fleet process); every other parameter is
    read-only once a node has started. The e-stop is a topic (``estop_topic``), not a parameter."""
    return tuple(name for name, m in field_meta(cls).items() if m.get("runtime"))


_FIELD_TYPES: dict[type, dict[str, Any]] = {}       # FlatParams.field_types, per class
_FIELD_RULES: dict[type, tuple] = {}                # FlatParams._field_rules, per class
INT64 = (-2 ** 63, 2 ** 63 - 1)                     # what a ROS integer parameter holds


def _bound(x: float) -> str:
    """A range bound in a message: an int as written, a float in its shortest form."""
    return str(x) if isinstance(x, int) else f"{x:g}"


class FlatParams:
    """Base of every config dataclass whose fields are ROS parameters: the flat-mapping reader (unknown keys and
    wrong types are errors), validated copies, and the ``/**:`` parameters file. Each field's doc, bounds, unit and
    runtime flag are its metadata (``param``; ``field_meta``)."""

    #: fields renamed so that a word means one thing in every scenario: old name -> new (the old one is refused
    #: with a message naming the new). A group may declare its own; ``renamed_fields`` gathers them.
    RENAMED: ClassVar[dict[str, str]] = {}

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def field_docs(cls) -> dict[str, str]:
        return field_docs(cls)

    @classmethod
    def field_ranges(cls) -> dict[str, tuple[float, float]]:
        return field_ranges(cls)

    @classmethod
    def _field_rules(cls) -> tuple:
        """``(ranges, nonfinite, float_fields, float_list_fields, int_fields)`` of ``cls``, resolved once per class."""
        rules = _FIELD_RULES.get(cls)
        if rules is None:
            nonfinite = {name for name, m in field_meta(cls).items() if m.get("nonfinite")}
            floats, float_lists, ints = set(), set(), set()
            for name, ann in cls.field_types().items():
                args = [a for a in typing.get_args(ann) if a is not type(None)] \
                    if typing.get_origin(ann) in (typing.Union, types.UnionType) else [ann]
                if float in args:
                    floats.add(name)
                elif int in args:
                    ints.add(name)
                elif any(typing.get_origin(a) is list and typing.get_args(a) == (float,) for a in args):
                    float_lists.add(name)
            rules = _FIELD_RULES[cls] = (cls.field_ranges(), frozenset(nonfinite), frozenset(floats),
                                         frozenset(float_lists), frozenset(ints))
        return rules

    @classmethod
    def field_problem(cls, name: str, value: Any) -> str | None:
        """What is wrong with ``value`` for field ``name`` by the field's own rule, or None: outside its bounds,
        a non-finite float (unless ``nonfinite``), an int beyond ROS's 64 bits. The one per-field check of
        every entry point (``validate``); a ROS node's descriptor (the same range) refuses no value this accepts."""
        if value is None or isinstance(value, bool):
            return None
        ranges, nonfinite, floats, float_lists, ints = cls._field_rules()
        if name in float_lists and isinstance(value, (list, tuple)) and name not in nonfinite:
            bad = [v for v in value if isinstance(v, float) and not math.isfinite(v)]
            return f"{name} must hold finite numbers (got {bad[0]})" if bad else None
        if not isinstance(value, (int, float)):
            return None
        if isinstance(value, float) and not math.isfinite(value) and name in nonfinite:
            return None
        if name in ranges:
            lo, hi = ranges[name]
            if not lo <= value <= hi:          # also nan and ±inf
                return f"{name} must be in [{_bound(lo)}, {_bound(hi)}] (got {value})"
            return None
        if isinstance(value, float) and not math.isfinite(value):
            return f"{name} must be a finite number (got {value})"
        if isinstance(value, int) and name in ints and not INT64[0] <= value <= INT64[1]:
            return f"{name} must be a 64-bit integer (got {value})"
        return None

    @classmethod
    def renamed_fields(cls) -> dict[str, str]:
        """The ``RENAMED`` maps of every group of ``cls`` (nearest class wins), without the names that are fields
        of ``cls`` (a word renamed in one group may still be a field of another: a fleet's ``num_robots``)."""
        out: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            out.update(vars(klass).get("RENAMED", {}))
        names = set(cls.field_names())
        return {old: new for old, new in out.items() if old not in names}

    @classmethod
    def field_types(cls) -> dict[str, Any]:
        """Each field's resolved annotation (``int``, ``list[str]``, ...); resolved once per class (a study builds a
        config per trial, and resolving the annotations costs more than the rest of ``from_dict``)."""
        types = _FIELD_TYPES.get(cls)
        if types is None:
            hints = typing.get_type_hints(cls)
            types = _FIELD_TYPES[cls] = {f.name: hints[f.name] for f in fields(cls)}
        return dict(types)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config"):
        """Build from a flat mapping; unknown keys and wrong types are errors."""
        known = {f.name for f in fields(cls)}
        types = cls.field_types()
        renamed = cls.renamed_fields()
        nested = fields_of_ros(cls)
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key == "use_sim_time":       # ROS's own parameter, accepted everywhere
                continue
            if key in nested and key not in known:      # a ROS name (control.kp) -> its field
                if nested[key] in kwargs:
                    raise ConfigError(f"{source}: '{nested[key]}' is given twice (also as '{key}'); keep '{key}'")
                key = nested[key]
            elif key in known and key in kwargs:
                raise ConfigError(f"{source}: '{key}' is given twice (also as '{ros_names(cls)[key]}'); keep "
                                  f"'{ros_names(cls)[key]}'")
            if key not in known and key in renamed:
                new = renamed[key]
                raise ConfigError(f"{source}: parameter '{key}' is now called '{new}' "
                                  f"('{ros_names(cls).get(new, new)}' in a parameters file; one meaning per word "
                                  f"across scenarios)")
            if key not in known:
                pool = nested if "." in str(key) else known     # a nested name gets nested suggestions
                close = [k for k in pool if k.startswith(str(key)[:4])]
                hint = f" (did you mean {', '.join(sorted(close)[:8])}?)" if close else ""
                raise ConfigError(f"{source}: unknown parameter '{key}'{hint}")
            kwargs[key] = coerce(key, value, types[key], source)
        cfg = cls(**kwargs)
        try:
            cfg.validate()
        except ConfigError as exc:
            if source in ("config", "override"):     # defaults and flags: the message names the field already
                raise
            raise ConfigError(f"{source}: {exc}") from None    # a file or a node: say which
        return cfg

    def replace(self, **changes: Any):
        """A copy with ``changes`` applied (None values ignored), validated."""
        data = self.to_dict()
        data.update({k: v for k, v in changes.items() if v is not None})
        return type(self).from_dict(data, source="override")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_ros_params_yaml(self, extra: dict[str, Any] | None = None) -> str:
        """The config as a ``/**:`` ROS 2 parameters file."""
        # rcl's YAML parser cannot type an empty sequence: leave empty lists out (the nodes' declared
        # defaults are the same empty lists)
        params = {k: v for k, v in self.to_dict().items() if v != []}
        if extra:
            params.update(extra)
        tree: dict[str, Any] = {}
        for key, value in ros_parameters(type(self), params).items():   # control.kp -> control: {kp: ...}
            *groups, leaf = key.split(".")
            node = tree
            for g in groups:
                node = node.setdefault(g, {})
            node[leaf] = value
        return yaml.safe_dump({"/**": {"ros__parameters": tree}}, sort_keys=True)

    def uses_llm(self) -> bool:
        """Does a run with this config call an LLM? (Scenarios with a ``planner`` field: planner == "llm".)"""
        return getattr(self, "planner", "") == "llm"

    def validate(self) -> None:
        """Every field's own rule first (``field_problem``: its bounds, finiteness; so the checks after it may
        rely on them and never restate a bound), then every group's ``_check_*`` once (base groups first), then the
        scenario's own ``check``."""
        for name in self.field_names():
            problem = self.field_problem(name, getattr(self, name))
            need(problem is None, problem or "")
        done: set[str] = set()
        for klass in reversed(type(self).__mro__):
            for name, fn in vars(klass).items():
                if name.startswith("_check_") and name not in done and callable(fn):
                    done.add(name)
                    getattr(self, name)()
        self.check()

    def check(self) -> None:
        """The scenario's own checks (after the groups')."""


# --------------------------------------------------------------------------- groups
@dataclass
class RunParams:
    """What every run has: a seed and a run directory."""

    GROUP: ClassVar[str] = "run"     # its fields' ROS parameters: run.<name> (settings.ros_names)

    seed: int = param(0,
        "the run's seed (initial positions, roles, the LLM's seed where it takes one)",
        bounds=(0, INT64[1]))
    output_dir: str = param("", "the run directory (empty: runs/<scenario>-<time>)")



@dataclass
class LLMParams:
    """How agents reach their LLM (the same names and bounds in every scenario)."""

    GROUP: ClassVar[str] = "llm"     # its fields' ROS parameters: llm.<name> (settings.ros_names)

    llm_backend: str = param("embedded", "who answers the LLM requests (consensus.llm.backends)")
    llm_model: str = param("", "model name (openai) or .gguf path (embedded; default: the pinned model)")
    llm_base_url: str = param("", "OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp server, ...)")
    llm_api_key_env: str = param("OPENAI_API_KEY", "the environment variable holding the key (never logged)")
    llm_temperature: float = param(0.7, "sampling temperature of every LLM request", bounds=(0.0, 2.0))
    llm_max_tokens: int = param(160, "the longest reply an LLM may generate (tokens)", bounds=(1, 4096))
    llm_timeout_s: float = param(60.0,
        "per request; a 2-core embedded model queues requests for tens of seconds",
        bounds=(1e-3, 3600.0), unit="s")
    llm_max_retries: int = param(2, "transport retries with backoff", bounds=(0, 10))
    llm_concurrency: int = param(4, "requests in flight at once (one shared client per process)", bounds=(1, 256))
    parse_retries: int = param(2,
        "a reply that does not parse is asked again this often, then a fallback",
        bounds=(0, 10))
    replay_path: str = param("", "transcripts.jsonl to replay (llm_backend: replay)")
    llm_port: int = param(18080, "port of the embedded LLM server (llm_server node)", bounds=(1, 65535))
    prompt_style: str = param("paper", "paper (the paper's wording, free reasoning) | json (schema) | tools")


    def _check_llm(self) -> None:
        need(self.prompt_style in PROMPT_STYLES,
             f"unknown prompt_style '{self.prompt_style}'; valid: {', '.join(PROMPT_STYLES)}")
        backends = _backend_names()          # the registry as it is now (a backend may be registered late)
        need(self.llm_backend in backends, f"unknown llm_backend '{self.llm_backend}'; valid: {', '.join(backends)}")
        if self.llm_backend == "replay" and self.uses_llm():
            need(bool(self.replay_path), "llm_backend 'replay' needs replay_path (a transcripts.jsonl)")
            from consensus.llm.transcripts import check_replayable

            check_replayable(Path(self.replay_path).expanduser())   # missing, or no valid record: refused now

    def manifest_llm(self) -> dict[str, str]:
        """The ``backend`` and ``model`` a run's manifest records ("none" and "" when the run calls no LLM; the
        pinned model's name for the embedded backend without ``llm_model``)."""
        if not self.uses_llm():
            return {"backend": "none", "model": ""}
        return {"backend": self.llm_backend,
                "model": self.llm_model or (DEFAULT_MODEL_NAME if self.llm_backend == "embedded" else "")}


@dataclass
class ControlParams:
    """The fast loop and its safety layer (``consensus.control``)."""

    GROUP: ClassVar[str] = "control"     # its fields' ROS parameters: control.<name> (settings.ros_names)

    control_period_s: float = param(0.1, "ΔTc: the controller's period", bounds=(1e-3, 10.0), unit="s")
    kinematics: str = param("single_integrator", "single_integrator | unicycle | point_mass_pid (paper 1's 2-D code)")
    kp: float = param(1.0, "proportional gain", bounds=(1e-6, 1e3), runtime=True)
    v_max: float = param(1.0, "speed limit", bounds=(1e-6, 1e2), unit="m/s", runtime=True)
    w_max: float = param(2.0, "turn-rate limit (unicycle)", bounds=(1e-6, 1e2), unit="rad/s", runtime=True)
    deadband: float = param(0.02, "closer than this to the target: stop", bounds=(0.0, 10.0), unit="m", runtime=True)
    odom_timeout_s: float = param(0.5, "stale odometry -> zero velocity", bounds=(1e-3, 3600.0), unit="s")
    target_timeout_s: float = param(30.0,
        "no planner round completed for this long -> zero velocity",
        bounds=(1e-3, 86400.0), unit="s")
    estop_topic: str = param("/estop", "names.ESTOP, std_msgs/Bool: true stops every robot until false (latched)")
    dry_run: bool = param(False, "log the velocity commands instead of publishing them")
    # collision avoidance between robots: the barrier-certificate filter (consensus.control.avoidance)
    collision_avoidance: str = param("auto",
        "auto | cbf | none; auto = cbf in ROS runs and with a robots_file, else none")
    safety_margin_m: float = param(0.05,
        "clearance added to the two footprints (localisation, tracking error)",
        bounds=(0.0, 10.0), unit="m")
    cbf_gamma: float = param(1.0, "barrier rate γ: how early robots brake; at most 1 / control_period_s",
                             bounds=(1e-6, 1e3), unit="1/s")
    footprint_radius_m: float = param(0.2,
        "disc covering a robot (the generic preset's); a robots_file's preset wins",
        bounds=(1e-3, 100.0), unit="m")
    # robots with bodies that share a meeting point stand in slots around it (consensus.control.packing): slots are
    # d_min + packing_gap_m apart, and a robot takes its slot once its meeting point is within packing_gap_m of every
    # neighbour's
    packing_gap_m: float = param(0.1,
        "room between slots beyond d_min; also the agreement needed to take one",
        bounds=(1e-3, 10.0), unit="m")
    deadlock_s: float = param(3.0,
        "kept from its slot this long: a counted deadlock (right-hand escape)",
        bounds=(0.1, 600.0), unit="s")
    # one process per robot (single_process: false): the nearby relay's reach (consensus.ros.nearby)
    nearby_horizon_s: float = param(0.5,
        "one process per robot: how long a robot drives on one nearby message. The relay sends each robot only the "
        "robots it can meet within it and one control period (consensus.control.avoidance.within_reach), and a "
        "robot whose newest nearby message is older stops (stale_stops). 0: every robot in every message, no stop",
        bounds=(0.0, 60.0), unit="s")
    # a neighbour that falls silent is still a body (consensus.control.robot_core)
    silent_bound_m: float = param(0.5,
        "how far a silent neighbour may have moved: the keep-out of a neighbour whose states stopped grows at v_max "
        "with their age up to this bound, then stays fixed until it speaks again or an operator clears it (0.5 m: "
        "1 s at 0.5 m/s, a driver's command timeout)",
        bounds=(1e-3, 10.0), unit="m")


    def _check_control(self) -> None:
        need(self.kinematics in KINEMATICS, f"unknown kinematics '{self.kinematics}'; valid: {', '.join(KINEMATICS)}")
        need(self.collision_avoidance in COLLISION_AVOIDANCE,
             f"unknown collision_avoidance '{self.collision_avoidance}'; valid: {', '.join(COLLISION_AVOIDANCE)}")
        need(self.cbf_gamma * self.control_period_s <= 1.0 + 1e-9,
             f"cbf_gamma must be at most 1 / control_period_s = {1.0 / self.control_period_s:g} (got "
             f"{self.cbf_gamma:g}): a larger rate lets a pair cross d_min between two control ticks")
        need(self.nearby_horizon_s == 0 or self.nearby_horizon_s >= 2 * self.control_period_s,
             f"nearby_horizon_s must be 0 (every robot, no stop) or at least two control periods "
             f"({2 * self.control_period_s:g} s; got {self.nearby_horizon_s:g}): a robot would stop between two "
             f"nearby messages")

    def resolved_collision_avoidance(self, *, ros: bool) -> str:
        """``cbf`` or ``none``. The rule of ``auto`` (docs/real-robots.md): ``cbf`` for a run whose robots are ROS
        nodes (``ros``), real robots (a ``robots_file``) or bodies in a physics world (a simulator with a ``world``:
        ``sim: mujoco``, also headless), ``none`` for headless studies of point robots (the papers' figures);
        ``cbf`` and ``none`` are taken as they are."""
        if self.collision_avoidance != "auto":
            return self.collision_avoidance
        if ros or getattr(self, "robots_file", ""):
            return "cbf"
        return "cbf" if sim_spec(getattr(self, "sim", "builtin")).world else "none"


@dataclass
class FleetParams:
    """How many robots and how their ROS processes are laid out. One robot is a valid fleet."""

    GROUP: ClassVar[str] = "fleet"     # its fields' ROS parameters: fleet.<name> (settings.ros_names)

    #: ``fleet`` named the process layout and the group of robots alike; the layout is ``single_process``
    RENAMED: ClassVar[dict[str, str]] = {"fleet": "single_process"}

    num_robots: int = param(4, "N robots (drones) of the fleet", bounds=(1, 1000))
    single_process: bool = param(True,
        "all robots in one process, the /fleet node (scales to ~100); False = one process per robot")
    executor: str = param("events", "\"events\" (rclpy EventsExecutor) or \"single\"")
    robots_per_step: int = param(10,
        "a robot process's clock steps this many robots at once: a larger fleet is stepped in groups whose control "
        "slots are spread evenly over the control period, at least 25 ms apart (consensus.ros.fleet.FleetClock)",
        bounds=(1, 1000))
    control_priority: int = param(50,
        "SCHED_FIFO priority of a robot process's control thread (the one clock and the robots' subscriptions), "
        "where the process may set it (root, CAP_SYS_NICE or an rtprio limit; as ros2_control's thread_priority); "
        "refused, the thread keeps the usual scheduling and the process logs why. 0: the usual scheduling",
        bounds=(0, 99))


    def _check_fleet(self) -> None:
        need(self.executor in EXECUTORS, f"unknown executor '{self.executor}'; valid: {', '.join(EXECUTORS)}")


@dataclass
class AgentsParams:
    """A team of agents that are not robots (paper 2's defenders and contributors, paper 4's population):
    ``num_agents`` (N). Robots count with ``FleetParams.num_robots``."""

    GROUP: ClassVar[str] = "agents"     # its fields' ROS parameters: agents.<name> (settings.ros_names)

    num_agents: int = param(5, "N agents of the team", bounds=(1, 10 ** 6))


@dataclass
class BagParams:
    """The run's MCAP bag (``consensus.ros.bag_recorder``)."""

    GROUP: ClassVar[str] = "bag"     # its fields' ROS parameters: bag.<name> (settings.ros_names)

    bag: bool = param(True, "record the run's topics into an MCAP bag in the run directory", leaf="record")
    bag_exclude: str = param(r"/nearby$",
        "topics (regular expression, searched in the full name) left out of the bag; the default leaves out the "
        "`nearby` relay: each robot's copy of the others' states in its reach (up to n x (n-1) poses every control "
        "period, derived from the recorded `state` topics). \"\" records every topic")

    def _check_bag(self) -> None:
        try:
            re.compile(self.bag_exclude)
        except re.error as exc:
            raise ConfigError(f"bag_exclude is not a regular expression: {exc}") from None


@dataclass
class LiveViewParams:
    """The live Foxglove view of a ROS run (``consensus.runs.foxglove_live``): a WebSocket server in the node that
    records the run. 0 = off."""

    GROUP: ClassVar[str] = "view"     # its fields' ROS parameters: view.<name> (settings.ros_names)

    foxglove: int = param(0, "port of the Foxglove WebSocket server (--foxglove [PORT]); 0 = off", bounds=(0, 65535))
    foxglove_host: str = param("127.0.0.1", "address it listens on (0.0.0.0: every interface)")

    def _check_live_view(self) -> None:
        host = self.foxglove_host
        need(0 < len(host) <= 253 and not any(c.isspace() for c in host),
             f"foxglove_host must be a host name or address (got '{host}')")


#: the act tools of ``consensus mcp`` (consensus.operator.policy.ACT_TOOLS); an allowlist entry names one of these
OPERATOR_APPROVALS = ("auto", "elicit", "token")


@dataclass
class OperatorParams:
    """The operator's seat of a run (``consensus mcp``, consensus.operator): which act tools are open, to whom, and
    how a human approves what moves robots. Read from the run's parameters file by the MCP server only; read-only
    in every node, so no tool call can widen it."""

    GROUP: ClassVar[str] = "operator"     # its fields' ROS parameters: operator.<name> (settings.ros_names)

    operator_allow: str = param(
        "estop, estop_release, set_topology, set_parameter, suggest_meeting_point, start_run, start_experiment, "
        "stop_run",
        "the act tools open to an MCP client, comma-separated; `tool=client1|client2` opens one only to those MCP "
        "clients (their clientInfo name); a tool not named is refused (read tools are always open)")
    operator_approval: str = param("auto",
        "how a human approves a tool that moves robots or changes their safety: elicit (the MCP client asks its "
        "user) | token (a code shown on the server's console, passed back as `confirm`) | auto (elicit where the "
        "client supports it, else token)")
    operator_approval_timeout_s: float = param(120.0, "how long an approval may take before the call is refused",
                                               bounds=(1.0, 3600.0), unit="s")

    def _check_operator(self) -> None:
        need(self.operator_approval in OPERATOR_APPROVALS,
             f"unknown operator_approval '{self.operator_approval}'; valid: {', '.join(OPERATOR_APPROVALS)}")
        need(len(self.operator_allow) <= 4096, "operator_allow is longer than 4096 characters")


@dataclass
class SimParams:
    """Who moves the robots of a ROS run, for a scenario config that is not a ``RobotBaseConfig`` (which has the same
    field and check): a simulator of ``consensus.control.motion`` (``consensus.sims.sim_processes``)."""

    GROUP: ClassVar[str] = "sim"     # its fields' ROS parameters: sim.<name> (settings.ros_names)

    sim: str = param("builtin", "who moves the robots (consensus.control.motion; none: real robots or another "
                                "driver)", leaf="backend")

    def _check_sim(self) -> None:
        sims = _sim_names()               # the registry as it is now (a simulator may be registered late)
        need(self.sim in sims, f"unknown sim '{self.sim}'; valid: {', '.join(sims)}")


@dataclass
class PhysicsParams:
    """The physics world of ``sim: mujoco`` (``consensus.sims.mujoco.world``): its fixed physics rate, how fast it runs,
    and the realism knobs (each recorded in the manifest with the rest of the config; docs/real-robots.md measures
    what they do). The other simulators ignore them."""

    GROUP: ClassVar[str] = "physics"     # its fields' ROS parameters: physics.<name> (settings.ros_names)

    physics_rate_hz: float = param(500.0, "MuJoCo's fixed physics rate (its timestep is the inverse)",
                                   bounds=(50.0, 10000.0), unit="Hz")
    realtime_factor: float = param(1.0, "sim seconds per wall second; 0 = as fast as the machine allows (with "
                                        "publish_clock / --use-sim-time, so that the nodes follow /clock)",
                                   bounds=(0.0, 100.0))
    accel_max: float = param(2.0, "the drives' acceleration limit (a robot's force limit is its mass times this)",
                             bounds=(0.01, 100.0), unit="m/s²")
    flight_altitude_m: float = param(0.0, "0 = ground robots on the floor; > 0 = drones held at this altitude",
                                     bounds=(0.0, 100.0), unit="m")
    floor_cell_m: float = param(1.0, "side of the floor's checker cells (a disaster run: the grid's cells)",
                                bounds=(0.01, 100.0), unit="m")
    wheel_friction: float = param(0.0, "Coulomb friction of each drive axis, as a share of the drive's force limit "
                                       "(1: the drive cannot move the robot)", bounds=(0.0, 1.0))
    actuator_lag_s: float = param(0.0, "first-order lag between a velocity command and the drive's set point",
                                  bounds=(0.0, 5.0), unit="s")
    odom_noise_m: float = param(0.0, "standard deviation of the Gaussian noise on each published position (seeded)",
                                bounds=(0.0, 10.0), unit="m")
    localization_offset_m: float = param(0.0, "a constant error of each robot's published position, in a seeded "
                                              "random direction per robot", bounds=(0.0, 10.0), unit="m")


#: the physics group's fields: what only the simulator node of ``sim: mujoco`` reads (robot nodes leave them out)
PHYSICS = tuple(f.name for f in fields(PhysicsParams))


@dataclass
class RobotBaseConfig(FlatParams, RunParams, LLMParams, ControlParams, FleetParams, BagParams, PhysicsParams,
                      OperatorParams):
    """What the kernel's robot nodes read (``sim``, the robot base ``consensus.ros.robot.RobotNode``,
    ``llm_server``): the groups above plus the workspace, the simulator and the planner period. Scenario configs
    of mobile robots extend it."""

    GROUP: ClassVar[str] = "robot"     # its fields' ROS parameters: robot.<name> (settings.ros_names)

    dim: int = param(2, "1 (a line, paper 1's number game in motion) or 2 (the plane)", bounds=(1, 2), group="world")
    workspace: list[float] = param([-10.0, 10.0, -10.0, 10.0], "geofence: [min, max] per axis", unit="m", group="world")
    planner_period_s: float = param(2.0, "ΔTp: the planner's period (one planning round)", bounds=(1e-3, 3600.0),
                                    unit="s", group="planner")
    meeting_point_step_m: float = param(0.0,
        "how far a meeting point heard from a robot may move from that robot's previous one in one round; 0: no "
        "limit beyond the hull check (within reach of what it heard)",
        bounds=(0.0, 100.0), unit="m", group="planner")
    max_rounds: int = param(0, "planning rounds at most; 0 = unlimited", bounds=(0, INT64[1]), group="planner")
    news_wait_s: float = param(0.0,
        "rounds in step, as paper 1's Algorithm 1 has them: a robot's first round waits until it heard the others, "
        "every later one until each neighbour heard has a new meeting point, each at most this long; 0: a round "
        "every planner period, on whatever was heard (slow LLM rounds then drift apart and repeat stale inputs)",
        bounds=(0.0, 3600.0), unit="s", group="planner")
    suggestion_hold_s: float = param(10.0,
        "an operator's meeting point (consensus mcp's suggest_meeting_point, on names.MEETING_POINT_SUGGESTION) is "
        "every robot's meeting point for this long before its planner plans again from it; a round in flight when "
        "it came is dropped",
        bounds=(0.0, 3600.0), unit="s", group="planner")
    initial_positions: list[float] = param([], "flat [x0, y0, x1, y1, ...]; empty = seeded random", unit="m",
                                           group="sim")
    init_radius: float = param(5.0, "random initial positions uniform in [-r, r]^dim", bounds=(1e-6, 1e6), unit="m",
                                group="sim")
    sim_rate_hz: float = param(20.0, "odometry publication and integration rate", bounds=(1e-3, 1000.0), unit="Hz",
                                group="sim")
    state_rate_hz: float = param(5.0, "rate at which robots broadcast their state", bounds=(1e-3, 1000.0), unit="Hz")
    publish_clock: bool = param(False, "the simulator publishes /clock (use with use_sim_time)", group="sim")
    cmd_vel_best_effort: bool = param(False, "best-effort cmd_vel (faster; only if every robot driver accepts it)")
    sim: str = param("builtin", "who moves the robots (consensus.control.motion; none: real robots or another "
                                "driver)", group="sim", leaf="backend")
    robots_file: str = param("", "YAML `robots:` map (real robots: name, namespace, preset, pose, enabled)")
    markers: bool = param(True, "publish visualization_msgs/MarkerArray (+ TF where tf2_msgs is installed)",
                          group="view")
    robot_timeout_s: float = param(2.0,
        "a robot whose state is older than this is dropped (lost robot, stale link)",
        bounds=(1e-3, 86400.0), unit="s")


    def _check_robot_base(self) -> None:
        if self.kinematics in _KINEMATICS:
            from consensus.control.dynamics import dynamics_of

            dims = dynamics_of(self.kinematics).dims
            need(self.dim in dims, f"{self.kinematics} kinematics needs dim {' or '.join(map(str, dims))}")
        SimParams._check_sim(self)
        need(self.control_period_s <= self.planner_period_s,
             "control_period_s must not exceed planner_period_s (the controller is the fast loop)")
        need(len(self.workspace) == 2 * self.dim,
             f"workspace needs {2 * self.dim} numbers [min, max per axis] for dim {self.dim} "
             f"(got {len(self.workspace)})")
        for axis in range(self.dim):
            lo, hi = self.workspace[2 * axis], self.workspace[2 * axis + 1]
            need(math.isfinite(lo) and math.isfinite(hi) and lo < hi,
                 f"workspace axis {axis}: need min < max (got {lo}, {hi})")
        pos = self.initial_positions_array()
        if pos is not None:
            lo, hi = self.workspace_bounds()
            need(bool(((pos >= lo) & (pos <= hi)).all()), "initial_positions must lie inside the workspace")

    def workspace_bounds(self):
        import numpy as np

        ws = np.asarray(self.workspace, dtype=float).reshape(self.dim, 2)
        return ws[:, 0], ws[:, 1]

    def initial_positions_array(self):
        """(n, dim) array of the given initial positions, or None when they are to be drawn at random."""
        import numpy as np

        vals = list(self.initial_positions)
        if not vals:
            return None
        if len(vals) != self.num_robots * self.dim:
            raise ConfigError(f"initial_positions needs num_robots*dim = {self.num_robots * self.dim} numbers "
                              f"(got {len(vals)})")
        arr = np.asarray(vals, dtype=float).reshape(self.num_robots, self.dim)
        if not np.isfinite(arr).all():
            raise ConfigError("initial_positions must be finite numbers")
        return arr


# --------------------------------------------------------------------------- reading
def coerce(key: str, value: Any, annotation: Any, source: str = "config") -> Any:
    """Convert a YAML/CLI/ROS value to the annotated type, or raise a ConfigError naming the field."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):         # ``int | None``: null, or a value of the other type
        others = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value is None and len(others) < len(typing.get_args(annotation)):
            return None
        if len(others) == 1:
            return coerce(key, value, others[0], source)
    try:
        if annotation is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
                return value.lower() in ("true", "1", "yes")
            raise ValueError
        if annotation is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if annotation is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if annotation is str:
            if isinstance(value, (list, dict)):
                return json.dumps(value)
            return "" if value is None else str(value)
        if origin is list:
            (item,) = typing.get_args(annotation) or (str,)
            if isinstance(value, str):
                value = yaml.safe_load(value) if value.strip() else []
            if not isinstance(value, (list, tuple)):
                raise ValueError
            return [coerce(key, v, item, source) for v in value]
    except (TypeError, ValueError, yaml.YAMLError, ConfigError):
        pass
    name = getattr(annotation, "__name__", str(annotation))
    raise ConfigError(f"{source}: parameter '{key}' has an invalid value {value!r} (expected {name})")


class DuplicateKeyError(yaml.YAMLError):
    """A mapping of a YAML file that holds the same key twice (``UniqueKeyLoader``)."""

    def __init__(self, key: Any, lines: tuple[int, int]) -> None:
        super().__init__(f"duplicate key {key!r} (lines {lines[0]} and {lines[1]})")
        self.key, self.lines = key, lines


class UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing a mapping that holds a key twice (PyYAML keeps the last value silently; a params
    file with ``num_robots`` twice would run with whichever came last). Merge keys (``<<:``) may still override."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise DuplicateKeyError(key, (seen[key], line))
                    seen[key] = line
                except TypeError:          # an unhashable key: the base class says so
                    continue
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str | Path, what: str) -> Any:
    """The one YAML file reader of the package (parameters files, robots maps, sweep specs): the parsed document
    (safe loader), or one ``ConfigError`` naming the file and saying what is wrong: missing (``what`` not found),
    not UTF-8, not YAML (with the line and column), a key given twice in one mapping (naming the key and its
    lines), unreadable."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{what} not found: {p}")
    try:
        return yaml.load(p.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)   # noqa: S506 - a SafeLoader
    except DuplicateKeyError as exc:
        raise ConfigError(f"{p}: key {exc.key!r} is given twice in one mapping (lines {exc.lines[0]} and "
                          f"{exc.lines[1]}); keep one") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not UTF-8 text (a {what} is YAML)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise ConfigError(f"{p}: not valid YAML{where}: {problem}") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot be read: {exc.strerror or exc}") from None


def _dotted(tree: dict, prefix: str = "") -> dict[str, Any]:
    """A parameters mapping with nested groups (``control: {kp: 1.0}``) as ROS reads it: ``control.kp``."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_dotted(value, name + "."))
        else:
            out[name] = value
    return out


def load_params_file(path: str | Path) -> dict[str, Any]:
    """Read a ROS 2 parameters YAML (``/**: ros__parameters: ...``) or a plain mapping into one mapping of parameter
    names, the nested groups dotted as ROS reads them (``control: {kp: 1.0}`` -> ``control.kp``)."""
    p = Path(path)
    data = read_yaml(p, "config file") or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping at the top level")
    if "/**" in data:
        section = data["/**"]
        if not isinstance(section, dict) or not isinstance(section.get("ros__parameters"), dict):
            raise ConfigError(f"{p}: '/**' must hold a 'ros__parameters' mapping")
        return _dotted(section["ros__parameters"])
    if "ros__parameters" in data:
        return _dotted(data["ros__parameters"])
    return _dotted(data)


def params_file_fields(path: str | Path, cls: type | None) -> dict[str, Any]:
    """A parameters file's values by the fields of the config class ``cls`` (``control.kp`` -> ``kp``; a flat name as
    it is); without a class, the ROS names as they are. Not validated: what a run's ``params.yaml`` holds."""
    data = load_params_file(path)
    nested = fields_of_ros(cls) if cls is not None else {}
    return {nested.get(k, k): v for k, v in data.items()}


def load_flat(cls, path: str | Path | None = None, **overrides: Any):
    """Load and validate a parameters file for the config class ``cls`` (or its defaults), then apply the
    non-None overrides (by the fields' own names, as ``--set`` gives them). A file's flat names of nested parameters
    are read with one warning (``renamed_hint``)."""
    data = load_params_file(path) if path else {}
    flat = flat_names_in(cls, data)
    if flat:
        import logging

        logging.getLogger("consensus.settings").warning("%s: %s", path, renamed_hint(cls, flat))
    names = ros_names(cls)
    for k, v in overrides.items():
        if v is not None:
            data.pop(names.get(k, ""), None)          # a flag wins over the file's nested name
            data[k] = v
    return cls.from_dict(data, source=str(path) if path else "config")


def parse_set_args(items: list[str]) -> dict[str, str]:
    """``--set KEY=VALUE`` arguments as a mapping (values stay strings; the config coerces them)."""
    sets: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got '{item}'")
        sets[key.strip()] = value
    return sets
