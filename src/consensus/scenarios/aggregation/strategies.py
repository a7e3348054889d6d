"""Per-round strategy labels, oscillation, clustering and rounds to converge of a negotiation (paper 1, 3.1-3.2).

Input: the states of a negotiation, ``states`` of shape ``(R + 1, n, d)`` (``states[r]`` before round ``r``,
``states[r + 1]`` after it), the communication graph as its adjacency ``adj[i, j]`` = "i hears j" (as in
``consensus.graphs.topology.Graph.adj``), and optionally the reasoning text and the fallback flag of every
``(round, agent)``. Distances are Euclidean in state units (absolute value in 1-D).

Strategy labels (paper 1, section 3.1). For agent ``i`` in round ``r``, with own state ``x = states[r, i]``, the
in-neighbour states ``x_j`` (j with ``adj[i, j]``) and the new state ``y = states[r + 1, i]``, the candidates are

* ``stubborn``               y = x                                  (keeps its own state, Fig. 3b)
* ``average_with_self``      y = mean({x} ∪ {x_j})                  (the average strategy, Fig. 2a)
* ``average_without_self``   y = mean({x_j})                        (average excluding itself, Fig. 2b)
* ``suggestible``            y = x_j for some in-neighbour j        (copies a neighbour's state, Fig. 3a)

A candidate *fits* when ``|y - candidate| <= tol`` (default ``LABEL_TOL`` = 0.5 state units: an LLM that rounds
an average to the nearest integer, as the paper's agents do, is still "average"; the prompts show 2 decimals).
The label is chosen in this order:

1. ``fallback`` when the planner produced no state (the runner held the old one): not the agent's choice.
2. ``agreed`` when the agent has at least one in-neighbour, all its in-neighbours are within ``tol`` of ``x``,
   and some candidate fits: every strategy gives the same answer, so the round says nothing about strategy.
3. ``erroneous`` when no candidate fits (a wrong average, a value from nowhere, a state outside the range of
   the states it saw: Fig. 3c).
4. the only fitting candidate;
5. several fit (e.g. two agents: the average without self *is* the other agent's state): the reasoning text is
   the tie-breaker. Keywords (``KEYWORDS``, case-insensitive, whole words) name strategies ("average", "mean",
   "midpoint" -> both averages; "stay", "remain", "stationary" -> stubborn; "their position", "nearest
   neighbour", "join", "follow", "copy" -> suggestible); if the named strategies intersect the fitting ones,
   only those stay. Among what stays the nearest candidate wins; exact ties (within 1e-9) go by ``PRIORITY``:
   stubborn, average_with_self, suggestible, average_without_self (for two agents copying the other is what
   the paper calls suggestible, Fig. 6b).

An agent with no in-neighbour (a leader) has only the stubborn candidate. Strategy *shares* are reported over
the five paper categories only; ``agreed`` and ``fallback`` rounds are counted separately.

Oscillation (paper 1, Figs. 3a and 6b: two suggestible agents swap forever). An update ``u_r = y - x`` is
*significant* when ``|u_r| > tol``. A *reversal* is a pair of consecutive significant updates ``u_a, u_b`` of one
agent (insignificant ones in between are skipped) pointing in opposite directions, ``u_a · u_b < 0`` (a sign
change in 1-D, an angle above 90° in 2-D), where the later move is not damped away: ``|u_b| >= REVERSAL_RATIO *
|u_a|`` (0.5). Averaging on a 3-agent star has an eigenvalue -1/6, so its centre zig-zags with moves shrinking
6-fold per round: a decaying transient, not the persistent swapping the paper calls oscillation. An agent
oscillates when it has at least ``min_reversals`` (default 2) reversals; a negotiation oscillates when any
agent does.

Clustering (paper 1, Fig. 7b): the final states are grouped by single linkage, two agents in one group when a
chain of agents with steps ``<= tol`` joins them; the negotiation is *clustered* when there are ``>= 2`` groups
(the default ``tol`` is the convergence tolerance, 1 state unit).

Rounds to converge: the first round after which the spread (diameter of the group, ``spread_series``) stays
below ``tol`` to the end, as ``consensus.metrics.convergence.time_to_converge`` defines it for time series;
``None`` if the final spread is not below ``tol``.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np


STRATEGIES = ("average_with_self", "average_without_self", "suggestible", "stubborn", "erroneous")
LABELS = (*STRATEGIES, "agreed", "fallback")
#: one character per label, used for compact per-round label strings in trial records
LABEL_CODES = {"average_with_self": "W", "average_without_self": "O", "suggestible": "G", "stubborn": "S",
               "erroneous": "E", "agreed": "=", "fallback": "F"}
CODE_LABELS = {code: label for label, code in LABEL_CODES.items()}
#: the candidates, in the order of the tie-break priority
PRIORITY = ("stubborn", "average_with_self", "suggestible", "average_without_self")
LABEL_TOL = 0.5
CONVERGE_TOL = 1.0
MIN_REVERSALS = 2
REVERSAL_RATIO = 0.5

KEYWORDS = {
    "average": (re.compile(r"\b(averag\w*|mean|midpoint|middle|halfway|centroid|cent(?:er|re))\b", re.I),
                ("average_with_self", "average_without_self")),
    "stay": (re.compile(r"\b(stay\w*|remain\w*|stationary|keep\w*|hold\w*|stick\w*|not move)\b", re.I),
             ("stubborn",)),
    "copy": (re.compile(r"\b(their (?:position|location)|other agent'?s (?:position|location)|"
                        r"(?:nearest|closest) (?:neighbou?r|agent|robot)|join\w*|follow\w*|cop(?:y|ies|ying))\b",
                        re.I),
             ("suggestible",)),
}
_EXACT = 1e-9
_FALLBACK, _ERRONEOUS, _AGREED = len(PRIORITY), len(PRIORITY) + 1, len(PRIORITY) + 2


def _norm(a: np.ndarray) -> np.ndarray:
    """Euclidean length over the last axis (``np.linalg.norm`` without its per-call checks)."""
    return np.sqrt(np.einsum("...d,...d->...", a, a))


def _check_states(states: np.ndarray) -> np.ndarray:
    states = np.asarray(states, dtype=float)
    if states.ndim != 3 or states.shape[0] < 1:
        raise ValueError(f"states must have shape (R + 1, n, d) with R >= 0, got {states.shape}")
    return states


def _check_tol(tol: float) -> float:
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tolerance must be a finite number > 0, got {tol}")
    return float(tol)


def named_strategies(reasoning: str) -> set[str]:
    """The strategies the reasoning text names (``KEYWORDS``); empty for no or unrelated text."""
    named: set[str] = set()
    for pattern, labels in KEYWORDS.values():
        if reasoning and pattern.search(reasoning):
            named.update(labels)
    return named


def candidate_distances(states: np.ndarray, adj: np.ndarray) -> np.ndarray:
    """``(R, n, 4)`` distance of each new state to each candidate, in ``PRIORITY`` order (inf = no candidate)."""
    states = _check_states(states)
    x, y = states[:-1], states[1:]
    hears = np.asarray(adj, dtype=bool)
    weights = hears.astype(float)
    deg = weights.sum(axis=1)
    sum_nb = np.einsum("ij,rjd->rid", weights, x)
    mean_with = (x + sum_nb) / (deg + 1.0)[None, :, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_without = sum_nb / deg[None, :, None]
    to_nb = _norm(y[:, :, None, :] - x[:, None, :, :])                  # (R, n, n): |y_i - x_j|
    to_nb = np.where(hears[None], to_nb, np.inf)
    out = np.stack([_norm(y - x),
                    _norm(y - mean_with),
                    to_nb.min(axis=-1),
                    _norm(y - mean_without)], axis=-1)
    out[:, deg == 0, 2:] = np.inf
    return out


def label_rounds(states: np.ndarray, adj: np.ndarray, *, reasonings: Sequence[Sequence[str]] | None = None,
                 fallbacks: np.ndarray | None = None, tol: float = LABEL_TOL) -> list[list[str]]:
    """``labels[r][i]``: the strategy label of agent ``i`` in round ``r`` (rules in the module docstring)."""
    states = _check_states(states)
    tol = _check_tol(tol)
    n_rounds, n = states.shape[0] - 1, states.shape[1]
    hears = np.asarray(adj, dtype=bool)
    if hears.shape != (n, n):
        raise ValueError(f"adjacency must have shape ({n}, {n}), got {hears.shape}")
    dist = candidate_distances(states, hears)
    fits = dist <= tol + _EXACT
    x = states[:-1]
    gap = _norm(x[:, :, None, :] - x[:, None, :, :])
    neighbourhood_agrees = np.where(hears[None], gap <= tol + _EXACT, True).all(axis=-1) & hears.any(axis=1)[None]
    held = np.zeros((n_rounds, n), bool) if fallbacks is None else np.asarray(fallbacks, dtype=bool)
    if held.shape != (n_rounds, n):
        raise ValueError(f"fallbacks must have shape ({n_rounds}, {n}), got {held.shape}")
    # label index per (round, agent): PRIORITY positions 0-3, then the non-strategy labels
    index = np.where(fits.sum(axis=-1) == 1, fits.argmax(axis=-1), -1)
    index[neighbourhood_agrees] = _AGREED
    index[~fits.any(axis=-1)] = _ERRONEOUS
    index[held] = _FALLBACK
    names = np.array([*PRIORITY, "fallback", "erroneous", "agreed"], dtype=object)[index]
    for r, i in zip(*np.nonzero(index < 0)):
        text = reasonings[r][i] if reasonings is not None else ""
        names[r, i] = _choose(dist[r, i], fits[r, i], text)
    return names.tolist()


def _choose(dist: np.ndarray, fits: np.ndarray, reasoning: str) -> str:
    """The fitting candidate: unique, else the ones the reasoning names, nearest, then ``PRIORITY``."""
    keep = fits.copy()
    if keep.sum() > 1:
        named = named_strategies(reasoning)
        by_text = keep & np.array([name in named for name in PRIORITY])
        if by_text.any():
            keep = by_text
    d = np.where(keep, dist, np.inf)
    return PRIORITY[int(np.flatnonzero(d <= d.min() + _EXACT)[0])]


def label_update(own: Sequence[float], neighbors: Sequence[Sequence[float]], new: Sequence[float],
                 reasoning: str = "", *, fallback: bool = False, tol: float = LABEL_TOL) -> str:
    """The label of one agent's update (``label_rounds`` on a one-round negotiation of this agent)."""
    own_arr = np.atleast_1d(np.asarray(own, dtype=float))
    nbs = [np.atleast_1d(np.asarray(nb, dtype=float)) for nb in neighbors]
    before = np.stack([own_arr, *nbs])
    after = before.copy()
    after[0] = np.atleast_1d(np.asarray(new, dtype=float))
    adj = np.zeros((len(before), len(before)), bool)
    adj[0, 1:] = True
    return label_rounds(np.stack([before, after]), adj, reasonings=[[reasoning] + [""] * len(nbs)],
                        fallbacks=np.array([[fallback] + [False] * len(nbs)]), tol=tol)[0][0]


