"""The Crazyflie link's decisions, without ROS: one drone between our robot node and crazyswarm2's server.

Our robot node publishes a body-frame velocity (Twist ``cmd_vel``) and reads its pose (PoseStamped ``link/pose``).
crazyswarm2 (its simulator ``crazyflie_sim`` and its hardware server alike) takes full-state setpoints
(``cmd_full_state``) and the high-level ``takeoff``/``land``/``notify_setpoints_stop`` services, and publishes each
drone's pose on ``/tf`` (``world`` -> ``<cf>``). ``LinkCore`` turns the one into the other; the node
(``consensus.ros.crazyflie_link``) only decodes what it hears, calls the core and carries out the actions that
``tick`` returns. Why a link, and not crazyswarm2's ``vel_mux``: since 1.0.4 ``vel_mux`` flies ``crazyflies[0]`` only,
and the simulator implements neither ``cmd_hover`` nor ``/<cf>/pose`` (docs/real-robots.md).

Phases (``PHASES``), one way only::

    WAIT --servers ready, pose fresh--> TAKEOFF --at h after takeoff_s--> FLY --trigger--> LAND --down--> LANDED

* **WAIT**: until the server's ``takeoff`` service is there (``servers_ready``) and a pose of the drone came within
  ``pose_timeout_s`` (a drone nobody sees does not take off). Then ``Takeoff(flight_height_m, takeoff_s)``.
* **TAKEOFF**: done when the node clock is at least ``takeoff_s`` past the call and the measured z is within
  ``TAKEOFF_TOLERANCE_M`` of the flight height. No pose is published before that (crazyswarm2's simulator reports an
  idle drone at (0, 0, 0)): the robots wait, stale, and the fleet moves only once its drone flies. A take-off that
  has not reached the height ``TAKEOFF_GRACE_S`` after its duration lands.
* **FLY**: every tick streams a setpoint, hover included (the firmware levels off 500 ms and cuts the motors 2 s
  after its last setpoint): ``v_world = R(yaw_measured) · v_body``, ``sp += v_world · dt`` with ``dt`` the
  *measured* interval since the previous tick (the simulator's clock advances unevenly: a 10 Hz timer on its sim
  time sees 0.2 s gaps), the horizontal setpoint kept within ``leash_m`` of the measured position (no wind-up when
  the drone lags), z at the flight height, yaw 0 (the command's turn rate is not used: the drone keeps yaw 0 and
  the robot turns its world velocity into the body frame with the yaw it measures). A command older than
  ``cmd_timeout_s`` holds (zero velocity). A new pose is published to the robot as it comes (``fresh_pose``; else
  by the next tick), in FLY and in LAND (a landing drone is still a body the others avoid); never before take-off is
  done, nor once LANDED.
* **LAND** when, in TAKEOFF or FLY: the e-stop is true; no command came for ``lost_after_s`` since the last one (the
  robot's process died: a lost drone is commanded to land), or none at all for ``first_command_s`` since FLY began
  (its robot never came: the robots start after the links, and on a loaded host one took 5 s, longer than
  ``lost_after_s``; a drone landed so before its robot spoke in the first benchmark run); no pose for ``pose_timeout_s``
  (motion-capture loss, a dead server); the end of the run (``shutdown``). Actions: ``NotifySetpointsStop(100 ms)``
  (hardware ignores high-level commands while setpoints stream), then ``Land(0, land_s)``; streaming stops.
* **LANDED** when the measured z is below ``landed_z_m`` or ``land_s`` + ``LANDED_AFTER_S`` passed. It stays: an
  e-stop released afterwards never takes off again (restart the link for that). The e-stop or the end of the run in
  WAIT goes to LANDED at once (the drone never flew).

Never ``go_to``: crazyswarm2's simulator raises in the service callback once any ``cmd_full_state`` came, and its
whole server (every drone) dies with it.

Untrusted input: a pose or command that is not finite or beyond ``MAX_ABS_VALUE``, a time that is not finite, an
e-stop that is not a bool are counted and dropped, as is a command outside FLY (``status()`` holds the counters).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Union

from consensus.errors import ConfigError

WAIT, TAKEOFF, FLY, LAND, LANDED = "wait", "takeoff", "fly", "land", "landed"
PHASES = (WAIT, TAKEOFF, FLY, LAND, LANDED)

TAKEOFF_TOLERANCE_M = 0.05   # take-off is done within this of the flight height [m]
TAKEOFF_GRACE_S = 2.0        # a take-off not at the height this long after its duration lands [s]
LANDED_AFTER_S = 1.0         # LANDED at the latest this long after the landing's duration [s]
NOTIFY_REMAIN_VALID_MS = 100  # notify_setpoints_stop: the last setpoint stays valid this long [ms]
MAX_ABS_VALUE = 1e6          # a heard value beyond this is as bad as a NaN (consensus.ros.inputs.MAX_ABS_VALUE)


@dataclass(frozen=True)
class LinkParams:
    """What a link needs to know; ``FIELDS`` holds each field's meaning, unit and inclusive range. Built valid or
    not at all: the first bad value is one ``ConfigError``."""

    flight_height_m: float = 0.5
    takeoff_s: float = 2.0
    land_s: float = 2.0
    leash_m: float = 0.2
    cmd_timeout_s: float = 0.5
    lost_after_s: float = 2.0
    first_command_s: float = 30.0
    pose_timeout_s: float = 0.5
    rate_hz: float = 10.0
    landed_z_m: float = 0.03     # crazyswarm2 lands to z 0; the run's end waits for the touch-down

    def __post_init__(self) -> None:
        for f in fields(self):
            doc, unit, (lo, hi) = FIELDS[f.name]
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"crazyflie link: {f.name} must be a number (got {value!r})")
            if not lo <= value <= hi:                   # also NaN and +-inf
                raise ConfigError(f"crazyflie link: {f.name} must be in [{lo:g}, {hi:g}] {unit} (got {value})")
            object.__setattr__(self, f.name, float(value))
        if self.landed_z_m >= self.flight_height_m:
            raise ConfigError(f"crazyflie link: landed_z_m ({self.landed_z_m:g} m) must be below flight_height_m "
                              f"({self.flight_height_m:g} m)")
        if self.cmd_timeout_s > self.lost_after_s:
            raise ConfigError(f"crazyflie link: cmd_timeout_s ({self.cmd_timeout_s:g} s) must not exceed "
                              f"lost_after_s ({self.lost_after_s:g} s): a silent robot's drone hovers, then lands")


#: each field of ``LinkParams`` -> (meaning, unit, inclusive range): the node's parameter descriptors and the checks
FIELDS: dict[str, tuple[str, str, tuple[float, float]]] = {
    "flight_height_m": ("the height the drone takes off to and flies at (world frame z)", "m", (0.1, 5.0)),
    "takeoff_s": ("the take-off's duration (crazyswarm2 takeoff service)", "s", (0.5, 30.0)),
    "land_s": ("the landing's duration (crazyswarm2 land service)", "s", (0.5, 30.0)),
    "leash_m": ("the horizontal setpoint stays this close to the measured position (no wind-up)", "m",
                (0.01, 2.0)),
    "cmd_timeout_s": ("a velocity command older than this holds the drone in place (zero velocity)", "s",
                      (0.05, 10.0)),
    "lost_after_s": ("no velocity command for this long in flight: the robot is lost and the drone lands", "s",
                     (0.1, 60.0)),
    "first_command_s": ("a flying drone whose robot never commanded it lands after this long (the robots start after "
                        "the links and may take seconds to come up)", "s", (1.0, 600.0)),
    "pose_timeout_s": ("no pose of the drone on /tf for this long (motion capture lost, server gone): it lands",
                       "s", (0.05, 10.0)),
    "rate_hz": ("setpoints per second (node clock); the firmware levels off 500 ms after its last one", "Hz",
                (5.0, 100.0)),
    "landed_z_m": ("below this height (measured z) a landing drone counts as landed", "m", (0.0, 1.0)),
}


# ------------------------------------------------------------------------------------------------- the actions
@dataclass(frozen=True)
class Takeoff:
    """Call the drone's ``takeoff`` service."""
    height_m: float
    duration_s: float
    kind = "takeoff"


