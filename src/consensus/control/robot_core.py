"""One robot's decisions without ROS: the core that the headless loop and the ROS robot node both call.

A ``RobotCore`` holds everything a robot decides; its callers only bring inputs and carry outputs:

* ``observe(now, pos, yaw)``: an accepted pose (the headless loop passes its simulated state); ``accept(now, pos,
  yaw, stamp)`` first checks a pose heard from the wire (the node's odometry) for plausibility
  (``consensus.control.plausibility``: outside the workspace plus a margin, off the source's track, a stamp from the
  future or the past) and observes it only when it passes: an implausible pose is counted and the robot goes stale;
  an observed one is also checked against the robot's own commands ("Own pose" below). ``check_heard`` and
  ``check_nearby`` apply the same checks to what the relays delivered (a neighbour outside the workspace is dropped;
  a nearby robot whose position jumped, or that the newest message left out, is avoided at its last plausible
  position, ageing: "Silent bodies" below);
* ``plan(now, heard)``: a planning slot (every ``planner_period_s``). It starts a round from what the robot heard of
  its in-neighbours (``Heard``) unless one is still running (an *overrun*: counted, the slot is skipped), the robot has
  no pose yet, or ``max_rounds`` are done. With a thread pool the planner runs there and **never blocks** ``step``;
  without one (cheap classical planners, the headless loop) it runs at once. ``wait()`` blocks until the running
  round is done (the headless loop's synchronous rounds);
* ``collect(now)``: applies a finished round (target clamped into the geofence, a fallback holds the last target,
  round 0's holds the robot's position, every fallback counted) and returns its record, or None;
* ``step(now, nearby)``: one control tick → a ``Command``. The safety rules (``rules``), in order: the e-stop (zero
  until released), stale odometry (``odom_timeout_s``; zero, counted as ``stale_stops``), a suspect own pose (zero,
  ``pose_suspect``, counted as ``pose_suspect_stops``), no target yet (zero), no completed round for
  ``target_timeout_s`` (zero, counted as ``stale_stops``), and with bodies no ``Nearby`` yet (zero: a robot never
  moves before it knows where the others are; a relay that stops makes the positions it sent age, which widens the
  distances kept), and with bodies a ``nearby`` message older than ``nearby_horizon_s`` (zero, counted as
  ``stale_stops``: the relay of robots in separate processes sends each robot only the robots it can meet within
  that horizon); then the controller towards the robot's *goal*, the speed limit, and the collision filter with the
  others' positions (``Nearby``); a robot with no slot it can reach holds (zero, ``blocked``: "Deadlock" below);
* ``broadcast_pose(now)``: what the node broadcasts as the robot's ``state``: its pose and the time it came, or
  nothing while it has no pose, its odometry is stale or its pose is suspect (the others then keep its last state,
  ageing, as a silent body, rather than hear a position it cannot vouch for).

**Own pose.** A robot that cannot trust its own pose holds still. Its pose is *suspect* (``pose_suspect(now)``)
while its odometry is a suspect source of the plausibility check (implausible positions: a second stream beside the
real one, jumps) or within ``POSE_CLEAR_S`` of having *crept* against the robot's own commands (``CreepWatch``:
over the last ``CREEP_WINDOW_S`` the odometry's displacement is farther than ``CREEP_SLACK_M`` — plus the delay
steps' share of the fastest command and ``CREEP_NOISE_SIGMAS`` of the declared ``odom_noise_m`` — from every share
in ``[CREEP_MIN_FOLLOW, 1]`` of where its commands, delayed by up to ``CREEP_LAG_S`` plus the declared
``actuator_lag_s``, could have taken it; counted as ``odom_creeps``). A robot may lag its commands, fall short of them
by half, be noisy; it never moves where they could not take it, nor stays put while they drive it on. A forged
stream that creeps away while the robot stands, one that runs ahead of or across its motion, or one that says it
stays while its body drives off, is caught within a second when it creeps at a metre a second or more; slower ones
take up to a window, and one slower than about ``CREEP_SLACK_M / (CREEP_MIN_FOLLOW × CREEP_WINDOW_S)`` (0.12 m/s), or
one that follows half the commanded motion, cannot be told from a slow robot. Stale
odometry stops the robot too (``stale_odom``); the state (``state()``) is ``pose_suspect`` in both cases, until the
source is consistent again. A point mass (``point_mass_pid``: its velocity command is its P law's input, and it coasts)
is checked for jumps and staleness only; a node whose commands never reach the robot (a dry run) sets
``watch_creep`` off.

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
disaster cell) name the group with ``set_target(point, group)``, and the robot packs with that group at once. A
silent body (below) takes no slot, and no slot within its keep-out (d_min + its margin) is used, nor one given up
(below): the robot takes the nearest free ones of the pattern, as many more as needed (the pattern still placed
inside the fence by its first ``num_robots`` slots, the extra ones only where they lie in the filter's box).

**Deadlock.** A robot in its packing (slot goal) that the filter keeps from its slot — more than ``ARRIVED_M`` away,
commanded at most a quarter of its nominal speed — for ``deadlock_s`` is in a deadlock (Wang, Ames & Egerstedt 2017
§V: barrier certificates have such stable points). It is counted (``deadlocks``) and escapes by the right-hand rule:
for the next ``deadlock_s`` its nominal velocity is turned ``ESCAPE_DEG`` to the right before filtering, so two
robots that block each other head-on both sidestep the same way and pass. The escape is bounded: after
``ESCAPES_PER_SLOT`` escapes that did not bring it into its slot, the next deadlock there gives the slot up (a body
sits on it or before it that the escapes do not get past: the slot is marked, counted as ``slots_blocked``) and the
robot takes the nearest free one at its next tick; the marks hold until the meeting point moves by more than a slot's
spacing. After ``MAX_BLOCKED_SLOTS`` slots given up, or when no free slot is left in the fence, the robot holds where
it is (``blocked``: its reason and state, counted once per hold in ``blocked``). A robot blocked on every slot thus
deadlocks at most ``(ESCAPES_PER_SLOT + 1) (MAX_BLOCKED_SLOTS + 1)`` times per meeting point.

**Honest d_min.** The filter keeps ``avoid.d_min_m`` (the clearance, plus the unicycle offset and braking terms)
between the robot and each neighbour, plus that neighbour position's *age* times the pair's *closing speed*: its age
as measured (``Nearby.ages``, from the stamp each position travelled with) times the robot's own last commanded
speed plus the neighbour's measured speed (``Nearby.speeds``). At rest it is the clearance; a fixed worst case
(``2 v_max τ`` every tick) packed robots at more than twice their clearance (docs/real-robots.md).

**Silent bodies.** A position older than ``FRESH_AGE_S`` (plus ``link_delay_s``) is a silent body's: a robot that
stopped speaking (dead, stale, or suspect of its own pose) is still a body, and may have moved at v_max since (the
fleet's ``v_max``, or this robot's if higher). Its margin grows with its age at at least that speed, up to
``silent_bound_m`` (or the margin it had when it fell silent, if larger), after which its area is a fixed keep-out
(``neighbour_margins``, which the fleet core batches). The core never drops a position for its age: a relay that
keeps sending a lost robot keeps it avoided. ``check_nearby`` keeps a robot the newest message left out at its last
plausible position, aged, until that age exceeds ``robot_timeout_s`` + ``nearby_horizon_s`` (then the relay's word
about it governs): a forged empty message costs nothing.

Status (``status()``): the counters (``llm_calls``, ``llm_fallbacks``, ``clamped``, ``overruns``,
``planner_errors``, ``stale_stops``, ``estops``, ``deadlocks``, ``census_fallbacks``, ``pose_suspect_stops``,
``odom_creeps``, ``slots_blocked``, ``blocked``), ``round``, ``state`` (``estopped``, ``waiting``, ``pose_suspect``,
``stopped``, ``blocked``, ``degraded`` or ``ok``), ``meeting_point``, ``goal``, ``agreed``, ``slot``, the filter's
``collision`` record and ``implausible`` (per kind: what the robot refused of its odometry and of its neighbours)
with ``suspects`` (the nearby robots suspect now).
"""
from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from consensus.control.dynamics import dynamics_of
from consensus.control.packing import assign, inside, slots
from consensus.control.planner import Planner, PlanRequest, PlanResult
from consensus.control.plausibility import Plausibility
from consensus.control.safety import Geofence, is_stale

