"""Settings of the public-goods scenario (paper 2, appendix C.3; choices in docs/public-goods.md)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from consensus.discussion.config import DiscussionParams
from consensus.settings import AgentsParams, FlatParams, RunParams, need, param

#: volatility -> probability that θ shifts at the start of a round
SHIFT_P = {"low": 0.1, "moderate": 0.25, "high": 0.5}


@dataclass
class PublicGoodsConfig(RunParams, AgentsParams, DiscussionParams, FlatParams):
    GROUP: ClassVar[str] = "public_goods"     # its fields' ROS parameters: public_goods.<name> (settings.ros_names)
    num_agents: int = param(5, "N contributors (paper: 3-30; θ(1) = 30 is given for N = 5)")
    max_contribution: float = param(20.0, "C_max")
    threshold_per_agent: float = param(6.0, "θ(1) = this * N (30 for N = 5)")
    benefit_min: float = param(80.0, "B(t) uniform in [benefit_min, benefit_max] each round")
    benefit_max: float = param(120.0, "the upper end of B(t)'s range")
    cost: float = param(1.0, "c (paper: 1 or 2)")
    rumour_p: float = param(0.5, "a misleading threshold rumour in a round with this probability")
    announce_p: float = param(0.8, "a threshold shift is announced truthfully with this probability")

    def check(self) -> None:
        need(1 <= self.num_agents <= 30, f"num_agents must be in [1, 30] (got {self.num_agents})")
        for name in ("max_contribution", "threshold_per_agent", "benefit_min", "benefit_max", "cost"):
            v = getattr(self, name)
            need(math.isfinite(v) and 0 < v <= 1e6, f"{name} must be in (0, 1e6] (got {v})")
        need(self.benefit_min <= self.benefit_max, "benefit_min must not exceed benefit_max")
        need(self.threshold_per_agent <= self.max_contribution,
             "threshold_per_agent must not exceed max_contribution (the good could never be funded)")
        for name in ("rumour_p", "announce_p"):
            need(0.0 <= getattr(self, name) <= 1.0, f"{name} must be in [0, 1] (got {getattr(self, name)})")
