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
* ``collect(now)``: applies a finished round (meeting point clamped into the geofence, a fallback holds the last one,
  round 0's holds the robot's position, every fallback counted) and returns its record, or None;
* ``step(now, nearby)``: one control tick → a ``Command``. The safety rules (``rules``), in order: the e-stop (zero
  until released), stale odometry (``odom_timeout_s``; zero, counted as ``stale_stops``), a suspect own pose (zero,
  ``pose_suspect``, counted as ``pose_suspect_stops``), no meeting point yet (zero), no completed round for
  ``target_timeout_s`` (zero, counted as ``stale_stops``), and with bodies no ``Nearby`` yet (zero: a robot never
  moves before it knows where the others are; a relay that stops makes the positions it sent age, which widens the
  distances kept), and with bodies a ``nearby`` message older than ``nearby_horizon_s`` (zero, counted as
  ``stale_stops``: the relay of robots in separate processes sends each robot only the robots it can meet within
  that horizon); then the controller towards the robot's *goal*, the speed limit, and the collision filter with the
  others' positions (``Nearby``); a robot with no slot it can reach holds (zero, ``blocked``: "Deadlock" below);
* ``suggest(point, now)``: an operator's meeting point for the whole fleet (below);
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

**Meeting point and goal.** The robot's *meeting point* is its planner's output: the point it wants the fleet to
meet at (the consensus variable its neighbours hear; the ``target`` topic carries it). Point robots drive to it. Robots
with bodies (``avoid``, the barrier-certificate filter) cannot all stand on one point: once the robot's meeting point
agrees with every neighbour's it heard within ``packing_gap_m`` (``agreed``), its *goal* is its slot around the meeting
point (``consensus.control.packing``: a hexagonal packing of the fleet's ``num_robots`` slots, spacing clearance +
``packing_gap_m``, the slot of the squared-distance-optimal assignment of every robot it knows of: those of its
``Nearby``, or, when its node subscribed the relay's *census* (``census_expected``: a relay that sends only the robots
in reach), the census's, itself as counted in it, so that every robot solves the same problem, and solved again on
each new census that counts it, so that robots that first solved on different ones agree after the next; no census
yet, one older than two planning periods and the horizon, or one without the robot itself: its ``Nearby``, counted
as ``census_fallbacks``); before that, the meeting point itself. Scenarios that send several robots to one point (a
disaster cell) name the group with ``set_meeting_point(point, group)``, and the robot packs with that group at once. A
silent body (below) takes no slot, and no slot within its keep-out (d_min + its margin) is used, nor one given up
(below): the robot takes the nearest free ones of the pattern, as many more as needed (the pattern still placed
inside the fence by its first ``num_robots`` slots, the extra ones only where they lie in the filter's box).

**Operator's meeting point.** ``suggest(point, now)`` (the robots' nodes call it for each message of
``names.MEETING_POINT_SUGGESTION``, ``consensus mcp``'s approved ``suggest_meeting_point``) returns None when it
applied the point, else the one reason it refused it: the robot has no planner (a scenario's protocol sets its meeting
points), the point has not the run's ``dim`` coordinates (the nodes pass x alone in a 1-D run: its line is the x axis,
as for odometry), is not finite, or lies outside the geofence (``workspace``: refused, never clamped, so the operator
learns "(x, y) is outside the fence [xmin, xmax] x [ymin, ymax]"). Applied, the point is the robot's meeting point
(``set_meeting_point``) and agreed (every robot got the same point: with bodies it packs around it at once), no
planning round starts before ``now + suggestion_hold_s`` and the round in flight, if any, is dropped when it completes
(``PlannerSchedule.hold``). After the hold the planner plans as before, from the operator's point: a planner on the
neighbours' meeting points (``meeting_points``) then averages points that all are it. Counted as ``suggestions``,
``suggestions_refused`` and ``rounds_dropped``.

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
``odom_creeps``, ``slots_blocked``, ``blocked``, ``news_waits``, ``suggestions``, ``suggestions_refused``,
``rounds_dropped``), ``round``, ``state`` (``estopped``, ``waiting``, ``pose_suspect``,
``stopped``, ``blocked``, ``degraded`` or ``ok``), ``meeting_point``, ``goal``, ``agreed``, ``slot``, the filter's
``collision`` record and ``implausible`` (per kind: what the robot refused of its odometry and of its neighbours)
with ``suspects`` (the nearby robots suspect now).

