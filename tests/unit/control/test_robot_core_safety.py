"""The robot core's safety rules for what it hears and what it cannot trust (issue 41; consensus.control.robot_core):
a robot whose own pose is suspect holds still (forged odometry beside the real one or alone, creeping against its
commands), a silent neighbour stays a body whose keep-out grows to a bound (in the filter and in the packing slots),
a robot left out of one ``nearby`` message is kept until its own age says otherwise, and a deadlock's escape is
bounded (a blocked slot is given up; with none left the robot holds, counted)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from consensus.control.avoidance import avoidance_from_config
from consensus.control.fleet_core import FleetCore
from consensus.control.kinematics import step_unicycle
from consensus.control.packing import slots
from consensus.control.robot_core import (
    CREEP_WINDOW_S, ESCAPES_PER_SLOT, FRESH_AGE_S, MAX_BLOCKED_SLOTS, POSE_CLEAR_S, Nearby, RobotCore,
)
from consensus.control.safety import Geofence
from support.kernel_config import robot_config

NOBODY = Nearby.of(np.empty((0, 2)))
BOUND = robot_config().silent_bound_m          # a silent body's keep-out beyond d_min


def config(**overrides):
    overrides.setdefault("num_robots", 2)
    overrides.setdefault("collision_avoidance", "cbf")
    overrides.setdefault("target_timeout_s", 600.0)
    return robot_config(**overrides)


def speed(cmd) -> float:
    return math.hypot(cmd.vx, cmd.vy)


# ---- a robot that cannot trust its own pose holds still -------------------------------------------------------------

class Body:
    """A robot's body answering its commands like a real one: a first-order lag of ``lag_s`` on the set point, an
    acceleration limit ``accel`` [m/s² and rad/s², None: none], single integrator or unicycle."""

    def __init__(self, kinematics: str, start=(0.0, 0.0), lag_s: float = 0.0, accel: float | None = None) -> None:
        self.kinematics, self.lag_s, self.accel = kinematics, lag_s, accel
        self.pose = np.array([*start, 0.0])
        self.set_point = np.zeros(2)
        self.vel = np.zeros(2)

    def step(self, cmd, dt: float) -> None:
        want = np.array([cmd.vx, cmd.wz if self.kinematics == "unicycle" else cmd.vy])
        self.set_point += (1.0 if self.lag_s <= 0 else 1.0 - math.exp(-dt / self.lag_s)) * (want - self.set_point)
        dv = self.set_point - self.vel
        if self.accel is not None:
            dv = np.clip(dv, -self.accel * dt, self.accel * dt)
        self.vel += dv
        if self.kinematics == "unicycle":
            self.pose = step_unicycle(self.pose[None], self.vel[:1], self.vel[1:], dt)[0]
        else:
            self.pose[:2] += self.vel * dt


def drive(core, body, seconds, *, real_hz=10.0, forged=None, forged_hz=50.0, noise=0.0, delay_s=0.0, seed=0,
          start=0.0):
    """Run ``core`` on ``body`` for ``seconds`` from ``start``: the body moves every 2 ms, the control ticks at the
    config's rate, the real odometry (the body's pose ``delay_s`` late, with ``noise``) comes at ``real_hz`` (0:
    none) and ``forged(t, pose)`` at ``forged_hz`` (None: nothing). Returns every tick's (time, command, true pose)."""
    dt = 0.002
    rng = np.random.default_rng(seed)
    every = {name: max(1, round(1.0 / (hz * dt))) for name, hz in
             (("control", 1.0 / core.cfg.control_period_s), ("real", real_hz or 1.0), ("forged", forged_hz))}
    late = round(delay_s / dt)
    history, ticks, cmd = [], [], None
    for k in range(1, int(round(seconds / dt)) + 1):
        t = start + k * dt
        history.append(body.pose.copy())
        if real_hz and k % every["real"] == 0:
            seen = history[max(0, len(history) - 1 - late)]
            core.accept(t, seen[:2] + rng.normal(0.0, noise, 2), seen[2])
        if forged is not None and k % every["forged"] == 0:
            p = forged(t, body.pose)
            if p is not None:
                core.accept(t, p, body.pose[2])
        if k % every["control"] == 0:
            cmd = core.step(t, NOBODY)
            ticks.append((t, cmd, body.pose.copy()))
        if cmd is not None:
            body.step(cmd, dt)
    return ticks


