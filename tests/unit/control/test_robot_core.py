"""One robot's decisions without ROS (consensus.control.robot_core.RobotCore): the safety rules of ``step`` in their
order, planning rounds (fallbacks, clamping, overruns, a thread pool that never blocks a tick), meeting points,
agreement and slots around the meeting point, groups sent to one point, the deadlock rule and the honest d_min."""
from __future__ import annotations

import itertools
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consensus.control.avoidance import avoidance_from_config
from consensus.control.packing import slots
from consensus.control.planner import PlanResult
from consensus.control.robot_core import ARRIVED_M, ESCAPES_PER_SLOT, Command, Heard, Nearby, RobotCore
from consensus.control.safety import Geofence
from support.kernel_config import MeanPlanner, robot_config

FAST = settings(max_examples=30, deadline=None, derandomize=True)
NONE = Heard.none(2)
NOBODY = Nearby.of(np.empty((0, 2)))          # a nearby message with no other robot in it


def config(**overrides):
    overrides.setdefault("num_robots", 4)
    overrides.setdefault("collision_avoidance", "cbf")
    return robot_config(**overrides)


def avoid_of(cfg):
    return avoidance_from_config(cfg, ros=True)


class FixedPlanner:
    """Answers every round with ``target`` (change it between rounds); keeps the requests it got."""

    dim = 2

    def __init__(self, target) -> None:
        self.target = None if target is None else np.asarray(target, dtype=float)
        self.requests: list = []

    def plan(self, req):
        self.requests.append(req)
        return PlanResult(meeting_point=None if self.target is None else self.target.copy(), reasoning="fixed")

    def reset(self) -> None:
        pass


class FailingPlanner(FixedPlanner):
    """Raises while ``fail`` is set, else answers ``target``."""

    fail = True

    def plan(self, req):
        self.requests.append(req)
        if self.fail:
            raise RuntimeError("planner bug")
        return PlanResult(meeting_point=self.target.copy())


class GatedPlanner(FixedPlanner):
    """A slow planner (an LLM): ``plan`` waits until ``gate`` is set."""

    def __init__(self, target) -> None:
        super().__init__(target)
        self.gate = threading.Event()
        self.started = threading.Event()

    def plan(self, req):
        self.started.set()
        if not self.gate.wait(timeout=10.0):
            raise TimeoutError("the test never opened the gate")
        return super().plan(req)


def running_core(cfg, pos, target, *, now=0.0, heard=NONE, **kw):
    """A core at ``pos`` whose first round (planned and collected at ``now``) set ``target``."""
    planner = kw.pop("planner", None) or FixedPlanner(target)
    core = RobotCore(cfg, kw.pop("robot_id", 0), planner, **kw)
    core.observe(now, pos)
    assert core.plan(now, heard) is not None
    rec = core.collect(now)
    assert rec is not None
    return core


def is_zero(cmd: Command, reason: str) -> bool:
    return cmd.reason == reason and (cmd.vx, cmd.vy, cmd.wz) == (0.0, 0.0, 0.0) and cmd.goal is None


def speed(cmd: Command) -> float:
    return math.hypot(cmd.vx, cmd.vy)


def in_rows(point, rows, tol=1e-9) -> bool:
    return bool(np.any(np.linalg.norm(np.asarray(rows) - np.asarray(point), axis=1) <= tol))


def inside_pattern(pattern: np.ndarray, lo, hi) -> np.ndarray:
    """The module docstring's rule: the pattern moved as a whole so that it lies within [lo, hi] per axis."""
    shift = np.zeros(pattern.shape[1])
    for a in range(pattern.shape[1]):
        s_lo, s_hi = pattern[:, a].min(), pattern[:, a].max()
        if s_lo < lo[a]:
            shift[a] = lo[a] - s_lo
        elif s_hi > hi[a]:
            shift[a] = hi[a] - s_hi
    return pattern + shift


# ---- the safety rules of step(), in order ---------------------------------------------------------------------------

def test_estop_holds_zero_until_released_and_counts_each_engagement_once():
    """The e-stop comes first: zero until released; ``estops`` counts engagements, not repeated requests."""
    cfg = config()
    core = running_core(cfg, [0.0, 0.0], [3.0, 0.0])
    assert core.step(0.0).reason == "ok" and speed(core.step(0.0)) > 0
    assert core.set_estop(True) is True
    assert core.set_estop(True) is False              # already engaged: no change, not counted again
    for k in range(5):
        core.observe(0.1 * k, [0.0, 0.0])
        assert is_zero(core.step(0.1 * k), "estopped")
    assert core.counters["estops"] == 1
    assert core.status(0.5)["state"] == "estopped" and core.status(0.5)["estopped"] is True
    assert core.set_estop(False) is True
    assert core.set_estop(False) is False
    cmd = core.step(0.5)
    assert cmd.reason == "ok" and speed(cmd) > 0
    assert core.set_estop(True) is True
    assert core.counters["estops"] == 2


