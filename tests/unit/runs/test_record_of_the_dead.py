"""The record names every robot that died, whenever it died, and judges agreement on the living (issue 41).

A robot is lost when its state stops for ``robot_timeout_s``, or when it never sent one by then after the recording
started (its process died at start-up: before, such a robot was never lost, and its still body, metres away, kept
the four others' agreement from counting: ``converged: False``, spread 6.40 m). The convergence figures leave the
lost robots out; the safety figures (closest pair, geofence) keep every body, a dead robot's too. ``consensus run``
adds a robot whose own process died to ``lost_robots`` when the recorder had not judged it yet.

The ROS-free rule (``LossWatch``) and the runner's note are tested without ROS; the recorder's judgement in-process
(rclpy initialised, no process started). A killed robot in a real run: tests/ros/test_lost_robot.py."""
from __future__ import annotations

import json

import numpy as np
import pytest

from consensus.metrics.convergence import LossWatch, on_the_living
from consensus.runs.ros_runner import note_lost_robots, robot_of_process


# ------------------------------------------------------------------------------------------------ ROS-free rule
def test_a_robot_never_heard_is_lost_one_timeout_after_the_recording_started_and_counts_at_no_sample():
    watch = LossWatch(3, timeout_s=1.5)
    t0 = 100.0
    for k in range(11):                                   # 0.0 .. 2.0 s; robot 1 speaks until 0.4 s, robot 2 never
        now = t0 + 0.2 * k
        watch.heard(0, now)
        if k <= 2:
            watch.heard(1, now)
        watch.update(now, t0)
        watch.sample()
    assert sorted(watch.lost) == [1, 2]
    lost = {e["robot"]: e for e in watch.losses}
    assert lost[2]["event"] == "lost" and lost[2]["last_state_s"] is None and lost[2]["t_s"] == pytest.approx(1.6)
    assert lost[1]["last_state_s"] == pytest.approx(0.4) and lost[1]["t_s"] == pytest.approx(2.0)
    members = watch.members()
    assert members.shape == (11, 3)
    assert members[:, 0].all() and not members[:, 2].any()          # never heard: never a member, even before 1.6 s
    assert members[:10, 1].all() and not members[10, 1]              # robot 1 counted until its loss
    watch.heard(1, t0 + 2.2)                                          # it speaks again: back
    assert watch.update(t0 + 2.2, t0) == [{"robot": 1, "event": "back", "t_s": 2.2}]
    assert sorted(watch.lost) == [2] and watch.living().tolist() == [True, True, False]


def test_agreement_is_judged_on_the_living_members_only():
    series = np.zeros((2, 3, 2))
    series[:, 2] = (6.0, 0.0)
    members = np.array([[True, True, True], [True, True, False]])
    out = on_the_living(series, members)
    assert np.isfinite(out[0]).all() and np.isnan(out[1, 2]).all() and np.isfinite(out[1, :2]).all()
    with pytest.raises(ValueError, match="members"):
        on_the_living(series, members[:, :2])
    with pytest.raises(ValueError, match="timeout_s"):
        LossWatch(3, timeout_s=0.0)


# ------------------------------------------------------------------------------------------------ the runner's note
def test_the_runner_names_a_robot_whose_process_died_that_the_recorder_had_not_judged(tmp_path):
    assert robot_of_process("robot_2/agent") == 2 and robot_of_process("fleet_a/robot_11/agent") == 11
    assert robot_of_process("bag_recorder") is None and robot_of_process("fleet") is None
    earlier = {"robot": 3, "event": "lost", "t_s": 4.2, "last_state_s": 2.1}
    (tmp_path / "summary.json").write_text(json.dumps({"lost_robots": [3], "losses": [earlier]}))
    dead = [{"process": "robot_2/agent", "exit_code": -9, "rule": "the run went on"},
            {"process": "bag_recorder", "exit_code": -9, "rule": "the run went on"},
            {"process": "robot_3/agent", "exit_code": -9, "rule": "the run went on"}]
    assert note_lost_robots(tmp_path, dead) == [2]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["lost_robots"] == [2, 3]
    assert summary["losses"] == [earlier, {"robot": 2, "event": "lost", "t_s": None, "process": "robot_2/agent",
                                           "exit_code": -9}]
    assert note_lost_robots(tmp_path, dead) == []                    # once
    # a scenario whose summary keeps no lost_robots is left as it is
    (tmp_path / "summary.json").write_text(json.dumps({"end_reason": "duration"}))
    assert note_lost_robots(tmp_path, dead) == []
    assert json.loads((tmp_path / "summary.json").read_text()) == {"end_reason": "duration"}


