"""Scenario 3's metrics (paper 2, appendix C.3 and section 3.2).

* **PR**, provision rate: the share of rounds with X(t) >= θ(t).
* **TW**, total welfare, normalised per round: (1/T) Σ_t Σ_i Π_i(t), the group's net payoff in an average round.
  The paper defines Σ_t Σ_i Π_i(t) but reports 19-28.5 (Table 5), which no raw sum over T = 20 rounds can be (a
  funded round alone is worth B - X ≈ 100 - 30 = 70). The raw sum (``welfare_sum``) and the mean per agent and
  round (``welfare_per_agent_round``) are reported too.
* **FD**, free-rider disparity: the Gini coefficient of {x_i(t)} (C.3 "standard deviation or Gini"; Table 5's values
  in [0, 1] fit a Gini), mean over rounds; a round where nobody contributed counts 0. Under explicit consensus every
  agent pays x_group/N, so FD = 0 by construction; ``proposal_disparity`` is the Gini of the first votes instead.
* **Deviation** (section 3.2): d_i(t) = |x_i(t) - μ(t)| / C_max with μ(t) the mean contribution; d̄(t) is the mean
  over agents, the run's value the mean over rounds.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def gini(values: Sequence[float]) -> float:
    x = np.asarray(values, dtype=float)
    if len(x) == 0 or x.sum() <= 0:
        return 0.0
    return float(np.abs(x[:, None] - x[None, :]).sum() / (2 * len(x) ** 2 * x.mean()))


def deviation(contributions: Sequence[float], c_max: float) -> float:
    x = np.asarray(contributions, dtype=float)
    return float(np.mean(np.abs(x - x.mean())) / c_max) if len(x) else 0.0


def summarize(results: Sequence, c_max: float, proposals: Sequence[Sequence[float | None]] = ()) -> dict:
    rounds = len(results)
    welfare = [float(sum(r.payoffs)) for r in results]
    n = len(results[0].contributions) if results else 1
    votes = [[v for v in p if v is not None] for p in proposals]
    return {
        "provision_rate": float(np.mean([r.funded for r in results])) if results else 0.0,
        "total_welfare": float(np.mean(welfare)) if welfare else 0.0,
        "welfare_sum": float(np.sum(welfare)),
        "welfare_per_agent_round": float(np.mean(welfare)) / n if welfare else 0.0,
        "free_rider_disparity": float(np.mean([gini(r.contributions) for r in results])) if results else 0.0,
        "proposal_disparity": float(np.mean([gini(v) for v in votes if v])) if any(votes) else None,
        "mean_deviation": float(np.mean([deviation(r.contributions, c_max) for r in results])) if results else 0.0,
        "rounds_run": rounds,
        "series": {"funded": [int(r.funded) for r in results], "total": [r.total for r in results],
                   "threshold": [r.threshold for r in results], "welfare": welfare,
                   "deviation": [deviation(r.contributions, c_max) for r in results]},
    }