ARRIVED_M = 0.05        # a robot this close to its slot is in it (no deadlock can be declared)
ESCAPE_DEG = 60.0       # the right-hand rule's turn of the nominal velocity [degrees, clockwise]
ESCAPES_PER_SLOT = 2    # right-hand escapes from one slot; the next deadlock there gives the slot up as blocked
MAX_BLOCKED_SLOTS = 2   # slots given up around one meeting point; one more deadlock and the robot holds (blocked)
FRESH_AGE_S = 1.0       # a neighbour position older than this (plus link_delay_s) is a silent body's [s]
CREEP_WINDOW_S = 5.0    # own odometry is checked against the robot's own commands over this window [s]
CREEP_SLACK_M = 0.3     # what odometry may stray from where the commands could take the robot [m]
CREEP_LAG_S = 0.5       # the longest the robot may answer its commands late [s]
CREEP_MIN_FOLLOW = 0.5  # the least share of its commanded motion a robot makes over the window
CREEP_NOISE_SIGMAS = 6.0    # plus this many standard deviations of the odometry's noise (odom_noise_m, each axis)
CREEP_SAMPLE_S = 0.1    # the window keeps one odometry sample per this long [s]
POSE_CLEAR_S = 3.0      # a pose source that crept is trusted again after this long without creeping [s]
_EMPTY = np.empty((0, 2))


