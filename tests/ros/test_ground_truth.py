"""Ground truth in the record: a simulator that knows every robot's true pose publishes it in one message
(``names.GROUND_TRUTH``, geometry_msgs/PoseArray), and the aggregation recorder records that message, not the robots'
odometry, which a stranger may forge and a simulator's realism knobs make noisy. The recorder refuses a message with
another number of poses than robots and each absurd pose, counted, keeping the last good positions. (MuJoCo's noisy
odometry against its ground truth: tests/unit/sims/test_mujoco.py.)"""
from __future__ import annotations

import math

import numpy as np
import pytest

from consensus.control.motion import sim_names, sim_spec

pytestmark = pytest.mark.ros


def test_the_simulators_that_know_the_true_poses_say_so():
    assert {name for name in sim_names() if sim_spec(name).ground_truth} == {"builtin", "mujoco"}


def test_the_simulator_publishes_every_robot_s_true_pose_with_its_odometry(ros):
    from geometry_msgs.msg import PoseArray
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.serialization import deserialize_message

    from consensus.control.dynamics.world import KinematicWorld
    from consensus.sims.builtin.ros import Simulator
    from support.sim_outputs import capture

    node = Node("sim", parameter_overrides=[Parameter("num_robots", value=3), Parameter("kinematics", value="unicycle"),
                                            Parameter("seed", value=4)])
    try:
        sim = Simulator(node)
        sent = capture(sim)
        truth, odom = sent.truth, sent.odom
        sim.cmd[1] = (0.5, 0.0, 1.0)                  # robot 1 drives and turns
        sim.cmd_time[:] = sim.cmd_clock()
        for _ in range(5):
            sim.step()
        assert len(truth) == 5
        msg = deserialize_message(truth[-1], PoseArray)
        assert msg.header.frame_id == "world" and len(msg.poses) == 3
        for i, p in enumerate(msg.poses):
            yaw = 2.0 * math.atan2(p.orientation.z, p.orientation.w)
            assert (p.position.x, p.position.y) == pytest.approx(tuple(sim.world.poses()[i, :2]))
            assert math.remainder(yaw - sim.world.poses()[i, 2], 2 * math.pi) == pytest.approx(0.0, abs=1e-9)
            o = deserialize_message(odom[i], Odometry)        # the builtin sim's odometry is the truth itself
            assert (o.pose.pose.position.x, o.pose.pose.position.y) == pytest.approx((p.position.x, p.position.y))
            assert o.header.stamp == msg.header.stamp
            if i == 1:                                        # a unicycle's twist is in its body frame
                tw = o.twist.twist
                assert (tw.linear.x, tw.linear.y, tw.angular.z) == pytest.approx((0.5, 0.0, 1.0), abs=1e-9)
        assert abs(sim.world.poses()[1, 2]) > 0.1             # robot 1 turned: its heading is in the message
        assert isinstance(sim.world, KinematicWorld)          # the node wraps the world the headless loops use
    finally:
        node.destroy_node()


def test_the_recorder_records_the_ground_truth_message_and_refuses_a_bad_one(ros, tmp_path):
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from consensus.ros.cdr import pose_array_bytes
    from consensus.scenarios.aggregation.ros.recorder import Recorder

    node = Node("recorder", parameter_overrides=[Parameter("num_robots", value=3),
                                                 Parameter("output_dir", value=str(tmp_path / "run")),
                                                 Parameter("markers", value=False)])
    try:
        rec = Recorder(node)
        assert rec.ground_truth                                # sim: builtin
        topics = {sub.topic_name for sub in node.subscriptions}
        assert "/ground_truth" in topics and not any(t.endswith("/odom") for t in topics), topics
        good = np.array([[1.0, 2.0], [-3.0, 0.5], [0.0, -1.0]])
        rec._truth_in(pose_array_bytes(10, "world", good))
        rec._decode_poses()
        assert np.array_equal(rec.pos, good)
        rec._truth_in(pose_array_bytes(11, "world", good[:2] + 5.0))           # a robot short
        rec._decode_poses()
        assert np.array_equal(rec.pos, good)
        bad = good + 1.0
        bad[2] = (math.nan, 0.0)
        rec._truth_in(pose_array_bytes(12, "world", bad))                        # one absurd pose
        rec._decode_poses()
        assert np.array_equal(rec.pos[:2], bad[:2]) and np.array_equal(rec.pos[2], good[2])
        assert rec.health.bad_by_input["recorder.ground_truth"] == 2
        rec._truth_in(b"\x00\x01garbage")                                        # undecodable
        rec._decode_poses()
        assert rec.health.bad_by_input["recorder.ground_truth"] == 3
    finally:
        node.destroy_node()


def test_without_a_ground_truth_message_the_recorder_turns_to_the_odometry(ros, tmp_path):
    """A simulator that should publish the ground truth but does not (started some other way): after
    ``START_WAIT_S`` the recorder subscribes to each robot's odometry and waits for it, instead of recording nothing."""
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from consensus.scenarios.aggregation.ros.recorder import START_WAIT_S, Recorder

    node = Node("recorder", parameter_overrides=[Parameter("num_robots", value=2),
                                                 Parameter("output_dir", value=str(tmp_path / "run")),
                                                 Parameter("markers", value=False)])
    try:
        rec = Recorder(node)
        clock = {"t": rec.t_created + START_WAIT_S - 1.0}
        rec._now = lambda: clock["t"]
        rec.sample()
        assert rec.ground_truth and rec.t0 is None                          # still waiting for the simulator
        clock["t"] += 1.5
        rec.sample()
        topics = {sub.topic_name for sub in node.subscriptions}
        assert not rec.ground_truth and rec.t0 is None                      # waits again, now for the odometry
        assert {"/robot_0/odom", "/robot_1/odom"} <= topics, topics
        # a ground truth that comes late is ignored (its subscription stays: destroying it while the executor
        # spins can crash the process), the positions come from the odometry
        from consensus.ros.cdr import pose_array_bytes

        rec._truth_in(pose_array_bytes(0, "world", np.array([[1.0, 2.0], [3.0, 4.0]]), np.zeros(2)))
        rec._decode_poses()
        assert rec._truth_raw is None and np.isnan(rec.pos).all()
    finally:
        node.destroy_node()
