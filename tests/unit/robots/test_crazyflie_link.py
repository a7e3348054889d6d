"""The Crazyflie link's core (consensus.robots.crazyflie), without ROS: phases, the leashed setpoint integrator on the
measured tick intervals, the timeouts that land a drone, and what it refuses to hear."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from consensus.errors import ConfigError
from consensus.robots.crazyflie import (
    FIELDS,
    FLY,
    LAND,
    LANDED,
    NOTIFY_REMAIN_VALID_MS,
    TAKEOFF,
    TAKEOFF_GRACE_S,
    WAIT,
    Land,
    LinkCore,
    LinkParams,
    NotifySetpointsStop,
    PublishPose,
    Setpoint,
    StatusChange,
    Takeoff,
)

H = 0.5
EXPECTED_KINDS = {"takeoff", "setpoint", "notify_setpoints_stop", "land", "publish_pose", "status"}


def kinds(actions) -> list[str]:
    return [a.kind for a in actions]


def of(actions, cls):
    return [a for a in actions if isinstance(a, cls)]


class Drone:
    """A drone as crazyswarm2's ``none`` backend flies it: its pose is the last setpoint, exactly."""

    def __init__(self, core: LinkCore, x=0.5, y=-0.5, z=0.0, yaw=0.0) -> None:
        self.core, self.x, self.y, self.z, self.yaw = core, x, y, z, yaw
        self.log: list = []

    def see(self, t: float) -> None:
        assert self.core.pose(t, self.x, self.y, self.z, self.yaw, stamp=t)

    def step(self, t: float, follow: bool = True) -> list:
        self.see(t)
        out = self.core.tick(t)
        self.log.extend(out)
        for a in out:
            if isinstance(a, Setpoint) and follow:
                self.x, self.y, self.z = a.pos
        return out


def flying(params: LinkParams | None = None, yaw: float = 0.0) -> tuple[LinkCore, Drone, float]:
    """A core in FLY at its returned time: servers ready, took off (the test plays the take-off), first setpoint
    sent."""
    core = LinkCore(params or LinkParams())
    drone = Drone(core, yaw=yaw)
    core.servers_ready(0.0)
    out = drone.step(0.1)
    assert kinds(out) == ["takeoff", "status"] and core.phase == TAKEOFF
    assert out[0] == Takeoff(H, 2.0)
    drone.z = H                                     # the server's take-off reached the height
    t = 0.1 + core.p.takeoff_s
    out = drone.step(t)
    assert core.phase == FLY and kinds(out) == ["status", "setpoint", "publish_pose"]
    assert out[1] == Setpoint((0.5, -0.5, H), (0.0, 0.0, 0.0))        # hover where it is
    return core, drone, t


# ------------------------------------------------------------------------------------------------ parameters
def test_params_have_the_documented_defaults_and_every_field_a_meaning_unit_and_range():
    p = LinkParams()
    assert (p.flight_height_m, p.takeoff_s, p.land_s, p.leash_m, p.cmd_timeout_s, p.lost_after_s, p.pose_timeout_s,
            p.rate_hz, p.landed_z_m, p.first_command_s) == (0.5, 2.0, 2.0, 0.2, 0.5, 2.0, 0.5, 10.0, 0.03, 30.0)
    for name, (doc, unit, (lo, hi)) in FIELDS.items():
        assert doc and unit and lo < getattr(p, name) <= hi, name
    assert set(FIELDS) == set(LinkParams.__dataclass_fields__)


@pytest.mark.parametrize("bad, words", [
    ({"flight_height_m": 0.0}, "flight_height_m must be in [0.1, 5] m"),
    ({"leash_m": math.nan}, "leash_m must be in"),
    ({"rate_hz": math.inf}, "rate_hz must be in"),
    ({"land_s": "2"}, "land_s must be a number"),
    ({"landed_z_m": 0.6}, "landed_z_m (0.6 m) must be below flight_height_m"),
    ({"cmd_timeout_s": 3.0}, "cmd_timeout_s (3 s) must not exceed lost_after_s"),
])
def test_a_bad_parameter_is_one_clear_error(bad, words):
    with pytest.raises(ConfigError) as err:
        LinkParams(**bad)
    assert words in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------------------------------------ take-off
