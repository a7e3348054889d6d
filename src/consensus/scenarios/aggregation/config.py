"""Parameters of paper 1's scenarios: a multi-robot aggregation run (section 4), ``AggregationConfig``, and one
negotiation of the consensus studies (sections 2-3, ``consensus.scenarios.aggregation.study``), ``NegotiationConfig``.

Every field of ``AggregationConfig`` is a declared ROS parameter of the aggregation nodes; ``config/aggregation.yaml``
is the packaged ``/**:`` file. The shared groups and the reader are ``consensus.settings``'; a word means the same in
both classes (``planner``, ``keep_history``, ``converge_tol_m``, the LLM group's ``llm_temperature``, ...).
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import yaml

from consensus.errors import ConfigError
from consensus.settings import (AgentsParams, FlatParams, LiveViewParams, LLMParams, RobotBaseConfig, RunParams,
                                load_flat, need, param)

PLANNERS = ("llm", "average", "average_no_self", "stubborn", "suggestible")
PERSONALITIES = ("none", "stubborn", "suggestible")
MEETING_POINTS = ("auto", "on", "off")


#: the fields of the communication graph a running topology node switches (``ros2 param set /topology ...``,
#: ``consensus mcp``'s set_topology); every other parameter is read-only once it runs
GRAPH_FIELDS = ("topology", "adjacency", "directed", "topology_p", "leader")


@dataclass
class AggregationConfig(RobotBaseConfig, LiveViewParams):
    """Parameters of a multi-robot aggregation run (paper 1, section 4). The shared groups (run, LLM, control and
    safety, fleet, workspace and simulator) are ``consensus.settings.RobotBaseConfig``'s, the live Foxglove view
    (``foxglove``, ``foxglove_host``) ``consensus.settings.LiveViewParams``'; these are the aggregation's own."""

    GROUP: ClassVar[str] = "aggregation"     # its fields' ROS parameters: aggregation.<name> (settings.ros_names)

    # graph
    topology: str = param("complete", "who hears whom: complete|ring|star|line|leader_follower|random|custom")
    directed: bool = param(False, "directed edges (ring, line, random, custom)")
    adjacency: str = param("", "custom topology: JSON/YAML list of lists, e.g. \"[[0,1],[1,0]]\"")
    topology_p: float = param(0.5, "edge probability of the random topology", bounds=(0.0, 1.0))
    leader: int = param(0, "leader of the leader_follower topology")
    link_delay_s: float = param(0.0,
        "per-link delivery delay applied by the topology node",
        bounds=(0.0, 1e3), unit="s")
    link_drop_prob: float = param(0.0, "per-link, per-delivery drop probability (seeded)", bounds=(0.0, 0.999999))
    neighbor_rate_hz: float = param(2.0,
        "rate at which the topology node delivers neighbour states (planner input)",
        bounds=(1e-3, 1e3), unit="Hz")

    # control: a robot within `deadband` of its target stops. On a sparse graph (a ring) every robot's neighbourhood
    # average can be within the deadband while the fleet is still spread out by several deadbands (0.02 m left a
    # 6-robot ring at 0.14 m against converge_tol_m 0.1 for good), so aggregation stops much closer than the
    # generic robot base (docs: "Running your own")
    deadband: float = param(0.005)

    # planning
    planner: str = param("average", "llm | average | average_no_self | stubborn | suggestible (default average: "
                                    "an LLM run is asked for, never started by accident)")
    personalities: list[str] = param([], "per robot; empty = all \"none\"")
    keep_history: bool = param(False, "the LLM planner keeps its chat history (paper 1's 1-D setting)")
    meeting_points: str = param("auto",
        "what the planners agree on: \"on\" = the neighbours' meeting points (their last targets; the classical "
        "planners run their rule on them, the LLM is shown them beside the positions and its tools compute on them), "
        "\"off\" = the positions (the papers' point robots), \"auto\" = on for the classical planners when bodies are "
        "filtered (collision avoidance cbf), else off (the LLM keeps the paper's wording: the positions the others "
        "hold)")

    # run
    duration_s: float = param(40.0,
        "the run's length, or its upper bound when settle_s ends it earlier",
        bounds=(1e-3, 1e6), unit="s")
    converge_tol_m: float = param(0.1, "consensus: every pair of robots within this distance", bounds=(1e-6, 1e6),
                                  unit="m")
    settle_s: float = param(0.0,
        "end the run once the spread stayed below converge_tol_m this long (0 = never)",
        bounds=(0.0, 1e6), unit="s")

    # ------------------------------------------------------------------
    RENAMED: ClassVar[dict] = {"memory": "keep_history"}    # `memory` is the naming game's H

    def check(self) -> None:
        need(self.num_robots >= 2, f"num_robots must be at least 2 for an aggregation (got {self.num_robots})")
        need(self.planner in PLANNERS, f"unknown planner '{self.planner}'; valid: {', '.join(PLANNERS)}")
        need(self.meeting_points in MEETING_POINTS,
             f"unknown meeting_points '{self.meeting_points}'; valid: {', '.join(MEETING_POINTS)}")
        need(0 <= self.leader < self.num_robots, f"leader must be a robot index 0..{self.num_robots - 1}")
        if self.personalities and self.personalities != ["none"]:
            need(len(self.personalities) in (1, self.num_robots),
                 f"personalities needs 1 or num_robots={self.num_robots} entries (got {len(self.personalities)})")
            for p in self.personalities:
                need(p in PERSONALITIES, f"unknown personality '{p}'; valid: {', '.join(PERSONALITIES)}")
        # the graph validates itself (unknown topology, adjacency size, ...)
        self.graph()
        # a fence narrower than a body, or too small for the fleet's packing, is refused where the filter is on
        from consensus.robots.map import check_fence

        check_fence(self)

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

    def plans_on_meeting_points(self, *, ros: bool) -> bool:
        """Do the classical planners run their rule on the neighbours' meeting points (``meeting_points``)?"""
        if self.meeting_points != "auto":
            return self.meeting_points == "on"
        return self.resolved_collision_avoidance(ros=ros) == "cbf"

    def llm_shows_meeting_points(self) -> bool:
        """Is the LLM shown the others' meeting points beside their positions (``meeting_points: on``)?"""
        return self.meeting_points == "on"

    def personality_of(self, robot: int) -> str:
        ps = [p for p in self.personalities if p]
        if not ps:
            return "none"
        return ps[0] if len(ps) == 1 else ps[robot]


