"""The threshold public-goods game of paper 2's scenario 3 (appendices B.3 and C.3).

* N contributors choose x_i(t) in [0, C_max]; X(t) = Σ x_i. The good is *funded* when X(t) >= θ(t).
* Payoff: Π_i(t) = B(t)/N - c·x_i(t) when funded, else -c·x_i(t) (C.3).
* θ(1) = ``threshold_per_agent`` · N (30 for N = 5, C.3). At the start of each later round θ shifts with probability
  ``SHIFT_P[volatility]`` (0.1 / 0.25 / 0.5; C.3 "at random intervals") by ±5 or ±10 (sign and size uniform),
  clipped to [5, N·C_max].
* B(t) is drawn uniformly in [80, 120] each round (C.3 "we sometimes allow B(t) to fluctuate between 80 and 120").
* Information (ours within B.3/C.3): contributors know last round's θ, B, total and outcome, not the current θ(t) or
  B(t). A shift is announced truthfully with probability ``announce_p``; with probability ``rumour_p`` a round also
  carries a misleading rumour claiming θ(t) ± 5 or ± 10 ("Analyst warns threshold could jump to 40"); a benefit
  report states B(t) with uniform noise of ±15. Items are ``ReportItem`` s (text for the LLM; the claimed value for
  the heuristic; ``misleading`` only for the logs).

Every draw comes from ``numpy.random.default_rng([seed, 31])``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from consensus.scenarios.public_goods.config import SHIFT_P


@dataclass(frozen=True)
class ReportItem:
    text: str
    about: str              # threshold | benefit
    source: str             # official | analyst | experts (named in the text)
    claimed: float
    misleading: bool

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Observation:
    round: int
    num_agents: int
    max_contribution: float
    cost: float
    last_threshold: float | None     # θ(t-1); None in round 0
    last_benefit: float | None
    last_total: float | None
    last_funded: bool | None
    first_threshold: float
    report: tuple[ReportItem, ...]

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["report"] = [i.to_dict() for i in self.report]
        return d

    @property
    def known_threshold(self) -> float:
        return self.first_threshold if self.last_threshold is None else self.last_threshold

    def claims(self, about: str = "threshold", source: str | None = None) -> list[float]:
        return [i.claimed for i in self.report if i.about == about and source in (None, i.source)]


@dataclass
class RoundResult:
    round: int
    threshold: float
    benefit: float
    contributions: list[float]
    total: float
    funded: bool
    payoffs: list[float]

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def payoffs(contributions, threshold: float, benefit: float, cost: float) -> tuple[bool, list[float]]:
    x = np.asarray(contributions, dtype=float)
    funded = bool(x.sum() >= threshold - 1e-9)
    share = benefit / len(x) if funded else 0.0
    return funded, [float(share - cost * xi) for xi in x]


class PublicGoodsGame:
    def __init__(self, cfg, seed: int) -> None:
        self.cfg = cfg
        self.rng = np.random.default_rng([seed, 31])
        self.n = cfg.num_agents
        self.first = cfg.threshold_per_agent * self.n
        self.threshold = self.first
        self.benefit = 100.0
        self.round = 0
        self.last: RoundResult | None = None

    def _shift(self) -> float:
        return float(self.rng.choice([-10, -5, 5, 10]))

    def observe(self) -> Observation:
        items: list[ReportItem] = []
        if self.round > 0 and self.rng.random() < SHIFT_P[self.cfg.volatility]:
            self.threshold = float(np.clip(self.threshold + self._shift(), 5.0, self.n * self.cfg.max_contribution))
            if self.rng.random() < self.cfg.announce_p:
                items.append(ReportItem(f"Official notice: the funding threshold is now {self.threshold:g}.",
                                        "threshold", "official", self.threshold, False))
        self.benefit = float(self.rng.uniform(self.cfg.benefit_min, self.cfg.benefit_max))
        if self.rng.random() < self.cfg.rumour_p:
            claim = float(max(5.0, self.threshold + self._shift()))
            items.append(ReportItem(f"Analyst warns the threshold could be {claim:g} this round. Another says "
                                    "'No, it stays where it was'.", "threshold", "analyst", claim, True))
        noisy = float(round(self.benefit + self.rng.uniform(-15, 15)))
        items.append(ReportItem(f"Experts estimate the benefit this round at about {noisy:g}.", "benefit", "experts",
                                noisy, abs(noisy - self.benefit) > 10))
        last = self.last
        return Observation(round=self.round, num_agents=self.n, max_contribution=self.cfg.max_contribution,
                           cost=self.cfg.cost, last_threshold=None if last is None else last.threshold,
                           last_benefit=None if last is None else last.benefit,
                           last_total=None if last is None else last.total,
                           last_funded=None if last is None else last.funded, first_threshold=self.first,
                           report=tuple(items))

    def play(self, contributions) -> RoundResult:
        x = [float(min(max(v, 0.0), self.cfg.max_contribution)) for v in contributions]
        funded, pay = payoffs(x, self.threshold, self.benefit, self.cfg.cost)
        self.last = RoundResult(self.round, self.threshold, self.benefit, x, float(sum(x)), funded, pay)
        self.round += 1
        return self.last
