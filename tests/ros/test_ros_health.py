"""Health counters of the ROS nodes (``consensus.ros.health.Health``): callback exceptions caught by ``guarded``
are counted (not only logged), every dropped input is counted in ``bad_messages``, and both reach the robots'
``planner/status`` and the nodes' ``health`` topic.

In-process rclpy tests in the session's own ROS domain (conftest.py); the EventsExecutor crash check runs in a
child process, since without ``guarded`` rclpy 9.1.2 dies of SIGSEGV (ros2/rclpy#1641).
"""
from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from consensus.scenarios.aggregation.config import AggregationConfig, load_config

pytestmark = pytest.mark.ros


def _cfg(**kw) -> AggregationConfig:
    base = dict(num_robots=2, planner="average", planner_period_s=0.3, control_period_s=0.05, odom_timeout_s=0.4,
                llm_backend="openai", seed=3)
    base.update(kw)
    return load_config(None, **base)


def _spin(ex, seconds: float, each=None) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if each is not None:
            each()
        ex.spin_once(timeout_sec=0.02)


def _pose(x: float, y: float):
    from geometry_msgs.msg import Pose

    p = Pose()
    p.position.x, p.position.y = x, y
    return p


# ------------------------------------------------------------------------------------------------ unit level
def test_health_counts_per_name_into_its_parent_and_sums_records():
    from consensus.ros.health import Health, sum_health

    parent = Health()
    child = Health(parent=parent)
    assert child.count_callback_error("a.tick") == 1 and child.count_callback_error("a.tick") == 2
    child.count_bad_message("a.odom")
    child.count_bad_message("a.neighbors", 3)
    child.count_bad_message("a.neighbors", 0)              # nothing dropped: nothing counted
    assert child.counts() == parent.counts() == {"callback_errors": 2, "bad_messages": 4}
    rec = child.record("/robot_0/agent")
    assert rec == {"node": "/robot_0/agent", "callback_errors": 2, "bad_messages": 4,
                   "errors_by_callback": {"a.tick": 2}, "bad_by_input": {"a.odom": 1, "a.neighbors": 3}}
    assert json.loads(json.dumps(rec)) == rec
    total = sum_health([rec, {"robot": 1, "callback_errors": 1, "bad_messages": 0}, {"node": "/x"},
                        {"callback_errors": "7", "bad_messages": True}, "garbage", None])
    assert total == {"callback_errors": 3, "bad_messages": 4}


def test_sane_refuses_non_finite_and_absurd_values():
    from consensus.ros.inputs import MAX_ABS_VALUE, sane

    assert sane(0.0, -3.5, MAX_ABS_VALUE, -MAX_ABS_VALUE)
    for bad in (math.nan, math.inf, -math.inf, 1e308, -1e308, 2 * MAX_ABS_VALUE):
        assert not sane(1.0, bad), bad


def test_read_xy_keeps_sane_positions_and_counts_what_it_drops():
    """The position decoding of the state/odometry inputs (nearby and topology relays, aggregation recorder,
    disaster grid): serialized bytes through the fast CDR path or rclpy's deserializer, or a message object; a
    NaN, infinite or absurd position, or bytes that do not decode, is None and one bad message of that input."""
    from geometry_msgs.msg import PointStamped
    from nav_msgs.msg import Odometry
    from rclpy.serialization import serialize_message

    from consensus.ros.health import Health
    from consensus.ros.inputs import MAX_ABS_VALUE, read_xy

    def point(x, y):
        m = PointStamped()
        m.header.frame_id = "world"
        m.point.x, m.point.y = x, y
        return m

    def odom(x, y):
        m = Odometry()
        m.header.frame_id, m.child_frame_id = "world", "robot_0/base_link"
        m.pose.pose.position.x, m.pose.pose.position.y = x, y
        return m

    health = Health()
    for make, kind in ((point, PointStamped), (odom, Odometry)):
        raw = serialize_message(make(1.5, -2.25))
        assert read_xy(raw, kind, health, "in") == (1.5, -2.25)
        assert read_xy(make(MAX_ABS_VALUE, 0.0), kind, health, "in") == (MAX_ABS_VALUE, 0.0)
        assert "in" not in health.bad_by_input
        for bad in (math.nan, math.inf, -math.inf, 1e308, 2 * MAX_ABS_VALUE):
            assert read_xy(serialize_message(make(0.0, bad)), kind, health, "state") is None
            assert read_xy(make(bad, 0.0), kind, health, "state") is None            # a message object too
        assert read_xy(b"\x00\x01\x00\x00garbage", kind, health, "odd") is None     # neither path decodes it
    assert health.bad_by_input == {"state": 20, "odd": 2}
    frame = b"world\0"                               # big-endian CDR: not the fast path's, rclpy's deserializer
    body = struct.pack(">iII", 1, 2, len(frame)) + frame
    body += b"\0" * (-len(body) % 8)
    assert read_xy(b"\x00\x00\x00\x00" + body + struct.pack(">3d", 1.5, -2.25, 0.0), PointStamped, health,
                   "in") == (1.5, -2.25)
    assert read_xy(b"\x00\x00\x00\x00" + body + struct.pack(">3d", math.nan, 0.0, 0.0), PointStamped, health,
                   "state") is None
    assert health.bad_by_input == {"state": 21, "odd": 2}


