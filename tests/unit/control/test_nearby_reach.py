"""The nearby relay of robots in separate processes (``single_process: false``) sends each robot only the robots in
reach (issue 29, item 3), and a census of every robot once a planning period for the packing slots.

ROS-free first: the reach (``consensus.control.avoidance.within_reach``), the robot's stop on a ``nearby`` message
older than the horizon, the slots from the census, and a fleet of cores driven through an emulated reach-limited relay
(bodies never touch, the fleet packs, and far fewer positions travel than with the relay of every robot). Then the
relay itself on an rclpy node: what it sends to each robot and in its census.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from consensus.control.avoidance import avoidance_from_config, within_reach
from consensus.control.packing import slots
from consensus.control.planner import PlanResult
from consensus.control.robot_core import Heard, Nearby, RobotCore
from support.kernel_config import robot_config


def _cfg(**kw):
    base = dict(num_robots=4, collision_avoidance="cbf", seed=5)
    base.update(kw)
    return robot_config(**base)


class _Fixed:
    dim = 2

    def __init__(self, target) -> None:
        self.target = np.asarray(target, dtype=float)

    def plan(self, req):
        return PlanResult(meeting_point=self.target.copy(), reasoning="fixed")

    def reset(self) -> None:
        pass


def _agreed(cfg, i, pos, target, *, census: bool = True) -> RobotCore:
    """Robot ``i`` at ``pos`` whose first round agreed on ``target`` with every other robot."""
    core = RobotCore(cfg, i, _Fixed(target), avoid=avoidance_from_config(cfg, ros=True))
    core.census_expected = census
    core.observe(0.0, pos)
    n = cfg.num_robots - 1
    core.plan(0.0, Heard(np.zeros((n, 2)), np.tile(np.asarray(target, dtype=float), (n, 1))))
    assert core.collect(0.0)["agreed"] is True
    return core


# ------------------------------------------------------------------------------------------------ the reach
def test_the_reach_is_d_min_plus_both_ages_and_twice_the_horizon_at_v_max():
    others = np.array([[1.9, 0.0], [2.1, 0.0], [0.0, -2.5], [10.0, 10.0]])
    # d_min 0.5, v_max 1, horizon 0.6: 0.5 + 1.2 = 1.7 m at rest, plus v_max x (own age 0.1 + 2 x each age)
    ages = np.array([0.05, 0.1, 0.0, 0.0])
    got = within_reach([0.0, 0.0], 0.1, others, ages, d_min=0.5, v_max=1.0, horizon_s=0.6)
    assert got.tolist() == [True, False, False, False]             # 1.9 <= 1.9; 2.1 > 2.0; 2.5 > 1.8
    older = within_reach([0.0, 0.0], 0.1, others, [0.1, 0.2, 0.35, 0.0], d_min=0.5, v_max=1.0, horizon_s=0.6)
    assert older.tolist() == [True, True, True, False]              # an older position reaches further
    assert within_reach([np.nan, 0.0], 0.0, others, ages, d_min=0.5, v_max=1.0, horizon_s=0.6).all()
    assert within_reach([0.0, 0.0], 0.0, np.empty((0, 2)), [], d_min=0.5, v_max=1.0, horizon_s=0.6).shape == (0,)


def test_a_nearby_message_older_than_the_horizon_stops_the_robot_and_is_counted():
    cfg = _cfg(nearby_horizon_s=0.5)
    core = _agreed(cfg, 0, [3.0, 0.0], [0.0, 0.0])
    got, _ = core.check_nearby(0.0, Nearby.of(np.empty((0, 2))), stamp=0.0)
    for t in (0.1, 0.3, 0.5):
        core.observe(t, [3.0, 0.0])
        assert core.step(t, got).reason == "ok"
    core.observe(0.6, [3.0, 0.0])
    cmd = core.step(0.6, got)
    assert cmd.reason == "stale_nearby" and (cmd.vx, cmd.vy) == (0.0, 0.0)
    assert core.counters["stale_stops"] == 1
    core.check_nearby(0.6, Nearby.of(np.empty((0, 2))), stamp=0.6)
    assert core.step(0.6, got).reason == "ok"
    # a relay clock 0.4 s ahead of the robot's: the horizon still runs from when the message came
    core.check_nearby(1.0, Nearby.of(np.empty((0, 2))), stamp=1.4)
    core.observe(1.6, [3.0, 0.0])
    assert core.step(1.6, got).reason == "stale_nearby" and core.state(1.6) == "stopped"
    # the relay of every robot (horizon 0): an old message is only aged, never a stop
    every = _agreed(_cfg(nearby_horizon_s=0.0), 0, [3.0, 0.0], [0.0, 0.0])
    every.check_nearby(0.0, Nearby.of(np.empty((0, 2))), stamp=0.0)
    every.observe(5.0, [3.0, 0.0])
    assert every.step(5.0, got).reason == "ok" and every.counters["stale_stops"] == 0


def test_a_horizon_shorter_than_two_control_periods_is_refused():
    from consensus.errors import ConfigError

    with pytest.raises(ConfigError, match="nearby_horizon_s"):
        _cfg(nearby_horizon_s=0.15, control_period_s=0.1)


@pytest.mark.parametrize("seed", range(3))
def test_robots_that_hear_only_the_robots_in_reach_take_distinct_optimal_slots_from_the_census(seed):
    cfg = _cfg(num_robots=5)
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-6.0, 6.0, (5, 2))
    target = rng.uniform(-1.0, 1.0, 2)
    avoid = avoidance_from_config(cfg, ros=True)
    spots = slots(target, 5, avoid.d_min_m + cfg.packing_gap_m)
    census = Nearby.of(pos, ids=list(range(5)))
    goals = []
    for i in range(5):
        core = _agreed(cfg, i, pos[i] + 0.01, target)        # its odometry is newer than the census: the census counts
        assert core.check_census(0.0, census, stamp=0.0) == 0
        goals.append(core.step(0.0, Nearby.of(np.empty((0, 2)))).goal)    # nobody in reach
        assert core.counters["census_fallbacks"] == 0
    goals = np.array(goals)
    assert len({tuple(np.round(g, 9)) for g in goals}) == 5
    best = min(float(np.sum((spots[list(p)] - pos) ** 2)) for p in itertools.permutations(range(5)))
    assert float(np.sum((goals - pos) ** 2)) == pytest.approx(best)
    # no census yet: the robots in reach (here nobody), counted
    alone = _agreed(cfg, 0, pos[0], target)
    alone.step(0.0, Nearby.of(np.empty((0, 2))))
    assert alone.counters["census_fallbacks"] == 1
    # a census that does not count this robot (its states were lost or refused): the others solved without it
    left_out = _agreed(cfg, 0, pos[0], target)
    left_out.check_census(0.0, Nearby.of(pos[1:], ids=[1, 2, 3, 4]), stamp=0.0)
    left_out.step(0.0, Nearby.of(np.empty((0, 2))))
    assert left_out.counters["census_fallbacks"] == 1


def test_a_census_from_the_future_is_refused_and_one_outside_the_workspace_is_left_out():
    cfg = _cfg()
    core = _agreed(cfg, 0, [1.0, 1.0], [0.0, 0.0])
    assert core.check_census(1.0, Nearby.of([[1.0, 1.0], [2.0, 2.0]], ids=[0, 1]), stamp=60.0) is None
    assert core.census is None
    assert core.check_census(1.0, Nearby.of([[1.0, 1.0], [500.0, 2.0]], ids=[0, 1]), stamp=1.0) == 1
    assert core.census.ids.tolist() == [0]


# ------------------------------------------------------------------------------------------------ a fleet of cores
def _fly(reach: bool, *, n: int = 12, seconds: float = 40.0):
    """``n`` single-integrator robots from a 16 m square to one meeting point, each a core fed by an emulated relay:
    states at ``state_rate_hz``, each robot's nearby set every control period (reach-limited or every robot) and
    the census every planning period. Returns (the closest two bodies came, the final distances to the meeting
    point, the positions sent each tick, the stale stops, the config)."""
    cfg = _cfg(num_robots=n, nearby_horizon_s=0.5 if reach else 0.0, target_timeout_s=600.0)
    avoid = avoidance_from_config(cfg, ros=True)
    rng = np.random.default_rng(11)
    pos = rng.uniform(-8.0, 8.0, (n, 2))
    while min(np.linalg.norm(a - b) for a, b in itertools.combinations(pos, 2)) < 1.0:
        pos = rng.uniform(-8.0, 8.0, (n, 2))
    target = np.array([0.5, -0.5])
    cores = [_agreed(cfg, i, pos[i], target, census=reach) for i in range(n)]
    dt, state_every, census_every = cfg.control_period_s, round(1.0 / (cfg.state_rate_hz * cfg.control_period_s)), \
        round(cfg.planner_period_s / cfg.control_period_s)
    state, state_t, prev = pos.copy(), np.zeros(n), pos.copy()
    closest, sent, ids = np.inf, [], np.arange(n)
    for k in range(int(seconds / dt)):
        t = k * dt
        if k % state_every == 0:
            prev, state, state_t = state.copy(), pos.copy(), np.full(n, t)
        speed = np.minimum(np.linalg.norm(state - prev, axis=1) / (state_every * dt), cfg.v_max)
        cmds = np.zeros((n, 2))
        sent.append(0)
        for i, core in enumerate(cores):
            core.observe(t, pos[i])
            others = ids != i
            if reach:
                others[others] = within_reach(state[i], t - state_t[i], state[others], t - state_t[others],
                                              d_min=avoid.d_min_m, v_max=cfg.v_max, horizon_s=cfg.nearby_horizon_s)
                if k % census_every == 0:
                    core.check_census(t, Nearby.of(state, t - state_t, speed, ids), stamp=t)
            sent[-1] += int(others.sum())
            got, _ = core.check_nearby(t, Nearby.of(state[others], t - state_t[others], speed[others], ids[others]),
                                       stamp=t)
            cmd = core.step(t, got)
            cmds[i] = cmd.vx, cmd.vy
        pos = pos + dt * cmds
        closest = min(closest, min(np.linalg.norm(a - b) for a, b in itertools.combinations(pos, 2)))
    stale = sum(c.counters["stale_stops"] for c in cores)
    return closest, np.linalg.norm(pos - target, axis=1), np.array(sent), stale, cfg


def test_a_fleet_fed_only_the_robots_in_reach_keeps_its_bodies_apart_packs_and_sends_far_fewer_positions():
    """Spread over the square, a robot has few others in reach; packed, all of them are (the traffic of a packed
    fleet is the relay's of every robot)."""
    closest, dist, sent, stale, cfg = _fly(reach=True)
    every_closest, every_dist, every_sent, _, _ = _fly(reach=False)
    clearance = avoidance_from_config(cfg, ros=True).clearance_m
    assert closest >= clearance - 1e-6 and every_closest >= clearance - 1e-6
    from consensus.metrics.convergence import packing_radius
    radius = packing_radius(cfg.num_robots, avoidance_from_config(cfg, ros=True).d_min_m)
    assert dist.max() <= radius and every_dist.max() <= radius
    assert stale == 0
    first = round(5.0 / cfg.control_period_s)             # the first 5 s: the robots still spread out
    assert sent[:first].sum() < 0.1 * every_sent[:first].sum(), (sent[:first].sum(), every_sent[:first].sum())
    assert sent.sum() < 0.8 * every_sent.sum() and np.all(sent <= every_sent)


# ------------------------------------------------------------------------------------------------ the relay (rclpy)
class _Capture:
    def __init__(self) -> None:
        self.msgs = []

    def publish(self, msg) -> None:
        self.msgs.append(msg)


@pytest.mark.ros
def test_the_relay_sends_each_robot_the_robots_in_reach_and_everyone_in_its_census(ros):
    from geometry_msgs.msg import PointStamped
    from rclpy.node import Node
    from rclpy.serialization import serialize_message

    from consensus import names
    from consensus.ros.health import Health
    from consensus.ros.nearby import NearbyRelay, read_nearby

    cfg = _cfg(num_robots=4, single_process=False, nearby_horizon_s=0.5)
    node = Node("relay_under_test")
    try:
        relay = NearbyRelay(node, cfg, Health(), subscribe=False)
        assert node.count_publishers(names.CENSUS.name) == 1
        relay.pubs = [_Capture() for _ in range(4)]
        relay.census_pub = census = _Capture()
        now = node.get_clock().now()
        for j, xy in enumerate([(0.0, 0.0), (1.0, 0.0), (6.0, 0.0), (6.5, 0.5)]):
            msg = PointStamped()
            msg.header.stamp = now.to_msg()
            msg.point.x, msg.point.y = xy
            assert relay.accept(j, serialize_message(msg)) is not None
        relay.relay()
        t = node.get_clock().now().nanoseconds * 1e-9
        heard = [read_nearby(bytes(serialize_message(p.msgs[-1])), t, 2)[0].ids.tolist() for p in relay.pubs]
        assert heard == [[1], [0], [3], [2]]
        assert relay.sent_points == 4
        everyone = read_nearby(bytes(serialize_message(census.msgs[-1])), t, 2)[0]
        assert everyone.ids.tolist() == [0, 1, 2, 3]
        assert np.allclose(everyone.positions[2], [6.0, 0.0])
        relay.relay()                                  # within the planning period: no second census
        assert len(census.msgs) == 1
        # a state no newer than the last (repeated while its odometry paused) changes nothing: not its speed either
        relay.speed[1] = 0.4
        msg = PointStamped()
        msg.header.stamp = now.to_msg()
        msg.point.x, msg.point.y = 1.5, 0.0
        assert relay.accept(1, serialize_message(msg)) is not None
        assert relay.speed[1] == 0.4 and relay.last[1, 1] == 1.0
        # the relay of every robot: all three others to each, no census
        every = NearbyRelay(node, _cfg(num_robots=4, single_process=False, nearby_horizon_s=0.0), Health(),
                            subscribe=False)
        assert every.census_pub is None
        every.pubs = [_Capture() for _ in range(4)]
        for j, xy in enumerate([(0.0, 0.0), (1.0, 0.0), (6.0, 0.0), (6.5, 0.5)]):
            msg = PointStamped()
            msg.header.stamp = now.to_msg()
            msg.point.x, msg.point.y = xy
            every.accept(j, serialize_message(msg))
        every.relay()
        t = node.get_clock().now().nanoseconds * 1e-9
        heard = [read_nearby(bytes(serialize_message(p.msgs[-1])), t, 2)[0].ids.tolist() for p in every.pubs]
        assert heard == [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]
    finally:
        node.destroy_node()


def _head_on(reach_s: float, *, seed: int = 0, reach_v: float | None = None):
    """Two robots driven straight at each other at v_max (each to a point behind the other), each fed by an emulated
    relay with a link delay of 0.3 s, states at 5 Hz and half of its nearby messages lost; the relay's reach over
    ``reach_s`` (its horizon plus a control period) at ``reach_v`` (default v_max). Returns (the closest the
    centres came, the clearance, the stale stops)."""
    cfg = _cfg(num_robots=2, nearby_horizon_s=0.5)
    avoid = avoidance_from_config(cfg, ros=True)
    rng = np.random.default_rng(seed)
    pos = np.array([[-3.0, 0.0], [3.0, 0.01]])
    cores = []
    for i, goal in enumerate(([6.0, 0.0], [-6.0, 0.0])):
        core = RobotCore(cfg, i, _Fixed(goal), avoid=avoidance_from_config(cfg, ros=True))
        core.observe(0.0, pos[i])
        core.plan(0.0, Heard.none(2))
        core.collect(0.0)
        core.check_nearby(0.0, Nearby.of(np.empty((0, 2))), stamp=0.0)
        cores.append(core)
    dt, delay, history, closest = cfg.control_period_s, 0.3, [], np.inf
    held = [Nearby.of(np.empty((0, 2))), Nearby.of(np.empty((0, 2)))]
    for k in range(1, 80):
        t = k * dt
        if k % 2 == 0:
            history.append((t, pos.copy()))
        seen = [(ts, p) for ts, p in history if ts <= t - delay]
        for i, core in enumerate(cores):
            core.observe(t, pos[i])
            if seen and rng.random() < 0.5:                        # this message comes; the others are lost
                ts, p = seen[-1]
                j = 1 - i
                if within_reach(p[i], t - ts, p[[j]], [t - ts], d_min=avoid.d_min_m,
                                v_max=cfg.v_max if reach_v is None else reach_v, horizon_s=reach_s)[0]:
                    msg = Nearby.of(p[[j]], [t - ts], [cfg.v_max], [j])
                else:
                    msg = Nearby.of(np.empty((0, 2)))
                held[i], _ = core.check_nearby(t, msg, stamp=t)
        cmds = [core.step(k * dt, held[i]) for i, core in enumerate(cores)]
        pos = pos + dt * np.array([[c.vx, c.vy] for c in cmds])
        closest = min(closest, float(np.linalg.norm(pos[0] - pos[1])))
    return closest, avoid.clearance_m, sum(c.counters["stale_stops"] for c in cores)


@pytest.mark.parametrize("seed", range(3))
def test_robots_left_out_of_lost_and_late_messages_still_keep_their_clearance(seed):
    cfg = _cfg(num_robots=2, nearby_horizon_s=0.5)
    closest, clearance, stale = _head_on(cfg.nearby_horizon_s + cfg.control_period_s, seed=seed)
    assert clearance <= closest < clearance + 0.5          # they met, and the filter held them apart
    assert stale > 0                                        # lost messages: the robots stopped on old ones
    # the same relay reaching only over the filter's d_min (no ages, no horizon): they learn of each other too late
    too_short, clearance, _ = _head_on(0.0, seed=seed, reach_v=0.0)
    assert too_short < clearance


def test_robots_that_solved_their_slots_on_different_censuses_agree_after_the_next_one():
    """Robot 0 solved on an older census in which robot 1 stood elsewhere, robot 1 on a newer one: both claim the
    same slot. The next census, the same message for both, gives them distinct slots."""
    cfg = _cfg(num_robots=2)
    target = np.array([0.0, 0.0])
    cores = [_agreed(cfg, i, p, target) for i, p in enumerate(([3.0, 0.0], [-3.0, 0.0]))]
    old = Nearby.of([[3.0, 0.0], [2.0, 0.0]], ids=[0, 1])          # robot 1 nearer the centre: robot 0 outside
    new = Nearby.of([[2.0, 0.0], [3.0, 0.0]], ids=[0, 1])          # robot 0 nearer the centre: robot 1 outside
    for c, census in zip(cores, (old, new)):
        c.observe(1.0, c.pos)
        c.check_census(1.0, census, stamp=1.0)
    nobody = Nearby.of(np.empty((0, 2)))
    first = [c.step(1.0, nobody).goal for c in cores]
    assert np.allclose(first[0], first[1])                         # a conflict: the two censuses differed
    now = Nearby.of([[3.0, 0.0], [-3.0, 0.0]], ids=[0, 1])
    for c in cores:
        c.observe(3.0, c.pos)
        c.check_census(3.0, now, stamp=3.0)
    goals = [c.step(3.0, nobody).goal for c in cores]
    assert not np.allclose(goals[0], goals[1]) and goals[0][0] > goals[1][0]     # each keeps its own side


@pytest.mark.parametrize("seed", range(3))
def test_a_census_a_second_old_still_counts_its_robots_as_robots_not_silent_bodies(seed):
    """A census is a snapshot for the slots: whether a robot in it is silent is judged by its age when the census was
    sent. Aged by the census's own age, a census taken 1.1 s before a planning round counted every robot silent at that
    round (0.2 s + 1.1 s over FRESH_AGE_S), so the round's slots and the next census's disagreed and the goals flipped
    every second (4 drones in crazyswarm2's simulator chattered around their slots for 120 s)."""
    cfg = _cfg(num_robots=4)
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-3.0, 3.0, (4, 2))
    target = rng.uniform(-1.0, 1.0, 2)
    census = Nearby(pos, np.full(4, 0.2), np.zeros(4), np.arange(4))
    for i in range(4):
        fresh, late = _agreed(cfg, i, pos[i] + 0.01, target), _agreed(cfg, i, pos[i] + 0.01, target)
        assert fresh.check_census(0.0, census, stamp=0.0) == 0 and late.check_census(0.0, census, stamp=0.0) == 0
        now = fresh.step(0.0, Nearby.of(np.empty((0, 2)))).goal
        late.observe(1.1, pos[i] + 0.01)
        later = late.step(1.1, Nearby.of(np.empty((0, 2)))).goal
        assert np.allclose(now, later), (i, now, later)
        assert late.counters["census_fallbacks"] == 0