def test_estop_comes_before_every_other_rule():
    """An e-stopped robot with no pose, no target and no round still reports the e-stop."""
    core = RobotCore(config(), 0, FixedPlanner([1.0, 1.0]))
    core.set_estop(True)
    assert is_zero(core.step(100.0), "estopped")
    assert core.counters["stale_stops"] == 0


def test_stale_odometry_stops_and_is_counted():
    cfg = config()
    core = running_core(cfg, [0.0, 0.0], [3.0, 0.0])
    assert core.step(0.5 * cfg.odom_timeout_s).reason == "ok"
    late = cfg.odom_timeout_s + 0.1
    assert is_zero(core.step(late), "stale_odom")
    assert is_zero(core.step(late + 0.1), "stale_odom")
    assert core.counters["stale_stops"] == 2
    core.observe(late + 0.2, [0.0, 0.0])               # odometry back: driving again
    cmd = core.step(late + 0.2)
    assert cmd.reason == "ok" and speed(cmd) > 0
    assert core.counters["stale_stops"] == 2


def test_no_pose_yet_stops_without_counting():
    """Before its first pose a robot is waiting, not failing: zero, reason stale_odom, nothing counted."""
    core = RobotCore(config(), 0, FixedPlanner([1.0, 1.0]))
    for t in (0.0, 1.0, 5.0):
        assert is_zero(core.step(t), "stale_odom")
    assert core.counters["stale_stops"] == 0
    assert core.status(5.0)["state"] == "waiting"
    assert core.plan(5.0, NONE) is None                # and no round starts without a pose


def test_no_completed_round_for_target_timeout_stops_and_is_counted():
    cfg = config()
    core = running_core(cfg, [0.0, 0.0], [3.0, 0.0], now=0.0)
    t = cfg.target_timeout_s
    core.observe(t, [0.0, 0.0])
    assert core.step(t).reason == "ok"                 # exactly target_timeout_s old: not yet stale
    assert core.status(t)["state"] == "ok"
    t += 0.5
    core.observe(t, [0.0, 0.0])
    assert is_zero(core.step(t), "no_round")
    assert core.counters["stale_stops"] == 1
    assert core.status(t)["state"] == "stopped"
    assert core.plan(t, NONE) is not None and core.collect(t) is not None    # a round completes: driving again
    assert core.step(t).reason == "ok"
    assert core.status(t)["state"] == "ok"


def test_no_plan_yet_stops_without_counting():
    core = RobotCore(config(), 0, FixedPlanner([1.0, 1.0]))
    core.observe(0.0, [0.0, 0.0])
    assert is_zero(core.step(0.0), "no_plan")
    assert core.counters["stale_stops"] == 0
    assert core.own_meeting_point() is not None and np.array_equal(core.own_meeting_point(), [0.0, 0.0])


# ---- planning rounds ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("wanted", [[15.0, -20.0], [-10.5, 3.0], [0.0, 99.0]])
def test_a_target_outside_the_workspace_is_clamped_and_counted(wanted):
    cfg = config()
    fence = Geofence.from_bounds(cfg.workspace)
    expected = np.clip(wanted, fence.lo, fence.hi)
    core = RobotCore(cfg, 0, FixedPlanner(wanted))
    core.observe(0.0, [0.0, 0.0])
    core.plan(0.0, NONE)
    rec = core.collect(0.0)
    assert rec["clamped"] is True and rec["fallback"] is False
    assert rec["target"] == pytest.approx(expected.tolist())
    assert np.array_equal(core.meeting_point, expected)
    assert core.counters["clamped"] == 1 and core.counters["llm_fallbacks"] == 0
    cmd = core.step(0.0)
    assert cmd.reason == "ok" and np.array_equal(cmd.goal, expected)


def test_a_target_inside_the_workspace_is_not_clamped():
    core = running_core(config(), [0.0, 0.0], [2.0, -3.0])
    assert core.counters["clamped"] == 0 and np.array_equal(core.meeting_point, [2.0, -3.0])


@pytest.mark.parametrize("bad", [[math.nan, 0.0], [math.inf, 1.0], [0.0, -math.inf]])
def test_a_non_finite_target_holds_the_last_one_as_a_fallback(bad):
    cfg = config()
    planner = FixedPlanner([2.0, 1.0])
    core = running_core(cfg, [0.0, 0.0], None, planner=planner)
    planner.target = np.array(bad)
    core.observe(1.0, [0.0, 0.0])
    core.plan(1.0, NONE)
    rec = core.collect(1.0)
    assert rec["fallback"] is True and rec["clamped"] is False
    assert np.array_equal(core.meeting_point, [2.0, 1.0]) and rec["target"] == [2.0, 1.0]
    assert core.counters["llm_fallbacks"] == 1 and core.counters["clamped"] == 0
    assert core.step(1.0).reason == "ok"


def test_a_non_finite_target_in_round_zero_holds_the_position():
    core = RobotCore(config(), 0, FixedPlanner([math.nan, math.nan]))
    core.observe(0.0, [1.5, -2.5])
    core.plan(0.0, NONE)
    rec = core.collect(0.0)
    assert rec["fallback"] is True and rec["target"] == [1.5, -2.5]
    assert core.counters["llm_fallbacks"] == 1


