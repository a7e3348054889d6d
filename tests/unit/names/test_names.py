"""consensus.names: every ROS name of the kernel in one place, with its QoS class; no publisher or subscriber spells a
topic out where it is used. The scenarios' protocol topics (each scenario's ``ros/protocol.TOPICS``) are checked with
the same rules in tests/scenarios/test_scenario_records.py (this kernel test imports no scenario)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from consensus import names

SRC = Path(__file__).resolve().parents[3] / "src" / "consensus"
ENDPOINTS = ("create_publisher", "create_subscription", "create_client", "create_service")


def test_per_robot_topics_resolve_into_the_robot_namespace_and_fleet_topics_do_not():
    assert names.namespace(3) == "robot_3" and names.base_link(3) == "robot_3/base_link"
    # relative: /robot_0/odom from the root namespace, /<ns>/robot_0/odom in a fleet's namespace (namespace:=)
    assert names.ODOM.of(0) == "robot_0/odom" and names.PLANNER_STATUS.of(12) == "robot_12/planner/status"
    for topic in names.ROBOT_TOPICS:
        assert not topic.name.startswith("/") and topic.of(7).startswith("robot_7/")
    with pytest.raises(ValueError, match="not a per-robot topic"):
        names.CLOCK.of(0)
    with pytest.raises(ValueError, match="unknown QoS class"):
        names.Topic("x", "std_msgs/msg/String", "sometimes")


def test_every_topic_has_a_profile_that_publisher_and_subscriber_share():
    rclpy_qos = pytest.importorskip("rclpy.qos")
    from consensus.ros import qos

    for topic in (*names.ROBOT_TOPICS, *names.FLEET_TOPICS):
        assert isinstance(qos.profile(topic), rclpy_qos.QoSProfile), topic
    kept = qos.profile(names.Topic("/x/kept", "std_msgs/msg/String", "latched", depth=50))   # a protocol's kept records
    assert (kept.depth, kept.durability) == (50, rclpy_qos.DurabilityPolicy.TRANSIENT_LOCAL)
    assert qos.profile(names.TOPOLOGY_GRAPH).depth == 1
    assert qos.profile(names.TOPOLOGY_GRAPH).durability == rclpy_qos.DurabilityPolicy.TRANSIENT_LOCAL
    assert qos.profile(names.CMD_VEL).reliability == rclpy_qos.ReliabilityPolicy.RELIABLE
    assert qos.profile(names.CMD_VEL, best_effort_commands=True).reliability == \
        rclpy_qos.ReliabilityPolicy.BEST_EFFORT


def _literal_endpoints(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ENDPOINTS \
                and len(node.args) >= 2:
            arg = node.args[1]
            if isinstance(arg, (ast.Constant, ast.JoinedStr)):
                out.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(arg)}")
    return out


def test_no_topic_name_is_spelled_out_at_a_publisher_or_subscriber():
    """Topic names come from consensus.names (or a scenario's protocol module), never a literal at the call."""
    found = [hit for path in SRC.rglob("*.py") for hit in _literal_endpoints(path)]
    assert not found, "\n".join(found)


# endpoints whose topic is not a name of the table: a configured name (the e-stop topic, the robot's cmd_vel topic
# of its robots map entry; a fleet process's one e-stop subscription; a drone link's e-stop, the robots' parameter)
# or whatever the bag recorder was told to record
NOT_FROM_THE_TABLE = {"ros/robot.py": {"cfg.estop_topic", "self.cmd_topic"}, "ros/bag_recorder.py": {"name"},
                      "ros/fleet.py": {"estop"}, "ros/crazyflie_link.py": {"estop_topic"},
                      "ros/operator_bridge.py": {"estop_topic"}}


def test_every_endpoint_of_the_kernel_and_the_scenarios_takes_its_topic_from_a_table():
    """The kernel's topics are in consensus.names, a scenario's in its ``ros/protocol`` module: an endpoint's topic is
    ``names.X.name``, ``names.X.of(i)``, ``names.X.in_run(ns)``, ``names.robot_topic(...)``, the same of
    ``protocol.X`` in a scenario's ``ros/`` package, or ``topic.name`` / ``topic.in_run(ns)`` of a loop over them."""
    found = []
    for path in SRC.rglob("*.py"):
        rel = str(path.relative_to(SRC))
        tables = ("names.", "protocol.") if rel.startswith("scenarios/") and "/ros/" in rel else ("names.",)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ENDPOINTS \
                    and len(node.args) >= 2:
                text = ast.unparse(node.args[1])
                if not any(table in text for table in tables) and text not in ("topic.name", "topic.in_run(ns)") \
                        and text not in NOT_FROM_THE_TABLE.get(rel, ()):
                    found.append(f"{rel}:{node.lineno}: {text}")
    assert not found, "\n".join(found)


def test_a_shared_channel_goes_under_the_run_s_namespace_and_a_relative_name_stays_as_it_is():
    shared = names.Topic("/scenario/state", "std_msgs/msg/String", "latched")    # e.g. a scenario's protocol topic
    mine = names.Topic("scenario/request", "std_msgs/msg/String", "events")
    assert mine.of(2) == "robot_2/scenario/request"
    # a run launched in a namespace (namespace:=fleet_a) keeps its shared channels to itself: its root nodes and its
    # robots (in /fleet_a/robot_<i>) meet under /fleet_a; in the root namespace the names are as they are
    for ns in ("/fleet_a", "/fleet_a/robot_3", "/fleet_a/"):
        assert shared.in_run(ns) == "/fleet_a/scenario/state"
    assert shared.in_run("/") == shared.in_run("/robot_0") == "/scenario/state"
    assert shared.in_run("/a/b/robot_12") == "/a/b/scenario/state"
    assert mine.in_run("/fleet_a/robot_3") == "scenario/request"                 # relative: as is
    assert names.CENSUS.in_run("/fleet_a/robot_3") == "/fleet_a/census"
    # the one reading of a robot's namespace (the fleet process finds its robot by it too)
    assert names.split_robot_namespace("/fleet_a/robot_3") == ("/fleet_a", 3)
    assert names.split_robot_namespace("/robot_3") == ("", 3)
    assert names.split_robot_namespace("/fleet_a") == ("/fleet_a", None)
    assert names.split_robot_namespace("/robot_x") == ("/robot_x", None)


def test_every_topic_of_the_kernel_is_in_its_two_lists_under_a_name_of_its_own():
    kernel = (*names.ROBOT_TOPICS, *names.FLEET_TOPICS)
    assert len({t.name for t in kernel}) == len(kernel)
    assert {v for v in vars(names).values() if isinstance(v, names.Topic)} == set(kernel)