def test_guarded_counts_every_exception_but_logs_only_the_first_five(ros, caplog):
    from consensus.ros.health import HEALTH, Health, guarded

    health = Health()
    before = HEALTH.counts()["callback_errors"]
    calls = []

    def boom(msg) -> None:
        calls.append(msg)
        raise RuntimeError("boom")

    import logging

    class Collect(logging.Handler):                        # on the logger itself: another test's import of the
        def __init__(self):                                # real launch may have made it non-propagating
            super().__init__(logging.ERROR)
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    collect, ros_log = Collect(), logging.getLogger("consensus.ros")
    ros_log.addHandler(collect)
    cb = guarded(boom, "probe.boom", health)
    try:
        for k in range(8):
            assert cb(k) is None                            # nothing reaches the caller (the executor)
    finally:
        ros_log.removeHandler(collect)
    assert calls == list(range(8))
    assert health.errors_by_callback == {"probe.boom": 8} and health.callback_errors == 8
    assert len([line for line in collect.lines if "probe.boom failed" in line]) == 5

    class NodeLogger:                                       # a node's logger (rclpy): the lines go to /rosout
        def __init__(self):
            self.lines = []

        def error(self, line):
            self.lines.append(line)

    logged = Health(logger=NodeLogger())
    cb = guarded(boom, "probe.node", logged)
    for k in range(7):
        cb(k)
    assert len(logged.logger.lines) == 5 and "probe.node failed (1 times so far): RuntimeError: boom" in \
        logged.logger.lines[0]
    # without an explicit Health, the process's counters take it
    guarded(lambda: 1 / 0, "probe.default")()
    assert HEALTH.counts()["callback_errors"] == before + 1


# ------------------------------------------------------------------------------------------------ robot node
def test_robot_uses_the_good_neighbour_and_counts_forged_ones(ros):
    """A forged PoseArray on `neighbors`: NaN and +-1e308 entries (1e308 is finite: only the bound catches it)
    plus one good pose. The robot plans from the good one only and counts the three others in its status."""
    from geometry_msgs.msg import PoseArray
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import String

    from consensus.ros.fleet import FleetClock
    from consensus.ros.robot import RobotNode
    from consensus.scenarios.aggregation.planners.classical import AveragePlanner

    cfg = _cfg()
    robot = Node("agent", namespace="robot_0")
    robot_node = RobotNode(robot, cfg, 0, AveragePlanner(dim=2), None)
    FleetClock(robot, cfg, [robot_node], nearby_in_process=False)     # as in a robot's own process: a fleet of one
    drv = Node("forger")
    odom_pub = drv.create_publisher(Odometry, "/robot_0/odom", 10)
    nb_pub = drv.create_publisher(PoseArray, "/robot_0/neighbors", 10)
    status: list[dict] = []
    plans: list[dict] = []
    drv.create_subscription(String, "/robot_0/planner/status", lambda m: status.append(json.loads(m.data)), 50)
    drv.create_subscription(String, "/robot_0/planner/reasoning", lambda m: plans.append(json.loads(m.data)), 50)
    ex = SingleThreadedExecutor()
    ex.add_node(robot)
    ex.add_node(drv)
    forged = PoseArray()
    forged.poses = [_pose(math.nan, 1.0), _pose(1e308, 0.0), _pose(4.0, 0.0), _pose(-1e308, 2.0)]

    def publish() -> None:
        odom_pub.publish(Odometry())                      # at the origin
        nb_pub.publish(forged)

    try:
        _spin(ex, 1.5, publish)
        _spin(ex, 0.8)                                    # the last planning round and its status go out
        assert len(robot_node.neighbors.positions) == 1 and np.allclose(robot_node.neighbors.positions[0], [4.0, 0.0])
        assert plans and np.allclose(plans[-1]["target"], [2.0, 0.0])       # average of (0, 0) and (4, 0)
        assert np.allclose(robot_node.meeting_point, [2.0, 0.0])
        bad = robot_node.health.bad_messages
        assert bad >= 3 and bad % 3 == 0                  # three bad poses per forged message decoded
        assert robot_node.health.bad_by_input == {"neighbors": bad}
        assert status[-1]["bad_messages"] == bad and status[-1]["callback_errors"] == 0
        for key in ("robot", "round", "state", "llm_calls", "llm_fallbacks", "clamped", "overruns",
                    "planner_errors", "stale_stops", "control"):
            assert key in status[-1], key                 # the existing keys stay

        # a non-finite odometry never becomes the position; it is counted too
        nan_odom = Odometry()
        nan_odom.pose.pose.position.x = math.nan
        _spin(ex, 0.5, lambda: odom_pub.publish(nan_odom))
        assert np.allclose(robot_node.pos, [0.0, 0.0])
        assert robot_node.health.bad_by_input.get("odom", 0) >= 1
        assert robot_node.status()["bad_messages"] == robot_node.health.bad_messages > bad
    finally:
        robot.destroy_node()
        drv.destroy_node()