def neighbour_margins(ages, speeds, own_speed, body_v_max, fresh_s, bound):
    """What the filter adds to its distance at rest for each neighbour (module docstring, "Honest d_min" and
    "Silent bodies"): a position at most ``fresh_s`` old gets its age times the closing speed (``own_speed`` plus the
    neighbour's measured speed); an older one (a silent body) gets its own possible motion since it was sent, at
    least at ``body_v_max``, up to ``bound`` (``silent_bound_m``; or the margin it had when it turned silent, if
    larger). Negative ages and speeds count as 0. Arrays broadcast (the fleet core passes ``(n, 1)`` own values)."""
    a = np.maximum(ages, 0.0)
    s = np.maximum(speeds, 0.0)
    closing = own_speed + s
    silent = np.minimum(a * (own_speed + np.maximum(s, body_v_max)), np.maximum(bound, fresh_s * closing))
    return np.where(a > fresh_s, silent, a * closing)


class CreepWatch:
    """Own odometry against the robot's own commands (module docstring, "Own pose"). ``command(now, v, w, yaw)``
    records each command (a world-frame velocity ``v``, or a unicycle's speed ``v`` along ``yaw`` turning at ``w``),
    held until the next; ``pose(now, p)`` checks each accepted pose and says whether the odometry *crept*: over the
    last ``window_s`` its displacement ``D`` is farther than the tolerance from every ``c C_s``, ``C_s`` being the
    commands' integral over the same window delayed by ``s`` (``LAG_STEPS`` delays from 0 to ``lag_s``: a robot
    answers its commands late) and ``c`` in ``[min_follow, 1]`` (it may fall short of them: an acceleration limit,
    wheels that slip; not much more: a pose that stays put while the robot is commanded on is no pose to trust). The
    tolerance is ``slack_m`` plus the delay steps' width times the fastest command of the window. A creep restarts the
    window at that pose. Plain floats (2-D; a 1-D robot's y is 0): every odometry message comes through here."""

    LAG_STEPS = 5

    def __init__(self, slack_m: float, lag_s: float, min_follow: float, window_s: float = CREEP_WINDOW_S) -> None:
        self.slack, self.lag, self.min_follow, self.window = float(slack_m), float(lag_s), float(min_follow), \
            float(window_s)
        self._shifts = [self.lag * k / (self.LAG_STEPS - 1) for k in range(self.LAG_STEPS)]
        # the command log: start times, the integral there, and each command (vx, vy, w, yaw, speed, unicycle)
        self._t: list[float] = []
        self._i: list[tuple[float, float]] = []
        self._c: list[tuple[float, float, float, float, float, bool]] = []
        self._first = 0                               # entries before it are older than any check needs
        self._peak = 0.0                              # the fastest command since the last sample
        self._samples: deque = deque()                # (t, (x, y), fastest command since the one before)
        self.last_bad = -math.inf                     # when the odometry last crept
        self.residual = 0.0                           # the last check's distance and tolerance [m]
        self.tolerance = 0.0

    def command(self, now: float, v, w: float = 0.0, yaw: float | None = None) -> None:
        now = float(now)
        start = self._integral(now) if self._t else (0.0, 0.0)
        if yaw is None:
            vx, vy = (float(v[0]), float(v[1]) if len(v) > 1 else 0.0)
            cmd = (vx, vy, 0.0, 0.0, math.hypot(vx, vy), False)
        else:
            cmd = (float(v), 0.0, float(w), float(yaw), abs(float(v)), True)
        if self._t and self._t[-1] >= now:            # a second command in one instant replaces the first
            self._t.pop(), self._i.pop(), self._c.pop()
        self._t.append(now)
        self._i.append(start)
        self._c.append(cmd)
        self._peak = max(self._peak, cmd[4])
        keep = now - self.window - 2.0 * self.lag - 1.0
        while self._first + 1 < len(self._t) and self._t[self._first + 1] < keep:
            self._first += 1
        if self._first > 256:                         # drop what is no longer read
            del self._t[: self._first], self._i[: self._first], self._c[: self._first]
            self._first = 0

    def _integral(self, t: float) -> tuple[float, float]:
        """The commands' integral from the first command to ``t`` (0 before it)."""
        k = bisect_right(self._t, t, self._first) - 1
        if k < self._first:
            return self._i[self._first] if self._t else (0.0, 0.0)
        (ix, iy), (vx, vy, w, yaw, _, unicycle) = self._i[k], self._c[k]
        dt = t - self._t[k]
        if not unicycle:
            return ix + vx * dt, iy + vy * dt
        if abs(w) < 1e-9:                             # a unicycle: along its heading, or its arc
            return ix + vx * dt * math.cos(yaw), iy + vx * dt * math.sin(yaw)
        return (ix + vx / w * (math.sin(yaw + w * dt) - math.sin(yaw)),
                iy - vx / w * (math.cos(yaw + w * dt) - math.cos(yaw)))

    def pose(self, now: float, pos) -> bool:
        now = float(now)
        p = (float(pos[0]), float(pos[1]) if len(pos) > 1 else 0.0)
        samples = self._samples
        horizon = now - self.window - self.lag
        while len(samples) > 1 and samples[1][0] < horizon:
            samples.popleft()
        ref, peak = None, max(self._peak, self._c[-1][4] if self._c else 0.0)
        for smp in samples:
            if smp[0] >= horizon:
                peak = max(peak, smp[2])
            if ref is None and smp[0] >= now - self.window:
                ref = smp
        if ref is None and samples:
            ref = samples[-1]                         # odometry came back after a gap: the pose before it
        bad = False
        if ref is not None:
            dx, dy = p[0] - ref[1][0], p[1] - ref[1][1]
            best = math.inf
            for s in self._shifts:
                (ax, ay), (bx, by) = self._integral(ref[0] - s), self._integral(now - s)
                best = min(best, _off_segment(dx, dy, bx - ax, by - ay, self.min_follow))
            self.residual = best
            self.tolerance = self.slack + self.lag / (self.LAG_STEPS - 1) * peak
            bad = best > self.tolerance
        if bad:
            self.last_bad = now
            samples.clear()
            samples.append((now, p, peak))            # the window restarts here (its fastest command kept)
            self._peak = 0.0
        elif not samples or now - samples[-1][0] >= CREEP_SAMPLE_S:
            samples.append((now, p, self._peak))
            self._peak = 0.0
        return bad

    def restart(self, now: float, pos) -> None:
        """The window starts anew at this pose (a relocation judged elsewhere), its fastest command kept."""
        peak = max([self._peak, *(smp[2] for smp in self._samples)])
        self._samples.clear()
        self._samples.append((float(now), (float(pos[0]), float(pos[1]) if len(pos) > 1 else 0.0), peak))
        self._peak = 0.0


