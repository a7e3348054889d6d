"""One robot's decisions without ROS: the core that the headless loop and the ROS robot node both call.

A ``RobotCore`` holds everything a robot decides; its callers only bring inputs and carry outputs:

* ``observe(now, pos, yaw)``: an accepted pose (the headless loop passes its simulated state); ``accept(now, pos,
  yaw, stamp)`` first checks a pose heard from the wire (the node's odometry) for plausibility
  (``consensus.control.plausibility``: outside the workspace plus a margin, a jump beyond the speed limit, a stamp
  from the future) and observes it only when it passes: an implausible pose is counted and the robot goes stale;
  ``check_heard`` and ``check_nearby`` apply the same checks to what the relays delivered (a neighbour outside the
  workspace is dropped; a nearby robot whose position jumped is avoided at its last plausible position, ageing);
* ``plan(now, heard)``: a planning slot (every ``planner_period_s``). It starts a round from what the robot heard of
  its in-neighbours (``Heard``) unless one is still running (an *overrun*: counted, the slot is skipped), the robot has
  no pose yet, or ``max_rounds`` are done. With a thread pool the planner runs there and **never blocks** ``step``;
  without one (cheap classical planners, the headless loop) it runs at once. ``wait()`` blocks until the running
  round is done (the headless loop's synchronous rounds);
* ``collect(now)``: applies a finished round (target clamped into the geofence, a fallback holds the last target,
  round 0's holds the robot's position, every fallback counted) and returns its record, or None;
* ``step(now, nearby)``: one control tick → a ``Command``. The safety rules, in order: the e-stop (zero until
  released), stale odometry (``odom_timeout_s``) and no completed round for ``target_timeout_s`` (both zero, counted
  as ``stale_stops``), no target yet (zero), and with bodies no ``Nearby`` yet (zero: a robot never moves before it
  knows where the others are; a relay that stops makes the positions it sent age, which widens the distances kept),
  and with bodies a ``nearby`` message older than ``nearby_horizon_s`` (zero, counted as ``stale_stops``: the relay of
  robots in separate processes sends each robot only the robots it can meet within that horizon); then the
  controller towards the robot's *goal*, the speed limit, and the collision filter with the others' positions
  (``Nearby``).

**Meeting point and goal.** The robot's *target* is its planner's output: the point it wants the fleet to meet at
(its *meeting point*, the consensus variable its neighbours hear). Point robots drive to it. Robots with bodies
(``avoid``, the barrier-certificate filter) cannot all stand on one point: once the robot's meeting point agrees with
every neighbour's it heard within ``packing_gap_m`` (``agreed``), its *goal* is its slot around the meeting point
(``consensus.control.packing``: a hexagonal packing of the fleet's ``num_robots`` slots, spacing clearance +
``packing_gap_m``, the slot of the squared-distance-optimal assignment of every robot it knows of: those of its
``Nearby``, or, when its node subscribed the relay's *census* (``census_expected``: a relay that sends only the robots
in reach), the census's, itself as counted in it, so that every robot solves the same problem, and solved again on
each new census that counts it, so that robots that first solved on different ones agree after the next; no census
yet, one older than two planning periods and the horizon, or one without the robot itself: its ``Nearby``, counted
as ``census_fallbacks``); before that, the meeting point itself. Scenarios that send several robots to one point (a
disaster cell) name the group with ``set_target(point, group)``, and the robot packs with that group at once.

**Deadlock.** A robot in its packing (slot goal) that the filter keeps from its slot — more than ``ARRIVED_M`` away,
commanded at most a quarter of its nominal speed — for ``deadlock_s`` is in a deadlock (Wang, Ames & Egerstedt 2017
§V: barrier certificates have such stable points). It is counted (``deadlocks``) and escapes by the right-hand rule:
for the next ``deadlock_s`` its nominal velocity is turned ``ESCAPE_DEG`` to the right before filtering, so two
robots that block each other head-on both sidestep the same way and pass.

**Honest d_min.** The filter keeps ``avoid.d_min_m`` (the clearance, plus the unicycle offset and braking terms)
between the robot and each neighbour, plus that neighbour position's *age* times the pair's *closing speed*: its age
as measured (``Nearby.ages``, from the stamp each position travelled with) times the robot's own last commanded
speed plus the neighbour's measured speed (``Nearby.speeds``). At rest it is the clearance; a fixed worst case
(``2 v_max τ`` every tick) packed robots at more than twice their clearance (docs/real-robots.md).

Status (``status()``): the counters (``llm_calls``, ``llm_fallbacks``, ``clamped``, ``overruns``,
``planner_errors``, ``stale_stops``, ``estops``, ``deadlocks``, ``census_fallbacks``), ``round``, ``state``,
``meeting_point``, ``goal``, ``agreed``, ``slot``, the filter's ``collision`` record and ``implausible`` (per kind:
what the robot refused of its odometry and of its neighbours) with ``suspects`` (the nearby robots suspect now).
"""
from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import numpy as np

