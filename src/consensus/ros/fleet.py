"""Start-up of a scenario's robot executable: one robot per process, or the whole fleet in one process.

* One robot per process: run in namespace ``robot_<i>`` (or set the parameter ``robot_id``); the node is
  ``/robot_<i>/agent``.
* Fleet (the scalable mode): run in the root namespace with ``robot_id`` -1 (the default). The process holds one
  parameter node (``/fleet``) and one Node per robot (``/robot_<i>/agent``, parameter services off) on one
  executor (measured on 2 cores, docs/benchmarks.md: rclpy's EventsExecutor keeps >= 99.5 % of 10 Hz control ticks
  on time for ~100 robots, where the SingleThreadedExecutor tops out near 30 and one process per robot near 30,
  80 MB each). LLM calls of all robots share one bounded thread pool of ``llm_concurrency`` workers and one LLM
  client, never the executor thread.

A scenario supplies how to read its config from the node, how to build the robots' policies (planners, drone
agents, ...) from one LLM client, and how to attach a robot (a ``consensus.ros.robot.RobotAgent``) to a node.
"""
from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter

from consensus.errors import ConfigError
from consensus.settings import ControlParams
from consensus.llm.from_config import client_from_config
from consensus.ros.params import freeze_startup_objects, make_executor, on_stop, run_node, spin
from consensus.runs.processes import ROBOT_NODE
from consensus import names



namespace = names.namespace          # robot_<i> (consensus.names)


def robot_ids(node: Node, num_robots: int) -> list[int]:
    """The robots this process runs: ``robot_id``, else the namespace's ``robot_<i>``, else all (fleet)."""
    rid = node.declare_parameter("robot_id", -1).value
    if rid < 0:
        m = re.fullmatch(r"/?robot_(\d+)", node.get_namespace())
        if m:
            rid = int(m.group(1))
        elif node.get_namespace() in ("", "/"):
            return list(range(num_robots))
        else:
            raise ConfigError(f"cannot tell the robot index: set parameter robot_id or run in namespace robot_<i> "
                              f"(namespace is '{node.get_namespace()}')")
    if not 0 <= rid < num_robots:
        raise ConfigError(f"robot_id {rid} out of range for num_robots={num_robots}")
    return [rid]


def policies_with_llm(cfg: Any, build: Callable[[Any], list], prefix: str = "planner"):
    """``build(client)`` with the run's LLM client (None when the scenario needs no LLM; exchanges recorded to
    ``<output_dir>/transcripts.jsonl``). Returns the policies, the thread pool for LLM calls (None without an
    LLM), the client's status function and a close function."""
    transcripts = Path(cfg.output_dir) / "transcripts.jsonl" if cfg.output_dir else None
    if transcripts is not None:
        os.makedirs(transcripts.parent, exist_ok=True)
    client, close_client = client_from_config(cfg, transcripts)
    policies = build(client)
    if client is None:
        return policies, None, None, close_client
    pool = ThreadPoolExecutor(max_workers=cfg.llm_concurrency, thread_name_prefix=prefix)

    def close() -> None:
        pool.shutdown(wait=False, cancel_futures=True)
        close_client()

    return policies, pool, client.status, close


def _runtime_settings(node: Node, cfg: Any, robots: list):
    """The parameter callback of a robot process's main node (``/robot_<i>/agent``, or ``/fleet`` for all its
    robots): a change of ``ControlParams.RUNTIME`` (kp, v_max, w_max, deadband) is validated like the config and
    applied to every robot from its next control tick on (``RobotAgent.set_limits``); a bad value is refused with
    the config's reason. Every other parameter is read-only (``declare_config``)."""
    from rcl_interfaces.msg import SetParametersResult

    current = [cfg]

    def on_set(params) -> SetParametersResult:
        changes = {p.name: p.value for p in params if p.name in ControlParams.RUNTIME}
        if not changes:
            return SetParametersResult(successful=True)
        try:
            new = current[0].replace(**changes)
        except ConfigError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        for robot in robots:
            if hasattr(robot, "set_limits"):
                robot.set_limits(new)
        current[0] = new
        node.get_logger().info("controller settings changed: " + ", ".join(f"{k}={v}" for k, v in changes.items()))
        return SetParametersResult(successful=True)

    return on_set


def run_robots(name: str, read_config: Callable[[Node], Any], build: Callable[[Any, list[int], Any], list],
               attach: Callable[..., Any]) -> int:
    """The main of a robot executable. ``read_config(node)`` declares and validates the parameters,
    ``build(cfg, ids, client)`` makes the robots' policies, ``attach(node, cfg, robot_id, policy, pool, status)``
    returns the robot (with ``stop()``)."""

    def body(_args: list[str]) -> None:
        main_node = Node(name)
        cfg = read_config(main_node)
        ids = robot_ids(main_node, cfg.num_robots)
        fleet = main_node.get_namespace() in ("", "/")
        policies, pool, status, close = policies_with_llm(cfg, lambda client: build(cfg, ids, client))
        executor = make_executor(cfg.executor)
        executor.add_node(main_node)
        robots, nodes = [], []
        sim_time = Parameter("use_sim_time", value=main_node.get_parameter("use_sim_time").value)
        for i, policy in zip(ids, policies):
            # use_global_arguments=False: the process's `-r __node:=fleet` must not rename the robots' nodes
            node = (Node(ROBOT_NODE, namespace=namespace(i), start_parameter_services=False, use_global_arguments=False,
                         parameter_overrides=[sim_time]) if fleet else main_node)
            robots.append(attach(node, cfg, i, policy, pool, status))
            if node is not main_node:
                nodes.append(node)
                executor.add_node(node)
        main_node.add_on_set_parameters_callback(_runtime_settings(main_node, cfg, robots))
        on_stop(lambda: [robot.stop() for robot in robots])      # zero velocity before the context goes down
        main_node.get_logger().info(f"{len(robots)} robot(s) up (executor={cfg.executor})")
        freeze_startup_objects()
        try:
            spin(executor)
        finally:
            if rclpy.ok():
                for robot in robots:
                    robot.stop()
            close()
            for node in nodes:
                node.destroy_node()
            main_node.destroy_node()

    return run_node(body, name)
