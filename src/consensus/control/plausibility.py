"""Plausibility of positions heard from the wire: nothing a node reads is trusted as it comes.

A position (a robot's own odometry, another robot's ``state``, a neighbour pose relayed to a robot) is *implausible*,
and dropped as a counted bad message of its kind, when it is

* ``outside``: outside the workspace (the geofence) widened by ``OUTSIDE_MARGIN_M`` on every side (a robot may be
  pushed a little over the fence; a position of (1000, 1000) in a 20 m workspace is a stranger or a glitch);
* ``jump``: farther from the source's last *accepted* position than its speed limit allows since then
  (``v_max`` × the time since that position arrived, plus ``JUMP_SLACK_M`` of localisation noise and timing jitter).
  The allowance grows with the time since the last accepted position, so a real relocation (a robot lifted and put
  down, a motion-capture re-acquisition) is accepted once the old position has aged enough, and a stranger's
  interleaved positions far from the robot are refused as long as the real ones keep coming;
* ``future``: stamped more than ``FUTURE_TOLERANCE_S`` after the receiver's clock (clock skew beyond that, or a
  forged stamp). Not checked while the receiver's clock is still at 0 (sim time before the first ``/clock``).

A source that produced ``SUSPECT_BAD`` implausible positions within ``SUSPECT_WINDOW_S`` is *suspect* until it has
produced none for ``CLEAR_S``. What a receiver does with a suspect is its own rule: the planning relay stops
delivering its states (its last good one ages out of everybody's neighbours, as a lost robot's does), while the
collision relay keeps every plausible position of it (a body the others must keep avoiding).

No ROS here: the robot core (own odometry, neighbours), the ``topology`` and ``nearby`` relays share this module
(``consensus.control.robot_core``, ``consensus.ros.nearby``, the aggregation's ``topology`` node).
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np

KINDS = ("outside", "jump", "future")
OUTSIDE_MARGIN_M = 1.0      # a position this far beyond the geofence is still plausible [m]
JUMP_SLACK_M = 0.5          # allowed beyond v_max × elapsed between two accepted positions [m]
FUTURE_TOLERANCE_S = 0.5    # a stamp at most this far ahead of the receiver's clock is plausible [s]
SUSPECT_BAD = 3             # this many implausible positions ...
SUSPECT_WINDOW_S = 2.0      # ... within this window make a source suspect [s]
CLEAR_S = 2.0               # a suspect with no implausible position for this long is trusted again [s]


class Plausibility:
    """The checks above for ``n`` sources (robot indices ``0 .. n-1``) in the box ``lo``, ``hi`` (the workspace, (d,)
    each) with the speed limit ``v_max`` [m/s]. Counts every kind (``counts``) and per source (``by_source``)."""

    def __init__(self, n: int, lo, hi, v_max: float, *, margin_m: float = OUTSIDE_MARGIN_M,
                 slack_m: float = JUMP_SLACK_M, future_s: float = FUTURE_TOLERANCE_S) -> None:
        self.n = int(n)
        self.lo = np.asarray(lo, dtype=float).ravel() - float(margin_m)
        self.hi = np.asarray(hi, dtype=float).ravel() + float(margin_m)
        self.dim = self.lo.size
        self._lo, self._hi = self.lo.tolist(), self.hi.tolist()
        self.v_max, self.slack, self.future_s = float(v_max), float(slack_m), float(future_s)
        self.last = np.full((self.n, self.dim), np.nan)     # last accepted position of each source
        self.last_t = np.full(self.n, -np.inf)              # when it was accepted (receiver's clock)
        self.counts = dict.fromkeys(KINDS, 0)
        self.by_source = np.zeros(self.n, dtype=int)
        self._bad_times = [deque() for _ in range(self.n)]
        self._suspect_since = np.full(self.n, np.nan)
        self.suspected: set[int] = set()                    # every source that was ever suspect

    @classmethod
    def for_workspace(cls, n: int, workspace, v_max: float, dim: int = 2) -> Plausibility:
        """From a config's ``workspace`` (``[lo, hi]`` for every axis, ``consensus.control.safety.Geofence``)."""
        from consensus.control.safety import Geofence

        fence = Geofence.from_bounds(workspace)
        return cls(n, np.resize(fence.lo, dim), np.resize(fence.hi, dim), v_max)

    def outside(self, xy) -> np.ndarray:
        """Per row of ``xy`` (k, d): True where it lies outside the widened box (NaN rows too)."""
        p = np.asarray(xy, dtype=float).reshape(-1, self.dim)
        with np.errstate(invalid="ignore"):
            return ~((p >= self.lo) & (p <= self.hi)).all(axis=1)

    def future(self, stamp: float | None, now: float) -> bool:
        return stamp is not None and now > 0.0 and math.isfinite(stamp) and stamp > now + self.future_s

    def check(self, j: int, now: float, pos, stamp: float | None = None) -> str | None:
        """Check source ``j``'s position ``pos`` received at ``now`` (stamped ``stamp``, seconds, or None): None when
        it is plausible (it becomes ``j``'s last accepted position), else its kind (counted)."""
        # plain floats: every odometry message of every robot comes through here (numpy's per-call cost dominated)
        p = np.asarray(pos, dtype=float).reshape(self.dim)
        vals = p.tolist()
        kind = None
        if not all(lo <= v <= hi for v, lo, hi in zip(vals, self._lo, self._hi)):     # False for NaN too
            kind = "outside"
        elif self.future(stamp, now):
            kind = "future"
        else:
            last_t = float(self.last_t[j])
            if last_t > -math.inf:
                allowed = self.v_max * max(now - last_t, 0.0) + self.slack
                if math.dist(vals, self.last[j].tolist()) > allowed:
                    kind = "jump"
        if kind is None:
            self.last[j], self.last_t[j] = p, now
        else:
            self.count(kind, j, now)
        return kind

    def check_many(self, ids, times, xy) -> np.ndarray:
        """``check`` for many positions at once (one per source: ``ids`` (k,) distinct, ``times`` (k,) when each was
        sent, ``xy`` (k, d)), vectorised (a robot checks its whole ``nearby`` message every control tick). Returns the
        kind of each row: ``""`` plausible (it becomes that source's last accepted position), else its kind
        (counted). Rows whose id is not a source here are only checked for ``outside``."""
        ids = np.asarray(ids, dtype=int)
        t = np.asarray(times, dtype=float)
        p = np.asarray(xy, dtype=float).reshape(-1, self.dim)
        kinds = np.full(len(ids), "", dtype=object)
        out = self.outside(p)
        known = (ids >= 0) & (ids < self.n)
        j = np.where(known, ids, 0)
        last_t = np.where(known, self.last_t[j], -np.inf)
        seen = np.isfinite(last_t)
        with np.errstate(invalid="ignore"):
            dist = np.linalg.norm(p - self.last[j], axis=1)
            allowed = self.v_max * np.maximum(t - last_t, 0.0) + self.slack
            jump = seen & ~out & (dist > allowed)
        kinds[out] = "outside"
        kinds[jump] = "jump"
        ok = known & ~out & ~jump
        self.last[ids[ok]], self.last_t[ids[ok]] = p[ok], t[ok]
        for k in np.flatnonzero(out | jump):          # rare: the per-source suspect bookkeeping
            self.count(kinds[k], int(ids[k]) if known[k] else None, float(t[k]))
        return kinds

    def count(self, kind: str, j: int | None = None, now: float = 0.0, n: int = 1) -> None:
        """Count ``n`` implausible positions of ``kind`` (from source ``j``, when known)."""
        if n <= 0:
            return
        self.counts[kind] += n
        if j is None:
            return
        self.by_source[j] += n
        times = self._bad_times[j]
        times.extend([now] * min(n, SUSPECT_BAD))
        while times and times[0] < now - SUSPECT_WINDOW_S:
            times.popleft()
        if len(times) >= SUSPECT_BAD and not np.isfinite(self._suspect_since[j]):
            self._suspect_since[j] = now
            self.suspected.add(int(j))

    def suspect(self, j: int, now: float) -> bool:
        """Whether source ``j`` is suspect at ``now`` (module docstring); clears it after ``CLEAR_S`` of quiet."""
        if not np.isfinite(self._suspect_since[j]):
            return False
        times = self._bad_times[j]
        if times and times[-1] >= now - CLEAR_S:
            return True
        self._suspect_since[j] = np.nan
        times.clear()
        return False

    def suspects(self, now: float) -> list[int]:
        """The sources suspect at ``now``."""
        return [j for j in range(self.n) if self.suspect(j, now)]

    def record(self, now: float) -> dict:
        """``{"implausible": {kind: n}, "suspects": [j, ...] (now), "suspected": [j, ...] (ever)}``."""
        return {"implausible": dict(self.counts), "suspects": self.suspects(now),
                "suspected": sorted(self.suspected)}


def sum_implausible(records) -> dict:
    """The run's totals for a summary from health and status records (dicts that may carry ``implausible`` and
    ``suspected``/``suspects``): ``{"implausible": {kind: n}, "suspected_robots": [j, ...]}``. Malformed entries add
    nothing (a record is outside text)."""
    counts = dict.fromkeys(KINDS, 0)
    suspected: set[int] = set()
    for rec in records:
        if not isinstance(rec, dict):
            continue
        imp = rec.get("implausible")
        if isinstance(imp, dict):
            for kind in KINDS:
                v = imp.get(kind)
                if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                    counts[kind] += v
        for key in ("suspected", "suspects"):
            ids = rec.get(key)
            if isinstance(ids, list):
                suspected.update(j for j in ids if isinstance(j, int) and not isinstance(j, bool) and 0 <= j < 1 << 20)
    return {"implausible": counts, "suspected_robots": sorted(suspected)}