from consensus.control.controller import make_controller
from consensus.control.motion import UNICYCLE
from consensus.control.packing import assign, slots
from consensus.control.planner import Planner, PlanRequest, PlanResult
from consensus.control.plausibility import Plausibility
from consensus.control.safety import Geofence, is_stale

ARRIVED_M = 0.05        # a robot this close to its slot is in it (no deadlock can be declared)
ESCAPE_DEG = 60.0       # the right-hand rule's turn of the nominal velocity [degrees, clockwise]
_EMPTY = np.empty((0, 2))


@dataclass(frozen=True)
class Heard:
    """What a robot heard of its in-neighbours for planning (the communication graph's deliveries, in the same
    order): their positions and their meeting points (their planners' last targets; a robot that has not planned
    yet is its position). ``(k, d)`` each."""

    positions: np.ndarray
    meeting_points: np.ndarray

    @classmethod
    def none(cls, dim: int) -> Heard:
        return cls(np.empty((0, dim)), np.empty((0, dim)))


@dataclass(frozen=True)
class Nearby:
    """Every other robot the collision filter must keep clear of, whatever the graph: ``positions (k, d)``, each
    position's age ``ages (k,)`` [s] and each robot's measured speed ``speeds (k,)`` [m/s] (zeros: not measured),
    ``ids (k,)`` (robot indices; -1 unknown)."""

    positions: np.ndarray
    ages: np.ndarray
    speeds: np.ndarray
    ids: np.ndarray

    @classmethod
    def of(cls, positions, ages=None, speeds=None, ids=None) -> Nearby:
        p = np.asarray(positions, dtype=float)
        k = len(p)
        return cls(p, np.zeros(k) if ages is None else np.asarray(ages, dtype=float),
                   np.zeros(k) if speeds is None else np.asarray(speeds, dtype=float),
                   np.full(k, -1) if ids is None else np.asarray(ids, dtype=int))



def _heard_at(now: float, stamp: float | None) -> float:
    """When a relay's message counts as sent: its stamp, or ``now`` (its receipt) if that is earlier or there is no
    stamp, so that a sender's clock ahead of ours never makes a message younger (``nearby_horizon_s``)."""
    return float(now if stamp is None else min(stamp, now))

@dataclass(frozen=True)
class Command:
    """One control tick's output. ``vx, vy`` world frame (single integrator, point mass set-point) or ``vx`` = v and
    ``wz`` = ω (unicycle); ``reason``: ``ok`` | ``estopped`` | ``stale_odom`` | ``no_round`` | ``no_plan`` |
    ``no_nearby`` | ``stale_nearby``;
    ``goal``: where the controller drove (None when stopped)."""

    vx: float = 0.0
    vy: float = 0.0
    wz: float = 0.0
    reason: str = "ok"
    goal: np.ndarray | None = None