# ------------------------------------------------------------------------------------------------ the recorder
LIVING = {0: (3.75, 0.75), 1: (4.25, 0.75), 4: (4.25, 1.25)}          # the survivors, 0.5 m apart, around (4, 1)
DEAD_AT_START = (10.5, 1.0)           # robot 2: never sent a state; its body 0.5 m beyond the fence (x <= 10)
DIES_AT = (4.0, 3.0)                  # robot 3: speaks until t = 0.8 s, then its body stays 2 m from the others
NEAR_BODY = (4.0, 2.7)                # robot 4 at t = 4 s: 0.3 m from robot 3's body


@pytest.mark.ros
@pytest.mark.parametrize("avoidance", ["none", "cbf"])
def test_the_recorder_lists_every_dead_robot_judges_agreement_on_the_living_and_safety_on_every_body(
        ros, tmp_path, avoidance):
    from geometry_msgs.msg import PointStamped
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from consensus.ros.cdr import pose_array_bytes
    from consensus.runs.rundir import read_trajectories
    from consensus.scenarios.aggregation.ros.recorder import START_WAIT_S, Recorder

    out = tmp_path / "run"
    node = Node("recorder", parameter_overrides=[
        Parameter("num_robots", value=5), Parameter("output_dir", value=str(out)), Parameter("markers", value=False),
        Parameter("robot_timeout_s", value=1.5), Parameter("converge_tol_m", value=1.0),
        Parameter("collision_avoidance", value=avoidance), Parameter("duration_s", value=60.0)])
    try:
        rec = Recorder(node)
        clock = {"t": rec.t_created + 0.5}
        rec._now = lambda: clock["t"]
        state = [rec._point(i, rec.state_pos, "recorder.state", rec.last_seen) for i in range(5)]
        target = [rec._point(i, rec.mps, "recorder.target") for i in range(5)]

        def point(x, y):
            msg = PointStamped()
            msg.point.x, msg.point.y = float(x), float(y)
            return msg

        def step(t_run: float | None, targets: bool = True) -> None:
            bodies = np.array([LIVING[0], LIVING[1], DEAD_AT_START, DIES_AT, LIVING[4]])
            if t_run is not None and 4.0 <= t_run < 4.3:
                bodies[4] = NEAR_BODY
            rec._truth_in(pose_array_bytes(int(clock["t"] * 1e9), "world", bodies))
            for i in (0, 1, 4):
                state[i](point(*bodies[i]))
                if targets:
                    target[i](point(4.0, 1.0))
            if t_run is None or t_run <= 0.8:
                state[3](point(*bodies[3]))
                if targets:
                    target[3](point(*DIES_AT))
            rec.sample()

        step(None, targets=False)
        assert rec.t0 is None                             # waits for robot 2's first state or a first target ...
        clock["t"] = rec.t_created + START_WAIT_S - 1.0
        step(None, targets=False)
        assert rec.t0 is None
        clock["t"] = rec.t_created + START_WAIT_S - 0.5
        step(None)
        assert rec.t0 == clock["t"]                       # ... and starts at the first target: the fleet moves
        t0 = rec.t0
        for k in range(1, 66):                            # 13 s at 5 Hz (a robot never heard: START_WAIT_S of grace)
            clock["t"] = t0 + 0.2 * k
            step(0.2 * k)
        summary = rec.finish()
    finally:
        node.destroy_node()

    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["lost_robots"] == [2, 3]
    lost = {e["robot"]: e for e in summary["losses"]}
    assert lost[2]["event"] == "lost" and lost[2]["last_state_s"] is None
    assert lost[3]["event"] == "lost" and lost[3]["last_state_s"] == pytest.approx(0.8)
    # agreement on the three living robots (their spread 0.71 m < 1.0 m; with robot 3's body, 2.3 m)
    assert summary["converged"] is True, summary
    assert summary["final_spread_m"] == pytest.approx(np.hypot(0.5, 0.5))
    assert summary["consensus_point"] == pytest.approx([4.0, 1.0], abs=0.2)
    # safety on every body: robot 4 came 0.3 m from robot 3's body; robot 2's body lies 0.5 m beyond the fence
    assert summary["min_pair_distance_m"] == pytest.approx(0.3)
    assert summary["outside_geofence_m"] == pytest.approx(0.5)
    times, pos, _ = read_trajectories(out / "trajectories.csv")
    assert pos[-1, 2] == pytest.approx(DEAD_AT_START) and pos[-1, 3] == pytest.approx(DIES_AT)
