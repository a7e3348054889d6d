"""The ``nearby`` relay's reach (consensus.control.reach, used by consensus.ros.nearby): a robot told only the robots
within its filter's reach computes exactly the command it computes with every robot, single integrators and
unicycles, while the message of a spread-out fleet is much shorter than n - 1. ROS-free: the robot's decisions are
its ``RobotCore``, stepped once with the full message and once with the reach-limited one."""
from __future__ import annotations

import copy

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from consensus.control.avoidance import avoidance_from_config
from consensus.control.kinematics import initial_positions
from consensus.control.plausibility import JUMP_SLACK_M
from consensus.control.reach import HORIZON_PERIODS, FilterReach, binding_distance, core_base_d_min
from consensus.control.robot_core import Nearby, RobotCore
from consensus.scenarios.aggregation.config import load_config

FAST = settings(max_examples=30, deadline=None, derandomize=True)
TOL = 1e-9


def config(**overrides):
    overrides.setdefault("collision_avoidance", "cbf")
    return load_config(None, **overrides)


def fleet_reach(cfg) -> FilterReach:
    """What ``consensus.ros.nearby.filter_reach`` builds for a config without a robots file."""
    avoid = avoidance_from_config(cfg, ros=True)
    return FilterReach.of([avoid] * cfg.num_robots, horizon_s=HORIZON_PERIODS * cfg.control_period_s,
                          slack_m=JUMP_SLACK_M)


def scene(rng, cfg, reach: FilterReach):
    """A relay's view at its stamp (own positions and ages, and what each robot's message would carry) and each
    robot's situation at a tick while it uses the message: its position within the reach rule's motion bound of
    where the relay last heard it (often on the bound), its yaw, its last speed (often the limit), the time since
    the stamp (often the horizon) and its target."""
    n = cfg.num_robots
    side = rng.choice([4.0, 8.0, 14.0, 19.0])
    relayed = rng.uniform(-side / 2, side / 2, size=(n, 2))
    own_age = rng.choice([0.0, 0.2, 0.6], size=n) * rng.uniform(0.5, 1.0, size=n)
    age = np.where(rng.random((n, n)) < 0.3, 0.0, rng.uniform(0.0, 0.6, size=(n, n)))
    speed = np.where(rng.random((n, n)) < 0.3, cfg.v_max, rng.uniform(0.0, cfg.v_max, size=(n, n)))
    h = reach.horizon_s
    since = np.where(rng.random(n) < 0.5, h, rng.uniform(0.0, h, size=n))
    # the robot's position: where the relay heard it, moved at most body_v (age + time since) plus the slack
    room = reach.body_v * (own_age + since) + reach.slack_m
    frac = np.where(rng.random(n) < 0.5, 1.0, np.sqrt(rng.random(n)))
    ang = rng.uniform(0, 2 * np.pi, size=n)
    pos = relayed + (room * frac)[:, None] * np.column_stack([np.cos(ang), np.sin(ang)])
    pos = np.clip(pos, -9.9, 9.9)      # in the workspace (default +-10 m); clipping only brings it closer
    yaw = rng.uniform(-np.pi, np.pi, size=n)
    last_speed = np.where(rng.random(n) < 0.5, reach.point_v, rng.uniform(0, 1, size=n) * reach.point_v)
    target = rng.uniform(-9.0, 9.0, size=(n, 2))
    return dict(relayed=relayed, own_age=own_age, age=age, speed=speed, since=since, pos=pos, yaw=yaw,
                last_speed=last_speed, target=target)


def commands(cfg, s, mask):
    """Each robot's command with the full message and with the one ``mask`` keeps: two lists of Commands."""
    n = cfg.num_robots
    avoid = avoidance_from_config(cfg, ros=True)
    now = 10.0
    full, limited = [], []
    for i in range(n):
        core = RobotCore(cfg, i, avoid=copy.deepcopy(avoid))
        core.observe(now, s["pos"][i], s["yaw"][i])
        core.set_target(s["target"][i], now)
        core.last_speed = float(s["last_speed"][i])
        others = np.flatnonzero(np.arange(n) != i)
        msg = Nearby.of(s["relayed"][others], s["age"][i, others] + s["since"][i], s["speed"][i, others], others)
        keep = mask[i, others]
        cut = Nearby(msg.positions[keep], msg.ages[keep], msg.speeds[keep], msg.ids[keep])
        twin = copy.deepcopy(core)
        full.append(core.step(now, msg))
        limited.append(twin.step(now, cut))
    return full, limited


def reach_mask(reach, s):
    n = len(s["relayed"])
    xy = np.broadcast_to(s["relayed"][None, :, :], (n, n, 2))
    return reach.mask(s["relayed"], s["own_age"], xy, s["age"], s["speed"])


def assert_same(full, limited):
    for i, (a, b) in enumerate(zip(full, limited)):
        assert a.reason == b.reason == "ok", (i, a, b)
        assert abs(a.vx - b.vx) <= TOL and abs(a.vy - b.vy) <= TOL and abs(a.wz - b.wz) <= TOL, (i, a, b)


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(6, 24))
def test_single_integrators_with_the_robots_in_reach_command_what_they_command_with_everyone(seed, n):
    cfg = config(num_robots=n, kinematics="single_integrator")
    reach = fleet_reach(cfg)
    s = scene(np.random.default_rng(seed), cfg, reach)
    assert_same(*commands(cfg, s, reach_mask(reach, s)))


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(6, 24))
def test_unicycles_with_the_robots_in_reach_command_what_they_command_with_everyone(seed, n):
    cfg = config(num_robots=n, kinematics="unicycle")
    reach = fleet_reach(cfg)
    assert reach.offset_m[0] > 0 and reach.point_v[0] > cfg.v_max      # the near-identity point is filtered
    s = scene(np.random.default_rng(seed), cfg, reach)
    assert_same(*commands(cfg, s, reach_mask(reach, s)))


