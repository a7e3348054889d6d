"""Paper 3's resource-allocation task: the nine problems, feasibility and the satisfaction score.

Problems (appendix Tables 3-5, exact numbers): three scales (small: 3 regions x water, food; medium:
6 regions x water, food; large: 9 regions x water, food, medicine) with the same demands for every
setting, and three settings of the available totals: ``equal`` (totals = total demand), ``lack``
(less) and ``excess`` (more). ``problem(scale, setting)`` returns one as an ``AllocationProblem``.

Layout: an allocation (and ``demand``) is a float array of shape (resources, regions): row r is
resource ``resources[r]``, column R is region ``regions[R]`` ("region1", "region2", ... as in the
paper's prompt example). Amounts may be fractional (an averaged plan is).

Satisfaction (eq. (1)): for region R, S(R) = (1/N_R) * sum_r min(Allocation(R, r) / Demand(R, r), 1),
N_R = the number of resources R demands (every demand in the paper's tables is > 0, so N_R is the number
of resources). The overall score of a plan is the MEAN of S(R) over the regions (the paper speaks of
"overall satisfaction of regional demands" without a formula; with equal weights a plan that meets every
demand scores 1).

Feasibility rules, applied by ``fit_to_totals`` before scoring:

* an allocation must have the problem's shape and hold finite, non-negative amounts (``ValueError``
  otherwise: the parser, ``consensus.scenarios.allocation.prompts``, rejects such replies before they get here);
* a resource whose amounts add up to more than its available total (beyond 1e-9 relative) is scaled
  down proportionally on that row to exactly the total: the plan's shares are kept, but nothing is
  handed out twice. The number of rows scaled is reported (``over_allocated``). The paper asks the
  agents to "respect the total available resources" but does not say how it scored plans that did not;
  scaling keeps an over-eager plan comparable instead of scoring it 0 or above what exists.

Failed agents: the paper replaces the plan of an agent that answered off-template or hallucinated
regions/resources by the all-zero allocation (``AllocationProblem.zeros()``), which scores 0.

References: ``proportional_allocation`` (each region gets demand x min(1, total / total demand)) and
``best_allocation``, the exact maximiser of the overall score: per resource, the objective
sum_R min(a_R / d_R, 1) is a fractional knapsack with value 1/d_R per unit, so serving regions in order
of increasing demand (ties: region order) is optimal. With equal or excess totals both meet every
demand (score 1); with lack the optimum is higher (small-lack: 0.783 vs 0.711 proportional).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from consensus.errors import ConfigError

SCALES = ("small", "medium", "large")
SETTINGS = ("equal", "lack", "excess")

#: per scale: resource names and the demand of each region (paper appendix, Tables 3-5)
DEMANDS: dict[str, tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]] = {
    "small": (("water", "food"), ((8, 6), (12, 7), (6, 10))),
    "medium": (("water", "food"), ((10, 8), (15, 5), (5, 12), (8, 3), (6, 10), (12, 6))),
    "large": (("water", "food", "medicine"),
              ((5, 3, 2), (7, 5, 3), (4, 6, 5), (8, 4, 3), (6, 7, 4), (10, 5, 6), (3, 2, 1), (9, 8, 7), (7, 6, 5))),
}
#: available totals per (scale, setting), in the order of the scale's resources (Tables 3-5)
TOTALS: dict[tuple[str, str], tuple[int, ...]] = {
    ("small", "equal"): (26, 23), ("small", "lack"): (20, 15), ("small", "excess"): (40, 35),
    ("medium", "equal"): (56, 44), ("medium", "lack"): (40, 30), ("medium", "excess"): (60, 50),
    ("large", "equal"): (59, 46, 36), ("large", "lack"): (45, 35, 25), ("large", "excess"): (80, 65, 50),
}

_OVER_TOL = 1e-9


@dataclass(frozen=True, eq=False)
class AllocationProblem:
    name: str                       # e.g. "medium-lack"
    resources: tuple[str, ...]      # e.g. ("water", "food")
    regions: tuple[str, ...]        # ("region1", ...)
    demand: np.ndarray              # (resources, regions), every entry > 0
    totals: np.ndarray              # (resources,) available amounts, >= 0

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.resources), len(self.regions)

    def zeros(self) -> np.ndarray:
        """The paper's plan for a failed agent: nothing to anybody."""
        return np.zeros(self.shape)


def problem(scale: str, setting: str) -> AllocationProblem:
    """The paper's problem for ``scale`` x ``setting``; ConfigError for unknown names."""
    if scale not in SCALES:
        raise ConfigError(f"allocation scale must be one of {', '.join(SCALES)}; got {scale!r}")
    if setting not in SETTINGS:
        raise ConfigError(f"allocation setting must be one of {', '.join(SETTINGS)}; got {setting!r}")
    resources, per_region = DEMANDS[scale]
    demand = np.asarray(per_region, dtype=float).T
    demand.flags.writeable = False
    totals = np.asarray(TOTALS[(scale, setting)], dtype=float)
    totals.flags.writeable = False
    return AllocationProblem(name=f"{scale}-{setting}", resources=resources,
                             regions=tuple(f"region{i + 1}" for i in range(demand.shape[1])),
                             demand=demand, totals=totals)


def fit_to_totals(prob: AllocationProblem, allocation: np.ndarray) -> tuple[np.ndarray, int]:
    """(feasible copy of ``allocation``, number of resources scaled down to their total)."""
    alloc = np.array(allocation, dtype=float)
    if alloc.shape != prob.shape:
        raise ValueError(f"{prob.name}: allocation must have shape {prob.shape} (resources x regions), "
                         f"got {alloc.shape}")
    if not np.all(np.isfinite(alloc)) or np.any(alloc < 0):
        raise ValueError(f"{prob.name}: allocation amounts must be finite and >= 0")
    used = alloc.sum(axis=1)
    over = used > prob.totals * (1 + _OVER_TOL) + _OVER_TOL
    alloc[over] *= (prob.totals[over] / used[over])[:, None]
    return alloc, int(over.sum())


def region_satisfaction(prob: AllocationProblem, allocation: np.ndarray) -> np.ndarray:
    """S(R) of every region (eq. (1)) for the feasible version of ``allocation``."""
    alloc, _ = fit_to_totals(prob, allocation)
    return np.minimum(alloc / prob.demand, 1.0).mean(axis=0)


def satisfaction(prob: AllocationProblem, allocation: np.ndarray) -> float:
    """The overall score: mean over regions of S(R); in [0, 1]."""
    return float(region_satisfaction(prob, allocation).mean())


def proportional_allocation(prob: AllocationProblem) -> np.ndarray:
    """Every region gets its demand times min(1, total / total demand) of each resource."""
    share = np.minimum(1.0, prob.totals / prob.demand.sum(axis=1))
    return prob.demand * share[:, None]


def best_allocation(prob: AllocationProblem) -> np.ndarray:
    """A plan with the highest possible score: per resource, fill the smallest demands first."""
    alloc = np.zeros(prob.shape)
    for r in range(prob.shape[0]):
        left = float(prob.totals[r])
        for region in np.argsort(prob.demand[r], kind="stable"):
            alloc[r, region] = min(prob.demand[r, region], left)
            left -= alloc[r, region]
    return alloc