def load_config(path: str | Path | None = None, **overrides: Any) -> AggregationConfig:
    """Load and validate a config file (or the defaults), then apply non-None overrides."""
    return load_flat(AggregationConfig, path, **overrides)


# --------------------------------------------------------------------------------------------- the negotiation
#: a negotiation's topology name -> (``consensus.graphs.topology.make_graph`` name, directed); paper 1's Fig. 8b is the
#: 3-agent ``star``, Fig. 9a ``leader_follower``, Fig. 9b's chain ``chain`` (study module docstring)
NEGOTIATION_TOPOLOGIES = {"complete": ("complete", False), "star": ("star", False), "ring": ("ring", False),
                          "line": ("line", False), "chain": ("line", True), "directed_ring": ("ring", True),
                          "leader_follower": ("leader_follower", True)}
MAX_AGENTS = 100
MAX_ROUNDS = 1000
MAX_ABS_STATE = 1e6     # bound of init_low, init_high and the tolerances (state units)


def parse_personalities(text: Any, num_agents: Any) -> tuple[str, ...]:
    """``"stubborn*7,suggestible*3"`` -> 10 names; one entry is repeated for all ``num_agents``; ``num_agents``
    None = as many as listed (at least 2)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"personalities must be a string like 'stubborn,suggestible' (got {text!r})")
    if num_agents is not None and (isinstance(num_agents, bool) or not isinstance(num_agents, int)):
        raise ConfigError(f"num_agents must be an integer or null (got {num_agents!r})")
    return _personalities(text, num_agents)


@lru_cache(maxsize=256)        # a trial asks several times; a bad entry raises, and is not cached
def _personalities(text: str, num_agents: int | None) -> tuple[str, ...]:
    names: list[str] = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*([a-z_]+)\s*(?:\*\s*(\d{1,6})\s*)?", item)
        if m is None or m.group(1) not in PERSONALITIES or (m.group(2) is not None and int(m.group(2)) < 1):
            raise ConfigError(f"personalities: bad entry {item.strip()[:40]!r}; use NAME or NAME*COUNT with NAME one "
                              f"of {', '.join(PERSONALITIES)}")
        names += [m.group(1)] * int(m.group(2) or 1)
        need(len(names) <= MAX_AGENTS, f"personalities lists more than {MAX_AGENTS} agents")
    if num_agents is None:
        need(len(names) >= 2, f"num_agents is null, so personalities must list >= 2 agents (got {text!r})")
        return tuple(names)
    if len(names) == 1:
        return tuple(names * num_agents)
    need(len(names) == num_agents, f"personalities {text!r} lists {len(names)} agents but num_agents = {num_agents}")
    return tuple(names)


@lru_cache(maxsize=256)
def negotiation_graph(topology: str, n: int):
    """The ``consensus.graphs.topology.Graph`` of ``n`` agents on ``NEGOTIATION_TOPOLOGIES[topology]``."""
    from consensus.graphs.topology import make_graph

    name, directed = NEGOTIATION_TOPOLOGIES[topology]
    return make_graph(name, n, directed=directed)


@dataclass
class NegotiationConfig(RunParams, LLMParams, AgentsParams, FlatParams):
    """One negotiation of paper 1, sections 2-3 (Algorithm 1 without robots): a trial of the ``consensus-1d``,
    ``consensus-2d``, ``personalities`` and ``topologies`` studies. The shared groups keep their names and checks
    (``num_agents``; the LLM's ``llm_temperature``, ``prompt_style``, ``parse_retries``; the trial's ``seed``), and
    ``planner``, ``keep_history``, ``converge_tol_m`` mean what they mean in ``AggregationConfig``."""

    GROUP: ClassVar[str] = "negotiation"     # its fields' ROS parameters: negotiation.<name> (settings.ros_names)

    num_agents: int | None = param(4, "N agents; null = as many as `personalities` lists", bounds=(2, MAX_AGENTS))
    planner: str = param("average", "llm | average | average_no_self | stubborn | suggestible")
    rounds: int = param(10, "negotiation rounds (Algorithm 1's n_r)", bounds=(1, MAX_ROUNDS))
    dim: int = param(1, "1 = numbers (sections 2-3), 2 = positions in the plane", bounds=(1, 2))
    init_low: float = param(0.0, "initial states: uniform in [init_low, init_high] per axis",
                            bounds=(-MAX_ABS_STATE, MAX_ABS_STATE))
    init_high: float = param(100.0, "upper end of the initial states (included)",
                             bounds=(-MAX_ABS_STATE, MAX_ABS_STATE))
    init_integer: bool = param(True, "integers (the paper's examples: 39, 65, 87) or reals")
    topology: str = param("complete",
        "who hears whom: complete | star | ring | line | chain | directed_ring | leader_follower (chain, "
        "directed_ring, leader_follower are directed)")
    personalities: str = param("none",
        "none | stubborn,suggestible | stubborn*7,suggestible*3: one entry for every agent, or one per agent (they "
        "must add up to num_agents)")
    keep_history: bool = param(True, "the LLM planner keeps its chat history (the paper's 1-D setting)")
    history_rounds: int = param(0,
        "with keep_history: exchanges sent, 0 = all (the paper's; bounded by the context window), k = the first and "
        "the k-1 latest")
    converge_tol_m: float = param(1.0,
        "consensus: spread (largest distance between two agents) < this; also the clustering gap. In state units "
        "(metres where states are positions)",
        unit="m")
    label_tol: float = param(0.5, "strategy labels and oscillation: |state - candidate| <= this")
    min_reversals: int = param(2, "an agent oscillates with at least this many direction reversals")

    # ------------------------------------------------------------------
    #: the study's names before they were shared with the other scenarios
    RENAMED: ClassVar[dict] = {"agents": "num_agents", "temperature": "llm_temperature",
                               "converge_tol": "converge_tol_m"}

    def check(self) -> None:
        need(self.planner in PLANNERS, f"unknown planner '{self.planner}'; valid: {', '.join(PLANNERS)}")
        need(self.topology in NEGOTIATION_TOPOLOGIES,
             f"unknown topology '{self.topology}'; valid: {', '.join(NEGOTIATION_TOPOLOGIES)}")
        self.agent_personalities()
        lo, hi = self.init_low, self.init_high
        need(lo < hi, f"init_low must be below init_high (got {lo} and {hi})")
        need(not self.init_integer or math.ceil(lo) <= math.floor(hi),
             f"init_integer is true but there is no integer in [init_low, init_high] = [{lo}, {hi}]")
        need(0 <= self.history_rounds <= MAX_ROUNDS,
             f"history_rounds must be in [0, {MAX_ROUNDS}] (got {self.history_rounds})")
        for name in ("converge_tol_m", "label_tol"):
            value = getattr(self, name)
            need(math.isfinite(value) and 0 < value <= MAX_ABS_STATE,
                 f"{name} must be a number in (0, {MAX_ABS_STATE:g}] (got {value})")
        need(1 <= self.min_reversals <= MAX_ROUNDS,
             f"min_reversals must be in [1, {MAX_ROUNDS}] (got {self.min_reversals})")

    # ------------------------------------------------------------------
    def agent_personalities(self) -> tuple[str, ...]:
        """Every agent's personality (``personalities`` spelled out, ``parse_personalities``)."""
        return parse_personalities(self.personalities, self.num_agents)

    def resolved(self) -> "NegotiationConfig":
        """This config with ``num_agents`` counted from ``personalities`` when it is null."""
        if self.num_agents is not None:
            return self
        return dataclasses.replace(self, num_agents=len(self.agent_personalities()))

    def graph(self):
        """Who hears whom (``negotiation_graph``); on a resolved config."""
        return negotiation_graph(self.topology, len(self.agent_personalities()))