class RobotCore:
    """Planner scheduling, safety rules, controller, packing and collision filter of robot ``robot_id``."""

    def __init__(self, cfg, robot_id: int, planner: Planner | None = None, *, pool: ThreadPoolExecutor | None = None,
                 kinematics: str | None = None, v_max: float | None = None, w_max: float | None = None,
                 avoid=None, meeting_points: bool = False, nearby_points: bool = False) -> None:
        self.cfg, self.id, self.planner, self.pool = cfg, int(robot_id), planner, pool
        self.dim = int(cfg.dim)
        self.geofence = Geofence.from_bounds(cfg.workspace)
        self.kinematics = kinematics or cfg.kinematics
        self.v_max = float(cfg.v_max if v_max is None else v_max)
        self.w_max = float(cfg.w_max if w_max is None else w_max)
        self.ctrl = make_controller(self.kinematics, kp=cfg.kp, v_max=self.v_max, w_max=self.w_max,
                                    deadband=cfg.deadband)
        self.avoid = avoid
        if avoid is not None:
            import scipy.optimize  # noqa: F401 - the slot assignment's solver, loaded now rather than in a tick
        self.meeting_points = bool(meeting_points)  # plan on the neighbours' meeting points, not their positions
        # a unicycle filters its near-identity point: against the others' points (``nearby_points``: the headless
        # loop, which knows them) d_min is the filter's; against their centres (the ROS ``state`` they broadcast)
        # it is the clearance plus one offset, which keeps the wheel axes the clearance apart
        self.nearby_points = bool(nearby_points)
        self.n_slots = int(getattr(cfg, "num_robots", 1))
        self.gap = float(getattr(cfg, "packing_gap_m", 0.1))
        self.deadlock_s = float(getattr(cfg, "deadlock_s", 3.0))
        # a relay that sends only the robots in reach (one process per robot): its newest message's stamp, and the
        # relay's census of every robot for the slots (``check_census``)
        self.nearby_horizon = float(getattr(cfg, "nearby_horizon_s", 0.0))
        self.nearby_stamp: float | None = None
        self.census: Nearby | None = None
        self.census_stamp = -math.inf
        # a census older than this is not taken (the relay stopped sending it): two planning periods and the horizon
        self.census_max_age = 2.0 * float(getattr(cfg, "planner_period_s", 2.0)) + self.nearby_horizon
        self.census_expected = False                 # the robot's node subscribed a census (``_goal``)

        self.pos: np.ndarray | None = None
        self.yaw = 0.0
        self.odom_stamp: float | None = None
        self.target: np.ndarray | None = None       # the meeting point (planner output)
        self.last_round_done: float | None = None
        self.round = 0
        self.pending: Future | None = None
        self.estopped = False
        self.counters = {"llm_calls": 0, "llm_fallbacks": 0, "clamped": 0, "overruns": 0, "planner_errors": 0,
                         "stale_stops": 0, "estops": 0, "deadlocks": 0, "census_fallbacks": 0}
        # packing
        self.agreed = False
        self.group: tuple[int, ...] | None = None   # robots sharing the target (set_target); None: the whole fleet
        self.slot: int | None = None
        self.goal: np.ndarray | None = None
        self._assign_due = False
        # deadlock
        self._blocked_since: float | None = None
        self._escape_until = -math.inf
        self.last_speed = 0.0                         # |last command| (world frame, the filtered point's)
        self._heard_mps = np.empty((0, self.dim))     # the meeting points heard for the running round
        self.planner_error = ""                       # the last planner exception (the node logs it)
        # what the robot hears from the wire (its odometry: source ``id``; nearby robots: their ids)
        self.plausible = Plausibility.for_workspace(max(self.n_slots, self.id + 1), cfg.workspace,
                                                    max(float(cfg.v_max), self.v_max), self.dim)
        # each nearby robot's speed with its last plausible position (the position and when it was sent are the
        # plausibility check's ``last`` and ``last_t``)
        self._nb_speed = np.zeros(self.plausible.n)

    # ------------------------------------------------------------------ inputs
    def observe(self, now: float, pos, yaw: float = 0.0) -> None:
        """An accepted pose at time ``now`` (odometry that passed the caller's checks)."""
        self.pos = np.asarray(pos, dtype=float).reshape(self.dim).copy()
        self.yaw = float(yaw)
        self.odom_stamp = float(now)

    def accept(self, now: float, pos, yaw: float = 0.0, stamp: float | None = None) -> str | None:
        """A pose heard from the wire (odometry received at ``now``, stamped ``stamp``): observed when plausible
        (returns None), else counted and refused (returns its kind: the robot keeps its last good pose and goes stale
        if no plausible one follows)."""
        p = np.asarray(pos, dtype=float).reshape(self.dim)
        kind = self.plausible.check(self.id, now, p, stamp)
        if kind is None:
            self.observe(now, p, yaw)
        return kind

    def check_heard(self, now: float, heard: Heard, stamp: float | None = None) -> tuple[Heard | None, int]:
        """What the planning relay delivered, checked: a delivery stamped in the future is refused whole (the
        previous one stays: returns None), a neighbour whose position or meeting point lies outside the workspace plus
        the margin is dropped. Returns the checked ``Heard`` (None: refused) and the number of entries dropped."""
        if self.plausible.future(stamp, now):
            self.plausible.count("future", None, now)
            return None, len(heard.positions)
        bad = self.plausible.outside(heard.positions) | self.plausible.outside(heard.meeting_points)
        self.plausible.count("outside", None, now, int(bad.sum()))
        if not bad.any():
            return heard, 0
        return Heard(heard.positions[~bad], heard.meeting_points[~bad]), int(bad.sum())

    def check_nearby(self, now: float, nearby: Nearby, stamp: float | None = None) -> tuple[Nearby | None, int]:
        """What the collision relay delivered, checked per robot (by id): a message stamped in the future is refused
        (None: keep the previous one); a robot outside the workspace plus the margin, or whose position jumped beyond
        its speed limit, is counted and replaced by its last plausible position, aged by the time since (dropped if
        there is none): a body is never forgotten because a message about it was wrong. Returns the checked
        ``Nearby`` and the number of implausible entries."""
        if self.plausible.future(stamp, now):
            self.plausible.count("future", None, now)
            return None, len(nearby.positions)
        self.nearby_stamp = _heard_at(now, stamp)
        pos = np.array(nearby.positions, dtype=float).reshape(-1, self.dim)
        ages, speeds, ids = (np.array(nearby.ages, dtype=float), np.array(nearby.speeds, dtype=float),
                             np.array(nearby.ids, dtype=int))
        # each position as it was when sent: a delivery's age is part of the elapsed time (own id: outside only)
        check_ids = np.where(ids == self.id, -1, ids)
        kinds = self.plausible.check_many(check_ids, now - ages, pos)
        good = kinds == ""
        known = (check_ids >= 0) & (check_ids < self.plausible.n)
        acc = good & known
        self._nb_speed[ids[acc]] = speeds[acc]
        bad = ~good
        n_bad = int(bad.sum())
        if not n_bad:
            return nearby, 0
        keep = good.copy()
        last, sent = self.plausible.last, self.plausible.last_t
        for k in np.flatnonzero(bad & known):             # a known body stays where it last plausibly was, ageing
            j = ids[k]
            if np.isfinite(sent[j]):
                pos[k], ages[k] = last[j], now - sent[j]
                speeds[k], keep[k] = max(self._nb_speed[j], speeds[k]), True
        return Nearby(pos[keep], ages[keep], speeds[keep], ids[keep]), n_bad

    def check_census(self, now: float, census: Nearby, stamp: float | None = None) -> int | None:
        """The relay's census (every robot's position, ``consensus.ros.nearby``), checked: refused whole when stamped
        in the future (returns None; the previous one stays), a robot outside the workspace plus the margin left out
        (counted as ``outside``; returns how many). It only places the packing slots (``_goal``): the filter avoids
        what ``nearby`` holds."""
        if self.plausible.future(stamp, now):
            self.plausible.count("future", None, now)
            return None
        pos = np.array(census.positions, dtype=float).reshape(-1, self.dim)
        bad = self.plausible.outside(pos)
        self.plausible.count("outside", None, now, int(bad.sum()))
        keep = ~bad
        self.census_stamp = _heard_at(now, stamp)
        self.census = Nearby(pos[keep], np.asarray(census.ages, dtype=float)[keep],
                             np.asarray(census.speeds, dtype=float)[keep], np.asarray(census.ids, dtype=int)[keep])
        if self.census_expected and self.goal is not None and self.id in self.census.ids:
            self._assign_due = True     # every robot solves its slot again on this one message, at its next tick
        return int(bad.sum())

    def alive(self, now: float) -> None:
        """The robot's planner (or a scenario's clock that sets its targets) is alive: resets ``target_timeout_s``."""
        self.last_round_done = float(now)

    def set_estop(self, engage: bool) -> bool:
        """Engage or release the e-stop; True when this changed it."""
        engage = bool(engage)
        changed = engage != self.estopped
        if engage and changed:
            self.counters["estops"] += 1
        self.estopped = engage
        return changed

    def set_target(self, target, now: float | None = None, *, group=None) -> tuple[np.ndarray, bool]:
        """A target set by a scenario's protocol (no planner): clamped into the geofence; with ``group`` (the ids of
        the robots sent to the same point, this one included) the robot packs with them there. Returns the target
        and whether it was clamped."""
        target, clamped = self.geofence.clamp(np.asarray(target, dtype=float).reshape(self.dim))
        self.counters["clamped"] += int(clamped)
        self.target = target
        self.group = None if group is None else tuple(sorted(int(g) for g in group))
        self.agreed = self.group is not None and len(self.group) > 1
        self.slot, self.goal, self._assign_due = None, None, self.agreed
        if now is not None:
            self.alive(now)
        return target, clamped

    # ------------------------------------------------------------------ planning (the slow loop)
    def meeting_point(self) -> np.ndarray | None:
        """The robot's meeting point: its target, or its position before its first round."""
        if self.target is not None:
            return self.target
        return None if self.pos is None else self.pos

    def plan(self, now: float, heard: Heard) -> PlanRequest | None:
        """A planning slot (module docstring); returns the request of the round it started, or None."""
        if self.pos is None or self.planner is None:
            return None
        if self.cfg.max_rounds and self.round >= self.cfg.max_rounds:
            return None
        if self.pending is not None:
            self.counters["overruns"] += 1        # the previous plan is still running (slow LLM): skip this slot
            return None
        own_mp = self.meeting_point()
        if self.meeting_points:
            own, neighbors = own_mp.copy(), list(np.asarray(heard.meeting_points, dtype=float))
        else:
            own, neighbors = self.pos.copy(), list(np.asarray(heard.positions, dtype=float))
        req = PlanRequest(robot_id=self.id, own=own, neighbors=neighbors, round=self.round,
                          own_position=self.pos.copy(), neighbor_positions=list(np.asarray(heard.positions, float)),
                          own_meeting_point=own_mp.copy(),
                          neighbor_meeting_points=list(np.asarray(heard.meeting_points, float)))
        self.round += 1
        self._heard_mps = np.asarray(heard.meeting_points, dtype=float).reshape(-1, self.dim)
        if self.pool is None:
            fut: Future = Future()
            fut.set_result(self._safe_plan(req))
        else:
            fut = self.pool.submit(self._safe_plan, req)
        self.pending = fut
        return req

    def _safe_plan(self, req: PlanRequest) -> tuple[PlanRequest, PlanResult]:
        try:
            return req, self.planner.plan(req)
        except Exception as exc:  # noqa: BLE001 - any planner bug becomes a counted fallback, never a dead robot
            self.planner_error = f"{type(exc).__name__}: {exc}"
            return req, PlanResult(target=None, reasoning="", fallback=True,
                                   fallback_reason=f"planner_exception: {type(exc).__name__}")

    def wait(self, timeout: float | None = None) -> None:
        """Block until the running round (if any) is done."""
        if self.pending is not None:
            try:
                self.pending.exception(timeout=timeout)
            except FutureTimeout:
                pass

    def collect(self, now: float) -> dict | None:
        """Apply a finished round; its record (``planner/reasoning``'s schema), or None when none finished."""
        fut = self.pending
        if fut is None or not fut.done():
            return None
        self.pending = None
        req, res = fut.result()
        self.counters["llm_calls"] += res.llm_calls
        fallback = res.fallback
        if res.fallback:
            self.counters["llm_fallbacks"] += 1
            if res.fallback_reason.startswith("planner_exception"):
                self.counters["planner_errors"] += 1
        target, clamped = res.target, res.clamped
        if target is not None:
            try:
                target, changed = self.geofence.clamp(np.asarray(target, dtype=float).reshape(self.dim))
                clamped = clamped or changed
            except ValueError:
                target = None                     # NaN/inf: hold the last target
                if not res.fallback:
                    self.counters["llm_fallbacks"] += 1
                    fallback = True
        if clamped:
            self.counters["clamped"] += 1
        if target is None:
            target = self.target if self.target is not None else req.own_position.copy()   # hold (round 0: stay)
        self.target = np.asarray(target, dtype=float)
        self.alive(now)
        self.group = None
        self._update_agreement()
        return {"robot": self.id, "round": req.round, "stamp": float(now),
                "target": [float(v) for v in self.target], "reasoning": res.reasoning[:500], "fallback": fallback,
                "fallback_reason": res.fallback_reason, "clamped": bool(clamped), "llm_calls": res.llm_calls,
                "agreed": self.agreed}

    def _update_agreement(self) -> None:
        """Agreed: every meeting point heard this round is within ``packing_gap_m`` of the robot's own."""
        if self.avoid is None:
            self.agreed = False
            return
        heard = self._heard_mps[np.isfinite(self._heard_mps).all(axis=1)]
        agreed = bool(np.all(np.linalg.norm(heard - self.target, axis=1) <= self.gap)) if len(heard) else False
        if agreed or self.agreed:
            self._assign_due = True               # a new meeting point: assign the slots again
        if not agreed:
            self.slot, self.goal = None, None
        self.agreed = agreed

    # ------------------------------------------------------------------ control (the fast loop)
    def _goal(self, nearby: Nearby | None, now: float) -> np.ndarray:
        """The meeting point, or once agreed the robot's slot around it (module docstring)."""
        if not self.agreed or self.avoid is None:
            return self.target
        if self._assign_due or self.goal is None:
            self._assign_due = False
            spacing = self.avoid.d_min_m + self.gap      # d_min: the clearance (+ the unicycle's offset)
            if self.group is not None:
                members = [self.id, *[g for g in self.group if g != self.id]]
                n = len(members)
            else:
                members, n = None, max(self.n_slots, 1)
            spots = self._inside(slots(self.target, n, spacing))
            # every robot known, itself included, in the order of their ids: robots that know the same positions
            # solve the same problem row for row, so even an exact tie is broken the same way for all of them
            source, own = self._slot_positions(nearby, now)
            ids, known = [self.id], [own]
            if source is not None and len(source.positions):
                keep = np.asarray(source.ids) != self.id
                if members is not None:
                    keep &= np.isin(source.ids, members)
                ids += [int(i) for i in np.asarray(source.ids)[keep]]
                known += list(np.asarray(source.positions, dtype=float)[keep][:, : self.dim])
            order = np.argsort(ids, kind="stable")
            rows = assign(np.asarray(known).reshape(-1, self.dim)[order], spots)
            self.slot = int(rows[int(np.flatnonzero(order == 0)[0])])
            self.goal = spots[self.slot] if self.slot >= 0 else self.target
            self.goal = self.geofence.clamp(self.goal)[0]
        return self.goal

    def _slot_positions(self, nearby: Nearby | None, now: float) -> tuple[Nearby | None, np.ndarray]:
        """Whom the slot assignment counts, and where it counts this robot: its ``Nearby`` and its own position; or,
        for a robot whose nearby set holds only the robots in reach (``census_expected``), the relay's census and
        itself as counted in it. A census that is missing, older than ``census_max_age`` or without this robot (the
        others do not count it) leaves the first, counted as ``census_fallbacks``."""
        if self.census_expected:
            fresh = self.census is not None and now - self.census_stamp <= self.census_max_age
            mine = np.flatnonzero(np.asarray(self.census.ids) == self.id) if fresh else []
            if len(mine):
                return self.census, np.asarray(self.census.positions, dtype=float)[mine[0], : self.dim]
            self.counters["census_fallbacks"] += 1
        return nearby, self._position_for_slots()

    def goal_needs_nearby(self) -> bool:
        """Does ``_goal`` read the nearby robots this tick (it assigns the packing slots)?"""
        return self.agreed and self.avoid is not None and (self._assign_due or self.goal is None)

    def _position_for_slots(self) -> np.ndarray:
        """Where this robot counts in the slot assignment: where the others it knows are counted, i.e. its
        near-identity point for a unicycle that knows the others' points (``nearby_points``), else its position."""
        if self.kinematics == UNICYCLE and self.avoid is not None and self.nearby_points:
            from consensus.control.collision import near_identity_point

            return near_identity_point(np.array([self.pos[0], self.pos[1], self.yaw]), self.avoid.offset)
        return self.pos

    def _inside(self, spots: np.ndarray) -> np.ndarray:
        """The slots moved as a whole (their pattern kept) so that every body in them is inside the geofence: a
        point at a wall (a disaster cell on the grid's edge) has its slots on the inner side. A pattern wider than
        the fence is centred in it (its outer slots are then clamped by the caller)."""
        if self.avoid.bounds is not None:                  # the box the filter keeps the robot's point in
            lo, hi = self.avoid.bounds
        else:
            lo, hi = self.geofence.lo + 0.5 * self.avoid.clearance_m, self.geofence.hi - 0.5 * self.avoid.clearance_m
        shift = np.zeros(self.dim)
        for a in range(self.dim):
            s_lo, s_hi = spots[:, a].min(), spots[:, a].max()
            if s_hi - s_lo > hi[a] - lo[a]:
                shift[a] = 0.5 * (lo[a] + hi[a]) - 0.5 * (s_lo + s_hi)
            elif s_lo < lo[a]:
                shift[a] = lo[a] - s_lo
            elif s_hi > hi[a]:
                shift[a] = hi[a] - s_hi
        return spots + shift

    def step(self, now: float, nearby: Nearby | None = None) -> Command:
        """One control tick (module docstring)."""
        return self.rules(now, nearby) or self.drive(now, nearby)

    def rules(self, now: float, nearby: Nearby | None) -> Command | None:
        """The safety rules of a control tick, in order (module docstring): the stop command of the first that
        holds (counted), or None when the robot may drive (``drive``)."""
        if self.estopped:
            return self._stop("estopped")
        if is_stale(self.odom_stamp, now, self.cfg.odom_timeout_s):
            if self.odom_stamp is not None:
                self.counters["stale_stops"] += 1
            return self._stop("stale_odom")
        if self.target is None:
            return self._stop("no_plan")
        if is_stale(self.last_round_done, now, self.cfg.target_timeout_s):
            self.counters["stale_stops"] += 1
            return self._stop("no_round")
        if self.avoid is not None and nearby is None:
            return self._stop("no_nearby")       # bodies: never move before knowing where the others are
        if self.nearby_stale(now):
            self.counters["stale_stops"] += 1    # the relay's reach covered only this long (consensus.ros.nearby)
            return self._stop("stale_nearby")
        return None

    def nearby_stale(self, now: float) -> bool:
        """Is the newest ``nearby`` message (from a relay that sends only the robots in reach) older than
        ``nearby_horizon_s``? Never for a robot fed in its process (the fleet clock, the headless loop)."""
        return (self.avoid is not None and self.nearby_horizon > 0 and self.nearby_stamp is not None
                and now - self.nearby_stamp > self.nearby_horizon)

    def drive(self, now: float, nearby: Nearby | None) -> Command:
        """The controller towards the goal and, with bodies, the collision filter (after ``rules`` said go)."""
        goal = self._goal(nearby, now)
        if self.avoid is None:
            if self.kinematics == UNICYCLE:
                v, w = self.ctrl.compute(np.array([self.pos[0], self.pos[1], self.yaw]), goal)
                self.last_speed = abs(v)
                return Command(vx=float(v), wz=float(w), goal=goal)
            vel = self.ctrl.compute(self.pos, goal)
            self.last_speed = float(np.linalg.norm(vel))
            return Command(vx=float(vel[0]), vy=float(vel[1]) if self.dim > 1 else 0.0, goal=goal)
        point, u_nom, nominal = self.filter_input(now, goal)
        u = self.avoid.filter(point, nominal, self.nearby_points_of(nearby), d_min=self._d_min(nearby))
        return self.filtered(now, point, u_nom, u, goal)

    # the filtered drive in three parts, shared with the fleet core (consensus.control.fleet_core), which filters
    # every robot's command in one batched step between ``filter_input`` and ``filtered``
    def filter_input(self, now: float, goal) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the collision filter gets: the filtered point (the position; a unicycle's near-identity point, which
        goes to the goal by a P law with the point's speed limit), the nominal velocity and the nominal as filtered
        (turned by the right-hand rule during a deadlock escape)."""
        if self.kinematics == UNICYCLE:
            from consensus.control.collision import near_identity_point

            av = self.avoid
            point = near_identity_point(np.array([self.pos[0], self.pos[1], self.yaw]), av.offset)
            err = np.asarray(goal, dtype=float) - point
            dist = float(np.linalg.norm(err))
            u_nom = np.zeros(2) if dist <= self.cfg.deadband else err * min(self.cfg.kp, av.point_v_max / dist)
        else:
            point, u_nom = self.pos, self.ctrl.compute(self.pos, goal)
        nominal = np.asarray(u_nom, dtype=float)
        if now < self._escape_until and self.dim == 2:
            a = math.radians(-ESCAPE_DEG)
            c, s = math.cos(a), math.sin(a)
            nominal = np.array([c * nominal[0] - s * nominal[1], s * nominal[0] + c * nominal[1]])
        return point, u_nom, nominal

    def nearby_points_of(self, nearby: Nearby | None) -> np.ndarray:
        """The positions the filter keeps clear of, ``(k, d)``."""
        return _EMPTY[:, : self.dim] if nearby is None else np.asarray(nearby.positions, dtype=float)[:, : self.dim]

    def filtered(self, now: float, point, u_nom, u, goal) -> Command:
        """The command from the filter's output ``u`` (the deadlock rule watches it)."""
        self._watch_deadlock(now, point, u_nom, u, goal)
        self.last_speed = float(np.linalg.norm(u))
        if self.kinematics == UNICYCLE:
            from consensus.control.collision import unicycle_command

            v, w = self.avoid._cap(*unicycle_command(self.yaw, u, self.avoid.offset))
            return Command(vx=float(v), wz=float(w), goal=goal)
        return Command(vx=float(u[0]), vy=float(u[1]) if self.dim > 1 else 0.0, goal=goal)

    def _stop(self, reason: str) -> Command:
        self.last_speed = 0.0
        return Command(reason=reason)

    def d_min_base(self) -> float:
        """The filter's distance to a neighbour at rest whose position is fresh (``_d_min`` adds the rest)."""
        if self.avoid.offset and not self.nearby_points:
            return self.avoid.clearance_m + self.avoid.offset
        return self.avoid.d_min_m

    def _d_min(self, nearby: Nearby) -> np.ndarray | float:
        """Per neighbour: the filter's d_min plus the measured age × closing speed (module docstring)."""
        base = self.d_min_base()
        if nearby is None or not len(nearby.ages):
            return base
        return base + np.maximum(nearby.ages, 0.0) * (self.last_speed + np.maximum(nearby.speeds, 0.0))

    def _watch_deadlock(self, now: float, point, u_nom, u, goal) -> None:
        if self.goal is None or goal is not self.goal:       # only in the packing: blocked on the way in is normal
            self._blocked_since = None
            return
        nominal = float(np.linalg.norm(u_nom))
        far = float(np.linalg.norm(point - goal)) > ARRIVED_M
        blocked = far and nominal > 1e-3 and float(np.linalg.norm(u)) < 0.25 * nominal
        if not blocked:
            self._blocked_since = None
            return
        if self._blocked_since is None:
            self._blocked_since = now
        elif now - self._blocked_since >= self.deadlock_s and now >= self._escape_until:
            self.counters["deadlocks"] += 1
            self._escape_until = now + self.deadlock_s
            self._blocked_since = None

    # ------------------------------------------------------------------ settings and status
    def set_limits(self, cfg, v_max: float | None = None, w_max: float | None = None) -> None:
        """Apply changed controller settings (kp, v_max, w_max, deadband) from the next tick on."""
        self.cfg = cfg
        self.v_max = float(cfg.v_max if v_max is None else v_max)
        self.w_max = float(cfg.w_max if w_max is None else w_max)
        self.ctrl = make_controller(self.kinematics, kp=cfg.kp, v_max=self.v_max, w_max=self.w_max,
                                    deadband=cfg.deadband)
        if self.avoid is not None:
            self.avoid.set_limits(self.v_max, self.w_max)

    def state(self, now: float, llm_state: str | None = None) -> str:
        if self.estopped:
            return "estopped"
        if self.pos is None:
            return "waiting"
        if self.counters["stale_stops"] and (is_stale(self.last_round_done, now, self.cfg.target_timeout_s)
                                             or self.nearby_stale(now)):
            return "stopped"
        return "degraded" if llm_state in ("retrying", "down") else "ok"

    def status(self, now: float, llm_state: str | None = None) -> dict:
        def pt(p):
            return None if p is None else [float(v) for v in p]
        out = {"robot": self.id, "round": self.round, "state": self.state(now, llm_state), **self.counters,
               "estopped": self.estopped, "meeting_point": pt(self.target), "goal": pt(self.goal),
               "agreed": self.agreed, "slot": self.slot, "implausible": dict(self.plausible.counts),
               "suspects": [j for j in self.plausible.suspects(now) if j != self.id]}
        if self.avoid is not None:
            out["collision"] = self.avoid.info()
        return out