def started(cfg, kinematics="single_integrator", start=(0.0, 0.0), target=(8.0, 0.0), **body_kw):
    core = RobotCore(cfg, 0, kinematics=kinematics)
    body = Body(kinematics, start, **body_kw)
    core.accept(0.0, body.pose[:2], body.pose[2])
    core.set_meeting_point(target, 0.0)
    return core, body


@pytest.mark.parametrize("kinematics", ["single_integrator", "unicycle"])
@pytest.mark.parametrize("real_hz", [10.0, 20.0])
def test_a_forged_odom_stream_beside_the_real_one_makes_the_robot_hold_within_a_second(kinematics, real_hz):
    """The issue's probe: while the robot drives, a stranger publishes its true position plus an offset growing
    2 m/s along +x at 50 Hz, interleaved with the real odometry. Within 1 s the robot holds still (zero commands,
    ``pose_suspect``: counted, its state, nothing broadcast) for as long as the stream goes on, and its body stays
    inside the geofence. (The current code drives on: the body left the fence by 2.94 m in the issue's ROS run.)"""
    cfg = config(kinematics=kinematics)
    core, body = started(cfg, kinematics)
    t0, t1 = 2.0, 8.0

    def forged(t, pose):
        return pose[:2] + [2.0 * (t - t0), 0.0] if t0 <= t < t1 else None

    ticks = drive(core, body, 10.0, real_hz=real_hz, forged=forged)
    held = [(t, c) for t, c, _ in ticks if c.reason == "pose_suspect"]
    assert held, "the robot never held"
    first = held[0][0]
    assert first <= t0 + 1.0
    during = [(t, c, p) for t, c, p in ticks if first <= t < t1]
    assert all(speed(c) == 0.0 and c.wz == 0.0 for _, c, _ in during)         # it holds while the stream goes on
    assert all(c.reason in ("pose_suspect", "stale_odom") for _, c, _ in during)
    moved = np.linalg.norm(during[-1][2][:2] - during[0][2][:2])
    assert moved < 0.2                                      # the body does not creep away (a unicycle coasts a little)
    assert core.counters["pose_suspect_stops"] > 0
    fence = Geofence.from_bounds(cfg.workspace)
    assert all(np.all(p[:2] >= fence.lo) and np.all(p[:2] <= fence.hi) for _, _, p in ticks)


@pytest.mark.parametrize("creep", [1.0, 2.0, 5.0])
def test_a_forged_only_odom_stream_creeping_while_the_robot_stands_is_caught_and_the_robot_recovers(creep):
    """The robot stands at its target (commanded still); its only odometry stream creeps away at ``creep`` m/s, 90 Hz
    (the real odometry suppressed). Within 1 s the pose is suspect: the robot holds (``pose_suspect``) and broadcasts
    nothing. Once the stream is honest again the robot trusts it after ``POSE_CLEAR_S`` (the plausibility check
    willing: a short creep stays within its jump allowance)."""
    cfg = config()
    core, body = started(cfg, target=(0.0, 0.0))
    drive(core, body, 2.0, real_hz=20.0)
    assert core.state(2.0) == "ok" and core.broadcast_pose(2.0) is not None
    seconds = 0.45 / creep                                  # it creeps 0.45 m, then the stream is the true pose again
    start = 2.0

    def forged(t, pose):
        return pose[:2] + [creep * min(t - start, seconds), 0.0] if t - start < seconds else pose[:2]

    ticks = drive(core, body, 1.0, real_hz=0, forged=forged, forged_hz=90.0, start=start)
    caught = [t for t, c, _ in ticks if c.reason == "pose_suspect"]
    assert caught and caught[0] <= start + 1.0
    assert core.state(start + 1.0) == "pose_suspect" and core.broadcast_pose(start + 1.0) is None
    assert core.counters["odom_creeps"] >= 1
    assert np.linalg.norm(body.pose[:2]) < 0.1                             # the body held
    ticks = drive(core, body, POSE_CLEAR_S + 1.5, real_hz=20.0, start=start + 1.0)
    assert ticks[-1][1].reason == "ok" and core.state(ticks[-1][0]) == "ok"
    assert core.broadcast_pose(ticks[-1][0]) is not None


