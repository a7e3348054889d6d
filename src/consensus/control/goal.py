"""Where a robot core drives (no ROS): ``GoalKeeper``, the goal and packing part of
``consensus.control.robot_core.RobotCore`` (its module docstring: "Meeting point and goal" and "Deadlock").

The goal is the meeting point, or once the robot agrees with its neighbours (or a scenario named its group) its slot
around it (``consensus.control.packing``), solved from the robots it knows (its nearby set, or the relay's census);
the deadlock watch turns a blocked robot's nominal velocity by the right-hand rule, gives up a slot the escapes do
not reach and holds the robot where it is when no slot is left."""
from __future__ import annotations

import math

import numpy as np

from consensus.control.filter_adapter import FilterAdapter
from consensus.control.packing import assign, inside, slots
from consensus.control.robot_state import EMPTY, Nearby, RobotState

ARRIVED_M = 0.05        # a robot this close to its slot is in it (no deadlock can be declared)
ESCAPE_DEG = 60.0       # the right-hand rule's turn of the nominal velocity [degrees, clockwise]
ESCAPES_PER_SLOT = 2    # right-hand escapes from one slot; the next deadlock there gives the slot up as blocked
MAX_BLOCKED_SLOTS = 2   # slots given up around one meeting point; one more deadlock and the robot holds (blocked)


