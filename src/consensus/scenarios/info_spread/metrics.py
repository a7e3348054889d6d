"""Scenario 2's metrics (paper 2, appendix C.2 and section 3.2).

* **MS**, final misinformation spread: the share of nodes misinformed when the run ends (C.2 "percentage of nodes
  misinformed at the end of T rounds"; a fraction in [0, 1] as in Table 4).
* **CT**, containment time: for every *cohort* (the m >= 1 nodes that became misinformed in one round, the initial
  nodes included), the number of rounds k >= 1 until fewer than m/2 of them are still misinformed at the end of
  round t0 + k (C.2: "reduce an outbreak from m newly infected nodes to < m/2"). A cohort not contained when the run
  ends is *censored* and counts the rounds it was observed (a cohort of the last round, never observed, is
  left out); CT is the mean over cohorts, and the number of censored
  cohorts is reported next to it.
* **CD**, coverage diversity: the number of distinct nodes fact-checked in a round, mean over rounds (C.2).
* **Deviation** (section 3.2, Jaccard): the *mode set* S_μ(t) is the node set chosen by the most defenders (exact
  set equality, eq. 3 for categorical actions; a tie goes to the set chosen first by defender index);
  d_i(t) = 1 - |S_i ∩ S_μ| / |S_i ∪ S_μ| (two empty sets: 0); d̄(t) is the mean over defenders, and the run's value
  the mean over rounds.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from consensus.decision.voting import majority_vote


def jaccard_distance(a: frozenset, b: frozenset) -> float:
    union = a | b
    return 0.0 if not union else 1.0 - len(a & b) / len(union)


def mode_set(actions: Sequence[frozenset]) -> frozenset:
    return majority_vote([frozenset(a) for a in actions]) or frozenset()


def action_deviation(actions: Sequence[frozenset]) -> float:
    """d̄(t) of one round's node sets (module docstring)."""
    if not actions:
        return 0.0
    mu = mode_set(actions)
    return float(np.mean([jaccard_distance(frozenset(a), mu) for a in actions]))


def coverage_diversity(actions: Sequence[frozenset]) -> int:
    """Distinct nodes fact-checked in one round."""
    return len(frozenset().union(*[frozenset(a) for a in actions])) if actions else 0


def containment_times(cohorts: Sequence[tuple[int, Sequence[int]]], history: Sequence[np.ndarray]
                      ) -> tuple[list[int], int]:
    """(CT of every non-empty cohort, how many were censored); ``history[t]`` = misinformed mask after round t."""
    times, censored = [], 0
    for t0, nodes in cohorts:
        m = len(nodes)
        if m == 0:
            continue
        observed = len(history) - 1 - t0            # rounds after the cohort's own
        if observed <= 0:
            continue                                # infected in the last round: never observed, not counted
        idx = np.asarray(nodes, dtype=int)
        for t in range(t0 + 1, len(history)):
            if int(np.sum(history[t][idx])) < m / 2:
                times.append(t - t0)
                break
        else:
            times.append(observed)
            censored += 1
    return times, censored


def summarize(net, outcomes: Sequence, actions_per_round: Sequence[Sequence[frozenset]]) -> dict:
    """The run's numbers and per-round series from the network ``net`` after the run."""
    times, censored = containment_times(net.cohorts, net.history)
    cd = [coverage_diversity(a) for a in actions_per_round]
    dev = [action_deviation(a) for a in actions_per_round]
    return {
        "misinformation_spread": float(np.mean(net.state == 2)),
        "containment_time": float(np.mean(times)) if times else None,
        "cohorts": len(times), "cohorts_censored": censored,
        "coverage_diversity": float(np.mean(cd)) if cd else 0.0,
        "mean_deviation": float(np.mean(dev)) if dev else 0.0,
        "rounds_run": len(outcomes),
        "stopped_early": bool(net.over()),
        "injections": sum(len(o.injected) for o in outcomes),
        "corrected": sum(o.corrected for o in outcomes),
        "series": {"misinformed": [o.misinformed_share for o in outcomes], "coverage_diversity": cd,
                   "deviation": dev},
    }