def _off_segment(dx: float, dy: float, cx: float, cy: float, lo: float) -> float:
    """The distance of ``(dx, dy)`` from the points ``c (cx, cy)``, ``c`` in ``[lo, 1]``."""
    cc = cx * cx + cy * cy
    k = 1.0 if cc <= 1e-18 else min(max((dx * cx + dy * cy) / cc, lo), 1.0)
    return math.hypot(dx - k * cx, dy - k * cy)


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
    ``no_nearby`` | ``stale_nearby`` |
    ``pose_suspect`` | ``blocked``; ``goal``: where the controller drove (None when stopped)."""

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
        self.dynamics = dynamics_of(self.kinematics)     # what the kinematics means (consensus.control.dynamics)
        self.v_max = float(cfg.v_max if v_max is None else v_max)
        self.w_max = float(cfg.w_max if w_max is None else w_max)
        self.ctrl = self.dynamics.controller(kp=cfg.kp, v_max=self.v_max, w_max=self.w_max, deadband=cfg.deadband)
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
                         "stale_stops": 0, "estops": 0, "deadlocks": 0, "census_fallbacks": 0,
                         "pose_suspect_stops": 0, "odom_creeps": 0, "slots_blocked": 0, "blocked": 0}
        # packing
        self.agreed = False
        self.group: tuple[int, ...] | None = None   # robots sharing the target (set_target); None: the whole fleet
        self.slot: int | None = None
        self.goal: np.ndarray | None = None
        self._assign_due = False
        # deadlock: escapes from the slot at ``_escape_ref``; slots given up (``_marks``, around the meeting point
        # ``_marks_at``); holding where it is (``blocked``: no slot left, ``_hold_marks``: too many given up)
        self._blocked_since: float | None = None
        self._escape_until = -math.inf
        self._escapes = 0
        self._escape_ref: np.ndarray | None = None
        self._marks: list[np.ndarray] = []
        self._marks_at: np.ndarray | None = None
        self._hold_marks = False
        self.holding = False
        # neighbours: a position older than ``fresh_s`` is a silent body's; one left out of the newest nearby
        # message is kept, ageing, for ``keep_s`` (``check_nearby``)
        self.fresh_s = FRESH_AGE_S + float(getattr(cfg, "link_delay_s", 0.0) or 0.0)
        self.keep_s = float(getattr(cfg, "robot_timeout_s", 2.0)) + self.nearby_horizon
        self.silent_bound = float(cfg.silent_bound_m)
        # own odometry against own commands (``accept``); the simulated robot's lag and noise widen the tolerance
        self.creep = CreepWatch(
            CREEP_SLACK_M + CREEP_NOISE_SIGMAS * math.sqrt(2.0) * float(getattr(cfg, "odom_noise_m", 0.0) or 0.0),
            CREEP_LAG_S + float(getattr(cfg, "actuator_lag_s", 0.0) or 0.0), CREEP_MIN_FOLLOW)
        # a point mass's velocity command is no velocity it follows (it reaches it late, and the frictionless mass
        # coasts on a zero command): its odometry is checked for jumps and staleness only. A node whose commands do
        # not reach the robot (a dry run) turns the check off too.
        self.watch_creep = self.dynamics.watches_creep
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
        if no plausible one follows). An observed pose is also checked against the robot's own commands
        (``CreepWatch``): one that crept is counted (``odom_creeps``) and makes the pose suspect (``pose_suspect``).
        A relocation the plausibility check took (a steady stream elsewhere after the old one fell silent) restarts
        that window instead: the jump was judged there."""
        p = np.asarray(pos, dtype=float).reshape(self.dim)
        relocated = self._relocations()
        kind = self.plausible.check(self.id, now, p, stamp)
        if kind is None:
            self.observe(now, p, yaw)
            if self._relocations() != relocated:
                self.creep.restart(now, p)        # a relocation the plausibility check took: the window starts anew
            elif self.watch_creep and self.creep.pose(now, p):
                self.counters["odom_creeps"] += 1
        return kind

    def _relocations(self) -> int:
        """How often the plausibility check relocated this robot's own track (a steady stream elsewhere)."""
        got = getattr(self.plausible, "relocations", None)
        return 0 if got is None else int(got[self.id])

    def pose_suspect(self, now: float) -> bool:
        """Can the robot not trust its own pose at ``now``: its odometry is a suspect source (implausible jumps,
        ``consensus.control.plausibility``) or crept against its commands within the last ``POSE_CLEAR_S``?"""
        return self.plausible.suspect(self.id, now) or now - self.creep.last_bad < POSE_CLEAR_S

    def broadcast_pose(self, now: float) -> tuple[np.ndarray, float] | None:
        """What the robot's node broadcasts as its ``state`` at ``now``: its pose and the time it came (the relays
        age it from there), or None, when it has no pose, its odometry is stale or its pose is suspect: then it
        broadcasts nothing, and the others keep the last state it sent, ageing (a silent body's keep-out), instead of
        a position it cannot vouch for."""
        if self.pos is None or self.odom_stamp is None or is_stale(self.odom_stamp, now, self.cfg.odom_timeout_s):
            return None
        if self.pose_suspect(now):
            return None
        return self.pos.copy(), float(self.odom_stamp)

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
        there is none): a body is never forgotten because a message about it was wrong. A robot left out of the
        message is kept too, at its last plausible position, aged, until that age exceeds ``keep_s``
        (``robot_timeout_s`` + ``nearby_horizon_s``; then the relay's word governs: it keeps sending silent robots),
        so a forged empty message blinds no one. A position's age is never a reason to drop it: an old one is a
        silent body (``neighbour_margins``). Returns the checked ``Nearby`` and the number of implausible entries."""
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
        keep = good.copy()
        last, sent = self.plausible.last, self.plausible.last_t
        for k in np.flatnonzero(bad & known):             # a known body stays where it last plausibly was, ageing
            j = ids[k]
            if np.isfinite(sent[j]):
                pos[k], ages[k] = last[j], now - sent[j]
                speeds[k], keep[k] = max(self._nb_speed[j], speeds[k]), True
        missing = self._left_out(now, ids[known])
        if not len(missing):
            return (nearby, 0) if not n_bad else (Nearby(pos[keep], ages[keep], speeds[keep], ids[keep]), n_bad)
        return Nearby(np.concatenate([pos[keep], last[missing]]), np.concatenate([ages[keep], now - sent[missing]]),
                      np.concatenate([speeds[keep], self._nb_speed[missing]]),
                      np.concatenate([ids[keep], missing])), n_bad

    def _left_out(self, now: float, present: np.ndarray) -> np.ndarray:
        """The robots (ids) with a plausible position sent at most ``keep_s`` ago that ``present`` does not hold."""
        sent = self.plausible.last_t
        with np.errstate(invalid="ignore"):
            held = np.isfinite(sent) & (now - sent <= self.keep_s)
        held[self.id] = False
        held[present] = False
        return np.flatnonzero(held)

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
    def goal_for(self, nearby: Nearby | None, now: float) -> np.ndarray | None:
        """The meeting point, or once agreed the robot's slot around it (module docstring); None while the robot
        holds where it is (``blocked``)."""
        if not self.agreed or self.avoid is None:
            return self.target
        if self._assign_due or (self.goal is None and not self.holding):
            self._assign(nearby, now)
        return self.goal

    def _assign(self, nearby: Nearby | None, now: float) -> None:
        """Solve the robot's slot (module docstring, "Meeting point and goal" and "Deadlock"): the slots around the
        meeting point less those a silent body's keep-out covers or that were given up, as many more as needed."""
        self._assign_due = False
        spacing = self.avoid.d_min_m + self.gap          # d_min: the clearance (+ the unicycle's offset)
        if self._marks and np.linalg.norm(self.target - self._marks_at) > spacing:
            self._marks, self._marks_at, self._hold_marks = [], None, False      # a new place: nothing given up
        if self._hold_marks:
            self.slot, self.goal = None, None
            return
        if self.group is not None:
            members = [self.id, *[g for g in self.group if g != self.id]]
            n = len(members)
        else:
            members, n = None, max(self.n_slots, 1)
        # every robot known, itself included, in the order of their ids: robots that know the same positions
        # solve the same problem row for row, so even an exact tie is broken the same way for all of them; a silent
        # body takes no slot, and keeps its keep-out clear of slots
        source, own = self._slot_positions(nearby, now)
        ids, known = [self.id], [own]
        bodies, keep_out = _EMPTY[:, : self.dim], np.empty(0)
        if source is not None and len(source.positions):
            keep = np.asarray(source.ids) != self.id
            if members is not None:
                keep &= np.isin(source.ids, members)
            ages = np.asarray(source.ages, dtype=float)[keep]
            if source is self.census:
                ages = ages + (now - self.census_stamp)
            where = np.asarray(source.positions, dtype=float)[keep][:, : self.dim]
            silent = ages > self.fresh_s
            bodies = where[silent]
            keep_out = self.d_min_base() + neighbour_margins(ages[silent], np.asarray(source.speeds)[keep][silent],
                                                             0.0, self.body_v_max, self.fresh_s, self.silent_bound)
            ids += [int(i) for i in np.asarray(source.ids)[keep][~silent]]
            known += list(where[~silent])
        if source is not None and source is self.census and nearby is not None and len(nearby.positions):
            # the census counts the living only: the silent bodies (a dead robot's, one that never spoke) are the
            # robot's nearby set's, which keeps them
            nb_ages = np.asarray(nearby.ages, dtype=float)
            more = (nb_ages > self.fresh_s) & (np.asarray(nearby.ids) != self.id)
            if more.any():
                bodies = np.vstack([bodies, np.asarray(nearby.positions, dtype=float)[more][:, : self.dim]])
                keep_out = np.concatenate([keep_out, self.d_min_base() + neighbour_margins(
                    nb_ages[more], np.asarray(nearby.speeds, dtype=float)[more], 0.0, self.body_v_max, self.fresh_s,
                    self.silent_bound)])
        spots = self._free_slots(max(n, len(ids)), n, spacing, bodies, keep_out)
        order = np.argsort(ids, kind="stable")
        rows = assign(np.asarray(known).reshape(-1, self.dim)[order], spots)
        self.slot = int(rows[int(np.flatnonzero(order == 0)[0])])
        if self.slot < 0:                                  # no free slot left for it: it holds where it is
            self.slot, self.goal = None, None
            self._hold()
            return
        self.holding = False
        self.goal = self.geofence.clamp(spots[self.slot])[0]

    def _free_slots(self, wanted: int, n: int, spacing: float, bodies: np.ndarray, keep_out: np.ndarray) -> np.ndarray:
        """The first ``wanted`` slots around the meeting point, in the pattern's order (nearest first), that no
        silent body's keep-out covers and that were not given up (within half a spacing of a mark); the pattern is
        placed inside the filter's box by its first ``n`` slots (``_inside``) and every slot beyond them must lie in
        that box. With nothing blocked: the ``wanted`` first slots, as before. Fewer when the room runs out."""
        lo, hi = self._box()
        marks = np.asarray(self._marks, dtype=float).reshape(-1, self.dim)
        cells = 3.7 * (float(np.max(keep_out, initial=spacing)) / spacing + 1.0) ** 2 + 7.0
        most = wanted + int(math.ceil(cells)) * (len(bodies) + len(marks))
        m = wanted
        while True:
            spots = self._inside(slots(self.target, m, spacing), n)
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
            self.counters["blocked"] += 1
        self.holding = True

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
        return self.agreed and self.avoid is not None and (self._assign_due or (self.goal is None
                                                                                 and not self.holding))

    def _position_for_slots(self) -> np.ndarray:
        """Where this robot counts in the slot assignment: where the others it knows are counted, i.e. its
        near-identity point for a unicycle that knows the others' points (``nearby_points``), else its position."""
        if self.avoid is not None and self.nearby_points:
            return self.dynamics.filter_point(self.pos, self.yaw, self.avoid.offset)
        return self.pos

    def _box(self) -> tuple[np.ndarray, np.ndarray]:
        """The box the filter keeps the robot's point in (the geofence less the body)."""
        return self.avoid.box(self.geofence.lo, self.geofence.hi)

    def _inside(self, spots: np.ndarray, n: int | None = None) -> np.ndarray:
        """The slots moved as a whole (their pattern kept) so that every body in the first ``n`` (all) is inside the
        geofence: a point at a wall (a disaster cell on the grid's edge) has its slots on the inner side. A pattern
        wider than the fence is centred in it (its outer slots are then clamped by the caller)."""
        return inside(spots, *self._box(), n)

    def step(self, now: float, nearby: Nearby | None = None) -> Command:
        """One control tick (module docstring)."""
        return self.rules(now, nearby) or self.drive(now, nearby)

    def rules(self, now: float, nearby: Nearby | None) -> Command | None:
        """The safety rules of a control tick, in order (module docstring): the stop command of the first that
        holds (counted), or None when the robot may drive (``drive``)."""
        if self.estopped:
            return self._stop(now, "estopped")
        if is_stale(self.odom_stamp, now, self.cfg.odom_timeout_s):
            if self.odom_stamp is not None:
                self.counters["stale_stops"] += 1
            return self._stop(now, "stale_odom")
        if self.pose_suspect(now):
            self.counters["pose_suspect_stops"] += 1
            return self._stop(now, "pose_suspect")
        if self.target is None:
            return self._stop(now, "no_plan")
        if is_stale(self.last_round_done, now, self.cfg.target_timeout_s):
            self.counters["stale_stops"] += 1
            return self._stop(now, "no_round")
        if self.avoid is not None and nearby is None:
            return self._stop(now, "no_nearby")      # bodies: never move before knowing where the others are
        if self.nearby_stale(now):
            self.counters["stale_stops"] += 1        # the relay's reach covered only this long (consensus.ros.nearby)
            return self._stop(now, "stale_nearby")
        return None

    def nearby_stale(self, now: float) -> bool:
        """Is the newest ``nearby`` message (from a relay that sends only the robots in reach) older than
        ``nearby_horizon_s``? Never for a robot fed in its process (the fleet clock, the headless loop)."""
        return (self.avoid is not None and self.nearby_horizon > 0 and self.nearby_stamp is not None
                and now - self.nearby_stamp > self.nearby_horizon)

    def drive(self, now: float, nearby: Nearby | None) -> Command:
        """The controller towards the goal and, with bodies, the collision filter (after ``rules`` said go)."""
        goal = self.goal_for(nearby, now)
        if self.avoid is None:
            vx, vy, wz, self.last_speed = self.dynamics.drive(self.ctrl, self.pos, self.yaw, goal, self.dim)
            return self._issue(now, Command(vx=vx, vy=vy, wz=wz, goal=goal))
        if goal is None:
            return self.hold(now)
        point, u_nom, nominal = self.filter_input(now, goal)
        u = self.avoid.filter(point, nominal, self.nearby_points_of(nearby), d_min=self.d_min(nearby))
        return self.filtered(now, point, u_nom, u, goal)

    # the filtered drive in three parts, shared with the fleet core (consensus.control.fleet_core), which filters
    # every robot's command in one batched step between ``filter_input`` and ``filtered``
    def filter_input(self, now: float, goal) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the collision filter gets: the filtered point (the position; a unicycle's near-identity point, which
        goes to the goal by a P law with the point's speed limit), the nominal velocity and the nominal as filtered
        (turned by the right-hand rule during a deadlock escape)."""
        av = self.avoid
        point, u_nom = self.dynamics.nominal(self.ctrl, self.pos, self.yaw, goal, offset=av.offset,
                                             point_v_max=av.point_v_max, kp=self.cfg.kp, deadband=self.cfg.deadband)
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
        vx, vy, wz = self.dynamics.command(self.yaw, u, self.avoid.offset, self.avoid.cap, self.dim)
        return self._issue(now, Command(vx=vx, vy=vy, wz=wz, goal=goal))

    def hold(self, now: float) -> Command:
        """The command of a robot that holds where it is (``blocked``: no slot it can reach)."""
        return self._stop(now, "blocked")

    def _stop(self, now: float, reason: str) -> Command:
        self.last_speed = 0.0
        return self._issue(now, Command(reason=reason))

    def _issue(self, now: float, cmd: Command) -> Command:
        """Every command the robot gives goes through here: its world-frame velocity is what its odometry is
        checked against (``CreepWatch``)."""
        self.dynamics.record_command(self.creep, now, cmd.vx, cmd.vy, cmd.wz, self.yaw)
        return cmd

    def d_min_base(self) -> float:
        """The filter's distance to a neighbour at rest whose position is fresh (``_d_min`` adds the rest)."""
        if self.avoid.offset and not self.nearby_points:
            return self.avoid.clearance_m + self.avoid.offset
        return self.avoid.d_min_m

    @property
    def body_v_max(self) -> float:
        """The speed a silent neighbour may have moved at: the fleet's limit, or this robot's if higher."""
        return max(float(self.cfg.v_max), self.v_max)

    def d_min(self, nearby: Nearby) -> np.ndarray | float:
        """Per neighbour: the filter's d_min plus the margin of its position's age (``neighbour_margins``: the
        honest d_min of a fresh position, a silent body's growing keep-out); ``d_min_rows`` is the same for a fleet's
        robots at once."""
        base = self.d_min_base()
        if nearby is None or not len(nearby.ages):
            return base
        return base + neighbour_margins(np.asarray(nearby.ages, dtype=float), np.asarray(nearby.speeds, dtype=float),
                                        self.last_speed, self.body_v_max, self.fresh_s, self.silent_bound)

    def _watch_deadlock(self, now: float, point, u_nom, u, goal) -> None:
        """The deadlock rule (module docstring, "Deadlock"): escapes, and a slot given up after ``ESCAPES_PER_SLOT``
        of them."""
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
        elif now - self._blocked_since >= self.deadlock_s and now >= self._escape_until:
            self.counters["deadlocks"] += 1
            self._blocked_since = None
            half = 0.5 * (self.avoid.d_min_m + self.gap)
            if self._escape_ref is None or np.linalg.norm(goal - self._escape_ref) > half:
                self._escapes, self._escape_ref = 0, np.array(goal, dtype=float)      # another slot
            if self._escapes < ESCAPES_PER_SLOT:
                self._escapes += 1
                self._escape_until = now + self.deadlock_s
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
            self._marks_at = np.array(self.target, dtype=float)
        self._marks.append(np.array(goal, dtype=float))
        self.counters["slots_blocked"] += 1
        self._assign_due = True

    # ------------------------------------------------------------------ settings and status
    def set_limits(self, cfg, v_max: float | None = None, w_max: float | None = None) -> None:
        """Apply changed controller settings (kp, v_max, w_max, deadband) from the next tick on."""
        self.cfg = cfg
        self.v_max = float(cfg.v_max if v_max is None else v_max)
        self.w_max = float(cfg.w_max if w_max is None else w_max)
        self.ctrl = self.dynamics.controller(kp=cfg.kp, v_max=self.v_max, w_max=self.w_max, deadband=cfg.deadband)
        if self.avoid is not None:
            self.avoid.set_limits(self.v_max, self.w_max)

    def state(self, now: float, llm_state: str | None = None) -> str:
        """``estopped``, ``waiting`` (no pose yet), ``pose_suspect`` (stale or suspect odometry: the robot holds
        still), ``stopped`` (a stale plan or nearby message), ``blocked`` (no slot it can reach: it holds),
        ``degraded`` (the LLM retrying or down) or ``ok``."""
        if self.estopped:
            return "estopped"
        if self.pos is None:
            return "waiting"
        if is_stale(self.odom_stamp, now, self.cfg.odom_timeout_s) or self.pose_suspect(now):
            return "pose_suspect"
        if self.counters["stale_stops"] and (is_stale(self.last_round_done, now, self.cfg.target_timeout_s)
                                             or self.nearby_stale(now)):
            return "stopped"
        if self.holding and self.agreed and self.avoid is not None:
            return "blocked"
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


def d_min_rows(cores: Sequence[RobotCore], ages: np.ndarray, speeds: np.ndarray) -> np.ndarray:
    """``RobotCore.d_min`` of several robots at once: row r is ``cores[r]``'s distance to each neighbour whose
    position is ``ages[r, k]`` old and was moving at ``speeds[r, k]`` (the fleet core's batched filter)."""
    base = np.array([c.d_min_base() for c in cores])
    own = np.array([[c.last_speed, c.body_v_max, c.fresh_s, c.silent_bound] for c in cores])
    with np.errstate(invalid="ignore"):           # inf x 0 of an empty entry: never read
        return base[:, None] + neighbour_margins(ages, speeds, own[:, 0:1], own[:, 1:2], own[:, 2:3], own[:, 3:4])
