"""consensus.names: every ROS name of the kernel in one place, with its QoS class; no publisher or subscriber spells a
topic out where it is used."""
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

    for topic in (*names.ROBOT_TOPICS, *names.FLEET_TOPICS, *names.SCENARIO_TOPICS):
        assert isinstance(qos.profile(topic), rclpy_qos.QoSProfile), topic
    kept = qos.profile(names.NAMING_GAME_WORDS)            # a protocol's kept records: latched, deeper history
    assert (kept.depth, kept.durability) == (50, rclpy_qos.DurabilityPolicy.TRANSIENT_LOCAL)
    assert qos.profile(names.DISASTER_STATE).depth == 10 and qos.profile(names.TOPOLOGY_GRAPH).depth == 1
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
# of its robots map entry; a fleet process's one e-stop subscription) or whatever the bag recorder was told to record
NOT_FROM_THE_TABLE = {"ros/robot.py": {"cfg.estop_topic", "self.cmd_topic"}, "ros/bag_recorder.py": {"name"},
                      "ros/fleet.py": {"estop"}}


def test_every_endpoint_of_the_kernel_and_the_scenarios_takes_its_topic_from_the_names_table():
    """A scenario's protocol names its topics in consensus.names too (a section per scenario): an endpoint's topic is
    ``names.X.name``, ``names.X.of(i)``, ``names.X.in_run(ns)``, ``names.robot_topic(...)`` or ``topic.name`` /
    ``topic.in_run(ns)`` of a loop over them."""
    found = []
    for path in SRC.rglob("*.py"):
        rel = str(path.relative_to(SRC))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ENDPOINTS \
                    and len(node.args) >= 2:
                text = ast.unparse(node.args[1])
                if "names." not in text and text not in ("topic.name", "topic.in_run(ns)") \
                        and text not in NOT_FROM_THE_TABLE.get(rel, ()):
                    found.append(f"{rel}:{node.lineno}: {text}")
    assert not found, "\n".join(found)


def test_the_scenario_protocols_topics_are_in_the_table_and_absolute_where_namespaces_meet():
    assert set(names.SCENARIO_TOPICS) == {*names.DISASTER_TOPICS, *names.NAMING_GAME_TOPICS}
    absolute = {t.name for t in names.SCENARIO_TOPICS if t.name.startswith("/")}
    assert absolute == {"/disaster/state", "/disaster/discussion", "/disaster/decisions", "/disaster/votes",
                        "/disaster/collective", "/disaster/aggregator/status", "/naming_game/pairs",
                        "/naming_game/words", "/naming_game/outcomes", "/naming_game/status"}
    assert names.DISASTER_VOTE_REQUEST.of(2).endswith("robot_2/disaster/vote_request")
    # a run launched in a namespace (namespace:=fleet_a) keeps its shared channels to itself: its root nodes and its
    # robots (in /fleet_a/robot_<i>) meet under /fleet_a; in the root namespace the names are as they are
    for ns in ("/fleet_a", "/fleet_a/robot_3", "/fleet_a/"):
        assert names.DISASTER_STATE.in_run(ns) == "/fleet_a/disaster/state"
    assert names.DISASTER_STATE.in_run("/") == names.DISASTER_STATE.in_run("/robot_0") == "/disaster/state"
    assert names.NAMING_GAME_PAIRS.in_run("/a/b/robot_12") == "/a/b/naming_game/pairs"
    assert names.DISASTER_VOTE_REQUEST.in_run("/fleet_a/robot_3") == "disaster/vote_request"     # relative: as is
    # the one reading of a robot's namespace (the fleet process finds its robot by it too)
    assert names.split_robot_namespace("/fleet_a/robot_3") == ("/fleet_a", 3)
    assert names.split_robot_namespace("/robot_3") == ("", 3)
    assert names.split_robot_namespace("/fleet_a") == ("/fleet_a", None)
    assert names.split_robot_namespace("/robot_x") == ("/robot_x", None)
