"""Plausibility of positions heard from the wire: a position is evidence about a body, never trusted as it comes.

Every receiver keeps a **track** of each source (a robot index): where that robot's body can be, moving at most
``TRACK_SPEED_FACTOR`` × ``v_max``. A position (a robot's own odometry, another robot's ``state``, a neighbour relayed
to a robot) taken at time ``t`` (its stamp, or when it came if that is earlier or there is none) is *implausible*,
counted by kind and refused as the source's position, when it is

* ``outside``: outside the workspace (the geofence) widened by ``OUTSIDE_MARGIN_M`` on every side (a robot may be
  pushed a little over the fence; a position of (1000, 1000) in a 20 m workspace is a stranger or a glitch);
* ``future``: stamped more than ``FUTURE_TOLERANCE_S`` after the receiver's clock (clock skew beyond that, or a
  forged stamp). Not checked while the receiver's clock is still at 0 (sim time before the first ``/clock``);
* ``past``: stamped more than ``PAST_TOLERANCE_S`` before the newest position of the source's track (a replay);
* ``jump``: farther from the track than the track can have moved since (``v_track`` × the time since the track's last
  position) plus ``JUMP_SLACK_M`` of measurement noise. The slack is a *measurement* allowance: an accepted position
  moves the track towards it by at most ``v_track`` × the elapsed time, so it does not add up message by message (a
  stranger sending 90 times a second moves the track no faster than a robot can move; the jump check of one baseline per
  message let it move 45 m/s).

**Tracks, not messages.** A position that fits no track of its source starts a *candidate* track (and is counted as a
``jump``). A candidate fed ``CONFIRM_N`` consistent positions over at least ``CONFIRM_S``, its newest no farther from
its first than ``v_max`` allows plus the slack (a stream faster than a robot starts its span anew: it is never
steady), is *confirmed*: a second consistent stream of positions for one robot, i.e. a second body (a stranger, a copy
of the robot, or the robot itself after a relocation). What the receiver does with it:

* **relocation**: when the source's own track got nothing for ``RELOCATE_S`` while a confirmed candidate is fed, the
  candidate becomes the source's track (counted in ``relocations``; the source is no longer suspect): a robot that
  re-localised, or was lifted and put down, is tracked again after a steady stream of consistent states — never locked
  out while it moves. A track whose allowance grew to take the stream's newest position first counts the same way,
  when every position since its own newest was refused and they were a steady stream (``CONFIRM_N``) leading there;
* **contested**: while both are fed, the source is *contested* (``contested(j, now)``): the collision relay sends
  every candidate as a body (``bodies(j, now)``, confirmed or not: a lie costs progress, never clearance), the planning
  relay leaves the source out (which stream is the robot cannot be told). Candidates silent for ``CANDIDATE_SILENT_S``
  are forgotten; the source's own track never is: a robot whose states stop is still a body (its last position,
  ageing).

**The first position.** A receiver that knows where a source starts (the run's initial positions: ``expect``) holds a
track there before any position came: a stranger's first state far from it starts a candidate and never takes the
robot's identity; the robot's own first state fits (within ``PRIOR_GATE_M``). Without a prior, the first position
starts the track.

A source that produced ``SUSPECT_BAD`` implausible positions within ``SUSPECT_WINDOW_S`` is *suspect* until it has
produced none for ``CLEAR_S``. What a receiver does with a suspect is its own rule: the planning relay stops
delivering its states, a robot whose own pose source is suspect holds still (``consensus.control.robot_core``), while
the collision relay keeps every plausible position of it (a body the others must keep avoiding).

No ROS here: the robot core (own odometry, neighbours), the ``topology`` and ``nearby`` relays share this module
(``consensus.control.robot_core``, ``consensus.ros.nearby``, the aggregation's ``topology`` node).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

KINDS = ("outside", "jump", "future", "past")
OUTSIDE_MARGIN_M = 1.0      # a position this far beyond the geofence is still plausible [m]
JUMP_SLACK_M = 0.5          # measurement allowance around a track (localisation noise, timing jitter) [m]
TRACK_SPEED_FACTOR = 1.25   # a track moves at most this × v_max (a robot's overshoot and odometry noise) [-]
FUTURE_TOLERANCE_S = 0.5    # a stamp at most this far ahead of the receiver's clock is plausible [s]
PAST_TOLERANCE_S = 0.25     # a stamp at most this far behind the track's newest position is plausible [s]
PRIOR_GATE_M = 1.0          # a first position this close to the expected start fits the prior [m]
CONFIRM_N = 4               # a candidate track fed this many consistent positions ...
CONFIRM_S = 1.0             # ... over at least this long, no farther from its first than v_max allows, is confirmed [s]
RELOCATE_S = 1.0            # the robot's own track silent this long while a confirmed candidate is fed: relocated [s]
CANDIDATE_SILENT_S = 2.0    # a candidate that got nothing for this long is forgotten [s]
MAX_CANDIDATES = 4          # candidates kept per source (the oldest silent one gives way)
SUSPECT_BAD = 3             # this many implausible positions ...
SUSPECT_WINDOW_S = 2.0      # ... within this window make a source suspect [s]
CLEAR_S = 2.0               # a suspect with no implausible position for this long is trusted again [s]


@dataclass(eq=False)
class _Candidate:
    """A second stream of positions for one source: a track of its own (position, newest time, first time, how many
    consistent positions fed it)."""

    pos: np.ndarray
    t: float
    first_t: float
    first: np.ndarray
    born: float
    n: int = 1

    @property
    def confirmed(self) -> bool:
        return self.n >= CONFIRM_N and self.t - self.first_t >= CONFIRM_S


class Plausibility:
    """The checks above for ``n`` sources (robot indices ``0 .. n-1``) in the box ``lo``, ``hi`` (the workspace, (d,)
    each) with the speed limit ``v_max`` [m/s]. Counts every kind (``counts``) and per source (``by_source``).

    ``last[j]``, ``last_t[j]``: source ``j``'s track (where its body is, the time of the newest position that fed it;
    ``-inf`` before any), the position a receiver uses for it."""

    def __init__(self, n: int, lo, hi, v_max: float, *, margin_m: float = OUTSIDE_MARGIN_M,
                 slack_m: float = JUMP_SLACK_M, future_s: float = FUTURE_TOLERANCE_S) -> None:
        self.n = int(n)
        self.lo = np.asarray(lo, dtype=float).ravel() - float(margin_m)
        self.hi = np.asarray(hi, dtype=float).ravel() + float(margin_m)
        self.dim = self.lo.size
        self._lo, self._hi = self.lo.tolist(), self.hi.tolist()
        self.v_max, self.slack, self.future_s = float(v_max), float(slack_m), float(future_s)
        self.v_track = TRACK_SPEED_FACTOR * self.v_max
        self.last = np.full((self.n, self.dim), np.nan)     # each source's track
        self.last_t = np.full(self.n, -np.inf)              # the time of its newest position
        self.prior = np.full((self.n, self.dim), np.nan)    # where each source is expected to start (``expect``)
        self.candidates: list[list[_Candidate]] = [[] for _ in range(self.n)]
        self.relocations = np.zeros(self.n, dtype=int)
        self.counts = dict.fromkeys(KINDS, 0)
        self.by_source = np.zeros(self.n, dtype=int)
        self._bad_times = [deque() for _ in range(self.n)]
        self._suspect_since = np.full(self.n, np.nan)
        self.suspected: set[int] = set()                    # every source that was ever suspect
        self.contested_ever: set[int] = set()               # every source that ever had a second body

    @classmethod
    def for_workspace(cls, n: int, workspace, v_max: float, dim: int = 2) -> Plausibility:
        """From a config's ``workspace`` (``[lo, hi]`` for every axis, ``consensus.control.safety.Geofence``)."""
        from consensus.control.safety import Geofence

        fence = Geofence.from_bounds(workspace)
        return cls(n, np.resize(fence.lo, dim), np.resize(fence.hi, dim), v_max)

    def expect(self, positions) -> None:
        """Where each source starts (``(n, d)``; a NaN row: unknown): the track before any position came (module
        docstring, "The first position")."""
        p = np.asarray(positions, dtype=float).reshape(-1, self.dim)[: self.n]
        unseen = ~np.isfinite(self.last_t[: len(p)])
        self.prior[: len(p)][unseen] = p[unseen]

    def outside(self, xy) -> np.ndarray:
        """Per row of ``xy`` (k, d): True where it lies outside the widened box (NaN rows too)."""
        p = np.asarray(xy, dtype=float).reshape(-1, self.dim)
        with np.errstate(invalid="ignore"):
            return ~((p >= self.lo) & (p <= self.hi)).all(axis=1)

    def future(self, stamp: float | None, now: float) -> bool:
        return stamp is not None and now > 0.0 and math.isfinite(stamp) and stamp > now + self.future_s

    # ------------------------------------------------------------------ one position
    def check(self, j: int, now: float, pos, stamp: float | None = None) -> str | None:
        """Check source ``j``'s position ``pos`` received at ``now`` (stamped ``stamp``, seconds, or None): None when
        it is the source's (it moved the track, or relocated it), else its kind (counted)."""
        # plain floats: every odometry message of every robot comes through here (numpy's per-call cost dominated)
        p = np.asarray(pos, dtype=float).reshape(self.dim)
        vals = p.tolist()
        if not all(lo <= v <= hi for v, lo, hi in zip(vals, self._lo, self._hi)):     # False for NaN too
            kind = "outside"
        elif self.future(stamp, now):
            kind = "future"
        else:
            t = now if stamp is None or not math.isfinite(stamp) else min(stamp, now)
            kind = self._place(j, t, p, vals, stamped=stamp is not None)
        if kind is not None:
            self.count(kind, j, now)
        return kind

    def _place(self, j: int, t: float, p: np.ndarray, vals: list, *, stamped: bool = True) -> str | None:
        """Source ``j``'s plausible-looking position ``p`` at ``t``: on its track (None), a replay (``past``), or a
        candidate's (``jump``; None when that relocated the track)."""
        last_t = float(self.last_t[j])
        if last_t > -math.inf:
            if stamped and t < last_t - PAST_TOLERANCE_S:
                return "past"
            if self._fits(self.last[j], last_t, p, t):
                if self.candidates[j]:
                    self._reacquired(j, t, p, last_t)
                self._move(j, t, p)
                return None
        elif not np.isfinite(self.prior[j, 0]):
            self.last[j], self.last_t[j] = p, t                # the first position starts the track
            return None
        elif math.dist(vals, self.prior[j].tolist()) <= PRIOR_GATE_M + self.slack:
            self.last[j], self.last_t[j] = p, t                # the robot's first state, where it starts
            return None
        return self._candidate(j, t, p)

    def _reacquired(self, j: int, t: float, p: np.ndarray, last_t: float) -> None:
        """Source ``j``'s track took ``p`` after its allowance grew: if every position since the track's newest one
        was refused and they were a steady stream leading here (a candidate born after it, of at least ``CONFIRM_N``,
        that fits ``p``), that was a relocation: counted, the candidate is gone and the source is no longer
        suspect."""
        for c in self.candidates[j]:
            if (c.born >= last_t and c.n >= CONFIRM_N and t >= c.t - PAST_TOLERANCE_S
                    and self._fits(c.pos, c.t, p, t)):
                self.candidates[j].remove(c)
                self.relocations[j] += 1
                self._bad_times[j].clear()
                self._suspect_since[j] = np.nan
                return

    def _fits(self, track, track_t: float, p, t: float) -> bool:
        return math.dist(p.tolist(), track.tolist()) <= self.v_track * max(t - track_t, 0.0) + self.slack

    def _move(self, j: int, t: float, p: np.ndarray) -> None:
        """The track towards ``p`` by at most ``v_track`` × the elapsed time."""
        self.last[j] = _towards(self.last[j], p, self.v_track * max(t - float(self.last_t[j]), 0.0))
        self.last_t[j] = max(float(self.last_t[j]), t)

    def _candidate(self, j: int, t: float, p: np.ndarray) -> str | None:
        """A position that fits no track of ``j``'s: it feeds the nearest candidate it fits, or starts one; a
        confirmed candidate fed while ``j``'s own track is silent relocates it (None)."""
        cands = self.candidates[j]
        cands[:] = [c for c in cands if t - c.t <= CANDIDATE_SILENT_S]
        fit = [c for c in cands if t >= c.t - PAST_TOLERANCE_S and self._fits(c.pos, c.t, p, t)]
        if fit:
            c = min(fit, key=lambda c: math.dist(c.pos.tolist(), p.tolist()))
            c.pos = _towards(c.pos, p, self.v_track * max(t - c.t, 0.0))
            c.t, c.n = max(c.t, t), c.n + 1
            if math.dist(p.tolist(), c.first.tolist()) > self.v_max * (t - c.first_t) + self.slack:
                c.first, c.first_t, c.n = p.copy(), t, 1     # faster than a robot over its span: no steady stream
        else:
            if len(cands) >= MAX_CANDIDATES:
                cands.remove(min(cands, key=lambda c: c.t))
            c = _Candidate(p.copy(), t, t, p.copy(), t)
            cands.append(c)
        own_fed = np.isfinite(self.last_t[j])
        if c.confirmed:
            if own_fed and t - float(self.last_t[j]) >= RELOCATE_S:
                self.last[j], self.last_t[j] = c.pos.copy(), c.t     # relocated: the steady stream is the robot
                cands.remove(c)
                self.relocations[j] += 1
                self._bad_times[j].clear()                          # consistent again: no longer suspect
                self._suspect_since[j] = np.nan
                return None
            self.contested_ever.add(int(j))
        return "jump"

    # ------------------------------------------------------------------ many positions (a relay's message)
    def check_many(self, ids, times, xy) -> np.ndarray:
        """``check`` for many positions at once (one per source: ``ids`` (k,) distinct, ``times`` (k,) when each was
        sent, ``xy`` (k, d)), vectorised for the common case (a robot checks its whole ``nearby`` message every control
        tick). Returns the kind of each row: ``""`` the source's (it moved its track), else its kind (counted). Rows
        whose id is not a source here are only checked for ``outside``."""
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
            step = self.v_track * np.maximum(t - last_t, 0.0)
            fits = seen & ~out & (dist <= step + self.slack) & (t >= last_t - PAST_TOLERANCE_S)
        kinds[out] = "outside"
        ok = np.flatnonzero(fits)
        if len(ok):                                   # the tracks move towards their positions, vectorised
            jj = ids[ok]
            scale = np.where(dist[ok] > step[ok], step[ok] / np.maximum(dist[ok], 1e-12), 1.0)[:, None]
            self.last[jj] = self.last[jj] + (p[ok] - self.last[jj]) * scale
            self.last_t[jj] = np.maximum(self.last_t[jj], t[ok])
        for k in np.flatnonzero(known & ~out & ~fits):   # rare: first positions, candidates, replays
            kind = self._place(int(ids[k]), float(t[k]), p[k], p[k].tolist())
            if kind is not None:
                kinds[k] = kind
        for k in np.flatnonzero(kinds != ""):
            self.count(kinds[k], int(ids[k]) if known[k] else None, float(t[k]))
        return kinds

    # ------------------------------------------------------------------ what a receiver asks
    def contested(self, j: int, now: float) -> bool:
        """Does source ``j`` have a second body now: a confirmed candidate fed within ``CANDIDATE_SILENT_S``?"""
        return any(c.confirmed and now - c.t <= CANDIDATE_SILENT_S for c in self.candidates[j])

    def bodies(self, j: int, now: float) -> list[tuple[np.ndarray, float]]:
        """Every candidate of source ``j`` fed within ``CANDIDATE_SILENT_S``, confirmed or not, as ``(position,
        time)``: more bodies the collision relay sends (its own track is ``last[j]``). A position that fits no track
        may be the real robot's (a stranger dragged its track away, or it relocated): avoiding it costs progress,
        ignoring it could cost clearance."""
        return [(c.pos.copy(), c.t) for c in self.candidates[j] if now - c.t <= CANDIDATE_SILENT_S]

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
        """``{"implausible": {kind: n}, "suspects": [j, ...] (now), "suspected": [j, ...] (ever), "contested": [j,
        ...] (ever had a second body), "relocations": n}``."""
        return {"implausible": dict(self.counts), "suspects": self.suspects(now),
                "suspected": sorted(self.suspected), "contested": sorted(self.contested_ever),
                "relocations": int(self.relocations.sum())}