def label_counts(labels: Sequence[Sequence[str]]) -> dict[str, int]:
    """How often each label occurs (every label of ``LABELS`` present, zeros included)."""
    counts = dict.fromkeys(LABELS, 0)
    for row in labels:
        for label in row:
            counts[label] += 1
    return counts


def encode_labels(labels: Sequence[Sequence[str]]) -> list[str]:
    """One string per round, one ``LABEL_CODES`` character per agent (compact for trial records)."""
    return ["".join(LABEL_CODES[label] for label in row) for row in labels]


def decode_labels(codes: Sequence[str]) -> list[list[str]]:
    """Inverse of ``encode_labels``."""
    return [[CODE_LABELS[c] for c in row] for row in codes]


def reversals(states: np.ndarray, tol: float = LABEL_TOL) -> list[int]:
    """Per agent: the number of reversals between consecutive significant updates (``|u| > tol``)."""
    states = _check_states(states)
    tol = _check_tol(tol)
    updates = np.diff(states, axis=0)                       # (R, n, d)
    size = _norm(updates)                                   # (R, n)
    big = size > tol
    # prev[r, i]: the last significant update of agent i before round r (-1: none)
    rounds = np.arange(len(updates))[:, None]
    last = np.maximum.accumulate(np.where(big, rounds, -1), axis=0)
    prev = np.concatenate([np.full((1, states.shape[1]), -1), last])[:-1]
    agents = np.arange(states.shape[1])[None, :]
    before = updates[np.maximum(prev, 0), agents]           # (R, n, d)
    opposite = np.einsum("rnd,rnd->rn", before, updates) < 0
    undamped = size >= REVERSAL_RATIO * size[np.maximum(prev, 0), agents]
    return (big & (prev >= 0) & opposite & undamped).sum(axis=0).tolist()