**Parts.** The core is the composition of four parts with typed boundaries (as nav2's regulated pure pursuit is
of its controller, collision checker and parameter handler), sharing one ``RobotState``
(``consensus.control.robot_state``: the pose, the meeting point, the last speed, the counters, the settings):
``schedule`` (``consensus.control.schedule.PlannerSchedule``: when to plan, the pool, the rounds and their
agreement), ``gate`` (``consensus.control.safety_gate.SafetyGate``: the input checks, the e-stop, the stop rules,
the own-pose watch of ``consensus.control.creep``), ``goals`` (``consensus.control.goal.GoalKeeper``: the goal, the
packing slots, the census, the deadlock watch) and ``filter`` (``consensus.control.filter_adapter.FilterAdapter``:
the collision filter's input and output, d_min). The core's attributes of old (``pos``, ``meeting_point``, ``goal``,
``census_expected``, ...) are its parts', read and written through it.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from consensus.control.creep import CREEP_WINDOW_S, CreepWatch
from consensus.control.dynamics import dynamics_of
from consensus.control.filter_adapter import FRESH_AGE_S, FilterAdapter, neighbour_margins
from consensus.control.goal import ARRIVED_M, ESCAPES_PER_SLOT, MAX_BLOCKED_SLOTS, GoalKeeper
from consensus.control.planner import Planner, PlanRequest
from consensus.control.robot_state import Command, Heard, Nearby, RobotState
from consensus.control.safety import Geofence
from consensus.control.safety_gate import POSE_CLEAR_S, SafetyGate
from consensus.control.schedule import PlannerSchedule

# what callers import from here: the core, its inputs and output, and the rules' constants (each part's own)
__all__ = ["ARRIVED_M", "CREEP_WINDOW_S", "ESCAPES_PER_SLOT", "FRESH_AGE_S", "MAX_BLOCKED_SLOTS", "POSE_CLEAR_S",
           "Command", "CreepWatch", "Heard", "Nearby", "RobotCore", "neighbour_margins"]


class _Of:
    """An attribute of the core that is its part ``part``'s (read and written there)."""

    def __init__(self, part: str) -> None:
        self.part = part

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, core, owner=None):
        return self if core is None else getattr(getattr(core, self.part), self.name)

    def __set__(self, core, value) -> None:
        setattr(getattr(core, self.part), self.name, value)