def _towards(a: np.ndarray, b: np.ndarray, step: float) -> np.ndarray:
    """``a`` moved towards ``b`` by at most ``step``."""
    d = b - a
    dist = float(np.linalg.norm(d))
    return b.copy() if dist <= step else a + d * (step / dist)


def sum_implausible(records) -> dict:
    """The run's totals for a summary from health and status records (dicts that may carry ``implausible``,
    ``suspected``/``suspects``, ``contested`` and ``relocations``): ``{"implausible": {kind: n}, "suspected_robots":
    [j, ...], "contested_robots": [j, ...], "relocations": n}``. Malformed entries add nothing (a record is outside
    text)."""
    counts = dict.fromkeys(KINDS, 0)
    suspected: set[int] = set()
    contested: set[int] = set()
    relocations = 0

    def ids_of(value) -> set[int]:
        if not isinstance(value, list):
            return set()
        return {j for j in value if isinstance(j, int) and not isinstance(j, bool) and 0 <= j < 1 << 20}

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
            suspected |= ids_of(rec.get(key))
        contested |= ids_of(rec.get("contested"))
        r = rec.get("relocations")
        if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 1 << 31:
            relocations += r
    return {"implausible": counts, "suspected_robots": sorted(suspected), "contested_robots": sorted(contested),
            "relocations": relocations}
