"""``robot``: one robot's planner and controller in its own process (namespace = the robot, e.g. /robot_2).

The robot index comes from the ``robot_id`` parameter, or from the namespace ``robot_<i>``.
"""
from __future__ import annotations

import re

import rclpy
from rclpy.node import Node

from consensus.errors import ConfigError
from consensus.ros.nodes._robots import make_planners
from consensus.ros.params import declare_config, on_stop, run_node, spin_node
from consensus.ros.robot_agent import RobotAgent


def _robot_id(node: Node, n: int) -> int:
    rid = node.declare_parameter("robot_id", -1).value
    if rid < 0:
        m = re.fullmatch(r"/?robot_(\d+)", node.get_namespace())
        if not m:
            raise ConfigError(f"cannot tell the robot index: set parameter robot_id or run in namespace robot_<i> "
                              f"(namespace is '{node.get_namespace()}')")
        rid = int(m.group(1))
    if not 0 <= rid < n:
        raise ConfigError(f"robot_id {rid} out of range for num_robots={n}")
    return rid


def _body(_args: list[str]) -> None:
    node = Node("robot")
    cfg = declare_config(node)
    rid = _robot_id(node, cfg.num_robots)
    (planner,), pool, status, close = make_planners(cfg, [rid])
    agent = RobotAgent(node, cfg, rid, planner, pool, status)
    on_stop(agent.stop)                                   # zero velocity before the context goes down
    try:
        spin_node(node, cfg.executor)
    finally:
        if rclpy.ok():
            agent.stop()
        close()
        node.destroy_node()


def main() -> int:
    return run_node(_body, "robot")
