"""The ROS robot node decides nothing of its own: fed the same inputs, the node (``consensus.ros.robot.RobotAgent``,
its inputs arriving as serialized ROS messages) and a bare ``RobotCore`` fed as the headless loop feeds it
(``Heard``, ``Nearby``) send the same command at every tick and plan the same targets, with the collision filter
binding, the meeting points of the neighbours, ages and speeds of the nearby positions, packing slots and the
planner's rounds. The safety rules themselves are tested without ROS (tests/test_robot_core.py)."""
from __future__ import annotations

import numpy as np
import pytest

from consensus.control.avoidance import avoidance_from_config
from consensus.control.robot_core import Heard, Nearby, RobotCore
from consensus.scenarios.aggregation.config import load_config
from consensus.scenarios.aggregation.planners.classical import AveragePlanner

pytestmark = pytest.mark.ros


def _pose_array(stamp_ns: int, xy) -> bytes:
    from consensus.ros.cdr import pose_array_bytes

    return pose_array_bytes(stamp_ns, "world", np.asarray(xy, dtype=float).reshape(-1, 2))


def test_the_node_and_the_headless_core_send_the_same_commands_for_the_same_inputs():
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rclpy.serialization import serialize_message

    from consensus.ros.nearby import nearby_cloud
    from consensus.ros.robot import RobotAgent

    cfg = load_config(None, num_robots=4, planner="average", collision_avoidance="cbf", planner_period_s=1.0,
                      control_period_s=0.1, state_rate_hz=5.0)
    rclpy.init()
    try:
        node = Node("agent", namespace="robot_0")
        agent = RobotAgent(node, cfg, 0, AveragePlanner(dim=2), None, meeting_points=True)
        twin = RobotCore(cfg, 0, AveragePlanner(dim=2), avoid=avoidance_from_config(cfg, ros=True),
                         meeting_points=True)
        sent: list[tuple[float, float, float]] = []
        agent.send = lambda vx, vy, wz, now=None: sent.append((vx, vy, wz))       # the node's output, captured
        clock = {"t": 100.0}
        agent._now = lambda: clock["t"]                                            # the node's clock, controlled

        rng = np.random.default_rng(3)
        pos = np.array([0.0, 0.0])
        others = np.array([[0.8, 0.05], [2.6, 1.5], [2.5, -1.2]])      # one of them in the way
        for tick in range(60):
            t = clock["t"] = 100.0 + 0.1 * tick
            stamp_ns = int(round(t * 1e9))
            odom = Odometry()
            odom.pose.pose.position.x, odom.pose.pose.position.y = pos
            odom.pose.pose.orientation.w = 1.0
            agent._on_odom_raw(serialize_message(odom))
            twin.observe(t, pos)
            others += rng.normal(0.0, 0.02, others.shape)                         # the others move a little
            ages = rng.uniform(0.0, 0.3, len(others))
            speeds = rng.uniform(0.0, 0.5, len(others))
            agent._on_nearby_raw(serialize_message(nearby_cloud(stamp_ns, others, ages, speeds, np.arange(1, 4))))
            nearby = Nearby.of(others, ages, speeds, np.arange(1, 4))
            if tick % 10 == 0:                                                     # a planning slot
                mps = np.array([2.4, 0.0]) + rng.normal(0.0, 0.3, others.shape)
                agent._on_neighbors_raw(_pose_array(stamp_ns, others))
                agent._on_targets_raw(_pose_array(stamp_ns, mps))
                agent.plan_tick()
                twin.plan(t, Heard(others.copy(), mps))
                twin.collect(t)
            agent.control_tick()
            cmd = twin.step(t, nearby)
            # equal up to the wire's float32 ages and speeds (sensor_msgs/PointCloud2 fields of `nearby`)
            assert sent[-1] == pytest.approx((cmd.vx, cmd.vy, cmd.wz), abs=1e-6), tick
            assert np.allclose(agent.core.target, twin.target)
            pos = pos + 0.1 * np.array(sent[-1][:2])
        assert twin.counters == agent.core.counters
        assert twin.avoid.counters.interventions > 0            # the filter did bind on the way
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