def test_the_scenes_leave_robots_out_and_make_the_filter_act():
    """The scenes above test something: robots are left out of messages, and commands the filter changed
    (because a robot in reach binds) are among those compared."""
    for kinematics in ("single_integrator", "unicycle"):
        cut = kept = changed = 0
        for seed in range(30):
            cfg = config(num_robots=16, kinematics=kinematics)
            reach = fleet_reach(cfg)
            s = scene(np.random.default_rng(seed), cfg, reach)
            mask = reach_mask(reach, s)
            np.fill_diagonal(mask, False)
            cut += int(16 * 15 - mask.sum())
            kept += int(mask.sum())
            with_filter, _ = commands(cfg, s, mask)
            _, lone = commands(cfg, s, np.zeros((16, 16), bool))
            changed += sum(abs(a.vx - b.vx) + abs(a.vy - b.vy) + abs(a.wz - b.wz) > 1e-6
                           for a, b in zip(with_filter, lone))
        assert cut > 0.2 * (cut + kept) and kept > 0.2 * (cut + kept), (kinematics, cut, kept)
        assert changed > 30, (kinematics, changed)


def test_a_shorter_reach_such_as_d_min_plus_the_closing_distance_changes_commands():
    """The issue's first sketch, ``d_min + 2 v_max × age``, ignores that a row binds well beyond d_min (a robot
    brakes from about 2 v_max / γ): robots it leaves out change commands. (Shows the equality above can fail.)"""
    cfg = config(num_robots=16, kinematics="single_integrator")
    reach = fleet_reach(cfg)
    differ = 0
    for seed in range(30):
        s = scene(np.random.default_rng(seed), cfg, reach)
        dist = np.linalg.norm(s["relayed"][:, None, :] - s["relayed"][None, :, :], axis=-1)
        naive = dist < reach.base_m[0] + 2 * cfg.v_max * (s["age"] + reach.horizon_s)
        full, limited = commands(cfg, s, naive)
        differ += sum(abs(a.vx - b.vx) + abs(a.vy - b.vy) > TOL for a, b in zip(full, limited))
    assert differ > 0


def test_a_row_binds_up_to_the_binding_distance_and_not_beyond():
    from consensus.control.collision import filter_velocity

    v, gamma, d = 1.0, 1.0, 0.45
    r = float(binding_distance(d, v, gamma))
    assert 4.0 < r < 4.1
    for dist, binds in ((r * (1 - 1e-6), True), (r * (1 + 1e-9), False)):
        _, info = filter_velocity(np.zeros(2), np.array([1.0, 0.0]), np.array([[dist, 0.0]]), d, v, gamma)
        assert (info.rows == 1) is binds, (dist, info)


def test_the_reach_grows_with_ages_speeds_the_horizon_and_unknown_positions_reach_everyone():
    cfg = config(num_robots=3, kinematics="unicycle")
    avoid = avoidance_from_config(cfg, ros=True)
    assert core_base_d_min(avoid) == avoid.clearance_m + avoid.offset
    reach = FilterReach.of([avoid, avoid, None], horizon_s=0.3, slack_m=0.5)
    r0 = reach.reach(np.zeros(3), np.zeros((3, 3)), np.zeros((3, 3)))
    assert np.all(reach.reach(np.zeros(3), np.ones((3, 3)), np.zeros((3, 3)))[:2] > r0[:2])
    assert np.all(reach.reach(np.zeros(3), np.zeros((3, 3)), np.ones((3, 3)))[:2] > r0[:2])
    assert np.all(reach.reach(np.ones(3), np.zeros((3, 3)), np.zeros((3, 3)))[:2] > r0[:2])
    assert np.isinf(r0[2]).all()                       # a robot without the filter: everyone
    far = np.broadcast_to(np.array([[0.0, 0.0], [100.0, 0.0], [0.0, 100.0]])[None], (3, 3, 2))
    mask = reach.mask([[0.0, 0.0], [np.nan, np.nan], [50.0, 50.0]], [0.0, 0.0, 0.0], far, np.zeros((3, 3)),
                      np.zeros((3, 3)))
    assert mask[0].tolist() == [True, False, False]
    assert mask[1].all() and mask[2].all()             # own position unknown; no filter


def points_per_message(cfg, *, moving: bool) -> float:
    """Mean points per ``nearby`` message at the start of ``cfg``'s run: states a state period old, no link delay,
    every robot at rest (speeds 0) or measured at full speed (``moving``)."""
    reach = fleet_reach(cfg)
    pos = initial_positions(cfg)
    n = len(pos)
    age = np.full((n, n), 1.0 / cfg.state_rate_hz)
    speed = np.full((n, n), cfg.v_max if moving else 0.0)
    mask = reach.mask(pos, np.full(n, 1.0 / cfg.state_rate_hz), np.broadcast_to(pos[None], (n, n, 2)), age, speed)
    np.fill_diagonal(mask, False)
    return float(mask.sum()) / n


def test_a_spread_out_fleet_sends_each_robot_far_fewer_than_n_minus_1_positions():
    spread = config(num_robots=100, init_radius=30.0, workspace=[-30.0, 30.0, -30.0, 30.0])
    for moving in (False, True):
        assert points_per_message(spread, moving=moving) < 0.15 * 99
    # the default start (uniform in +-5 m) is dense: the reach (~5 m) still leaves out a good part of the fleet
    dense = config(num_robots=100)
    assert points_per_message(dense, moving=False) < 0.8 * 99
