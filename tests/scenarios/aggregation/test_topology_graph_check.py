"""The topology relay's check of the ROS graph (``TopologyRelay._check_graph``): a publisher of a robot's ``state``
or ``target`` that is not a node of the robot's namespace is foreign at once; one the graph cannot name yet (its
node's discovery still under way, as for a robot's own node on a loaded host) is counted and named only if it is
still unnamed at the next check. Graph answers are scripted; no ROS traffic."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("rclpy")

from consensus.ros.health import Health  # noqa: E402
from consensus.scenarios.aggregation.ros.topology import GRAPH_CHECK_S, UNNAMED_NODE, TopologyRelay  # noqa: E402


class _Graph:
    def __init__(self) -> None:
        self.publishers: dict[str, list[tuple[str, str]]] = {}
        self.warnings: list[str] = []

    def get_namespace(self) -> str:
        return "/"

    def get_publishers_info_by_topic(self, topic: str):
        return [SimpleNamespace(node_namespace=ns, node_name=name) for ns, name in self.publishers.get(topic, [])]

    def get_logger(self):
        return SimpleNamespace(warning=self.warnings.append)


def _relay(graph: _Graph) -> TopologyRelay:
    relay = object.__new__(TopologyRelay)          # only what _check_graph reads
    relay.node, relay.cfg = graph, SimpleNamespace(num_robots=1)
    relay.health = Health(logger=None)
    relay.foreign, relay._unnamed, relay._graph_due = {}, {}, 0.0
    relay.targets_untrusted_until = np.zeros(1)
    return relay


def test_an_unnamed_publisher_is_foreign_at_once_but_counted_only_if_it_stays_unnamed():
    graph = _Graph()
    relay = _relay(graph)
    own = ("/robot_0", "agent")
    unnamed = ("_NODE_NAMESPACE_UNKNOWN_", UNNAMED_NODE)
    # the robot's own node, unnamed at the first check and named at the next: never counted
    graph.publishers = {"/robot_0/state": [unnamed], "/robot_0/target": [unnamed]}
    relay._check_graph(0.0)
    assert relay.health.bad_messages == 0 and not graph.warnings
    assert "/robot_0/target" in relay.foreign and relay.targets_untrusted_until[0] > 0.0    # foreign at once
    graph.publishers = {"/robot_0/state": [own], "/robot_0/target": [own]}
    relay._check_graph(GRAPH_CHECK_S)
    assert relay.health.bad_messages == 0 and not graph.warnings and not relay.foreign
    # a named stranger: counted at once; an unnamed one still unnamed at the next check: counted then, once
    graph.publishers = {"/robot_0/state": [own, ("/", "stranger")], "/robot_0/target": [own, unnamed]}
    relay._check_graph(2 * GRAPH_CHECK_S)
    assert relay.health.bad_by_input["foreign_publisher"] == 1 and len(graph.warnings) == 1
    relay._check_graph(3 * GRAPH_CHECK_S)
    assert relay.health.bad_by_input["foreign_publisher"] == 2 and UNNAMED_NODE in graph.warnings[-1]
    relay._check_graph(4 * GRAPH_CHECK_S)
    assert relay.health.bad_by_input["foreign_publisher"] == 2                              # once each