def test_forged_odometry_that_stays_put_while_the_body_drives_off_is_caught():
    """The issue's steered robot: the stream says the robot stands at its target while its body drives away
    (the stream is the true position less the body's motion since the forging began): the commands that keep the
    believed pose there never move it, which no robot does for a whole window: pose_suspect, the body held."""
    cfg = config()
    core, body = started(cfg, target=(3.0, 0.0))
    drive(core, body, 6.0, real_hz=20.0)
    assert np.linalg.norm(body.pose[:2] - [3.0, 0.0]) < 0.05
    anchor = body.pose[:2].copy()

    def forged(t, pose):                              # the pose it had when it arrived, drifting 0.3 m/s towards -x
        return anchor + [-0.3 * (t - 6.0), 0.0]

    ticks = drive(core, body, CREEP_WINDOW_S + 2.0, real_hz=0, forged=forged, forged_hz=20.0, start=6.0)
    assert any(c.reason == "pose_suspect" for _, c, _ in ticks)
    assert np.linalg.norm(body.pose[:2] - anchor) < 1.5


@pytest.mark.parametrize("kinematics", ["single_integrator", "unicycle"])
def test_a_robot_that_relocates_while_driving_holds_then_drives_on_within_5_s(kinematics):
    """A real localisation fault: the robot's odometry jumps 1.5 m while it drives (and stays there). It holds while
    it cannot vouch for its pose (the jump refused, then judged against its commands: it moved where they could not
    take it), broadcasting nothing; within 5 s it trusts the new pose and drives on, broadcasting again."""
    cfg = config(kinematics=kinematics)
    core, body = started(cfg, kinematics, target=(8.0, 3.0))
    drive(core, body, 4.0, real_hz=20.0)
    ticks = drive(core, body, 8.0, real_hz=0, forged=lambda t, pose: pose[:2] + [0.0, 1.5], forged_hz=20.0, start=4.0)
    held = [t for t, c, _ in ticks if c.reason != "ok"]
    assert held and held[0] <= 4.5 and held[-1] <= 9.0
    assert all(c.reason == "ok" for t, c, _ in ticks if t > 9.0)
    assert core.broadcast_pose(12.0) is not None and core.state(12.0) == "ok"


@pytest.mark.parametrize("kinematics", ["single_integrator", "unicycle"])
@pytest.mark.parametrize("target", [(8.0, 0.0), (-8.0, 3.0), (0.5, 6.0)])
def test_honest_odometry_of_a_lagging_noisy_robot_is_never_suspect(kinematics, target):
    """A guard for the rule above: a body with a 0.2 s response lag, a 2 m/s² acceleration limit, odometry noise
    (declared: ``odom_noise_m``) arriving 50 ms late at 20 Hz, driven across the workspace, is never suspect."""
    cfg = config(kinematics=kinematics, odom_noise_m=0.03)
    core, body = started(cfg, kinematics, target=target, lag_s=0.2, accel=2.0)
    ticks = drive(core, body, 20.0, real_hz=20.0, noise=0.03, delay_s=0.05)
    assert {c.reason for _, c, _ in ticks} == {"ok"}
    assert core.counters["odom_creeps"] == 0 and np.linalg.norm(body.pose[:2] - target) < 0.2


def test_broadcast_pose_is_the_pose_and_its_time_or_nothing():
    cfg = config()
    core = RobotCore(cfg, 0)
    assert core.broadcast_pose(0.0) is None                              # no pose yet
    core.accept(1.0, [1.0, 2.0])
    pos, stamp = core.broadcast_pose(1.1)
    assert pos.tolist() == [1.0, 2.0] and stamp == 1.0
    assert core.broadcast_pose(1.0 + cfg.odom_timeout_s + 0.01) is None   # stale: not stamped anew
    core.accept(2.0, [1.0, 2.0])
    core.accept(2.1, [1.0, 2.55])                   # plausible (within v_max x 0.1 s + 0.5 m), but commanded still
    assert core.counters["odom_creeps"] == 1 and core.broadcast_pose(2.1) is None
    assert core.state(2.1) == "pose_suspect" and core.step(2.1).reason == "pose_suspect"