class GoalKeeper:
    """The goal of the robot whose state is ``state``: its meeting point, or its packing slot once ``agreed``
    (with bodies: ``avoid``, whose distances ``filt`` gives). ``n_slots``: the fleet's robots (the pattern's size
    without a group), ``gap``: ``packing_gap_m``, ``deadlock_s``: how long a blocked robot waits before it escapes,
    ``census_max_age``: a census older than it is not taken (the relay stopped sending it)."""

    def __init__(self, state: RobotState, avoid, filt: FilterAdapter, geofence, *, n_slots: int, gap: float,
                 deadlock_s: float, census_max_age: float) -> None:
        self.state, self.avoid, self.filt, self.geofence = state, avoid, filt, geofence
        self.n_slots, self.gap, self.deadlock_s = int(n_slots), float(gap), float(deadlock_s)
        self.agreed = False
        self.group: tuple[int, ...] | None = None   # robots sharing the meeting point (set_group); None: all
        self.slot: int | None = None
        self.goal: np.ndarray | None = None
        self.assign_due = False                      # the slot is solved again at the next tick that asks
        # the relay's census of every robot for the slots (``take_census``), when the robot's node subscribed one
        self.census: Nearby | None = None
        self.census_stamp = -math.inf
        self.census_max_age = float(census_max_age)
        self.census_expected = False
        # deadlock: escapes from the slot at ``_escape_ref`` until ``escape_until``; slots given up (``_marks``,
        # around the meeting point ``_marks_at``); holding where it is (``holding``: no slot left, ``_hold_marks``:
        # too many given up)
        self._blocked_since: float | None = None
        self.escape_until = -math.inf
        self._escapes = 0
        self._escape_ref: np.ndarray | None = None
        self._marks: list[np.ndarray] = []
        self._marks_at: np.ndarray | None = None
        self._hold_marks = False
        self.holding = False

    # ------------------------------------------------------------------ what decides the goal
    def set_group(self, group) -> None:
        """A scenario named the robots sent to the robot's new meeting point (``group``, this one included; None: none):
        the robot packs with them there at once."""
        self.group = None if group is None else tuple(sorted(int(g) for g in group))
        self.agreed = self.group is not None and len(self.group) > 1
        self.slot, self.goal, self.assign_due = None, None, self.agreed

    def set_agreed(self, agreed: bool) -> None:
        """A planning round's meeting point (the group forgotten): agreed or not with the neighbours heard; a new
        meeting point, agreed or once agreed, has its slots assigned again."""
        self.group = None
        if self.avoid is None:
            self.agreed = False
            return
        if agreed or self.agreed:
            self.assign_due = True
        if not agreed:
            self.slot, self.goal = None, None
        self.agreed = agreed

    def take_census(self, census: Nearby, stamp: float) -> None:
        """The relay's checked census (``SafetyGate.check_census``), sent at ``stamp``: a robot that expects one and
        is in its packing solves its slot again on this message, at its next tick, as every robot counted in it."""
        self.census_stamp = stamp
        self.census = census
        if self.census_expected and self.goal is not None and self.state.id in census.ids:
            self.assign_due = True

    def blocked(self) -> bool:
        """Does the robot hold where it is for want of a slot (``blocked``)?"""
        return self.holding and self.agreed and self.avoid is not None

    # ------------------------------------------------------------------ the goal
    def needs_nearby(self) -> bool:
        """Does ``goal_for`` read the nearby robots this tick (it assigns the packing slots)?"""
        return self.agreed and self.avoid is not None and (self.assign_due or (self.goal is None
                                                                                and not self.holding))

    def goal_for(self, nearby: Nearby | None, now: float) -> np.ndarray | None:
        """The meeting point, or once agreed the robot's slot around it; None while the robot holds where it is
        (``blocked``)."""
        if not self.agreed or self.avoid is None:
            return self.state.meeting_point
        if self.assign_due or (self.goal is None and not self.holding):
            self._assign(nearby, now)
        return self.goal

    def _assign(self, nearby: Nearby | None, now: float) -> None:
        """Solve the robot's slot ("Meeting point and goal" and "Deadlock"): the slots around the meeting point less
        those a silent body's keep-out covers or that were given up, as many more as needed."""
        st = self.state
        self.assign_due = False
        spacing = self.avoid.d_min_m + self.gap          # d_min: the clearance (+ the unicycle's offset)
        if self._marks and np.linalg.norm(st.meeting_point - self._marks_at) > spacing:
            self._marks, self._marks_at, self._hold_marks = [], None, False      # a new place: nothing given up
        if self._hold_marks:
            self.slot, self.goal = None, None
            return
        if self.group is not None:
            members = [st.id, *[g for g in self.group if g != st.id]]
            n = len(members)
        else:
            members, n = None, max(self.n_slots, 1)
        ids, known, bodies, keep_out = self._known(nearby, now, members)
        spots = self._free_slots(max(n, len(ids)), n, spacing, bodies, keep_out)
        order = np.argsort(ids, kind="stable")
        rows = assign(np.asarray(known).reshape(-1, st.dim)[order], spots)
        self.slot = int(rows[int(np.flatnonzero(order == 0)[0])])
        if self.slot < 0:                                  # no free slot left for it: it holds where it is
            self.slot, self.goal = None, None
            self._hold()
            return
        self.holding = False
        self.goal = self.geofence.clamp(spots[self.slot])[0]

    def _known(self, nearby: Nearby | None, now: float, members) -> tuple[list, list, np.ndarray, np.ndarray]:
        """Whom the slot assignment counts: every robot known (``members`` of a group), itself included and first,
        with where each counts; and the silent bodies (which take no slot) with their keep-outs. Robots that know
        the same positions solve the same problem row for row (the caller orders them by id), so even an exact tie
        is broken the same way for all of them."""
        st, filt = self.state, self.filt
        source, own = self._slot_positions(nearby, now)
        ids, known = [st.id], [own]
        bodies, keep_out = EMPTY[:, : st.dim], np.empty(0)
        if source is not None and len(source.positions):
            keep = np.asarray(source.ids) != st.id
            if members is not None:
                keep &= np.isin(source.ids, members)
            sent = np.asarray(source.ages, dtype=float)[keep]
            # a census is a snapshot (taken until census_max_age): whether a robot in it was silent is judged by its
            # age when the census was sent, not aged by the census's own age. Aged, a census taken about 1 s before a
            # planning round counted every robot silent at that round (their ages plus the 1 s over fresh_s), so
            # the round's slots and the next census's disagreed and the robots' goals flipped every second (4 drones
            # in crazyswarm2's simulator chattered around their slots for 120 s)
            ages = sent + (now - self.census_stamp) if source is self.census else sent
            where = np.asarray(source.positions, dtype=float)[keep][:, : st.dim]
            silent = sent > filt.fresh_s
            bodies = where[silent]
            keep_out = filt.keep_out(ages[silent], np.asarray(source.speeds)[keep][silent])
            ids += [int(i) for i in np.asarray(source.ids)[keep][~silent]]
            known += list(where[~silent])
        if source is not None and source is self.census and nearby is not None and len(nearby.positions):
            # the census counts the living only: the silent bodies (a dead robot's, one that never spoke) are the
            # robot's nearby set's, which keeps them
            nb_ages = np.asarray(nearby.ages, dtype=float)
            more = (nb_ages > filt.fresh_s) & (np.asarray(nearby.ids) != st.id)
            if more.any():
                bodies = np.vstack([bodies, np.asarray(nearby.positions, dtype=float)[more][:, : st.dim]])
                keep_out = np.concatenate([keep_out, filt.keep_out(
                    nb_ages[more], np.asarray(nearby.speeds, dtype=float)[more])])
        return ids, known, bodies, keep_out

    def _free_slots(self, wanted: int, n: int, spacing: float, bodies: np.ndarray, keep_out: np.ndarray) -> np.ndarray:
        """The first ``wanted`` slots around the meeting point, in the pattern's order (nearest first), that no
        silent body's keep-out covers and that were not given up (within half a spacing of a mark); the pattern is
        placed inside the filter's box by its first ``n`` slots (``inside``) and every slot beyond them must lie in
        that box. With nothing blocked: the ``wanted`` first slots, as before. Fewer when the room runs out."""
        lo, hi = self.box()
        marks = np.asarray(self._marks, dtype=float).reshape(-1, self.state.dim)
        cells = 3.7 * (float(np.max(keep_out, initial=spacing)) / spacing + 1.0) ** 2 + 7.0
        most = wanted + int(math.ceil(cells)) * (len(bodies) + len(marks))
        m = wanted
        while True:
            spots = self.inside(slots(self.state.meeting_point, m, spacing), n)
            blocked = np.zeros(m, dtype=bool)
            if len(bodies):
                dist = np.linalg.norm(spots[:, None, :] - bodies[None, :, :], axis=2)
                blocked |= (dist < keep_out[None, :]).any(axis=1)
            if len(marks):
                blocked |= (np.linalg.norm(spots[:, None, :] - marks[None, :, :], axis=2) < 0.5 * spacing).any(axis=1)
            beyond = np.arange(m) >= n
            blocked |= beyond & ~((spots >= lo - 1e-9) & (spots <= hi + 1e-9)).all(axis=1)
            free = np.flatnonzero(~blocked)
            if len(free) >= wanted or m >= most:
                return spots[free[:wanted]]
            m = min(most, m + wanted - len(free))

    def _hold(self) -> None:
        """The robot holds where it is (``blocked``: counted once per hold)."""
        if not self.holding:
            self.state.counters["blocked"] += 1
        self.holding = True

    def _slot_positions(self, nearby: Nearby | None, now: float) -> tuple[Nearby | None, np.ndarray]:
        """Whom the slot assignment counts, and where it counts this robot: its ``Nearby`` and its own position; or,
        for a robot whose nearby set holds only the robots in reach (``census_expected``), the relay's census and
        itself as counted in it. A census that is missing, older than ``census_max_age`` or without this robot (the
        others do not count it) leaves the first, counted as ``census_fallbacks``."""
        st = self.state
        if self.census_expected:
            fresh = self.census is not None and now - self.census_stamp <= self.census_max_age
            mine = np.flatnonzero(np.asarray(self.census.ids) == st.id) if fresh else []
            if len(mine):
                return self.census, np.asarray(self.census.positions, dtype=float)[mine[0], : st.dim]
            st.counters["census_fallbacks"] += 1
        return nearby, self.filt.own_point()

    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """The box the filter keeps the robot's point in (the geofence less the body)."""
        return self.avoid.box(self.geofence.lo, self.geofence.hi)

    def inside(self, spots: np.ndarray, n: int | None = None) -> np.ndarray:
        """The slots moved as a whole (their pattern kept) so that every body in the first ``n`` (all) is inside the
        geofence: a point at a wall (a disaster cell on the grid's edge) has its slots on the inner side. A pattern
        wider than the fence is centred in it (its outer slots are then clamped by the caller)."""
        return inside(spots, *self.box(), n)

    # ------------------------------------------------------------------ the deadlock watch
    def turned(self, now: float, u_nom) -> np.ndarray:
        """The nominal velocity as filtered: turned ``ESCAPE_DEG`` to the right while escaping a deadlock."""
        nominal = np.asarray(u_nom, dtype=float)
        if now < self.escape_until and self.state.dim == 2:
            a = math.radians(-ESCAPE_DEG)
            c, s = math.cos(a), math.sin(a)
            nominal = np.array([c * nominal[0] - s * nominal[1], s * nominal[0] + c * nominal[1]])
        return nominal

    def watch(self, now: float, point, u_nom, u, goal) -> None:
        """The deadlock rule: escapes, and a slot given up after ``ESCAPES_PER_SLOT`` of them."""
        if self.goal is None or goal is not self.goal:       # only in the packing: blocked on the way in is normal
            self._blocked_since = None
            return
        nominal = float(np.linalg.norm(u_nom))
        far = float(np.linalg.norm(point - goal)) > ARRIVED_M
        if not far:
            self._escapes, self._escape_ref = 0, None        # in its slot: the escapes worked
        blocked = far and nominal > 1e-3 and float(np.linalg.norm(u)) < 0.25 * nominal
        if not blocked:
            self._blocked_since = None
            return
        if self._blocked_since is None:
            self._blocked_since = now
        elif now - self._blocked_since >= self.deadlock_s and now >= self.escape_until:
            self.state.counters["deadlocks"] += 1
            self._blocked_since = None
            half = 0.5 * (self.avoid.d_min_m + self.gap)
            if self._escape_ref is None or np.linalg.norm(goal - self._escape_ref) > half:
                self._escapes, self._escape_ref = 0, np.array(goal, dtype=float)      # another slot
            if self._escapes < ESCAPES_PER_SLOT:
                self._escapes += 1
                self.escape_until = now + self.deadlock_s
            else:
                self._give_up(goal)

    def _give_up(self, goal) -> None:
        """The slot at ``goal`` is blocked (a body the escapes did not get past sits on it or before it): it is
        marked, and the robot takes another at its next tick; past ``MAX_BLOCKED_SLOTS`` it holds where it is."""
        self._escapes, self._escape_ref = 0, None
        self.slot, self.goal = None, None
        if len(self._marks) >= MAX_BLOCKED_SLOTS:
            self._hold_marks = True
            self._hold()
            return
        if not self._marks:
            self._marks_at = np.array(self.state.meeting_point, dtype=float)
        self._marks.append(np.array(goal, dtype=float))
        self.state.counters["slots_blocked"] += 1
        self.assign_due = True