class RobotCore:
    """Planner scheduling, safety rules, controller, packing and collision filter of robot ``robot_id``: the
    composition of its parts (module docstring, "Parts")."""

    # the shared state's
    cfg = _Of("shared")
    id = _Of("shared")
    dim = _Of("shared")
    geofence = _Of("shared")
    v_max = _Of("shared")
    w_max = _Of("shared")
    pos = _Of("shared")
    yaw = _Of("shared")
    odom_stamp = _Of("shared")
    meeting_point = _Of("shared")
    last_round_done = _Of("shared")
    last_speed = _Of("shared")
    counters = _Of("shared")
    # the planner schedule's
    planner = _Of("schedule")
    pool = _Of("schedule")
    meeting_points = _Of("schedule")
    round = _Of("schedule")
    pending = _Of("schedule")
    planner_error = _Of("schedule")
    # the safety gate's
    estopped = _Of("gate")
    plausible = _Of("gate")
    creep = _Of("gate")
    watch_creep = _Of("gate")
    nearby_horizon = _Of("gate")
    nearby_stamp = _Of("gate")
    keep_s = _Of("gate")
    # the goal's
    agreed = _Of("goals")
    group = _Of("goals")
    slot = _Of("goals")
    goal = _Of("goals")
    holding = _Of("goals")
    n_slots = _Of("goals")
    gap = _Of("goals")
    deadlock_s = _Of("goals")
    census = _Of("goals")
    census_stamp = _Of("goals")
    census_max_age = _Of("goals")
    census_expected = _Of("goals")
    # the filter adapter's
    nearby_points = _Of("filter")
    fresh_s = _Of("filter")
    silent_bound = _Of("filter")
    body_v_max = _Of("filter")

    def __init__(self, cfg, robot_id: int, planner: Planner | None = None, *, pool: ThreadPoolExecutor | None = None,
                 kinematics: str | None = None, v_max: float | None = None, w_max: float | None = None,
                 avoid=None, meeting_points: bool = False, nearby_points: bool = False) -> None:
        geofence = Geofence.from_bounds(cfg.workspace)
        self.kinematics = kinematics or cfg.kinematics
        self.dynamics = dynamics = dynamics_of(self.kinematics)   # what the kinematics means (control.dynamics)
        self.shared = RobotState(cfg, int(robot_id), int(cfg.dim), geofence,
                                 float(cfg.v_max if v_max is None else v_max),
                                 float(cfg.w_max if w_max is None else w_max))
        self.ctrl = dynamics.controller(kp=cfg.kp, v_max=self.v_max, w_max=self.w_max, deadband=cfg.deadband)
        self.avoid = avoid
        if avoid is not None:
            import scipy.optimize  # noqa: F401 - the slot assignment's solver, loaded now rather than in a tick
        # a relay that sends only the robots in reach (one process per robot) covers this long
        horizon = float(getattr(cfg, "nearby_horizon_s", 0.0))
        n_slots = int(getattr(cfg, "num_robots", 1))
        self.schedule = PlannerSchedule(self.shared, planner, pool, meeting_points=meeting_points)
        # neighbours: a position older than ``fresh_s`` is a silent body's
        self.filter = FilterAdapter(self.shared, avoid, dynamics, nearby_points=nearby_points,
                                    fresh_s=FRESH_AGE_S + float(getattr(cfg, "link_delay_s", 0.0) or 0.0),
                                    silent_bound=float(cfg.silent_bound_m))
        # a census older than two planning periods and the horizon is not taken (the relay stopped sending it)
        self.goals = GoalKeeper(self.shared, avoid, self.filter, geofence, n_slots=n_slots,
                                gap=float(getattr(cfg, "packing_gap_m", 0.1)),
                                deadlock_s=float(getattr(cfg, "deadlock_s", 3.0)),
                                census_max_age=2.0 * float(getattr(cfg, "planner_period_s", 2.0)) + horizon)
        # one left out of the newest nearby message is kept, ageing, for ``keep_s`` (``check_nearby``)
        self.gate = SafetyGate(self.shared, dynamics, avoid, n_robots=n_slots, nearby_horizon=horizon,
                               keep_s=float(getattr(cfg, "robot_timeout_s", 2.0)) + horizon)

    # ------------------------------------------------------------------ inputs
    def observe(self, now: float, pos, yaw: float = 0.0) -> None:
        """An accepted pose at time ``now`` (odometry that passed the caller's checks)."""
        self.gate.observe(now, pos, yaw)

    def accept(self, now: float, pos, yaw: float = 0.0, stamp: float | None = None) -> str | None:
        """A pose heard from the wire (odometry received at ``now``, stamped ``stamp``): observed when plausible
        (returns None), else counted and refused (returns its kind: the robot keeps its last good pose and goes stale
        if no plausible one follows). An observed pose is also checked against the robot's own commands
        (``CreepWatch``): one that crept is counted (``odom_creeps``) and makes the pose suspect (``pose_suspect``).
        A relocation the plausibility check took (a steady stream elsewhere after the old one fell silent) restarts
        that window instead: the jump was judged there."""
        return self.gate.accept(now, pos, yaw, stamp)

    def pose_suspect(self, now: float) -> bool:
        """Can the robot not trust its own pose at ``now``: its odometry is a suspect source (implausible jumps,
        ``consensus.control.plausibility``) or crept against its commands within the last ``POSE_CLEAR_S``?"""
        return self.gate.pose_suspect(now)

    def broadcast_pose(self, now: float) -> tuple[np.ndarray, float] | None:
        """What the robot's node broadcasts as its ``state`` at ``now``: its pose and the time it came (the relays
        age it from there), or None, when it has no pose, its odometry is stale or its pose is suspect: then it
        broadcasts nothing, and the others keep the last state it sent, ageing (a silent body's keep-out), instead of
        a position it cannot vouch for."""
        return self.gate.broadcast_pose(now)

    def check_heard(self, now: float, heard: Heard, stamp: float | None = None) -> tuple[Heard | None, int]:
        """What the planning relay delivered, checked: a delivery stamped in the future is refused whole (the
        previous one stays: returns None), a neighbour whose position or meeting point lies outside the workspace plus
        the margin is dropped. Returns the checked ``Heard`` (None: refused) and the number of entries dropped."""
        return self.gate.check_heard(now, heard, stamp)

    def check_nearby(self, now: float, nearby: Nearby, stamp: float | None = None) -> tuple[Nearby | None, int]:
        """What the collision relay delivered, checked per robot (by id): a message stamped in the future is refused
        (None: keep the previous one); a robot outside the workspace plus the margin, or whose position jumped beyond
        its speed limit, is counted and replaced by its last plausible position, aged by the time since (dropped if
        there is none): a body is never forgotten because a message about it was wrong. A robot left out of the
        message is kept too, at its last plausible position, aged, until that age exceeds ``keep_s``
        (``robot_timeout_s`` + ``nearby_horizon_s``; then the relay's word governs: it keeps sending silent robots),
        so a forged empty message blinds no one. A position's age is never a reason to drop it: an old one is a
        silent body (``neighbour_margins``). Returns the checked ``Nearby`` and the number of implausible entries."""
        return self.gate.check_nearby(now, nearby, stamp)

    def check_census(self, now: float, census: Nearby, stamp: float | None = None) -> int | None:
        """The relay's census (every robot's position, ``consensus.ros.nearby``), checked: refused whole when stamped
        in the future (returns None; the previous one stays), a robot outside the workspace plus the margin left out
        (counted as ``outside``; returns how many). It only places the packing slots (``goal_for``): the filter avoids
        what ``nearby`` holds."""
        got = self.gate.check_census(now, census, stamp)
        if got is None:
            return None
        checked, sent, bad = got
        self.goals.take_census(checked, sent)
        return bad

    def alive(self, now: float) -> None:
        """The robot's planner (or a scenario's clock that sets its meeting points) is alive: resets
        ``target_timeout_s``."""
        self.shared.last_round_done = float(now)

    def set_estop(self, engage: bool) -> bool:
        """Engage or release the e-stop; True when this changed it."""
        return self.gate.set_estop(engage)

    def set_meeting_point(self, point, now: float | None = None, *, group=None) -> tuple[np.ndarray, bool]:
        """A meeting point set by a scenario's protocol (no planner): clamped into the geofence; with ``group`` (the
        ids of the robots sent to the same point, this one included) the robot packs with them there. Returns the
        meeting point and whether it was clamped."""
        point, clamped = self.geofence.clamp(np.asarray(point, dtype=float).reshape(self.dim))
        self.counters["clamped"] += int(clamped)
        self.meeting_point = point
        self.goals.set_group(group)
        if now is not None:
            self.alive(now)
        return point, clamped

    def suggest(self, point, now: float) -> str | None:
        """An operator's meeting point for the fleet (module docstring, "Operator's meeting point"): applied (returns
        None) or refused (returns the reason, one sentence for the operator), counted either way."""
        reason = self._suggestion_problem(point)
        if reason is not None:
            self.counters["suggestions_refused"] += 1
            return reason
        p = np.asarray(point, dtype=float).reshape(self.dim)
        self.set_meeting_point(p, now)
        self.goals.set_agreed(True)       # the whole fleet got the same point: with bodies it packs around it at once
        self.schedule.hold(float(now) + self.suggestion_hold_s)
        self.counters["suggestions"] += 1
        return None

    def _suggestion_problem(self, point) -> str | None:
        """Why the operator's ``point`` cannot be the robot's meeting point, or None."""
        if self.planner is None:
            return "this robot has no planner: its meeting points are its scenario's"
        try:
            p = np.asarray(point, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            return f"not a point: {point!r}"
        if p.size != self.dim:
            return f"a {self.dim}-D run takes {self.dim} coordinate{'s' if self.dim > 1 else ''}, got {p.size}"
        if not np.all(np.isfinite(p)):
            return f"not a finite point: {p.tolist()}"
        if not self.geofence.contains(p):
            fence = " x ".join(f"[{lo:g}, {hi:g}]" for lo, hi in zip(self.geofence.lo, self.geofence.hi))
            where = ", ".join(f"{v:g}" for v in p)
            return f"({where}) is outside the fence {fence}"
        return None

    @property
    def suggestion_hold_s(self) -> float:
        """How long an operator's meeting point holds before the planner plans again (``suggestion_hold_s``)."""
        return float(getattr(self.cfg, "suggestion_hold_s", 10.0))

    @property
    def planning_held_until(self) -> float:
        """No planning round starts before this time (an operator's meeting point; -inf: none held)."""
        return self.schedule.hold_until

    # ------------------------------------------------------------------ planning (the slow loop)
    def own_meeting_point(self) -> np.ndarray | None:
        """The robot's meeting point, or its position before its first round (a request's ``own_meeting_point``)."""
        return self.schedule.own_meeting_point()

    def plan(self, now: float, heard: Heard) -> PlanRequest | None:
        """A planning slot (module docstring); returns the request of the round it started, or None."""
        return self.schedule.plan(now, heard)

    def wait(self, timeout: float | None = None) -> None:
        """Block until the running round (if any) is done."""
        self.schedule.wait(timeout)

    def collect(self, now: float) -> dict | None:
        """Apply a finished round; its record (``planner/reasoning``'s schema), or None when none finished. Agreed:
        every meeting point heard this round is within ``packing_gap_m`` of the robot's own."""
        done = self.schedule.collect(now)
        if done is None:
            return None
        self.goals.set_agreed(self.avoid is not None and self.schedule.agrees(self.meeting_point, self.gap))
        return done.record(self.id, now, self.meeting_point, self.agreed)

    # ------------------------------------------------------------------ control (the fast loop)
    def goal_for(self, nearby: Nearby | None, now: float) -> np.ndarray | None:
        """The meeting point, or once agreed the robot's slot around it (module docstring); None while the robot
        holds where it is (``blocked``)."""
        return self.goals.goal_for(nearby, now)

    def goal_needs_nearby(self) -> bool:
        """Does ``goal_for`` read the nearby robots this tick (it assigns the packing slots)?"""
        return self.goals.needs_nearby()

    def step(self, now: float, nearby: Nearby | None = None) -> Command:
        """One control tick (module docstring)."""
        return self.rules(now, nearby) or self.drive(now, nearby)

    def rules(self, now: float, nearby: Nearby | None) -> Command | None:
        """The safety rules of a control tick, in order (module docstring): the stop command of the first that
        holds (counted), or None when the robot may drive (``drive``)."""
        return self.gate.rules(now, nearby)

    def nearby_stale(self, now: float) -> bool:
        """Is the newest ``nearby`` message (from a relay that sends only the robots in reach) older than
        ``nearby_horizon_s``? Never for a robot fed in its process (the fleet clock, the headless loop)."""
        return self.gate.nearby_stale(now)

    def drive(self, now: float, nearby: Nearby | None) -> Command:
        """The controller towards the goal and, with bodies, the collision filter (after ``rules`` said go)."""
        goal = self.goal_for(nearby, now)
        if self.avoid is None:
            vx, vy, wz, self.last_speed = self.dynamics.drive(self.ctrl, self.pos, self.yaw, goal, self.dim)
            return self.gate.issue(now, Command(vx=vx, vy=vy, wz=wz, goal=goal))
        if goal is None:
            return self.hold(now)
        point, u_nom, nominal = self.filter_input(now, goal)
        return self.filtered(now, point, u_nom, self.filter.filter(point, nominal, nearby), goal)

    # the filtered drive in three parts, shared with the fleet core (consensus.control.fleet_core), which filters
    # every robot's command in one batched step between ``filter_input`` and ``filtered``
    def filter_input(self, now: float, goal) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the collision filter gets: the filtered point (the position; a unicycle's near-identity point, which
        goes to the goal by a P law with the point's speed limit), the nominal velocity and the nominal as filtered
        (turned by the right-hand rule during a deadlock escape)."""
        point, u_nom = self.filter.nominal(self.ctrl, goal)
        return point, u_nom, self.goals.turned(now, u_nom)

    def nearby_points_of(self, nearby: Nearby | None) -> np.ndarray:
        """The positions the filter keeps clear of, ``(k, d)``."""
        return self.filter.points_of(nearby)

    def filtered(self, now: float, point, u_nom, u, goal) -> Command:
        """The command from the filter's output ``u`` (the deadlock rule watches it)."""
        self.goals.watch(now, point, u_nom, u, goal)
        vx, vy, wz = self.filter.command(u)
        return self.gate.issue(now, Command(vx=vx, vy=vy, wz=wz, goal=goal))

    def hold(self, now: float) -> Command:
        """The command of a robot that holds where it is (``blocked``: no slot it can reach)."""
        return self.gate.stop(now, "blocked")

    def d_min_base(self) -> float:
        """The filter's distance to a neighbour at rest whose position is fresh (``d_min`` adds the rest)."""
        return self.filter.d_min_base()

    def d_min(self, nearby: Nearby) -> np.ndarray | float:
        """Per neighbour: the filter's d_min plus the margin of its position's age (``neighbour_margins``: the
        honest d_min of a fresh position, a silent body's growing keep-out); ``d_min_rows`` is the same for a fleet's
        robots at once."""
        return self.filter.d_min(nearby)

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
        return self.gate.state_name(now, llm_state, self.goals.blocked())

    def status(self, now: float, llm_state: str | None = None) -> dict:
        def pt(p):
            return None if p is None else [float(v) for v in p]
        out = {"robot": self.id, "round": self.round, "state": self.state(now, llm_state), **self.counters,
               "estopped": self.estopped, "meeting_point": pt(self.meeting_point), "goal": pt(self.goal),
               "agreed": self.agreed, "slot": self.slot, "implausible": dict(self.plausible.counts),
               "suspects": [j for j in self.plausible.suspects(now) if j != self.id]}
        if self.avoid is not None:
            out["collision"] = self.avoid.info()
        return out