def test_a_planner_that_raises_is_a_counted_fallback_holding_the_position_then_the_last_target():
    """A planner bug never kills the robot: round 0 holds where the robot stood when it planned, later rounds keep
    the previous target; each exception counts as ``planner_errors`` and as a fallback."""
    planner = FailingPlanner([3.0, 4.0])
    core = RobotCore(config(), 0, planner)
    core.observe(0.0, [1.0, 2.0])
    core.plan(0.0, NONE)
    core.observe(0.1, [1.2, 2.0])                  # the robot moved after the round started
    rec = core.collect(0.1)
    assert rec["fallback"] is True and rec["fallback_reason"].startswith("planner_exception")
    assert "RuntimeError" in rec["fallback_reason"] and "planner bug" in core.planner_error
    assert rec["target"] == [1.0, 2.0]                 # the position the round was planned from
    assert core.counters["planner_errors"] == 1 and core.counters["llm_fallbacks"] == 1
    assert core.step(0.1).reason == "ok"

    planner.fail = False
    core.plan(1.0, NONE)
    assert core.collect(1.0)["target"] == [3.0, 4.0]
    planner.fail = True
    core.plan(2.0, NONE)
    rec = core.collect(2.0)
    assert rec["fallback_reason"].startswith("planner_exception") and rec["target"] == [3.0, 4.0]
    assert core.counters["planner_errors"] == 2 and core.counters["llm_fallbacks"] == 2
    assert core.round == 3


def test_a_planner_fallback_that_is_not_an_exception_is_not_a_planner_error():
    class Unparseable(FixedPlanner):
        def plan(self, req):
            return PlanResult(meeting_point=None, fallback=True, fallback_reason="unparseable", llm_calls=2)

    core = running_core(config(), [0.0, 0.0], [1.0, 1.0], planner=Unparseable(None))
    assert core.counters["llm_fallbacks"] == 1 and core.counters["planner_errors"] == 0
    assert core.counters["llm_calls"] == 2 and np.array_equal(core.meeting_point, [0.0, 0.0])


def test_max_rounds_stops_planning():
    cfg = config(max_rounds=2)
    planner = FixedPlanner([1.0, 0.0])
    core = RobotCore(cfg, 0, planner)
    core.observe(0.0, [0.0, 0.0])
    for r in range(cfg.max_rounds):
        req = core.plan(float(r), NONE)
        assert req is not None and req.round == r
        assert core.collect(float(r))["round"] == r
    assert core.plan(5.0, NONE) is None and core.plan(6.0, NONE) is None
    assert len(planner.requests) == cfg.max_rounds and core.round == cfg.max_rounds
    assert core.counters["overruns"] == 0              # a finished run is not an overrun
    core.observe(6.0, [0.0, 0.0])
    assert core.step(6.0).reason == "ok"               # the last target is still driven to


def test_a_round_not_collected_is_an_overrun_for_the_next_slot():
    core = RobotCore(config(), 0, FixedPlanner([1.0, 0.0]))
    core.observe(0.0, [0.0, 0.0])
    assert core.plan(0.0, NONE) is not None
    assert core.plan(2.0, NONE) is None
    assert core.counters["overruns"] == 1 and core.round == 1
    assert core.collect(2.0) is not None and core.collect(2.0) is None
    assert core.plan(4.0, NONE) is not None


def test_planning_in_a_pool_never_blocks_step():
    """A slow planner (an LLM) runs in the pool: ticks go on with the last target while it runs, a planning slot
    during it is an overrun, and the round is applied once it is done."""
    cfg = config()
    planner = GatedPlanner([3.0, 0.0])
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        core = RobotCore(cfg, 0, planner, pool=pool)
        core.observe(0.0, [0.0, 0.0])
        planner.gate.set()
        core.plan(0.0, NONE)
        core.wait(timeout=5.0)
        assert core.collect(0.0)["target"] == [3.0, 0.0]

        planner.gate.clear()
        planner.started.clear()
        planner.target = np.array([-3.0, 0.0])
        assert core.plan(1.0, NONE) is not None
        assert planner.started.wait(timeout=5.0)      # the plan is really running (and waiting) now
        start = time.monotonic()
        for k in range(20):
            t = 1.0 + 0.05 * k
            core.observe(t, [0.0, 0.0])
            cmd = core.step(t)
            assert cmd.reason == "ok" and np.array_equal(cmd.goal, [3.0, 0.0]) and cmd.vx > 0
        assert time.monotonic() - start < 2.0         # 20 ticks, none waited for the planner (it waits 10 s)
        assert core.collect(2.0) is None
        core.wait(timeout=0.01)                       # a bounded wait returns while the plan is still pending
        assert core.plan(3.0, NONE) is None
        assert core.counters["overruns"] == 1

        planner.gate.set()
        core.wait(timeout=5.0)
        rec = core.collect(3.0)
        assert rec is not None and rec["round"] == 1 and rec["target"] == [-3.0, 0.0]
        core.observe(3.0, [0.0, 0.0])
        assert core.step(3.0).vx < 0
    finally:
        planner.gate.set()
        pool.shutdown(wait=True)