def test_it_waits_for_the_servers_and_a_pose_then_takes_off_and_publishes_no_pose_before_it_is_done():
    core = LinkCore()
    drone = Drone(core)
    assert drone.step(0.1) == [] and core.phase == WAIT             # no server yet
    core.servers_ready(0.2)
    assert kinds(core.tick(0.9)) == [] and core.phase == WAIT       # the last pose is 0.8 s old: not seen
    out = drone.step(1.0)
    assert out[0] == Takeoff(H, 2.0) and core.phase == TAKEOFF
    # climbing: no pose for the robot, no setpoint; the height is reached early, but the duration is not over
    for i, z in enumerate((0.1, 0.3, 0.5, 0.5)):
        drone.z = z
        out = drone.step(1.5 + 0.4 * i)
        assert out == [] and core.phase == TAKEOFF
    drone.z = 0.47                                  # duration over and within 0.05 of h: done
    out = drone.step(3.0)
    assert core.phase == FLY and kinds(out) == ["status", "setpoint", "publish_pose"]
    assert out[2] == PublishPose(0.5, -0.5, 0.47, 0.0, 3.0) and core.takeoff_z == 0.47
    assert all(not isinstance(a, PublishPose) for a in drone.log[:-1])


def test_a_take_off_that_never_reaches_the_height_lands():
    core = LinkCore()
    drone = Drone(core)
    core.servers_ready(0.0)
    drone.step(0.0)
    drone.z = 0.3
    assert drone.step(2.0 + TAKEOFF_GRACE_S) == [] and core.phase == TAKEOFF
    out = drone.step(2.1 + TAKEOFF_GRACE_S)
    assert kinds(out) == ["notify_setpoints_stop", "land", "status"] and "did not reach 0.5 m" in core.reason
    assert not of(drone.log, PublishPose)           # it never flew: the robot never got a pose


# ------------------------------------------------------------------------------------------------ flight
def test_the_setpoint_integrates_the_command_over_the_measured_uneven_intervals_exactly():
    core, drone, t0 = flying()
    assert core.command(t0, 0.3, -0.2, 0.0)
    t = t0
    for dt in (0.1, 0.2, 0.1):                      # the sim clock's uneven 10 Hz: one 0.2 s gap
        t += dt
        core.command(t - 0.01, 0.3, -0.2, 0.0)      # the robot keeps commanding
        out = drone.step(t)
        (sp,) = of(out, Setpoint)
        assert sp.vel == (0.3, -0.2, 0.0)
    total = t - t0                                  # 0.4 s, not 3 ticks x 0.1
    assert drone.x - 0.5 == pytest.approx(0.3 * total, abs=1e-12)
    assert drone.y + 0.5 == pytest.approx(-0.2 * total, abs=1e-12)
    assert drone.z == H and core.counters.leash_clamps == 0


def test_a_body_frame_command_turns_into_the_world_frame_by_the_measured_yaw():
    core, drone, t0 = flying(yaw=math.pi / 2)       # nose along +y
    core.command(t0, 0.2, 0.1, 0.7)                 # forward 0.2, left 0.1; the turn rate is not used
    (sp,) = of(drone.step(t0 + 0.1), Setpoint)
    assert sp.vel[0] == pytest.approx(-0.1) and sp.vel[1] == pytest.approx(0.2) and sp.vel[2] == 0.0
    assert sp.pos[0] == pytest.approx(0.5 - 0.01) and sp.pos[1] == pytest.approx(-0.5 + 0.02)


def test_the_leash_keeps_the_setpoint_near_a_drone_that_lags():
    core, drone, t = flying()
    for _ in range(20):                             # 1 m/s for 2 s, but the drone does not move
        core.command(t, 1.0, 0.0, 0.0)
        t += 0.1
        (sp,) = of(drone.step(t, follow=False), Setpoint)
        assert math.hypot(sp.pos[0] - drone.x, sp.pos[1] - drone.y) <= core.p.leash_m + 1e-12
    assert sp.pos[0] == pytest.approx(0.5 + 0.2) and core.counters.leash_clamps > 0


def test_a_stale_command_hovers_and_every_tick_streams_a_setpoint():
    core, drone, t = flying()
    core.command(t, 0.3, 0.0, 0.0)
    x0 = drone.x
    for i in range(1, 15):                          # 1.4 s: the command is 0.5 s old at t + 0.5
        sp = of(drone.step(t + 0.1 * i), Setpoint)
        assert len(sp) == 1                         # streamed every tick, hover included
        if 0.1 * i > 0.5 + 1e-9:
            assert sp[0].vel == (0.0, 0.0, 0.0)
    # holds: the first setpoint of the flight (no command yet) and the 9 after the command went stale
    assert drone.x - x0 == pytest.approx(0.3 * 0.5, abs=1e-9) and core.counters.holds == 1 + 9
    assert core.phase == FLY                        # 1.4 s < lost_after_s


