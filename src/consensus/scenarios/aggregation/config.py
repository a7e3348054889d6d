"""Parameters of a multi-robot aggregation run (paper 1, section 4): ``AggregationConfig``.

Every field is a declared ROS parameter of the aggregation nodes; ``config/aggregation.yaml`` is the packaged
``/**:`` file. The shared groups and the reader are ``consensus.settings``'.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from consensus.errors import ConfigError
from consensus.settings import LiveViewParams, RobotBaseConfig, load_flat, need, need_positive

PLANNERS = ("llm", "average", "average_no_self", "stubborn", "suggestible")
PERSONALITIES = ("none", "stubborn", "suggestible")


@dataclass
class AggregationConfig(RobotBaseConfig, LiveViewParams):
    """Parameters of a multi-robot aggregation run (paper 1, section 4). The shared groups (run, LLM, control and
    safety, fleet, workspace and simulator) are ``consensus.settings.RobotBaseConfig``'s, the live Foxglove view
    (``foxglove``, ``foxglove_host``) ``consensus.settings.LiveViewParams``'; these are the aggregation's own."""

    # graph
    topology: str = "complete"        # who hears whom: complete|ring|star|line|leader_follower|random|custom
    directed: bool = False            # directed edges (ring, line, random, custom)
    adjacency: str = ""               # custom topology: JSON/YAML list of lists, e.g. "[[0,1],[1,0]]"
    topology_p: float = 0.5           # edge probability of the random topology
    leader: int = 0                   # leader of the leader_follower topology
    link_delay_s: float = 0.0         # per-link delivery delay applied by the topology node
    link_drop_prob: float = 0.0       # per-link, per-delivery drop probability (seeded)
    neighbor_rate_hz: float = 2.0     # rate at which the topology node delivers neighbour states (planner input)

    # control: a robot within `deadband` of its target stops. On a sparse graph (a ring) every robot's neighbourhood
    # average can be within the deadband while the fleet is still spread out by several deadbands (0.02 m left a
    # 6-robot ring at 0.14 m against converge_tol_m 0.1 for good), so aggregation stops much closer than the
    # generic robot base (docs: "Running your own")
    deadband: float = 0.005

    # planning
    planner: str = "average"          # not llm: an LLM run is asked for (--planner llm), never started by accident
    personalities: list[str] = field(default_factory=list)   # per robot; empty = all "none"
    keep_history: bool = False        # the LLM planner keeps its chat history (paper 1's 1-D setting)

    # run
    duration_s: float = 40.0          # the run's length, or its upper bound when settle_s ends it earlier
    converge_tol_m: float = 0.1       # consensus: every pair of robots within this distance [m]
    settle_s: float = 0.0             # end the run once the spread stayed below converge_tol_m this long (0 = never)

    # ------------------------------------------------------------------
    RENAMED: ClassVar[dict] = {"memory": "keep_history"}    # `memory` is the naming game's H
    RANGES: ClassVar[dict] = {"topology_p": (0.0, 1.0), "link_drop_prob": (0.0, 0.999999), "link_delay_s": (0.0, 1e3),
                              "settle_s": (0.0, 1e6)}

    def check(self) -> None:
        need(self.num_robots >= 2, f"num_robots must be at least 2 for an aggregation (got {self.num_robots})")
        need(self.planner in PLANNERS, f"unknown planner '{self.planner}'; valid: {', '.join(PLANNERS)}")
        need_positive(self, "neighbor_rate_hz", "duration_s", "converge_tol_m")
        need(self.settle_s >= 0, f"settle_s must be >= 0 (0 = run for duration_s; got {self.settle_s})")
        need(self.link_delay_s >= 0, f"link_delay_s must be >= 0 (got {self.link_delay_s})")
        need(0.0 <= self.link_drop_prob < 1.0, f"link_drop_prob must be in [0, 1) (got {self.link_drop_prob})")
        need(0.0 <= self.topology_p <= 1.0, f"topology_p must be in [0, 1] (got {self.topology_p})")
        need(0 <= self.leader < self.num_robots, f"leader must be a robot index 0..{self.num_robots - 1}")
        if self.personalities and self.personalities != ["none"]:
            need(len(self.personalities) in (1, self.num_robots),
                 f"personalities needs 1 or num_robots={self.num_robots} entries (got {len(self.personalities)})")
            for p in self.personalities:
                need(p in PERSONALITIES, f"unknown personality '{p}'; valid: {', '.join(PERSONALITIES)}")
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

    def personality_of(self, robot: int) -> str:
        ps = [p for p in self.personalities if p]
        if not ps:
            return "none"
        return ps[0] if len(ps) == 1 else ps[robot]


def load_config(path: str | Path | None = None, **overrides: Any) -> AggregationConfig:
    """Load and validate a config file (or the defaults), then apply non-None overrides."""
    return load_flat(AggregationConfig, path, **overrides)