def test_a_point_mass_is_not_checked_against_its_commands():
    """Paper 1's point mass reads its velocity command as its P law's input and coasts on a zero one: only the
    plausibility check (jumps, staleness) judges its odometry."""
    core = RobotCore(config(kinematics="point_mass_pid"), 0)
    core.accept(0.0, [0.0, 0.0])
    core.accept(0.1, [0.3, 0.0])
    core.accept(0.4, [1.0, 0.0])
    assert core.counters["odom_creeps"] == 0 and core.step(0.4).reason != "pose_suspect"


# ---- a silent robot is still a body ---------------------------------------------------------------------------------

def test_a_silent_neighbours_margin_grows_at_v_max_with_its_age_up_to_the_bound():
    """A neighbour measured at rest: fresh, its margin is its age × the closing speed (0 here: the robot stands);
    once older than ``FRESH_AGE_S`` it may have moved at v_max since, up to ``BOUND`` (then a fixed
    keep-out). The current code gives a still neighbour no margin at any age."""
    cfg = config(v_max=0.5, silent_bound_m=1.0)
    core = RobotCore(cfg, 0, avoid=avoidance_from_config(cfg, ros=True))
    base = core.d_min_base()
    ages = np.array([0.5, FRESH_AGE_S + 0.2, 1.8, 10.0, 1e4])
    got = core.d_min(Nearby.of(np.zeros((5, 2)), ages=ages, speeds=np.zeros(5), ids=[1, 2, 3, 4, 5]))
    assert got == pytest.approx(base + np.array([0.0, 0.6, 0.9, 1.0, 1.0]))


def test_a_robot_driving_at_a_dead_robots_body_stops_at_its_keep_out():
    """The relay keeps sending a dead robot's last position with its growing age: the core never drops it, and the
    robot keeps d_min + ``BOUND`` from it (the current code: d_min, bodies touching after a real robot's
    last motion)."""
    cfg = config()
    avoid = avoidance_from_config(cfg, ros=True)
    core = RobotCore(cfg, 0, avoid=avoid)
    core.check_nearby(0.0, Nearby.of([[4.0, 0.0]], ages=[0.1], ids=[1]), stamp=0.0)
    pos = np.array([0.0, 0.0])
    core.set_meeting_point([9.0, 0.0], 0.0)
    dt = cfg.control_period_s
    for k in range(1, 300):
        t = k * dt
        core.observe(t, pos)
        got, _ = core.check_nearby(t, Nearby.of([[4.0, 0.0]], ages=[t + 0.1], ids=[1]), stamp=t)
        assert got.ids.tolist() == [1]                                   # never dropped for its age
        cmd = core.step(t, got)
        pos = pos + dt * np.array([cmd.vx, cmd.vy])
    assert 4.0 - pos[0] == pytest.approx(avoid.d_min_m + BOUND, abs=0.02)


def test_the_fleet_core_keeps_silent_bodies_the_same_way():
    """The batched margins equal the robot core's, fresh and silent neighbours mixed (guard: FleetCore == RobotCore)."""
    cfg = config(num_robots=6)
    rng = np.random.default_rng(3)
    pos = rng.uniform(-3.0, 3.0, (6, 2))
    a = [RobotCore(cfg, i, avoid=avoidance_from_config(cfg, ros=True)) for i in range(6)]
    b = [RobotCore(cfg, i, avoid=avoidance_from_config(cfg, ros=True)) for i in range(6)]
    for cores in (a, b):
        for i, core in enumerate(cores):
            core.observe(0.0, pos[i])
            core.set_meeting_point(-pos[i], 0.0)
    fleet = FleetCore(b)
    for k in range(1, 20):
        t = 0.1 * k
        nb = []
        for i in range(6):
            ids = [j for j in range(6) if j != i]
            nb.append(Nearby.of(pos[ids], rng.choice([0.1, 0.5, 1.5, 30.0], 5), rng.uniform(0, 0.5, 5), ids))
        ca, cb = [c.step(t, nb[i]) for i, c in enumerate(a)], fleet.step(t, nb)
        for x, y in zip(ca, cb):
            assert x.reason == y.reason
            np.testing.assert_allclose([y.vx, y.vy], [x.vx, x.vy], atol=1e-6)
        for i, core in enumerate(a):
            core.observe(t, pos[i])
            b[i].observe(t, pos[i])


def _agreed(cfg, i, pos, target, group):
    core = RobotCore(cfg, i, avoid=avoidance_from_config(cfg, ros=True))
    core.observe(0.0, pos)
    core.set_meeting_point(target, 0.0, group=group)
    return core


