"""The robot core's parts (consensus.control.robot_core, "Parts") at their boundaries: each part works on a
``RobotState`` alone, none imports the core nor reaches into another's or the filter's privates, and the core's
attributes are its parts' (read and written through it)."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import consensus.control as control
from consensus.control.avoidance import avoidance_from_config
from consensus.control.dynamics import dynamics_of
from consensus.control.filter_adapter import FilterAdapter, d_min_rows
from consensus.control.goal import GoalKeeper
from consensus.control.robot_core import RobotCore
from consensus.control.robot_state import Heard, Nearby, RobotState
from consensus.control.safety import Geofence
from consensus.control.safety_gate import SafetyGate
from consensus.control.schedule import PlannerSchedule
from support.kernel_config import MeanPlanner, robot_config

PARTS = ("robot_state", "schedule", "safety_gate", "goal", "filter_adapter", "creep")


def _state(cfg) -> RobotState:
    return RobotState(cfg, 0, int(cfg.dim), Geofence.from_bounds(cfg.workspace), float(cfg.v_max), float(cfg.w_max))


@pytest.mark.parametrize("name", PARTS)
def test_a_part_imports_no_core_and_reads_no_private_of_another(name):
    tree = ast.parse((Path(control.__file__).parent / f"{name}.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"consensus.control.robot_core", "consensus.control.fleet_core"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            assert isinstance(node.value, ast.Name) and node.value.id == "self", (name, node.attr, node.lineno)


def test_the_core_s_attributes_are_its_parts():
    cfg = robot_config(collision_avoidance="cbf", num_robots=3)
    core = RobotCore(cfg, 1, MeanPlanner(), avoid=avoidance_from_config(cfg, ros=True))
    core.census_expected = True
    core.watch_creep = False
    assert core.goals.census_expected is True and core.gate.watch_creep is False
    core.observe(0.0, [1.0, 2.0], 0.5)
    assert core.pos is core.shared.pos and core.yaw == core.shared.yaw == 0.5
    core.set_meeting_point([1.0, 1.0], 0.0, group=(0, 1))
    assert core.group == core.goals.group == (0, 1) and core.agreed and core.meeting_point is core.shared.meeting_point
    assert core.counters is core.shared.counters and core.round == core.schedule.round == 0
    assert core.body_v_max == core.filter.body_v_max and core.fresh_s == core.filter.fresh_s


def test_the_gate_alone_stops_in_order_and_counts():
    cfg = robot_config()
    st = _state(cfg)
    gate = SafetyGate(st, dynamics_of(cfg.kinematics), None, n_robots=1, nearby_horizon=0.0, keep_s=2.0)
    assert gate.rules(0.0, None).reason == "stale_odom" and st.counters["stale_stops"] == 0   # no pose yet
    gate.observe(0.0, [0.0, 0.0])
    assert gate.rules(0.0, None).reason == "no_plan"
    st.meeting_point, st.last_round_done = np.zeros(2), 0.0
    assert gate.rules(0.0, None) is None
    gate.set_estop(True)
    assert gate.rules(0.0, None).reason == "estopped" and st.counters["estops"] == 1 and st.last_speed == 0.0
    assert gate.state_name(0.0, None, blocked=False) == "estopped"


def test_the_gate_refuses_a_future_delivery_whole():
    cfg = robot_config()
    st = _state(cfg)
    gate = SafetyGate(st, dynamics_of(cfg.kinematics), None, n_robots=2, nearby_horizon=0.0, keep_s=2.0)
    heard = Heard(np.zeros((1, 2)), np.zeros((1, 2)))
    assert gate.check_heard(1.0, heard, stamp=100.0) == (None, 1)
    assert gate.check_census(1.0, Nearby.of(np.zeros((1, 2)), ids=[1]), stamp=100.0) is None


def test_the_schedule_alone_clamps_a_round_into_the_fence():
    cfg = robot_config()
    st = _state(cfg)
    sched = PlannerSchedule(st, MeanPlanner(), None, meeting_points=False)
    assert sched.plan(0.0, Heard.none(2)) is None                     # no pose yet
    st.pos = np.zeros(2)
    far = np.array([[1e3, 1e3]])
    req = sched.plan(0.0, Heard(far, far))
    assert req is not None and sched.round == 1
    done = sched.collect(1.0)
    assert done.clamped and st.counters["clamped"] == 1 and st.last_round_done == 1.0
    assert Geofence.from_bounds(cfg.workspace).contains(st.meeting_point)
    assert done.record(0, 1.0, st.meeting_point, False)["round"] == 0
    assert not sched.agrees(st.meeting_point, 0.1)                            # the neighbour's point is far


def test_news_wait_keeps_the_rounds_in_step_and_never_longer_than_its_bound():
    """``news_wait_s`` (issue 44): the first round waits until the others were heard, a later one until each
    neighbour's meeting point is new since the last round, each at most news_wait_s; 0 plans every slot."""
    st = _state(robot_config(news_wait_s=6.0, num_robots=3))
    st.pos = np.zeros(2)
    sched = PlannerSchedule(st, MeanPlanner(), None, meeting_points=True)
    mps = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert sched.plan(0.0, Heard.none(2)) is None and st.counters["news_waits"] == 1       # heard nobody yet
    assert sched.plan(1.0, Heard(mps[:1], mps[:1])) is None                              # one of the two others
    assert sched.plan(2.0, Heard(mps, mps)) is not None and sched.collect(2.5)            # round 0 on all it heard
    assert sched.plan(4.0, Heard(mps, mps)) is None                                      # nothing new: waits
    one_new = np.array([[2.0, 0.0], [0.0, 1.0]])
    assert sched.plan(6.0, Heard(one_new, one_new)) is None                              # one of two is new: waits
    both_new = np.array([[2.0, 0.0], [0.0, 2.0]])
    assert sched.plan(8.0, Heard(both_new, both_new)) is not None and sched.collect(8.5) and sched.round == 2
    assert sched.plan(10.0, Heard(both_new, both_new)) is None                            # a silent neighbour ...
    assert sched.plan(16.0, Heard(both_new, both_new)) is not None                        # ... holds it 6 s at most
    assert st.counters["news_waits"] == 5
    off = _state(robot_config())                                                          # the default: no wait
    off.pos = np.zeros(2)
    every = PlannerSchedule(off, MeanPlanner(), None, meeting_points=True)
    assert every.plan(0.0, Heard.none(2)) is not None and every.collect(0.1)
    assert every.plan(2.0, Heard.none(2)) is not None and off.counters["news_waits"] == 0


