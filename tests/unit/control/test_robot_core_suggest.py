"""An operator's meeting point (``RobotCore.suggest``, issue 45): applied inside the fence (the robot's meeting point,
agreed, planning held ``suggestion_hold_s``), refused with its reason outside it, not finite, of the wrong dimension or
without a planner; a round in flight when it came is dropped, not applied; every outcome counted. (The topology
node's acceptance of a meeting point that took one: tests/scenarios/aggregation/test_topology_suggestions.py.)"""
from __future__ import annotations

import numpy as np
import pytest

from consensus.control.avoidance import avoidance_from_config
from consensus.control.planner import PlanResult
from consensus.control.robot_core import Heard, RobotCore
from consensus.control.robot_state import COUNTERS
from support.kernel_config import robot_config

NONE = Heard.none(2)


class FixedPlanner:
    """Answers every round with ``target``; counts its rounds."""

    dim = 2

    def __init__(self, target) -> None:
        self.target = np.asarray(target, dtype=float)
        self.rounds = 0

    def plan(self, req):
        self.rounds += 1
        return PlanResult(meeting_point=self.target.copy(), reasoning="fixed", llm_calls=1)

    def reset(self) -> None:
        pass


def core_with(planner=None, **overrides) -> RobotCore:
    overrides.setdefault("num_robots", 4)
    overrides.setdefault("workspace", [-10.0, 10.0, -5.0, 5.0])
    cfg = robot_config(**overrides)
    core = RobotCore(cfg, 0, FixedPlanner([1.0, 1.0]) if planner is None else planner)
    core.observe(0.0, [0.0] * core.dim)
    return core


def test_the_counters_are_in_the_status_record():
    assert {"suggestions", "suggestions_refused", "rounds_dropped"} <= set(COUNTERS)
    status = core_with().status(0.0)
    assert status["suggestions"] == status["suggestions_refused"] == status["rounds_dropped"] == 0


def test_a_point_inside_the_fence_becomes_the_meeting_point_and_holds_the_planner():
    core = core_with(suggestion_hold_s=10.0)
    assert core.suggest([3.0, -2.0], 5.0) is None
    assert core.meeting_point.tolist() == [3.0, -2.0] and core.counters["suggestions"] == 1
    assert core.counters["clamped"] == 0 and core.planning_held_until == 15.0
    assert core.goal_for(None, 5.0).tolist() == [3.0, -2.0]       # point robots drive to it
    # no round starts before the hold is over: not even an overrun is counted, and the robot is not stale for it
    for t in (6.0, 10.0, 14.9):
        assert core.plan(t, NONE) is None
    assert core.round == 0 and core.counters["overruns"] == 0 and core.last_round_done == 14.9
    assert core.meeting_point.tolist() == [3.0, -2.0]
    # then the planner's normal work
    assert core.plan(15.0, NONE) is not None
    assert core.collect(15.0)["target"] == [1.0, 1.0] and core.round == 1


def test_a_held_robot_with_bodies_packs_around_the_point_at_once():
    cfg = robot_config(num_robots=4, collision_avoidance="cbf")
    core = RobotCore(cfg, 0, FixedPlanner([1.0, 1.0]), avoid=avoidance_from_config(cfg, ros=True))
    core.observe(0.0, [0.0, 0.0])
    assert not core.agreed
    assert core.suggest([3.0, -2.0], 1.0) is None
    assert core.agreed                          # every robot got the same point: its slot around it, not the point
    goal = core.goal_for(None, 1.0)
    assert goal is not None and np.linalg.norm(goal - [3.0, -2.0]) < 1.0 and core.slot is not None


@pytest.mark.parametrize("point, reason", [
    ([30.0, 0.0], "(30, 0) is outside the fence [-10, 10] x [-5, 5]"),
    ([0.0, -5.5], "(0, -5.5) is outside the fence [-10, 10] x [-5, 5]"),
    ([float("nan"), 0.0], "not a finite point"),
    ([0.0, float("inf")], "not a finite point"),
    ([1.0, 2.0, 3.0], "a 2-D run takes 2 coordinates, got 3"),
    ([1.0], "a 2-D run takes 2 coordinates, got 1"),
    ("here", "not a point"),
])
def test_a_bad_point_is_refused_with_its_reason_never_clamped(point, reason):
    core = core_with()
    core.plan(0.0, NONE)
    core.collect(0.0)
    before = core.meeting_point.copy()
    got = core.suggest(point, 1.0)
    assert got is not None and got.startswith(reason), got
    assert core.meeting_point.tolist() == before.tolist() and core.counters["clamped"] == 0
    assert core.counters["suggestions_refused"] == 1 and core.counters["suggestions"] == 0
    assert core.plan(2.0, NONE) is not None             # nothing held


def test_the_fence_s_edge_is_inside_and_a_1d_run_takes_x_alone():
    assert core_with().suggest([10.0, -5.0], 0.0) is None
    line = core_with(dim=1, workspace=[-4.0, 4.0], initial_positions=[0.0, 1.0, 2.0, 3.0])
    assert line.suggest([3.0], 0.0) is None and line.meeting_point.tolist() == [3.0]
    assert line.suggest([5.0], 0.0) == "(5) is outside the fence [-4, 4]"
    assert line.suggest([3.0, -2.0], 0.0) == "a 1-D run takes 1 coordinate, got 2"


def test_a_robot_without_a_planner_refuses():
    cfg = robot_config(num_robots=2)
    core = RobotCore(cfg, 0, None)
    assert "no planner" in core.suggest([1.0, 1.0], 0.0) and core.meeting_point is None
    assert core.counters["suggestions_refused"] == 1


def test_a_round_in_flight_when_the_point_came_is_dropped_not_applied():
    planner = FixedPlanner([7.0, 4.0])
    core = core_with(planner, suggestion_hold_s=4.0)
    assert core.plan(0.0, NONE) is not None           # requested before the suggestion, not collected yet
    assert core.suggest([3.0, -2.0], 0.5) is None
    assert core.collect(1.0) is None                  # it completes: dropped
    assert core.meeting_point.tolist() == [3.0, -2.0]
    assert core.counters["rounds_dropped"] == 1 and core.counters["llm_calls"] == 1   # its calls were made
    assert core.counters["llm_fallbacks"] == 0 and core.pending is None
    # a round requested after the hold is applied as usual
    assert core.plan(4.5, NONE) is not None and core.collect(4.5)["target"] == [7.0, 4.0]
    assert core.counters["rounds_dropped"] == 1


def test_a_second_point_replaces_the_first_and_restarts_the_hold():
    core = core_with(suggestion_hold_s=10.0)
    assert core.suggest([3.0, -2.0], 0.0) is None
    assert core.suggest([-1.0, 4.0], 6.0) is None
    assert core.meeting_point.tolist() == [-1.0, 4.0] and core.planning_held_until == 16.0
    assert core.plan(12.0, NONE) is None and core.counters["suggestions"] == 2
    assert core.counters["rounds_dropped"] == 0       # nothing was in flight