@dataclass(frozen=True)
class Setpoint:
    """Publish one ``cmd_full_state``: position ``pos`` and velocity ``vel`` in the world frame, yaw 0."""
    pos: tuple[float, float, float]
    vel: tuple[float, float, float]
    kind = "setpoint"


@dataclass(frozen=True)
class NotifySetpointsStop:
    """Call ``notify_setpoints_stop`` (before ``Land``: the firmware takes high-level commands again)."""
    remain_valid_ms: int = NOTIFY_REMAIN_VALID_MS
    kind = "notify_setpoints_stop"


@dataclass(frozen=True)
class Land:
    """Call the drone's ``land`` service (after ``NotifySetpointsStop`` has been answered)."""
    height_m: float
    duration_s: float
    kind = "land"


@dataclass(frozen=True)
class PublishPose:
    """Publish the drone's pose to the robot: measured ``x, y, z, yaw`` and the pose's own ``stamp`` [s] (None:
    the time it came)."""
    x: float
    y: float
    z: float
    yaw: float
    stamp: float | None
    kind = "publish_pose"


@dataclass(frozen=True)
class StatusChange:
    """The phase changed (to ``phase``, because ``reason``)."""
    phase: str
    reason: str
    kind = "status"


Action = Union[Takeoff, Setpoint, NotifySetpointsStop, Land, PublishPose, StatusChange]


