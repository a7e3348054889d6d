"""Settings of the information spread scenario (paper 2, appendix C.2; choices in docs/info-spread.md)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from consensus.discussion.config import DiscussionParams
from consensus.settings import AgentsParams, FlatParams, RunParams, need, param

#: volatility -> p_spread (C.2); the injection schedule is in ``network.Adversary``
VOLATILITY = {"low": 0.1, "moderate": 0.2, "high": 0.3}


@dataclass
class InfoSpreadConfig(RunParams, AgentsParams, DiscussionParams, FlatParams):
    GROUP: ClassVar[str] = "info_spread"     # its fields' ROS parameters: info_spread.<name> (settings.ros_names)
    num_agents: int = param(3, "N defenders (paper: 3-10)")
    nodes: int = param(50, "scale-free network size")
    attach: int = param(3, "Barabási-Albert m (edges of each new node)")
    initial_misinformed: int = param(3, "paper: 2-5 random nodes")
    checks_per_agent: int = param(3, "R: nodes one defender fact-checks per round")
    informed_resistance: float = param(0.5, "an informed (fact-checked) node is infected with p_spread * (1 - this)")
    high_injection_p: float = param(0.8, "high volatility: an injection in a round with this probability")
    detection: float = param(0.8, "a misinformed node shows up in the round's report with this probability")
    report_noise: float = param(0.2, "share of report items that are misleading (paper: \"some ... contradictory\")")
    stop_share: float = param(0.8, "the run ends when more than this share of nodes is misinformed")

    def check(self) -> None:
        need(1 <= self.num_agents <= 30, f"num_agents must be in [1, 30] (got {self.num_agents})")
        need(5 <= self.nodes <= 10_000, f"nodes must be in [5, 10000] (got {self.nodes})")
        need(1 <= self.attach < self.nodes, f"attach must be in [1, nodes) (got {self.attach})")
        need(1 <= self.initial_misinformed <= self.nodes, "initial_misinformed must be in [1, nodes]")
        need(1 <= self.checks_per_agent <= 10, f"checks_per_agent must be in [1, 10] (got {self.checks_per_agent})")
        for name in ("informed_resistance", "high_injection_p", "detection", "report_noise", "stop_share"):
            need(0.0 <= getattr(self, name) <= 1.0, f"{name} must be in [0, 1] (got {getattr(self, name)})")
        need(self.strategy != "averaging" or self.mode != "explicit",
             "node sets cannot be averaged: explicit strategy 'averaging' does not apply to info-spread")

    @property
    def p_spread(self) -> float:
        return VOLATILITY[self.volatility]