@pytest.mark.parametrize("on", [True, False])
def test_the_request_plans_on_meeting_points_or_on_positions(on):
    """Both kinds are always given by name; ``own``/``neighbors`` (what the rule runs on) are the meeting points
    with ``meeting_points=True``, else the positions."""
    planner = FixedPlanner([2.0, 2.0])
    core = RobotCore(config(), 0, planner, meeting_points=on)
    core.observe(0.0, [0.0, 1.0])
    heard = Heard(np.array([[1.0, 0.0], [4.0, 4.0]]), np.array([[1.5, 0.5], [3.0, 3.5]]))
    req0 = core.plan(0.0, heard)
    # before its first round the robot's meeting point is its position
    assert np.array_equal(req0.own_meeting_point, [0.0, 1.0]) and np.array_equal(req0.own, [0.0, 1.0])
    core.collect(0.0)
    core.observe(1.0, [0.5, 1.0])
    req = core.plan(1.0, heard)
    assert req is planner.requests[-1] and req.round == 1 and req.robot_id == 0
    assert np.array_equal(req.own_position, [0.5, 1.0])
    assert np.array_equal(req.own_meeting_point, [2.0, 2.0])
    assert np.array_equal(np.array(req.neighbor_positions), heard.positions)
    assert np.array_equal(np.array(req.neighbor_meeting_points), heard.meeting_points)
    if on:
        assert np.array_equal(req.own, [2.0, 2.0])
        assert np.array_equal(np.array(req.neighbors), heard.meeting_points)
    else:
        assert np.array_equal(req.own, [0.5, 1.0])
        assert np.array_equal(np.array(req.neighbors), heard.positions)


def test_an_average_planner_on_meeting_points_averages_them():
    heard = Heard(np.array([[8.0, 8.0]]), np.array([[2.0, 0.0]]))
    core = RobotCore(config(), 0, MeanPlanner(dim=2), meeting_points=True)
    core.observe(0.0, [0.0, 0.0])
    core.plan(0.0, heard)
    assert core.collect(0.0)["target"] == [1.0, 0.0]        # (own position 0 + meeting point 2) / 2
    core.plan(1.0, heard)
    assert core.collect(1.0)["target"] == [1.5, 0.0]        # (own meeting point 1 + 2) / 2


# ---- the speed limit ------------------------------------------------------------------------------------------------

coords = st.floats(-9.0, 9.0, allow_nan=False)


@FAST
@given(x=coords, y=coords, tx=coords, ty=coords, with_filter=st.booleans())
def test_single_integrator_commands_stay_within_v_max(x, y, tx, ty, with_filter):
    cfg = config()
    core = RobotCore(cfg, 0, avoid=avoid_of(cfg) if with_filter else None)
    core.observe(0.0, [x, y])
    core.set_meeting_point([tx, ty], 0.0)
    cmd = core.step(0.0, NOBODY)
    assert cmd.reason == "ok" and speed(cmd) <= cfg.v_max + 1e-9
    dist = math.hypot(tx - x, ty - y)
    if dist * cfg.kp >= cfg.v_max and not with_filter:  # far targets: at the limit, straight at the target
        assert speed(cmd) == pytest.approx(cfg.v_max)
        assert cmd.vx * (tx - x) + cmd.vy * (ty - y) == pytest.approx(cfg.v_max * dist)


@FAST
@given(x=coords, y=coords, yaw=st.floats(-math.pi, math.pi), tx=coords, ty=coords, with_filter=st.booleans())
def test_unicycle_commands_stay_within_v_max_and_w_max(x, y, yaw, tx, ty, with_filter):
    cfg = config(kinematics="unicycle", v_max=0.4, w_max=0.8)
    core = RobotCore(cfg, 0, avoid=avoid_of(cfg) if with_filter else None)
    core.observe(0.0, [x, y], yaw)
    core.set_meeting_point([tx, ty], 0.0)
    cmd = core.step(0.0, NOBODY)
    assert cmd.reason == "ok" and cmd.vy == 0.0
    assert abs(cmd.vx) <= cfg.v_max + 1e-9 and abs(cmd.wz) <= cfg.w_max + 1e-9


def test_a_far_target_is_driven_at_the_speed_limit_from_the_constructor():
    """``v_max`` given to the core (a robots file's preset) overrides the config's."""
    cfg = config()
    core = RobotCore(cfg, 0, v_max=0.3)
    core.observe(0.0, [0.0, 0.0])
    core.set_meeting_point([6.0, 8.0], 0.0)
    cmd = core.step(0.0)
    assert speed(cmd) == pytest.approx(0.3) and cmd.vx / cmd.vy == pytest.approx(6.0 / 8.0)


# ---- agreement and slots --------------------------------------------------------------------------------------------

def agreed_core(cfg, robot_id, pos, target, heard_mps):
    core = RobotCore(cfg, robot_id, FixedPlanner(target), avoid=avoid_of(cfg))
    core.observe(0.0, pos)
    core.plan(0.0, Heard(np.zeros((len(heard_mps), 2)), np.asarray(heard_mps, dtype=float).reshape(-1, 2)))
    rec = core.collect(0.0)
    return core, rec