def _finite(*values: float) -> bool:
    """Every value a finite number within ``MAX_ABS_VALUE`` (a position, a velocity, a yaw)."""
    try:
        return all(math.isfinite(v) and abs(v) <= MAX_ABS_VALUE for v in values)
    except TypeError:
        return False


def _time(*values: float | None) -> bool:
    """Every value a finite time [s] (wall-clock times are ~1.8e9 s: no bound), None allowed."""
    try:
        return all(v is None or math.isfinite(v) for v in values)
    except TypeError:
        return False


@dataclass
class _Pose:
    t: float
    x: float
    y: float
    z: float
    yaw: float
    stamp: float | None


@dataclass
class Counters:
    ticks: int = 0
    setpoints: int = 0            # cmd_full_state published
    holds: int = 0                # setpoints with zero velocity because the command was older than cmd_timeout_s
    leash_clamps: int = 0         # setpoints pulled back to leash_m of the measured position
    commands: int = 0             # velocity commands used (in FLY)
    commands_dropped: int = 0     # velocity commands that came outside FLY (robots command zero while they wait)
    poses: int = 0                # poses accepted
    poses_published: int = 0
    bad_inputs: dict = field(default_factory=dict)   # input -> non-finite values dropped

    def bad(self, what: str) -> None:
        self.bad_inputs[what] = self.bad_inputs.get(what, 0) + 1