def oscillates(states: np.ndarray, tol: float = LABEL_TOL, min_reversals: int = MIN_REVERSALS) -> bool:
    """True when some agent reverses direction at least ``min_reversals`` times (module docstring)."""
    if min_reversals < 1:
        raise ValueError(f"min_reversals must be >= 1, got {min_reversals}")
    return max(reversals(states, tol), default=0) >= min_reversals


def clusters(points: np.ndarray, tol: float = CONVERGE_TOL) -> list[list[int]]:
    """Single-linkage groups of ``(n, d)`` points (steps ``<= tol``), each sorted, ordered by first member."""
    points = np.asarray(points, dtype=float)
    if points.ndim != 2:
        raise ValueError(f"points must have shape (n, d), got {points.shape}")
    tol = _check_tol(tol)
    near = _norm(points[:, None, :] - points[None, :, :]) <= tol + _EXACT
    group = np.arange(len(points))
    while True:         # every agent takes the smallest group number among its near ones, until nothing changes
        smallest = np.where(near, group[None, :], len(points)).min(axis=1, initial=len(points))
        if np.array_equal(smallest, group):
            return [np.flatnonzero(group == g).tolist() for g in np.unique(group)]
        group = smallest


def rounds_to_converge(spreads: Sequence[float], tol: float = CONVERGE_TOL) -> int | None:
    """First round ``r`` with ``spreads[k] < tol`` for every ``k >= r``; ``None`` if the last one is not.

    ``spreads`` is the group diameter per round (``consensus.metrics.convergence.spread_series``); NaN counts as
    not converged.
    """
    tol = _check_tol(tol)
    with np.errstate(invalid="ignore"):
        ok = np.asarray(spreads, dtype=float) < tol
    if len(ok) == 0 or not ok[-1]:
        return None
    bad = np.flatnonzero(~ok)
    return 0 if len(bad) == 0 else int(bad[-1]) + 1