def test_agreement_needs_every_heard_meeting_point_within_the_gap():
    cfg = config()
    gap = cfg.packing_gap_m
    target = np.array([1.0, 2.0])
    near = [target + [0.6 * gap, 0.0], target + [0.0, -0.9 * gap]]
    core, rec = agreed_core(cfg, 0, [4.0, 4.0], target, near)
    assert rec["agreed"] is True and core.agreed and core.status(0.0)["agreed"] is True
    one_far = near + [target + [0.0, 1.5 * gap]]
    core, rec = agreed_core(cfg, 0, [4.0, 4.0], target, one_far)
    assert rec["agreed"] is False and not core.agreed
    assert np.array_equal(core.step(0.0, NOBODY).goal, target)    # not agreed: drives to the meeting point itself
    core, rec = agreed_core(cfg, 0, [4.0, 4.0], target, [])
    assert rec["agreed"] is False                         # nobody heard: nothing to agree with


def test_unknown_heard_meeting_points_are_ignored_for_agreement():
    cfg = config()
    core, rec = agreed_core(cfg, 0, [4.0, 4.0], [1.0, 2.0], [[1.0, 2.0], [math.nan, math.nan]])
    assert rec["agreed"] is True


def test_point_robots_never_agree():
    """Without a filter (point robots) everyone drives to the meeting point itself."""
    cfg = config()
    target = np.array([1.0, 2.0])
    core = RobotCore(cfg, 0, FixedPlanner(target))
    core.observe(0.0, [4.0, 4.0])
    core.plan(0.0, Heard(np.zeros((2, 2)), np.tile(target, (2, 1))))
    assert core.collect(0.0)["agreed"] is False
    assert np.array_equal(core.step(0.0, Nearby.of([[5.0, 5.0]])).goal, target)


def test_losing_agreement_drops_the_slot():
    cfg = config()
    target = np.array([0.0, 0.0])
    core, _ = agreed_core(cfg, 0, [3.0, 3.0], target, [target])
    spots = slots(target, cfg.num_robots, avoid_of(cfg).d_min_m + cfg.packing_gap_m)
    goal = core.step(0.0, NOBODY).goal
    assert core.slot is not None and np.array_equal(goal, spots[core.slot])
    core.observe(1.0, [3.0, 3.0])
    core.plan(1.0, Heard(np.zeros((1, 2)), np.array([[5.0, 5.0]])))
    assert core.collect(1.0)["agreed"] is False
    assert core.slot is None and core.goal is None
    assert np.array_equal(core.step(1.0, NOBODY).goal, target)


@pytest.mark.parametrize("seed", range(5))
def test_agreed_robots_take_distinct_optimal_slots(seed):
    """Robots that see the same positions and the same meeting point compute the same assignment: each takes a
    different slot of ``slots(target, num_robots, d_min + gap)``, and together they minimise the sum of squared
    distances."""
    cfg = config(num_robots=4)
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-4.0, 4.0, (cfg.num_robots, 2))
    target = rng.uniform(-2.0, 2.0, 2)
    avoid = avoid_of(cfg)
    spots = slots(target, cfg.num_robots, avoid.d_min_m + cfg.packing_gap_m)
    goals = []
    for i in range(cfg.num_robots):
        others = [j for j in range(cfg.num_robots) if j != i]
        core, rec = agreed_core(cfg, i, pos[i], target, np.tile(target, (len(others), 1)))
        assert rec["agreed"] is True
        cmd = core.step(0.0, Nearby.of(pos[others], ids=others))
        assert cmd.reason == "ok" and in_rows(cmd.goal, spots)
        assert np.allclose(spots[core.slot], cmd.goal) and core.status(0.0)["goal"] == pytest.approx(cmd.goal)
        goals.append(cmd.goal)
    goals = np.array(goals)
    assert len({tuple(np.round(g, 9)) for g in goals}) == cfg.num_robots
    cost = float(np.sum((goals - pos) ** 2))
    best = min(float(np.sum((spots[list(p)] - pos) ** 2)) for p in itertools.permutations(range(len(spots))))
    assert cost == pytest.approx(best)


def test_two_robots_with_the_same_view_get_different_slots():
    cfg = config(num_robots=2)
    target = np.array([-1.0, 0.5])
    pos = np.array([[2.0, 1.3], [-3.0, -0.4]])
    cores = [agreed_core(cfg, i, pos[i], target, [target])[0] for i in range(2)]
    g0 = cores[0].step(0.0, Nearby.of(pos[[1]], ids=[1])).goal
    g1 = cores[1].step(0.0, Nearby.of(pos[[0]], ids=[0])).goal
    assert cores[0].slot != cores[1].slot
    assert np.linalg.norm(g0 - g1) >= avoid_of(cfg).d_min_m + cfg.packing_gap_m - 1e-9


