"""The ROS robot node decides nothing of its own: fed the same inputs, the node (``consensus.ros.robot.RobotNode``,
its inputs arriving as serialized ROS messages) and a bare ``RobotCore`` fed as the headless loop feeds it
(``Heard``, ``Nearby``) send the same command at every tick and plan the same targets, with the collision filter
binding, the meeting points of the neighbours, ages and speeds of the nearby positions, packing slots and the
planner's rounds. The safety rules themselves are tested without ROS (tests/unit/control/test_robot_core.py)."""
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

    from consensus.control.fleet_core import FleetCore
    from consensus.ros.nearby import nearby_cloud
    from consensus.ros.robot import RobotNode

    cfg = load_config(None, num_robots=4, planner="average", collision_avoidance="cbf", planner_period_s=1.0,
                      control_period_s=0.1, state_rate_hz=5.0)
    rclpy.init()
    try:
        node = Node("agent", namespace="robot_0")
        robot_node = RobotNode(node, cfg, 0, AveragePlanner(dim=2), None, meeting_points=True)
        twin = RobotCore(cfg, 0, AveragePlanner(dim=2), avoid=avoidance_from_config(cfg, ros=True),
                         meeting_points=True)
        fleet = FleetCore([robot_node.core])
        sent: list[tuple[float, float, float]] = []
        robot_node.send = lambda vx, vy, wz, now=None: sent.append((vx, vy, wz))       # the node's output, captured
        clock = {"t": 100.0}
        robot_node._now = lambda: clock["t"]                                            # the node's clock, controlled

        rng = np.random.default_rng(3)
        pos = np.array([0.0, 0.0])
        others = np.array([[0.8, 0.05], [2.6, 1.5], [2.5, -1.2]])      # one of them in the way
        for tick in range(60):
            t = clock["t"] = 100.0 + 0.1 * tick
            stamp_ns = int(round(t * 1e9))
            odom = Odometry()
            odom.pose.pose.position.x, odom.pose.pose.position.y = pos
            odom.pose.pose.orientation.w = 1.0
            robot_node._on_odom_raw(serialize_message(odom))
            twin.observe(t, pos)
            others += rng.normal(0.0, 0.02, others.shape)                         # the others move a little
            ages = rng.uniform(0.0, 0.3, len(others))
            speeds = rng.uniform(0.0, 0.5, len(others))
            robot_node._on_nearby_raw(serialize_message(nearby_cloud(stamp_ns, others, ages, speeds, np.arange(1, 4))))
            nearby = Nearby.of(others, ages, speeds, np.arange(1, 4))
            if tick % 10 == 0:                                                     # a planning slot
                mps = np.array([2.4, 0.0]) + rng.normal(0.0, 0.3, others.shape)
                robot_node._on_neighbors_raw(_pose_array(stamp_ns, others))
                robot_node._on_targets_raw(_pose_array(stamp_ns, mps))
                robot_node.plan_tick()
                twin.plan(t, Heard(others.copy(), mps))
                twin.collect(t)
            # the node's control tick as its process's fleet clock runs it, a fleet of one (FleetClock._group_tick
            # with the clock's time here in the test's hand)
            robot_node.prepare(t, t)
            robot_node.finish(fleet.step(t, [robot_node.nearby])[0])
            robot_node.flush()
            robot_node.after_control()
            cmd = twin.step(t, nearby)
            # equal up to the wire's float32 ages and speeds (sensor_msgs/PointCloud2 fields of `nearby`)
            assert sent[-1] == pytest.approx((cmd.vx, cmd.vy, cmd.wz), abs=1e-6), tick
            assert np.allclose(robot_node.core.meeting_point, twin.meeting_point)
            pos = pos + 0.1 * np.array(sent[-1][:2])
        assert twin.counters == robot_node.core.counters
        assert twin.avoid.counters.interventions > 0            # the filter did bind on the way
        node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_a_planning_slot_between_the_positions_and_their_meeting_points_plans_on_the_previous_delivery():
    """``neighbors`` and ``neighbor_targets`` travel on two topics: a planning slot that falls between them plans on
    the previous pair, never on the neighbours' positions (which would pull the meeting point towards their
    centroid); the waiting delivery is used once its meeting points come; a relay that sends none is planned on with
    the positions after ``UNPAIRED_DELIVERIES`` deliveries, counted."""
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rclpy.serialization import serialize_message

    from consensus.ros.robot import UNPAIRED_DELIVERIES, RobotNode

    cfg = load_config(None, num_robots=3, planner="average", collision_avoidance="none", planner_period_s=1.0)
    rclpy.init()
    try:
        node = Node("agent", namespace="robot_0")
        robot_node = RobotNode(node, cfg, 0, AveragePlanner(dim=2), None, meeting_points=True)
        robot_node.send = lambda vx, vy, wz, now=None: None
        clock = {"t": 100.0}
        robot_node._now = lambda: clock["t"]
        odom = Odometry()
        odom.pose.pose.orientation.w = 1.0
        robot_node._on_odom_raw(serialize_message(odom))            # own position (0, 0)
        positions = np.array([[4.0, 4.0], [-4.0, 4.0]])        # far from where they agree to meet
        agreed = np.array([[1.0, 1.0], [1.0, 1.0]])

        def slot(t: float) -> np.ndarray:
            clock["t"] = t
            robot_node.plan_tick()
            return robot_node.core.meeting_point.copy()

        robot_node._on_neighbors_raw(_pose_array(int(100e9), positions))
        robot_node._on_targets_raw(_pose_array(int(100e9), agreed))
        t1 = slot(100.1)
        assert np.allclose(t1, [2 / 3, 2 / 3])                   # (own 0,0 + 1,1 + 1,1) / 3

        robot_node._on_neighbors_raw(_pose_array(int(101e9), positions))      # its meeting points not here yet
        t2 = slot(101.1)
        assert np.allclose(t2, (t1 + agreed.sum(axis=0)) / 3)             # the previous pair
        robot_node._on_targets_raw(_pose_array(int(101e9), agreed + 1.0))
        t3 = slot(102.1)
        assert np.allclose(t3, (t2 + (agreed + 1.0).sum(axis=0)) / 3)     # the waiting delivery, paired
        assert robot_node.health.bad_by_input.get("neighbor_targets", 0) == 0

        for k in range(UNPAIRED_DELIVERIES + 1):                # a relay that stopped sending meeting points
            robot_node._on_neighbors_raw(_pose_array(int((103 + k) * 1e9), positions))
        before = robot_node.core.meeting_point.copy()
        after = slot(103.1 + UNPAIRED_DELIVERIES)
        assert np.allclose(after, (before + positions.sum(axis=0)) / 3)
        assert robot_node.health.bad_by_input.get("neighbor_targets", 0) == 1

        # meeting points that never match their delivery (stamped otherwise, e.g. forged): the robot waits as long
        # and then plans on the positions, counted; a matching pair is used again at once
        robot_node._on_neighbors_raw(_pose_array(int(200e9), positions))
        robot_node._on_targets_raw(_pose_array(int(200e9), agreed))
        t = slot(200.1)
        for k in range(1, UNPAIRED_DELIVERIES + 2):
            robot_node._on_neighbors_raw(_pose_array(int((200 + k) * 1e9), positions))
            robot_node._on_targets_raw(_pose_array(int((200 + k) * 1e9) + 1, agreed))
            before, t = t, slot(200.1 + k)
            if k <= UNPAIRED_DELIVERIES:                           # waiting: the pair of 200 s planned on again
                assert np.allclose(t, (before + agreed.sum(axis=0)) / 3), k
        assert np.allclose(t, (before + positions.sum(axis=0)) / 3)        # then the positions, counted
        assert robot_node.health.bad_by_input["neighbor_targets"] == 2
        robot_node._on_targets_raw(_pose_array(int(250e9), agreed))
        robot_node._on_neighbors_raw(_pose_array(int(250e9), positions))          # meeting points first this time
        assert np.allclose(slot(250.1), (t + agreed.sum(axis=0)) / 3)
        node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_every_odometry_message_between_two_ticks_is_checked_not_only_the_newest():
    """A second stream on ``odom`` whose messages each arrive just before the real ones (the forged-odometry case of
    issue 41, as a loaded host or a stranger's timing makes it) is still seen: every message since the last tick is
    checked, in order. The node keeping only the newest saw none of them (the deployed run drove on, 0 held ticks):
    here the forged ones are refused as jumps, counted, and the robot holds still (``pose_suspect``). Of a flood
    beyond ``ODOM_KEPT`` a tick the newest are checked: a forgery among them is seen, an honest one costs nothing."""
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rclpy.serialization import serialize_message

    from consensus.control.fleet_core import FleetCore
    from consensus.ros.robot import ODOM_KEPT, RobotNode

    cfg = load_config(None, num_robots=2, planner="average", collision_avoidance="none", control_period_s=0.1)
    rclpy.init()
    try:
        node = Node("agent", namespace="robot_0")
        robot_node = RobotNode(node, cfg, 0, AveragePlanner(dim=2), None)
        sent: list[tuple[float, float, float]] = []
        robot_node.send = lambda vx, vy, wz, now=None: sent.append((vx, vy, wz))
        clock = {"t": 100.0}
        robot_node._now = lambda: clock["t"]
        fleet = FleetCore([robot_node.core])

        def odom(x: float, y: float, t: float) -> bytes:
            msg = Odometry()
            msg.header.frame_id = "world"
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(t), int(round((t % 1) * 1e9))
            msg.pose.pose.position.x, msg.pose.pose.position.y = x, y
            msg.pose.pose.orientation.w = 1.0
            return serialize_message(msg)

        def tick(t: float) -> str:
            clock["t"] = t
            robot_node.prepare(t, t)
            cmd = fleet.step(t, [robot_node.nearby])[0]
            robot_node.finish(cmd)
            robot_node.flush()
            robot_node.after_control()
            return cmd.reason

        robot_node.core.set_meeting_point((5.0, 0.0), 100.0)
        for k in range(10):                                    # honest: the robot drives
            t = 100.0 + 0.1 * k
            robot_node._on_odom_raw(odom(0.05 * k, 0.0, t))
            tick(t + 0.001)
        assert sent[-1][0] > 0.0
        held = []
        for k in range(10, 30):                                # a forged message just before each real one
            t = 100.0 + 0.1 * k
            robot_node._on_odom_raw(odom(0.05 * k + 2.0 * (t - 101.0) + 1.0, 0.0, t - 0.002))
            robot_node._on_odom_raw(odom(0.05 * 10, 0.0, t))
            held.append(tick(t + 0.001))
        bad = dict(robot_node.health.bad_by_input)
        assert bad.get("odom.jump", 0) >= 3, bad
        assert "pose_suspect" in held[:10] and held[-1] == "pose_suspect" and sent[-1][:2] == (0.0, 0.0), held
        before = robot_node.health.bad_messages
        for k in range(3 * ODOM_KEPT):                         # an honest flood within one tick: nothing counted
            robot_node._on_odom_raw(odom(0.5, 0.0, 105.0 + k * 1e-4))
        tick(105.01)
        assert robot_node.health.bad_messages == before
        for k in range(3 * ODOM_KEPT):                         # one forgery among the newest of a flood: seen
            robot_node._on_odom_raw(odom(3.5 if k == 3 * ODOM_KEPT - 2 else 0.5, 0.0, 105.1 + k * 1e-4))
        tick(105.2)
        assert robot_node.health.bad_by_input["odom.jump"] == bad["odom.jump"] + 1
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