def test_goal_and_filter_alone_pack_and_batch_as_the_core_does():
    cfg = robot_config(collision_avoidance="cbf", num_robots=3)
    avoid = avoidance_from_config(cfg, ros=True)
    st = _state(cfg)
    filt = FilterAdapter(st, avoid, dynamics_of(cfg.kinematics), nearby_points=False, fresh_s=1.0,
                         silent_bound=float(cfg.silent_bound_m))
    goals = GoalKeeper(st, avoid, filt, st.geofence, n_slots=3, gap=0.1, deadlock_s=3.0, census_max_age=4.0)
    st.pos, st.meeting_point = np.zeros(2), np.zeros(2)
    assert goals.goal_for(None, 0.0) is st.meeting_point                      # not agreed: the meeting point
    goals.set_group((0, 1, 2))
    assert goals.needs_nearby()
    nearby = Nearby.of([[0.0, 1.0], [1.0, 0.0]], ages=[0.1, 5.0], speeds=[0.2, 0.0], ids=[1, 2])
    goal = goals.goal_for(nearby, 0.0)
    assert goal is not None and goals.slot is not None and not goals.needs_nearby()
    rows = d_min_rows([filt], nearby.ages[None], nearby.speeds[None])
    np.testing.assert_allclose(rows[0], filt.d_min(nearby), rtol=0, atol=1e-12)
    v, gamma, bounds = filt.batch_row(2)
    assert v == avoid.point_v_max and gamma == avoid.gamma and np.shape(bounds) == (2, 2)


def test_a_filter_without_a_fence_has_no_box_in_a_batch():
    cfg = robot_config(collision_avoidance="cbf")
    avoid = avoidance_from_config(cfg, ros=True, workspace=[0.0])       # no fence of 2 or 4 numbers
    assert avoid.bounds is None and np.isnan(avoid.batch_row(2)[2]).all()