def test_slots_at_a_wall_are_moved_inside_the_filter_box():
    """A meeting point at the geofence's corner: the slot pattern is moved as a whole so every body stands inside."""
    cfg = config(num_robots=4)
    avoid = avoid_of(cfg)
    lo, hi = avoid.bounds
    fence = Geofence.from_bounds(cfg.workspace)
    target = fence.hi.copy()                                  # the corner (10, 10)
    pattern = inside_pattern(slots(target, cfg.num_robots, avoid.d_min_m + cfg.packing_gap_m), lo, hi)
    pos = np.array([[5.0, 5.0], [6.0, 4.0], [4.0, 6.5], [7.0, 7.0]])
    goals = []
    for i in range(cfg.num_robots):
        others = [j for j in range(cfg.num_robots) if j != i]
        core, rec = agreed_core(cfg, i, pos[i], target, np.tile(target, (3, 1)))
        assert rec["agreed"] is True and rec["clamped"] is False
        goals.append(core.step(0.0, Nearby.of(pos[others], ids=others)).goal)
    goals = np.array(goals)
    assert np.all(goals >= lo - 1e-9) and np.all(goals <= hi + 1e-9)
    assert all(in_rows(g, pattern) for g in goals)
    assert len({tuple(np.round(g, 9)) for g in goals}) == cfg.num_robots


# ---- set_meeting_point with a group ------------------------------------------------------------------------------

def test_set_meeting_point_clamps_and_reports_it():
    cfg = config()
    core = RobotCore(cfg, 0)
    core.observe(0.0, [0.0, 0.0])
    target, clamped = core.set_meeting_point([12.0, -3.0], 0.0)
    assert clamped is True and np.array_equal(target, [10.0, -3.0]) and core.counters["clamped"] == 1
    target, clamped = core.set_meeting_point([2.0, -3.0], 0.0)
    assert clamped is False and core.counters["clamped"] == 1
    assert np.array_equal(core.step(0.0, NOBODY).goal, [2.0, -3.0])      # no group: the point itself


@pytest.mark.parametrize("point", [[1.0, -2.0], [10.0, 0.0], [-10.0, -10.0]])
def test_a_group_packs_in_its_own_slots_around_the_point(point):
    """Three robots of a fleet of seven sent to one point (a disaster cell, maybe at a wall) pack in three slots
    around it, inside the geofence; robots outside the group do not count."""
    cfg = config(num_robots=7)
    avoid = avoid_of(cfg)
    lo, hi = avoid.bounds
    spacing = avoid.d_min_m + cfg.packing_gap_m
    group = [1, 4, 6]
    pos = {1: [3.0, 3.0], 4: [-3.0, 1.0], 6: [0.5, -4.0], 0: [1.2, -2.1], 2: [0.9, -1.8]}
    pattern = inside_pattern(slots(point, len(group), spacing), lo, hi)
    goals = []
    for i in group:
        core = RobotCore(cfg, i, avoid=avoid_of(cfg))
        core.observe(0.0, pos[i])
        _, clamped = core.set_meeting_point(point, 0.0, group=group)
        assert clamped is False and core.agreed
        others = [j for j in pos if j != i]
        cmd = core.step(0.0, Nearby.of([pos[j] for j in others], ids=others))
        assert cmd.reason == "ok"
        goals.append(cmd.goal)
    goals = np.array(goals)
    assert all(in_rows(g, pattern) for g in goals)
    assert len({tuple(np.round(g, 9)) for g in goals}) == len(group)
    assert np.all(goals >= lo - 1e-9) and np.all(goals <= hi + 1e-9)
    assert np.all(goals >= cfg.workspace[0]) and np.all(goals <= cfg.workspace[1])


def test_a_group_of_one_drives_to_the_point():
    cfg = config()
    core = RobotCore(cfg, 2, avoid=avoid_of(cfg))
    core.observe(0.0, [0.0, 0.0])
    core.set_meeting_point([3.0, 1.0], 0.0, group=[2])
    assert not core.agreed and np.array_equal(core.step(0.0, NOBODY).goal, [3.0, 1.0])


# ---- the deadlock rule ----------------------------------------------------------------------------------------------

def blocked_core(cfg):
    """Robot 0 sent with robot 1 to (5, 0): its slot is the centre, behind robot 1, which stands still on the line
    from robot 0 to the slot, just over d_min away: the filter holds robot 0 head-on."""
    core = RobotCore(cfg, 0, avoid=avoid_of(cfg))
    here = np.array([3.5, 0.0])
    neighbour = here + [avoid_of(cfg).d_min_m + 0.01, 0.0]
    core.observe(0.0, here)
    core.set_meeting_point([5.0, 0.0], 0.0, group=[0, 1])
    return core, here, Nearby.of([neighbour], ids=[1])


