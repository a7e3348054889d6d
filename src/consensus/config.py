"""Run configuration: one flat set of parameters shared by the CLI, the headless
runner and every ROS node.

The same YAML file serves all three. It is a ROS 2 parameters file with a single
``/**:`` section, so ``ros2 launch`` and ``--ros-args --params-file`` read it
directly, and ``load_config`` reads it here::

    /**:
      ros__parameters:
        num_robots: 4
        topology: complete
        ...

Every field below is a declared ROS parameter of the nodes (see
``consensus.ros.params``). ``AggregationConfig.validate`` gives one clear
``ConfigError`` for the first bad field; nothing starts before validation.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from consensus.errors import ConfigError

PLANNERS = ("llm", "average", "average_no_self", "stubborn", "suggestible")
BACKENDS = ("embedded", "openai", "replay")
KINEMATICS = ("single_integrator", "unicycle")
EXECUTORS = ("events", "single")
PERSONALITIES = ("none", "stubborn", "suggestible")


def need(cond: bool, msg: str) -> None:
    """A validation step: ``ConfigError(msg)`` unless ``cond``."""
    if not cond:
        raise ConfigError(msg)


class FlatParams:
    """Shared by every config dataclass whose fields are the ROS parameters (``AggregationConfig``,
    ``consensus.disaster.config.DisasterConfig``): flat-mapping reader with unknown-key and type errors, validated
    copies, and the ``/**:`` parameters file. Subclasses define ``validate()``."""

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config"):
        """Build from a flat mapping; unknown keys and wrong types are errors."""
        known = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key == "use_sim_time":       # ROS's own parameter, accepted everywhere
                continue
            if key not in known:
                close = [k for k in known if k.startswith(key[:4])]
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise ConfigError(f"{source}: unknown parameter '{key}'{hint}")
            kwargs[key] = _coerce(key, value, known[key], source)
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
        return yaml.safe_dump({"/**": {"ros__parameters": params}}, sort_keys=True)

    def validate(self) -> None:
        raise NotImplementedError

    def validate_llm(self, uses_llm: bool) -> None:
        """The ``llm_*`` fields both scenarios share (same names, same bounds)."""
        need(self.llm_backend in BACKENDS, f"unknown llm_backend '{self.llm_backend}'; valid: {', '.join(BACKENDS)}")
        need(1 <= self.llm_port <= 65535, f"llm_port must be in [1, 65535] (got {self.llm_port})")
        if self.llm_backend == "replay" and uses_llm:
            need(bool(self.replay_path), "llm_backend 'replay' needs replay_path (a transcripts.jsonl)")


def load_flat(cls, path: str | Path | None = None, **overrides: Any):
    """Load and validate a parameters file for the config class ``cls`` (or its defaults), then apply the
    non-None overrides."""
    data = load_params_file(path) if path else {}
    data.update({k: v for k, v in overrides.items() if v is not None})
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


@dataclass
class AggregationConfig(FlatParams):
    """Parameters of a multi-robot aggregation run (paper 1, section 4)."""

    # fleet and graph
    num_robots: int = 4
    dim: int = 2
    topology: str = "complete"
    directed: bool = False
    adjacency: str = ""               # custom topology: JSON/YAML list of lists, e.g. "[[0,1],[1,0]]"
    topology_p: float = 0.5           # edge probability of the random topology
    leader: int = 0                   # leader of the leader_follower topology
    link_delay_s: float = 0.0         # per-link delivery delay applied by the topology node
    link_drop_prob: float = 0.0       # per-link, per-delivery drop probability (seeded)
    seed: int = 0

    # planning
    planner: str = "llm"
    personalities: list[str] = field(default_factory=list)   # per robot; empty = all "none"
    memory: bool = False              # LLM planner keeps the chat history (1-D paper setting)
    planner_period_s: float = 2.0     # ΔTp
    max_rounds: int = 0               # 0 = unlimited (run until duration_s)

    # control and safety
    control_period_s: float = 0.1     # ΔTc
    kinematics: str = "single_integrator"
    kp: float = 1.0
    v_max: float = 1.0
    w_max: float = 2.0
    deadband: float = 0.02
    workspace: list[float] = field(default_factory=lambda: [-10.0, 10.0, -10.0, 10.0])
    odom_timeout_s: float = 0.5       # stale odometry -> zero velocity
    target_timeout_s: float = 30.0    # no planner round completed for this long -> zero velocity

    # simulator
    initial_positions: list[float] = field(default_factory=list)   # flat [x0, y0, x1, y1, ...]; empty = seeded random
    init_radius: float = 5.0          # random initial positions uniform in [-r, r]^dim
    sim_rate_hz: float = 20.0         # odometry publication and integration rate
    state_rate_hz: float = 5.0        # rate at which robots broadcast their state (recorder, topology input)
    neighbor_rate_hz: float = 2.0     # rate at which the topology node delivers neighbour states (planner input)
    publish_clock: bool = False       # the simulator publishes /clock (use with use_sim_time)
    cmd_vel_best_effort: bool = False  # best-effort cmd_vel (faster; only if every robot driver accepts it)

    # LLM
    llm_backend: str = "embedded"
    llm_model: str = ""
    llm_base_url: str = ""
    llm_api_key_env: str = "OPENAI_API_KEY"
    llm_temperature: float = 0.7
    llm_max_tokens: int = 160
    llm_timeout_s: float = 60.0       # per request; a 2-core embedded model queues requests for tens of seconds
    llm_max_retries: int = 2
    llm_concurrency: int = 4
    parse_retries: int = 2
    replay_path: str = ""

    # processes (ROS)
    fleet: bool = True                # all robots in one process (scales to ~100); False = one process per robot
    executor: str = "events"          # fleet executor: "events" (rclpy EventsExecutor) or "single"
    llm_port: int = 18080             # port of the embedded LLM server started by the llm_server node

    # run
    duration_s: float = 40.0
    converge_tol_m: float = 0.1
    output_dir: str = ""

    # ------------------------------------------------------------------
    def validate(self) -> None:
        need(self.num_robots >= 2, f"num_robots must be at least 2 (got {self.num_robots})")
        need(self.num_robots <= 1000, f"num_robots must be at most 1000 (got {self.num_robots})")
        need(self.dim in (1, 2), f"dim must be 1 or 2 (got {self.dim})")
        need(self.planner in PLANNERS, f"unknown planner '{self.planner}'; valid: {', '.join(PLANNERS)}")
        need(self.kinematics in KINEMATICS,
             f"unknown kinematics '{self.kinematics}'; valid: {', '.join(KINEMATICS)}")
        need(not (self.kinematics == "unicycle" and self.dim != 2), "unicycle kinematics needs dim 2")
        need(self.executor in EXECUTORS, f"unknown executor '{self.executor}'; valid: {', '.join(EXECUTORS)}")
        for name in ("planner_period_s", "control_period_s", "kp", "v_max", "w_max", "odom_timeout_s",
                     "target_timeout_s", "sim_rate_hz", "state_rate_hz", "neighbor_rate_hz", "llm_timeout_s", "duration_s",
                     "converge_tol_m", "init_radius"):
            value = getattr(self, name)
            need(math.isfinite(value) and value > 0, f"{name} must be a positive number (got {value})")
        need(self.control_period_s <= self.planner_period_s,
             "control_period_s must not exceed planner_period_s (the controller is the fast loop)")
        need(self.deadband >= 0, f"deadband must be >= 0 (got {self.deadband})")
        need(self.link_delay_s >= 0, f"link_delay_s must be >= 0 (got {self.link_delay_s})")
        need(0.0 <= self.link_drop_prob < 1.0, f"link_drop_prob must be in [0, 1) (got {self.link_drop_prob})")
        need(0.0 <= self.topology_p <= 1.0, f"topology_p must be in [0, 1] (got {self.topology_p})")
        need(0 <= self.leader < self.num_robots, f"leader must be a robot index 0..{self.num_robots - 1}")
        need(self.max_rounds >= 0, f"max_rounds must be >= 0 (got {self.max_rounds})")
        need(0.0 <= self.llm_temperature <= 2.0, f"llm_temperature must be in [0, 2] (got {self.llm_temperature})")
        need(1 <= self.llm_max_tokens <= 4096, f"llm_max_tokens must be in [1, 4096] (got {self.llm_max_tokens})")
        need(0 <= self.llm_max_retries <= 10, f"llm_max_retries must be in [0, 10] (got {self.llm_max_retries})")
        need(1 <= self.llm_concurrency <= 256, f"llm_concurrency must be in [1, 256] (got {self.llm_concurrency})")
        need(0 <= self.parse_retries <= 10, f"parse_retries must be in [0, 10] (got {self.parse_retries})")
        need(len(self.workspace) == 2 * self.dim,
             f"workspace needs {2 * self.dim} numbers [min, max per axis] for dim {self.dim} "
             f"(got {len(self.workspace)})")
        for axis in range(self.dim):
            lo, hi = self.workspace[2 * axis], self.workspace[2 * axis + 1]
            need(math.isfinite(lo) and math.isfinite(hi) and lo < hi,
                 f"workspace axis {axis}: need min < max (got {lo}, {hi})")
        if self.personalities and self.personalities != ["none"]:
            need(len(self.personalities) in (1, self.num_robots),
                 f"personalities needs 1 or num_robots={self.num_robots} entries (got {len(self.personalities)})")
            for p in self.personalities:
                need(p in PERSONALITIES, f"unknown personality '{p}'; valid: {', '.join(PERSONALITIES)}")
        pos = self.initial_positions_array()
        if pos is not None:
            lo, hi = self.workspace_bounds()
            need(bool(((pos >= lo) & (pos <= hi)).all()), "initial_positions must lie inside the workspace")
        self.validate_llm(self.planner == "llm")
        # the graph validates itself (unknown topology, adjacency size, ...)
        self.graph()

    # ------------------------------------------------------------------
    def graph(self):
        from consensus.graphs.topology import make_graph

        adjacency = None
        if self.topology == "custom":
            if not self.adjacency:
                raise ConfigError("topology 'custom' needs the adjacency parameter (a list of lists)")
            try:
                adjacency = yaml.safe_load(self.adjacency)
            except yaml.YAMLError as exc:
                raise ConfigError(f"adjacency is not valid YAML/JSON: {exc}") from None
        return make_graph(self.topology, self.num_robots, directed=self.directed if self.directed else None,
                          seed=self.seed, p=self.topology_p, adjacency=adjacency, leader=self.leader)

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

    def personality_of(self, robot: int) -> str:
        ps = [p for p in self.personalities if p]
        if not ps:
            return "none"
        return ps[0] if len(ps) == 1 else ps[robot]


def _coerce(key: str, value: Any, f: dataclasses.Field, source: str) -> Any:
    """Convert a YAML/CLI value to the field's type, or raise a ConfigError naming the field."""
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
    try:
        if isinstance(default, bool):
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
                return value.lower() in ("true", "1", "yes")
            raise ValueError
        if isinstance(default, int):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if isinstance(default, float):
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if isinstance(default, str):
            if isinstance(value, (list, dict)):
                return json.dumps(value)
            return "" if value is None else str(value)
        if isinstance(default, list):
            if isinstance(value, str):
                value = yaml.safe_load(value) if value.strip() else []
            if not isinstance(value, (list, tuple)):
                raise ValueError
            if key == "personalities":
                return [str(v) for v in value]
            return [float(v) for v in value]
    except (TypeError, ValueError, yaml.YAMLError):
        pass
    raise ConfigError(f"{source}: parameter '{key}' has an invalid value {value!r} "
                      f"(expected {type(default).__name__})")


def load_params_file(path: str | Path) -> dict[str, Any]:
    """Read a ROS 2 parameters YAML (``/**: ros__parameters: ...``) or a plain mapping into a flat dict."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping at the top level")
    if "/**" in data:
        section = data["/**"]
        if not isinstance(section, dict) or not isinstance(section.get("ros__parameters"), dict):
            raise ConfigError(f"{p}: '/**' must hold a 'ros__parameters' mapping")
        return dict(section["ros__parameters"])
    if "ros__parameters" in data:
        return dict(data["ros__parameters"])
    return dict(data)


def load_config(path: str | Path | None = None, **overrides: Any) -> AggregationConfig:
    """Load and validate a config file (or the defaults), then apply non-None overrides."""
    return load_flat(AggregationConfig, path, **overrides)