def test_packing_slots_avoid_a_silent_bodys_keep_out():
    """Robot 3 died on the centre slot (its position 5 s old): the living take distinct slots, none within its
    keep-out (d_min + its margin), and it takes none. The current code hands the slots next to it to the living."""
    cfg = config(num_robots=4)
    avoid = avoidance_from_config(cfg, ros=True)
    target = np.array([1.0, -1.0])
    pos = {0: [4.0, 0.0], 1: [-3.0, 2.0], 2: [0.0, -4.0], 3: list(target)}
    goals = []
    for i in (0, 1, 2):
        core = _agreed(cfg, i, pos[i], target, [0, 1, 2, 3])
        others = [j for j in pos if j != i]
        ages = [5.0 if j == 3 else 0.1 for j in others]
        cmd = core.step(0.0, Nearby.of([pos[j] for j in others], ages=ages, ids=others))
        assert cmd.reason == "ok"
        goals.append(core.goal)
    goals = np.array(goals)
    keep_out = avoid.d_min_m + BOUND
    assert np.all(np.linalg.norm(goals - target, axis=1) >= keep_out - 1e-9)
    assert len({tuple(np.round(g, 9)) for g in goals}) == 3
    spacing = avoid.d_min_m + cfg.packing_gap_m
    assert min(np.linalg.norm(goals[a] - goals[b]) for a, b in ((0, 1), (0, 2), (1, 2))) >= spacing - 1e-9


# ---- a robot left out of one nearby message is kept ----------------------------------------------------------------

def test_a_robot_left_out_of_a_nearby_message_is_kept_until_its_own_age_says_otherwise():
    """A forged empty ``nearby`` with a fresh stamp costs nothing: the robots it leaves out stay at their last
    plausible positions, aged, until that age exceeds robot_timeout_s + nearby_horizon_s. The current code takes the
    newest message as the whole set (the robot is blinded)."""
    cfg = config(num_robots=3)
    core = RobotCore(cfg, 0, avoid=avoidance_from_config(cfg, ros=True))
    first, _ = core.check_nearby(1.0, Nearby.of([[1.0, 0.0], [0.0, 2.0]], ages=[0.1, 0.2], speeds=[0.3, 0.0],
                                                ids=[1, 2]), stamp=1.0)
    assert first.ids.tolist() == [1, 2]
    blind, bad = core.check_nearby(1.5, NOBODY, stamp=1.5)
    assert bad == 0 and blind.ids.tolist() == [1, 2]
    assert blind.positions.tolist() == [[1.0, 0.0], [0.0, 2.0]]
    assert blind.ages == pytest.approx([0.6, 0.7]) and blind.speeds.tolist() == [0.3, 0.0]
    part, _ = core.check_nearby(2.0, Nearby.of([[1.1, 0.0]], ages=[0.0], ids=[1]), stamp=2.0)
    assert part.ids.tolist() == [1, 2] and part.ages == pytest.approx([0.0, 1.2])
    keep = cfg.robot_timeout_s + cfg.nearby_horizon_s
    late, _ = core.check_nearby(0.8 + keep + 0.01, Nearby.of([[1.1, 0.0]], ages=[0.0], ids=[1]))
    assert late.ids.tolist() == [1]                                     # robot 2's own age dropped it


def test_a_forged_empty_nearby_message_never_brings_a_robot_into_a_neighbour():
    """Robot 1 stands in robot 0's way; a stranger sends robot 0 an empty ``nearby`` with a fresh stamp every tick
    after the first real one: robot 0 still keeps its distance."""
    cfg = config()
    avoid = avoidance_from_config(cfg, ros=True)
    core = RobotCore(cfg, 0, avoid=avoid)
    core.set_meeting_point([6.0, 0.0], 0.0)
    pos = np.array([0.0, 0.0])
    held, _ = core.check_nearby(0.0, Nearby.of([[2.0, 0.0]], ages=[0.0], ids=[1]), stamp=0.0)
    dt = cfg.control_period_s
    for k in range(1, 25):
        t = k * dt
        core.observe(t, pos)
        held, _ = core.check_nearby(t, NOBODY, stamp=t)
        cmd = core.step(t, held)
        pos = pos + dt * np.array([cmd.vx, cmd.vy])
    assert 2.0 - pos[0] >= avoid.d_min_m - 1e-6