def test_a_robot_blocked_from_its_slot_sidesteps_clockwise_and_gets_there():
    """Held head-on by a still neighbour between it and its slot, the robot declares a deadlock after deadlock_s and
    escapes by the right-hand rule (its nominal turned ESCAPE_DEG clockwise: it slides round the neighbour's right
    side, -y when heading +x); the escape resolves the case: the robot ends in its slot, within ESCAPES_PER_SLOT
    escapes, with no slot given up, never closer to the neighbour than d_min."""
    cfg = config(deadlock_s=1.0)
    core, here, nearby = blocked_core(cfg)
    slot = core.step(0.0, nearby).goal
    assert np.array_equal(slot, [5.0, 0.0]) and core.slot is not None     # the slot behind the neighbour
    dt = 0.05
    deadlock_at, pos, closest = None, here.copy(), np.inf
    sidestep = []
    for k in range(1, int(20.0 / dt)):
        t = k * dt
        core.observe(t, pos)
        before = core.counters["deadlocks"]
        cmd = core.step(t, nearby)
        if core.counters["deadlocks"] > before and deadlock_at is None:
            deadlock_at = t
        if deadlock_at is not None and t < deadlock_at + cfg.deadlock_s:
            sidestep.append(cmd.vy)
        pos = pos + dt * np.array([cmd.vx, cmd.vy])
        closest = min(closest, float(np.linalg.norm(pos - nearby.positions[0])))
    assert deadlock_at is not None and deadlock_at == pytest.approx(cfg.deadlock_s, abs=2 * dt)
    assert min(sidestep) < -0.25 * cfg.v_max                  # clockwise: round the neighbour's right side
    assert np.linalg.norm(pos - slot) <= ARRIVED_M and np.array_equal(core.goal, slot)
    assert 1 <= core.counters["deadlocks"] <= ESCAPES_PER_SLOT and core.counters["slots_blocked"] == 0
    assert closest >= avoid_of(cfg).d_min_m - 1e-6


def test_a_deadlock_is_counted_once_per_blocked_period():
    cfg = config(deadlock_s=1.0)
    core, here, nearby = blocked_core(cfg)
    for k in range(int(cfg.deadlock_s / 0.125)):         # blocked for just under deadlock_s
        core.observe(k * 0.125, here)
        core.step(k * 0.125, nearby)
    assert core.counters["deadlocks"] == 0


def test_a_robot_blocked_on_its_way_to_the_meeting_point_is_no_deadlock():
    """Only robots in their packing (slot goal) can deadlock; one held by a neighbour while driving to a meeting
    point it has not agreed on is simply waiting."""
    cfg = config(deadlock_s=1.0)
    core = RobotCore(cfg, 0, avoid=avoid_of(cfg))
    here = np.array([3.5, 0.0])
    nearby = Nearby.of([here + [avoid_of(cfg).d_min_m + 0.01, 0.0]], ids=[1])
    core.observe(0.0, here)
    core.set_meeting_point([5.0, 0.0], 0.0)                      # no group: not agreed, the point itself
    for k in range(40):
        core.observe(k * 0.125, here)
        cmd = core.step(k * 0.125, nearby)
        assert abs(cmd.vy) < 1e-6 and speed(cmd) < 0.25 * cfg.v_max
    assert core.counters["deadlocks"] == 0


# ---- the honest d_min -----------------------------------------------------------------------------------------------

def test_an_old_position_of_a_moving_neighbour_widens_the_kept_distance():
    """The filter keeps d_min plus the position's age times the closing speed (own last command + the neighbour's
    measured speed): the command equals the filter's with that distance, and is slower than with a fresh one."""
    cfg = config()
    here, goal = np.array([0.0, 0.0]), np.array([5.0, 0.0])
    nb = np.array([[1.6, 0.0]])
    age, nb_speed = 0.4, 0.5
    fresh = RobotCore(cfg, 0, avoid=avoid_of(cfg))
    old = RobotCore(cfg, 0, avoid=avoid_of(cfg))
    ref = avoid_of(cfg)
    last = 0.0
    for t in (0.0, 0.1, 0.2):
        for core in (fresh, old):
            core.observe(t, here)
            core.set_meeting_point(goal, t)
        c_fresh = fresh.step(t, Nearby.of(nb))
        c_old = old.step(t, Nearby.of(nb, ages=[age], speeds=[nb_speed]))
        u_nom = cfg.v_max * (goal - here) / np.linalg.norm(goal - here)
        expect_fresh = ref.filter(here, u_nom, nb, d_min=np.array([ref.d_min_m]))
        expect_old = ref.filter(here, u_nom, nb, d_min=np.array([ref.d_min_m + age * (last + nb_speed)]))
        assert [c_fresh.vx, c_fresh.vy] == pytest.approx(expect_fresh.tolist(), abs=1e-9)
        assert [c_old.vx, c_old.vy] == pytest.approx(expect_old.tolist(), abs=1e-9)
        assert c_old.vx < c_fresh.vx
        last = speed(c_old)


def test_negative_ages_and_speeds_count_as_zero():
    cfg = config()
    here, nb = np.array([0.0, 0.0]), np.array([[1.0, 0.2]])
    a, b = RobotCore(cfg, 0, avoid=avoid_of(cfg)), RobotCore(cfg, 0, avoid=avoid_of(cfg))
    for core in (a, b):
        core.observe(0.0, here)
        core.set_meeting_point([5.0, 0.0], 0.0)
    ca = a.step(0.0, Nearby.of(nb))
    cb = b.step(0.0, Nearby.of(nb, ages=[-2.0], speeds=[-3.0]))
    assert (ca.vx, ca.vy) == pytest.approx((cb.vx, cb.vy))