class LinkCore:
    """One drone's link (module docstring). Times are the node clock's [s] (sim time where ``use_sim_time``)."""

    def __init__(self, params: LinkParams | None = None) -> None:
        self.p = params or LinkParams()
        self.phase = WAIT
        self.reason = "waiting for the server's takeoff service and a pose"
        self.counters = Counters()
        self._pose: _Pose | None = None
        self._pose_new = False
        self._cmd: tuple[float, float, float, float] | None = None     # (t, vx, vy, wz), body frame
        self._estop = False
        self._shutdown = False
        self._ready = False
        self._last_tick: float | None = None
        self._since: dict[str, float] = {}          # phase -> when it began
        self.sp: list[float] | None = None          # the setpoint (x, y, z), world frame, in FLY
        self.takeoff_z: float | None = None         # the measured z when take-off was done (None: it never was)
        self.touchdown_z: float | None = None       # the measured z that made it LANDED (None: by time)

    # ------------------------------------------------------------------------------------------------ inputs
    def pose(self, t: float, x: float, y: float, z: float, yaw: float, stamp: float | None = None) -> bool:
        """The drone's measured pose, received at ``t`` (node clock); ``stamp``: its own stamp, passed on to the
        robot. False (counted) when not finite."""
        if t is None or not (_time(t, stamp) and _finite(x, y, z, yaw)):
            self.counters.bad("pose")
            return False
        self._pose = _Pose(float(t), float(x), float(y), float(z), float(yaw), stamp)
        self._pose_new = True
        self.counters.poses += 1
        return True

    def fresh_pose(self) -> list[Action]:
        """The pose just received (``pose``), to publish at once in FLY and LAND: the robot then gets its drone's pose
        one ``/tf`` message old, not up to one tick older (the node calls it after each pose)."""
        out: list[Action] = []
        if self.phase in (FLY, LAND):
            self._publish_pose(out)
        return out

    def command(self, t: float, vx: float, vy: float, wz: float) -> bool:
        """A body-frame velocity command from the robot, received at ``t``. Used only in FLY: False (counted as
        dropped) in any other phase, or (counted as bad) when not finite."""
        if t is None or not (_time(t) and _finite(vx, vy, wz)):
            self.counters.bad("command")
            return False
        if self.phase != FLY:
            self.counters.commands_dropped += 1
            return False
        self._cmd = (float(t), float(vx), float(vy), float(wz))
        self.counters.commands += 1
        return True

    def estop(self, flag: bool, t: float) -> None:
        """The fleet's e-stop: true lands a flying drone (and keeps a waiting one on the ground) for good."""
        if not isinstance(flag, bool):
            self.counters.bad("estop")
            return
        self._estop = flag

    def shutdown(self, t: float) -> None:
        """The end of the run: land (the next ``tick`` says how)."""
        self._shutdown = True

    def servers_ready(self, t: float) -> None:
        """The server's services are there (the node saw ``takeoff``)."""
        self._ready = True

    # ------------------------------------------------------------------------------------------------ the tick
    def tick(self, t: float) -> list[Action]:
        """The actions of the tick at ``t`` (node clock), in the order they are to be carried out."""
        if t is None or not _time(t):
            self.counters.bad("time")
            return []
        self.counters.ticks += 1
        dt = 0.0 if self._last_tick is None else max(0.0, t - self._last_tick)    # measured; a clock reset: 0
        self._last_tick = t
        out: list[Action] = []
        if self.phase == WAIT:
            missing = self._waiting_for(t)
            if self._shutdown or self._estop:
                why = ("the run ended before take-off" if self._shutdown
                       else "e-stop before take-off: it does not take off")
                self._enter(LANDED, t, f"{why} ({missing})" if missing else why, out)
            elif not missing:
                self._enter(TAKEOFF, t, f"taking off to {self.p.flight_height_m:g} m", out)
                out.insert(0, Takeoff(self.p.flight_height_m, self.p.takeoff_s))
            else:
                self.reason = missing           # the status says what holds the drone on the ground
            return out
        if self.phase in (TAKEOFF, FLY):
            why = self._land_reason(t)
            if why:
                self._land(t, why, out)
                self._publish_pose(out)         # only for a drone that flew (no pose before take-off is done)
                return out
        if self.phase == TAKEOFF:
            started = self._since[TAKEOFF]
            z = self._pose.z if self._pose is not None else math.nan
            if t >= started + self.p.takeoff_s and abs(z - self.p.flight_height_m) < TAKEOFF_TOLERANCE_M:
                self.takeoff_z = z
                self.sp = [self._pose.x, self._pose.y, self.p.flight_height_m]
                self._enter(FLY, t, f"flying at {self.p.flight_height_m:g} m", out)
                dt = 0.0                      # the setpoint starts here: nothing to integrate yet
            elif t > started + self.p.takeoff_s + TAKEOFF_GRACE_S:
                self._land(t, f"take-off did not reach {self.p.flight_height_m:g} m (z {z:.3f} m)", out)
                return out
            else:
                return out
        if self.phase == FLY:
            out.append(self._setpoint(t, dt))
            self._publish_pose(out)
            return out
        if self.phase == LAND:
            if self._pose_fresh(t) and self._pose.z < self.p.landed_z_m:
                self.touchdown_z = self._pose.z
                self._enter(LANDED, t, f"landed (z {self._pose.z:.3f} m): {self.reason}", out)
            elif t >= self._since[LAND] + self.p.land_s + LANDED_AFTER_S:
                self._enter(LANDED, t, f"landing time over: {self.reason}", out)
            else:
                self._publish_pose(out)         # a landing drone is still a body the others avoid
        return out

    # ------------------------------------------------------------------------------------------------ helpers
    def _enter(self, phase: str, t: float, reason: str, out: list[Action]) -> None:
        self.phase, self.reason = phase, reason
        self._since[phase] = t
        out.append(StatusChange(phase, reason))

    def _waiting_for(self, t: float) -> str:
        """What keeps a waiting drone on the ground ("" when nothing does)."""
        missing = [] if self._ready else ["the server's takeoff service"]
        if self._pose is None:
            missing.append("a pose (none came)")
        elif not self._pose_fresh(t):
            missing.append(f"a fresh pose (the last came {t - self._pose.t:.1f} s ago)")
        return "waiting for " + " and ".join(missing) if missing else ""

    def _pose_fresh(self, t: float) -> bool:
        return self._pose is not None and t - self._pose.t <= self.p.pose_timeout_s

    def _land_reason(self, t: float) -> str:
        if self._estop:
            return "e-stop"
        if self._shutdown:
            return "the run ended"
        if not self._pose_fresh(t):
            age = "never" if self._pose is None else f"{t - self._pose.t:.2f} s ago"
            return f"no pose for {self.p.pose_timeout_s:g} s (last {age}): motion capture or server lost"
        if self.phase == FLY:
            if self._cmd is None and t - self._since[FLY] > self.p.first_command_s:
                return f"no command for {self.p.first_command_s:g} s since take-off: the robot never came"
            if self._cmd is not None and t - self._cmd[0] > self.p.lost_after_s:
                return f"no command for {self.p.lost_after_s:g} s: the robot is lost"
        return ""

    def _land(self, t: float, why: str, out: list[Action]) -> None:
        out.append(NotifySetpointsStop(NOTIFY_REMAIN_VALID_MS))
        out.append(Land(0.0, self.p.land_s))
        self._enter(LAND, t, why, out)
        self.sp = None

    def _setpoint(self, t: float, dt: float) -> Setpoint:
        pose, cmd = self._pose, self._cmd
        if cmd is not None and t - cmd[0] <= self.p.cmd_timeout_s:
            vx, vy = cmd[1], cmd[2]
        else:
            vx = vy = 0.0
            self.counters.holds += 1
        c, s = math.cos(pose.yaw), math.sin(pose.yaw)
        vwx, vwy = c * vx - s * vy, s * vx + c * vy
        sp = self.sp
        sp[0] += vwx * dt
        sp[1] += vwy * dt
        sp[2] = self.p.flight_height_m
        ex, ey = sp[0] - pose.x, sp[1] - pose.y
        off = math.hypot(ex, ey)
        if off > self.p.leash_m:
            k = self.p.leash_m / off
            sp[0], sp[1] = pose.x + ex * k, pose.y + ey * k
            self.counters.leash_clamps += 1
        self.counters.setpoints += 1
        return Setpoint((sp[0], sp[1], sp[2]), (vwx, vwy, 0.0))

    def _publish_pose(self, out: list[Action]) -> None:
        if self._pose_new and self._pose is not None and self.takeoff_z is not None:
            self._pose_new = False
            p = self._pose
            out.append(PublishPose(p.x, p.y, p.z, p.yaw, p.stamp))
            self.counters.poses_published += 1

    # ------------------------------------------------------------------------------------------------ status
    def status(self) -> dict:
        """The link's status record: phase, why, the take-off and landing heights, the counters."""
        c = self.counters
        return {"phase": self.phase, "reason": self.reason, "estop": self._estop,
                "takeoff_z_m": self.takeoff_z, "touchdown_z_m": self.touchdown_z,
                "ticks": c.ticks, "setpoints": c.setpoints, "holds": c.holds, "leash_clamps": c.leash_clamps,
                "commands": c.commands, "commands_dropped": c.commands_dropped, "poses": c.poses,
                "poses_published": c.poses_published, "bad_inputs": dict(c.bad_inputs)}