# ---- deadlock has a bounded escape ----------------------------------------------------------------------------------

def _blocked_run(cfg, seconds=120.0, follow=False):
    """Robot 0 sent with robot 1 to P (a group of two, as a disaster cell or a round's agreement sends them); robot 1
    stands still on robot 0's slot (the centre: robot 0 comes from the far side). With ``follow`` robot 1 moves onto
    every new slot robot 0 takes. Returns (the core, robot 0's path length, its final position, robot 1's)."""
    avoid = avoidance_from_config(cfg, ros=True)
    target = np.array([2.0, 1.0])
    core = RobotCore(cfg, 0, avoid=avoid)
    pos = target + [-1.5, 0.0]
    other = slots(target, 2, avoid.d_min_m + cfg.packing_gap_m)[0].copy()
    core.observe(0.0, pos)
    core.set_meeting_point(target, 0.0, group=[0, 1])
    dt, path = cfg.control_period_s, 0.0
    for k in range(int(seconds / dt)):
        t = k * dt
        core.observe(t, pos)
        if follow and core.goal is not None and np.linalg.norm(core.goal - other) > 1e-9:
            other = core.goal.copy()
        cmd = core.step(t, Nearby.of(other[None], ids=[1]))
        new = pos + dt * np.array([cmd.vx, cmd.vy])
        path += float(np.linalg.norm(new - pos))
        pos = new
    return core, path, pos, other


def test_a_robot_whose_slot_a_still_body_sits_on_takes_another_after_a_bounded_escape():
    """The issue's case: robot 1 stopped on robot 0's slot. The current code escapes for ever (20 deadlocks, 24.8 m
    of orbiting in 120 s); now after ``ESCAPES_PER_SLOT`` escapes the slot is given up (marked blocked) and robot 0
    ends in another one, beside robot 1, having driven less than 5 m."""
    cfg = config()
    core, path, pos, other = _blocked_run(cfg)
    print(f"\nFIGURES deadlock: deadlocks={core.counters['deadlocks']}, path_m={path:.2f}, "
          f"slots_blocked={core.counters['slots_blocked']}")
    assert core.counters["deadlocks"] <= ESCAPES_PER_SLOT + 1
    assert core.counters["slots_blocked"] == 1 and core.counters["blocked"] == 0
    assert path < 5.0
    assert np.linalg.norm(core.goal - other) > 0.5 * (core.avoid.d_min_m + cfg.packing_gap_m)   # another slot
    assert np.linalg.norm(pos - core.goal) <= 0.05                                               # ... and in it
    assert np.linalg.norm(pos - other) >= core.avoid.d_min_m - 1e-6
    assert core.state(120.0) == "ok"


def test_a_robot_blocked_on_every_slot_it_takes_holds_counted():
    """A body that moves onto every slot the robot takes: after ``MAX_BLOCKED_SLOTS`` slots given up the robot holds
    where it is (``blocked``: its reason, its state, counted once), with a bounded number of deadlocks."""
    cfg = config()
    core, path, pos, other = _blocked_run(cfg, seconds=150.0, follow=True)
    assert core.counters["slots_blocked"] == MAX_BLOCKED_SLOTS and core.counters["blocked"] == 1
    assert core.counters["deadlocks"] <= (ESCAPES_PER_SLOT + 1) * (MAX_BLOCKED_SLOTS + 1)
    assert core.holding and core.state(150.0) == "blocked"
    core.observe(150.0, pos)
    cmd = core.step(150.0, Nearby.of(other[None], ids=[1]))
    assert cmd.reason == "blocked" and speed(cmd) == 0.0
    assert np.linalg.norm(pos - other) >= core.avoid.d_min_m - 1e-6


def test_a_robot_with_no_free_slot_in_the_fence_holds():
    """A silent body whose keep-out covers every slot the fence has room for: the robot holds (``blocked``)."""
    cfg = config(workspace=[-1.0, 1.0, -1.0, 1.0], init_radius=0.5)
    core = _agreed(cfg, 0, [0.6, 0.6], [0.0, 0.0], [0, 1])
    cmd = core.step(0.0, Nearby.of([[0.0, 0.0]], ages=[30.0], ids=[1]))
    assert cmd.reason == "blocked" and speed(cmd) == 0.0
    assert core.counters["blocked"] == 1 and core.state(0.0) == "blocked"
