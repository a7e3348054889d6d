"""Reliability of repeated trials (paper 3, eq. (2)) and the area under the reliability curve (Table 2).

* ``kappa(scores, tau)`` = (1/T) * sum_t 1[S_t >= tau]: the share of the T trials whose score reaches
  the threshold (``>=``, as in eq. (2)).
* ``reliability_curve(scores, taus)`` = kappa at every threshold of ``taus``.
* ``aurc(scores)`` = the integral of kappa(tau) over tau in [0, 1], computed EXACTLY: kappa is a step
  function, and for one trial integral_0^1 1[s >= tau] dtau = clip(s, 0, 1) (the length of [0, min(s, 1)]),
  so by linearity AURC = mean(clip(S_t, 0, 1)). A perfect, consistent system has AURC = 1.

Relation to a trapezoid on a grid: ``np.trapezoid(reliability_curve(S, g), g)`` on the uniform grid
g = (0, h, 2h, ..., 1) counts a trial with score s in [g_j, g_{j+1}) as g_j + h/2 (its last interval holds
one 1 and one 0), a trial with s >= 1 as 1 and a trial with s < 0 as 0; it therefore differs from the exact
AURC by at most h/2 (0.005 on 101 points), and equals it when every score sits at an interval midpoint.
The paper does not say which rule it used; the exact one needs no grid.

Scores must be finite (a failed trial must be given a score by the caller, e.g. 0); an empty score list
is an error because a reliability of nothing is undefined.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def _scores(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    s = np.asarray(scores, dtype=float).reshape(-1)
    if s.size == 0:
        raise ValueError("reliability needs at least one trial score")
    if not np.all(np.isfinite(s)):
        raise ValueError("trial scores must be finite (give failed trials an explicit score)")
    return s


def kappa(scores: Sequence[float] | np.ndarray, tau: float) -> float:
    """Share of trials with score >= tau (paper 3, eq. (2))."""
    return float(np.mean(_scores(scores) >= tau))


def reliability_curve(scores: Sequence[float] | np.ndarray, taus: Sequence[float] | np.ndarray) -> np.ndarray:
    """kappa(tau) for every tau in ``taus`` (same order)."""
    s = np.sort(_scores(scores))
    t = np.asarray(taus, dtype=float).reshape(-1)
    below = np.searchsorted(s, t, side="left")     # trials with score < tau
    return (len(s) - below) / len(s)


def aurc(scores: Sequence[float] | np.ndarray) -> float:
    """Exact area under kappa(tau) over tau in [0, 1] = mean of the scores clipped to [0, 1]."""
    return float(np.mean(np.clip(_scores(scores), 0.0, 1.0)))
