"""``fleet``: all robots' planners and controllers in one process (the scalable mode).

One rclpy Node per robot (namespace ``robot_<i>``, parameter services off) on one executor. Measured on a 2-core
machine (docs/benchmarks.md): rclpy's EventsExecutor keeps >= 99.5 % of 10 Hz control ticks on time for ~100
robots, where the SingleThreadedExecutor tops out near 30 and one process per robot near 30 (80 MB each).
LLM calls run on a bounded thread pool, never on the executor thread.
"""
from __future__ import annotations


import rclpy
from rclpy.node import Node

from consensus.ros.nodes._robots import make_planners
from consensus.ros.params import declare_config, make_executor, on_stop, run_node, spin
from consensus.ros.robot_agent import RobotAgent


def _body(_args: list[str]) -> None:
    fleet = Node("fleet")
    cfg = declare_config(fleet)
    ids = list(range(cfg.num_robots))
    planners, pool, status, close = make_planners(cfg, ids)
    executor = make_executor(cfg.executor)
    executor.add_node(fleet)
    agents, nodes = [], []
    for i, planner in zip(ids, planners):
        node = Node("robot", namespace=f"robot_{i}", start_parameter_services=False,
                    parameter_overrides=[rclpy.parameter.Parameter("use_sim_time", value=fleet.get_parameter(
                        "use_sim_time").value)])
        agents.append(RobotAgent(node, cfg, i, planner, pool, status))
        nodes.append(node)
        executor.add_node(node)
    on_stop(lambda: [agent.stop() for agent in agents])      # zero velocity before the context goes down
    fleet.get_logger().info(f"fleet of {len(agents)} robots up (planner={cfg.planner}, executor={cfg.executor})")
    try:
        spin(executor)
    finally:
        if rclpy.ok():
            for agent in agents:
                agent.stop()
        close()
        for node in nodes:
            node.destroy_node()
        fleet.destroy_node()


def main() -> int:
    return run_node(_body, "fleet")