# ------------------------------------------------------------------------------------------------ landing
def landing(out) -> None:
    assert kinds(out)[:3] == ["notify_setpoints_stop", "land", "status"]
    assert out[0] == NotifySetpointsStop(NOTIFY_REMAIN_VALID_MS) and NOTIFY_REMAIN_VALID_MS == 100
    assert out[1] == Land(0.0, 2.0)
    assert not of(out, Setpoint)


def test_the_estop_lands_at_once_and_its_release_never_takes_off_again():
    core, drone, t = flying()
    core.command(t, 0.3, 0.0, 0.0)
    core.estop(True, t + 0.05)
    out = drone.step(t + 0.1)
    landing(out)
    assert core.phase == LAND and core.reason == "e-stop"
    drone.z = 0.3
    out = drone.step(t + 1.0)
    assert kinds(out) == ["publish_pose"] and core.phase == LAND   # no setpoint while landing; still a body
    drone.z = 0.02
    out = drone.step(t + 2.0)
    assert kinds(out) == ["status"] and core.phase == LANDED and core.touchdown_z == 0.02
    core.estop(False, t + 3.0)
    core.servers_ready(t + 3.0)
    for i in range(30):
        assert drone.step(t + 3.1 + 0.1 * i) == [] and core.phase == LANDED     # nothing, a take-off least of all
    assert len(of(drone.log, Takeoff)) == 1


def test_a_silent_robot_hovers_then_its_drone_lands():
    core, drone, t0 = flying()
    core.command(t0 + 0.1, 0.2, 0.0, 0.0)
    t = t0 + 0.1
    while core.phase == FLY:
        t = round(t + 0.1, 10)
        out = drone.step(t)
    landing(out)
    assert t == pytest.approx(t0 + 0.1 + 2.1) and "the robot is lost" in core.reason


def test_a_robot_that_never_commands_lands_its_drone_first_command_s_after_the_take_off():
    """Its robot may come up seconds after the drone flies (the robots start after the links; 5 s on a loaded host,
    longer than lost_after_s): the drone hovers and waits first_command_s for it, then lands (the robot never
    came); once it has commanded, lost_after_s of silence lands it."""
    core, drone, t0 = flying(LinkParams(first_command_s=6.0))
    t = t0
    while core.phase == FLY:
        t = round(t + 0.1, 10)
        out = drone.step(t)
        assert t < t0 + 2.1 or core.phase != LAND or "never came" in core.reason
    landing(out)
    assert t == pytest.approx(t0 + 6.1) and "the robot never came" in core.reason
    core, drone, t0 = flying()
    t = round(t0 + 5.0, 10)                           # the robot comes 5 s after the take-off: still flying
    while t < t0 + 5.0 + 1e-9:
        drone.step(t)
        t = round(t + 0.1, 10)
    assert core.phase == FLY
    assert core.command(t, 0.1, 0.0, 0.0)
    drone.step(t)
    assert core.phase == FLY


def test_a_lost_pose_lands_and_it_is_landed_after_land_s_plus_one_second_without_one():
    core, drone, t = flying()
    assert of(core.tick(t + 0.3), Setpoint)         # a pose 0.3 s old is still fresh
    out = core.tick(t + 0.6)
    landing(out)
    assert "no pose for 0.5 s" in core.reason
    assert core.tick(t + 0.6 + 2.9) == [] and core.phase == LAND
    out = core.tick(t + 0.6 + 3.0)
    assert kinds(out) == ["status"] and core.phase == LANDED and core.touchdown_z is None


def test_the_end_of_the_run_lands_a_flying_drone_and_ends_a_waiting_one_at_once():
    core, drone, t = flying()
    core.shutdown(t + 0.05)
    landing(drone.step(t + 0.1))
    assert core.reason == "the run ended"
    waiting = LinkCore()
    waiting.servers_ready(0.0)
    waiting.shutdown(0.0)
    assert waiting.pose(0.0, 0.0, 0.0, 0.0, 0.0)
    out = waiting.tick(0.1)
    assert out == [StatusChange(LANDED, "the run ended before take-off")]
    estopped = LinkCore()
    estopped.estop(True, 0.0)
    estopped.servers_ready(0.0)
    estopped.pose(0.0, 0.0, 0.0, 0.0, 0.0)
    assert kinds(estopped.tick(0.1)) == ["status"] and estopped.phase == LANDED     # never takes off