def test_driving_at_a_neighbour_with_an_old_position_slows_earlier_and_stops_farther():
    cfg = config()
    dt = cfg.control_period_s
    nb = np.array([[6.0, 0.0]])
    age, nb_speed = 1.0, 0.5
    results = {}
    for label, a, s in (("fresh", 0.0, 0.0), ("old", age, nb_speed)):
        core = RobotCore(cfg, 0, avoid=avoid_of(cfg))
        pos = np.array([-3.0, 0.0])
        core.set_meeting_point([9.0, 0.0], 0.0)
        first_slow = None
        for k in range(300):
            t = k * dt
            core.observe(t, pos)
            cmd = core.step(t, Nearby.of(nb, ages=[a], speeds=[s]))
            if first_slow is None and speed(cmd) < 0.99 * cfg.v_max:
                first_slow = k
            pos = pos + dt * np.array([cmd.vx, cmd.vy])
        results[label] = first_slow, float(np.linalg.norm(pos - nb[0]))
    d_min = avoid_of(cfg).d_min_m
    assert results["old"][0] < results["fresh"][0]
    assert results["fresh"][1] == pytest.approx(d_min, abs=0.02)
    # at rest the closing speed is the neighbour's alone: d_min + age * speed
    assert results["old"][1] == pytest.approx(d_min + age * nb_speed, abs=0.02)


# ---- found in review: ties, unicycles' own point, limits changed at run time ------------------------------------

def test_mirror_image_robots_still_get_different_slots():
    """Two robots at exact mirror images of each other are a tie for the assignment; both solve it with the rows in
    the order of the robots' ids, so they break it the same way and never claim one slot."""
    cfg = config(num_robots=2)
    target = np.zeros(2)
    pos = np.array([[0.275, 1.0], [0.275, -1.0]])
    cores = [agreed_core(cfg, i, pos[i], target, [target])[0] for i in range(2)]
    g0 = cores[0].step(0.0, Nearby.of(pos[[1]], ids=[1])).goal
    g1 = cores[1].step(0.0, Nearby.of(pos[[0]], ids=[0])).goal
    assert cores[0].slot != cores[1].slot and not np.allclose(g0, g1)


def test_unicycles_that_know_each_others_points_never_claim_one_slot():
    """Headless unicycles see each other at their near-identity points (``nearby_points``); each counts itself at
    its own point too, so the two solve the same assignment."""
    from consensus.control.collision import near_identity_point

    cfg = config(num_robots=2, kinematics="unicycle")
    rng = np.random.default_rng(1)
    for _ in range(100):
        poses = np.column_stack([rng.uniform(-3, 3, (2, 2)), rng.uniform(-np.pi, np.pi, 2)])
        cores = []
        for i in range(2):
            core = RobotCore(cfg, i, avoid=avoid_of(cfg), nearby_points=True)
            core.observe(0.0, poses[i, :2], poses[i, 2])
            core.set_meeting_point([0.0, 0.0], 0.0, group=[0, 1])
            other = 1 - i
            core.step(0.0, Nearby.of(near_identity_point(poses[other], core.avoid.offset)[None], ids=[other]))
            cores.append(core)
        assert cores[0].slot != cores[1].slot, poses


def test_limits_changed_at_run_time_bind_the_filtered_unicycle_too():
    cfg = config(kinematics="unicycle")
    core = RobotCore(cfg, 0, avoid=avoid_of(cfg))
    core.observe(0.0, [0.0, 0.0], 0.0)
    core.set_meeting_point([5.0, 0.0], 0.0)
    assert core.step(0.1, NOBODY).vx > 0.5
    core.set_limits(config(kinematics="unicycle", v_max=0.2, w_max=0.5))
    cmd = core.step(0.2, NOBODY)
    assert 0 < cmd.vx <= 0.2 + 1e-9 and abs(cmd.wz) <= 0.5 + 1e-9
    assert core.avoid.v_max == 0.2 and core.avoid.offset == pytest.approx(0.2 / 0.5)


def test_bodies_never_move_before_the_first_nearby_message():
    """With the filter a robot stands still until it knows where the others are (its first ``nearby``); the start
    of a ROS run, before the relay has heard every state, is when two robots close together would otherwise meet."""
    cfg = config()
    core = RobotCore(cfg, 0, avoid=avoid_of(cfg))
    core.observe(0.0, [0.0, 0.0])
    core.set_meeting_point([3.0, 0.0], 0.0)
    assert is_zero(core.step(0.1), "no_nearby") and core.counters["stale_stops"] == 0
    assert core.step(0.2, NOBODY).reason == "ok"
    point = RobotCore(cfg, 1)                          # point robots need no one's position
    point.observe(0.0, [0.0, 0.0])
    point.set_meeting_point([3.0, 0.0], 0.0)
    assert point.step(0.1).reason == "ok"
