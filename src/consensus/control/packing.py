"""Where robots with bodies stand around a point they share (no ROS): slots and their assignment.

Robots that agree on one meeting point cannot all stand on it. Each drives instead to a *slot* around it:

* **Slots.** The ``n`` points of a triangular (hexagonal) lattice of spacing ``s`` nearest to the meeting point
  (2-D; the centre first, then ring by ring, each ring by angle), or ``n`` points ``s`` apart on a line centred on it
  (1-D). ``s = d_min + gap``: the distance the collision filter keeps at rest (``Avoidance.d_min_m``: the robots'
  clearance between centres, plus twice the filtered point's offset for unicycles) plus ``packing_gap_m``, which
  covers two robots whose meeting points still differ by up to that much (their slot grids are then shifted against
  each other by less than the gap, so no two slots overlap). A 2-D pattern starts at its point and grows to one side;
  ``centred(place, n, s)`` is the point to send robots to whose slots must be centred on a place (a disaster cell).
* **Assignment.** Robot i takes the slot of the assignment of every robot it knows of to the slots that minimises
  the sum of squared distances (``scipy.optimize.linear_sum_assignment``). Robots that know the same positions and
  meeting point compute the same assignment, so no two claim one slot; and the squared-distance optimum is the one
  whose straight paths do not cross (Turpin, Michael & Kumar, "CAPT: Concurrent assignment and planning of
  trajectories for multiple robots", IJRR 2014): a robot is not sent through the others to a slot on the far side,
  which is what makes a barrier-certificate filter deadlock. In 1-D, where robots cannot pass each other, the
  optimum keeps their order along the line.

``consensus.metrics.convergence.packing_radius(n, d_min)`` is the bound the summaries and tests judge a packed fleet
by: ``d_min × (1 + √n)``, d_min being the clearance for single-integrator robots. In 2-D the slots of ``n`` robots
lie within it whenever the gap is at most 0.9 × d_min (checked for n up to 1000; the lattice's ``n``-th point is
within ``(0.55 √n + 0.5) s``).

**Fit.** The robot core moves the pattern as a whole into the box the filter keeps the robots' points in (the geofence
less the body: ``RobotCore._inside``); it never rotates or shrinks it. A packing fits that box when its extent
(``extent``: the width of the slots' bounding box per axis) is at most the box's width on every axis; one that does
not would have its outer slots clamped onto each other and outside the box. ``fits`` says which, and ``most_that_fit``
how many robots a box holds; the configs refuse a fleet that does not fit (``consensus.robots.map.check_fence``).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=64)
def _unit_slots(n: int, dim: int) -> np.ndarray:
    """Slot offsets for spacing 1 (read-only): lattice points nearest the origin, centre first."""
    if dim == 1:
        out = (np.arange(n, dtype=float) - (n - 1) / 2.0).reshape(n, 1)
    else:
        k = 1
        while 3 * k * (k + 1) + 1 < n:      # hexagonal rings needed: 1, 7, 19, 37, ...
            k += 1
        k += 1                              # one ring more: the n nearest may reach into it
        q, r = np.meshgrid(np.arange(-k, k + 1), np.arange(-k, k + 1), indexing="ij")
        q, r = q.ravel(), r.ravel()
        pts = np.column_stack([q + 0.5 * r, (math.sqrt(3) / 2.0) * r]).astype(float)
        dist = np.round(np.hypot(pts[:, 0], pts[:, 1]), 9)
        ang = np.round(np.mod(np.arctan2(pts[:, 1], pts[:, 0]), 2 * math.pi), 9)
        out = pts[np.lexsort((ang, dist))][:n]
    out.setflags(write=False)
    return out


def slots(center, n: int, spacing: float) -> np.ndarray:
    """``(n, d)`` slot positions around ``center`` (d = 1 or 2) for ``n`` robots ``spacing`` apart."""
    c = np.asarray(center, dtype=float).reshape(-1)
    if c.size not in (1, 2) or not np.isfinite(c).all():
        raise ValueError(f"slots: center must be 1 or 2 finite numbers, got {center!r}")
    if int(n) < 1 or not (spacing > 0 and math.isfinite(spacing)):
        raise ValueError(f"slots: need n >= 1 and a finite spacing > 0 (got n={n}, spacing={spacing})")
    return c + spacing * _unit_slots(int(n), c.size)


def centred(point, n: int, spacing: float) -> np.ndarray:
    """The point to send ``n`` robots to so that their slots (``slots``, ``spacing`` apart) have their bounding box
    centred on ``point``. The pattern starts at its point and grows to one side (two robots: the point and one
    spacing beside it); robots that must stand around a place, not beside it (the drones sent to one disaster cell),
    are sent to ``centred(place, n, spacing)`` instead (two robots: half a spacing either side of it)."""
    c = np.asarray(point, dtype=float).reshape(-1)
    unit = slots(np.zeros(c.size), max(int(n), 1), 1.0)
    return c - spacing * 0.5 * (unit.min(axis=0) + unit.max(axis=0))


def inside(spots: np.ndarray, lo, hi, n: int | None = None) -> np.ndarray:
    """The slots ``spots (m, d)`` moved as a whole (their pattern kept) so that the first ``n`` (all) lie in the box
    ``[lo, hi]`` (the filter's box: the geofence less the body): a point at a wall (a disaster cell on the grid's
    edge) has its slots on the inner side. A pattern wider than the box is centred in it (its outer slots are then
    clamped by the caller). The one placement of the robot core (``RobotCore._inside``) and of every judge of where
    robots stand (the disaster grid's ``metrics.CellSlots``)."""
    spots = np.asarray(spots, dtype=float)
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    first = spots if n is None else spots[:n]
    shift = np.zeros(spots.shape[1])
    for a in range(spots.shape[1]):
        s_lo, s_hi = first[:, a].min(), first[:, a].max()
        if s_hi - s_lo > hi[a] - lo[a]:
            shift[a] = 0.5 * (lo[a] + hi[a]) - 0.5 * (s_lo + s_hi)
        elif s_lo < lo[a]:
            shift[a] = lo[a] - s_lo
        elif s_hi > hi[a]:
            shift[a] = hi[a] - s_hi
    return spots + shift


def assign(positions, slot_positions) -> np.ndarray:
    """For each robot (row of ``positions`` (k, d); NaN rows: unknown, get -1) the index of its slot in the
    assignment that minimises the sum of squared distances (each slot used at most once; ``k`` may differ from the
    number of slots)."""
    from scipy.optimize import linear_sum_assignment

    p = np.asarray(positions, dtype=float)
    s = np.asarray(slot_positions, dtype=float)
    out = np.full(len(p), -1, dtype=int)
    known = np.flatnonzero(np.isfinite(p).all(axis=1))
    if not len(known) or not len(s):
        return out
    diff = p[known, None, :] - s[None, :, :]
    rows, cols = linear_sum_assignment(np.einsum("ksd,ksd->ks", diff, diff))
    out[known[rows]] = cols
    return out


def extent(n: int, spacing: float, dim: int = 2) -> np.ndarray:
    """``(dim,)``: the width of the bounding box of ``n`` slots ``spacing`` apart, per axis (0 for one robot)."""
    unit = _unit_slots(max(int(n), 1), int(dim))
    return (unit.max(axis=0) - unit.min(axis=0)) * float(spacing)


def fits(n: int, spacing: float, lo, hi) -> str | None:
    """None when the ``n`` slots ``spacing`` apart fit the box ``[lo, hi]`` (one bound per axis, 1 or 2 axes: the
    box the filter keeps the robots' points in) on every axis (module docstring, "Fit"); else what does not fit, in
    one sentence naming the packing's extent and the box's width on each axis."""
    lo, hi = (np.asarray(x, dtype=float).reshape(-1) for x in (lo, hi))
    if lo.shape != hi.shape or lo.size not in (1, 2):
        raise ValueError(f"fits: lo and hi must be 1 or 2 numbers each (got {lo.size} and {hi.size})")
    need, room = extent(n, spacing, lo.size), hi - lo
    if bool(np.all(need <= room + 1e-9)):
        return None
    return (f"{int(n)} slots {spacing:.3g} m apart span {_by(need)} m, but the box is {_by(room)} m")


def most_that_fit(spacing: float, lo, hi, limit: int = 1000) -> int:
    """The most robots (at most ``limit``) whose slots ``spacing`` apart fit ``[lo, hi]`` (0: not even one); the
    extent grows with ``n`` (the first ``n`` slots are those of ``n + 1`` less one), so a bisection finds it."""
    if fits(1, spacing, lo, hi) is not None:
        return 0
    good, bad = 1, int(limit) + 1
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid, spacing, lo, hi) is None else (good, mid)
    return good


def _by(values: np.ndarray) -> str:
    """A box's widths as ``"1.6 × 1.6"``."""
    return " × ".join(f"{v:.3g}" for v in values)


def slots_radius(n: int, spacing: float, dim: int = 2) -> float:
    """The distance of the farthest of ``n`` slots from their centre."""
    return float(np.linalg.norm(_unit_slots(max(int(n), 1), dim), axis=1).max()) * float(spacing)