def test_a_waiting_drone_says_what_keeps_it_on_the_ground():
    ready = LinkCore(LinkParams(pose_timeout_s=0.5))
    ready.servers_ready(0.1)
    ready.tick(0.2)
    assert ready.reason == "waiting for a pose (none came)" and ready.phase == WAIT
    core = LinkCore(LinkParams(pose_timeout_s=0.5))
    assert core.tick(0.0) == [] and core.reason == "waiting for the server's takeoff service and a pose (none came)"
    core.pose(0.3, 0.0, 0.0, 0.0, 0.0)
    core.tick(2.0)
    assert core.reason == "waiting for the server's takeoff service and a fresh pose (the last came 1.7 s ago)"
    core.shutdown(2.1)
    assert core.tick(2.2) == [StatusChange(
        LANDED, "the run ended before take-off (waiting for the server's takeoff service and a fresh pose "
                "(the last came 1.9 s ago))")]


# ------------------------------------------------------------------------------------------------ what it hears
def test_commands_outside_flight_and_non_finite_inputs_are_counted_and_dropped():
    core = LinkCore()
    assert not core.command(0.0, 0.1, 0.0, 0.0)                 # WAIT: dropped
    assert not core.pose(0.0, math.nan, 0.0, 0.0, 0.0)
    assert not core.pose(0.0, 0.0, 0.0, math.inf, 0.0)
    assert not core.pose(0.0, 0.0, 0.0, 0.0, 0.0, stamp=math.nan)
    assert not core.pose(0.0, 2e6, 0.0, 0.0, 0.0)               # absurd: as bad as NaN
    assert core.tick(math.nan) == []
    core.estop("yes", 0.0)                                      # not a bool
    st = core.status()
    assert st["commands_dropped"] == 1 and st["commands"] == 0 and st["poses"] == 0
    assert st["bad_inputs"] == {"pose": 4, "time": 1, "estop": 1}
    core, drone, t = flying()
    assert not core.command(t, math.nan, 0.0, 0.0) and not core.command(t, 0.0, 0.0, -math.inf)
    (sp,) = of(drone.step(t + 0.1), Setpoint)
    assert sp.vel == (0.0, 0.0, 0.0)                            # the bad commands moved nothing
    assert core.status()["bad_inputs"] == {"command": 2}
    core.estop(True, t + 0.1)
    drone.step(t + 0.2)
    assert not core.command(t + 0.25, 0.1, 0.0, 0.0)            # LAND: dropped
    assert core.status()["commands_dropped"] == 1


def test_wall_clock_times_are_times_not_absurd_values():
    """Without sim time the node clock is the wall clock (~1.8e9 s): only positions and velocities have a bound."""
    wall = 1.8e9
    core2 = LinkCore()
    core2.servers_ready(wall)
    assert core2.pose(wall, 0.0, 0.0, 0.0, 0.0, stamp=wall)
    assert kinds(core2.tick(wall + 0.1)) == ["takeoff", "status"]
    core2.shutdown(wall + 0.2)
    assert kinds(core2.tick(wall + 0.3)) == ["notify_setpoints_stop", "land", "status"]
    assert core2.status()["bad_inputs"] == {}


def test_go_to_is_never_among_the_actions_nor_in_the_node():
    """crazyswarm2's simulator dies on a go_to after any cmd_full_state: the link has no such action, and its node
    has no client for it."""
    seen = set()
    for stop in ("estop", "silence", "pose", "shutdown"):
        core, drone, t = flying()
        seen.update(kinds(drone.log))
        for i in range(1, 80):
            now = t + 0.1 * i
            if i < 20 or stop != "silence":
                core.command(now, 0.3, 0.1, 0.2)
            if i == 20 and stop == "estop":
                core.estop(True, now)
            if i == 20 and stop == "shutdown":
                core.shutdown(now)
            if stop == "pose" and i >= 20:
                seen.update(kinds(core.tick(now)))
            else:
                seen.update(kinds(drone.step(now)))
        assert core.phase == LANDED, stop
    assert seen == EXPECTED_KINDS
    node = Path(__file__).resolve().parents[3] / "src" / "consensus" / "ros" / "crazyflie_link.py"
    assert "GoTo" not in node.read_text() and "go_to(" not in node.read_text()


def test_a_pose_goes_to_the_robot_as_it_comes_in_flight_and_never_before_take_off():
    core = LinkCore()
    core.servers_ready(0.0)
    core.pose(0.05, 0.5, -0.5, 0.0, 0.0)
    assert core.fresh_pose() == []                     # WAIT: an idle drone's pose is not the robot's
    core, drone, t = flying()
    core.pose(t + 0.03, 0.52, -0.5, H, 0.0)
    out = core.fresh_pose()
    assert kinds(out) == ["publish_pose"] and out[0].x == 0.52
    assert core.fresh_pose() == []                     # once per pose
    assert "publish_pose" not in kinds(core.tick(t + 0.1))      # the tick does not send it again