def test_a_raising_tick_is_counted_in_status_and_the_robot_goes_on(ros):
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import String

    from consensus.ros.fleet import FleetClock
    from consensus.ros.robot import RobotNode
    from consensus.scenarios.aggregation.planners.classical import AveragePlanner

    class BrokenRobot(RobotNode):
        def after_control(self) -> None:
            super().after_control()
            raise RuntimeError("bug in every control tick")

    cfg = _cfg()
    robot = Node("agent", namespace="robot_0")
    robot_node = BrokenRobot(robot, cfg, 0, AveragePlanner(dim=2), None)
    FleetClock(robot, cfg, [robot_node], nearby_in_process=False)     # as in a robot's own process: a fleet of one
    drv = Node("watcher")
    odom_pub = drv.create_publisher(Odometry, "/robot_0/odom", 10)
    status: list[dict] = []
    cmds: list[float] = []
    drv.create_subscription(String, "/robot_0/planner/status", lambda m: status.append(json.loads(m.data)), 50)
    drv.create_subscription(Twist, "/robot_0/cmd_vel", lambda m: cmds.append(time.monotonic()), 50)
    ex = SingleThreadedExecutor()
    ex.add_node(robot)
    ex.add_node(drv)
    try:
        _spin(ex, 1.5, lambda: odom_pub.publish(Odometry()))
        errors = robot_node.health.callback_errors
        assert errors >= 10 and robot_node.health.errors_by_callback == {"robot_0.control": errors}
        assert status and status[-1]["callback_errors"] >= 10 and status[-1]["round"] >= 2   # planning goes on
        assert len(cmds) >= 10                            # and so do the control ticks' commands
    finally:
        robot.destroy_node()
        drv.destroy_node()


# ------------------------------------------------------------------------------------------------ health topic
def test_health_topic_reports_callback_errors_and_bad_messages(ros):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import String

    from consensus.ros.health import Health, guarded, publish_health

    health = Health()
    node = Node("health_probe")
    node.create_timer(0.05, guarded(lambda: 1 / 0, "health_probe.tick", health))
    health.count_bad_message("health_probe.input", 2)
    publish_health(node, health, period_s=0.2)
    listener = Node("health_listener")
    seen: list[dict] = []
    listener.create_subscription(String, "/health", lambda m: seen.append(json.loads(m.data)), 50)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    ex.add_node(listener)
    try:
        _spin(ex, 1.5)
        mine = [r for r in seen if r["node"] == "/health_probe"]
        assert len(mine) >= 3
        last = mine[-1]
        assert last["callback_errors"] >= 5
        assert last["errors_by_callback"] == {"health_probe.tick": last["callback_errors"]}
        assert last["bad_messages"] == 2 and last["bad_by_input"] == {"health_probe.input": 2}
        assert [r["callback_errors"] for r in mine] == sorted(r["callback_errors"] for r in mine)
    finally:
        node.destroy_node()
        listener.destroy_node()


# ------------------------------------------------------------------------------------------------ node survives
_CHILD = textwrap.dedent("""
    import json, sys
    import rclpy
    import rclpy.task
    from rclpy.node import Node
    from std_msgs.msg import String
    from consensus.ros.health import Health, guarded
    from consensus.ros.process import make_executor

    wrap = sys.argv[1] == "guarded"
    rclpy.init()
    node = Node("crash_probe")                     # a single node on the EventsExecutor: the crashing set-up
    health = Health()
    seen = {"ticks": 0, "msgs": 0}

    def tick():
        seen["ticks"] += 1
        pub.publish(String(data=str(seen["ticks"])))
        if seen["ticks"] % 2 == 0:
            raise RuntimeError("tick bug")

    def on_msg(msg):
        seen["msgs"] += 1
        raise ValueError("message bug")

    pub = node.create_publisher(String, "crash_probe/out", 10)
    node.create_subscription(String, "crash_probe/out", guarded(on_msg, "probe.sub", health) if wrap else on_msg, 10)
    node.create_timer(0.02, guarded(tick, "probe.tick", health) if wrap else tick)
    ex = make_executor("events")
    ex.add_node(node)
    ex.spin_until_future_complete(rclpy.task.Future(), timeout_sec=1.5)
    print(json.dumps({**seen, **health.counts(), "by": dict(health.errors_by_callback)}), flush=True)
    rclpy.shutdown()
""")


def _child(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CHILD, mode], capture_output=True, text=True, timeout=60)


def test_guarded_keeps_a_lone_node_on_the_events_executor_alive():
    out = _child("guarded")
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["ticks"] >= 20 and res["msgs"] >= 10                # both callbacks kept running
    assert res["by"]["probe.tick"] == res["ticks"] // 2
    assert res["by"]["probe.sub"] == res["msgs"]
    assert res["callback_errors"] == res["ticks"] // 2 + res["msgs"]
    # the control: the same child without guarded dies at the first exception (spin re-raises it, or the
    # EventsExecutor crashes), so a node that loses its guard fails this test
    raw = _child("raw")
    assert raw.returncode != 0 and not raw.stdout.strip()
