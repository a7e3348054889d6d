"""``drone``: disaster-response drones (``consensus.ros.drone_agent.RosDrone``), one per process or a whole fleet.

* One drone per process: run in namespace ``robot_<i>`` (or set the parameter ``drone_id``); the node is
  ``/robot_<i>/drone``.
* Drone fleet (the scalable mode, like the aggregation ``fleet``): run in the root namespace with ``drone_id`` -1
  (the default). The process holds one parameter node (``/drone_fleet`` by default) and one Node per drone
  (namespace ``robot_<i>``, parameter services off) on one EventsExecutor; LLM calls of all drones share one
  bounded thread pool of ``llm_concurrency`` workers and one LLM client.

Both read the run's ``/**:`` parameters (``DisasterConfig``, baseline-resolved) and build each drone's core agent
with ``consensus.planners.drones.make_drone``; LLM exchanges are recorded to ``<output_dir>/transcripts.jsonl``.
"""
from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter

from consensus.disaster.config import DisasterConfig
from consensus.errors import ConfigError
from consensus.llm.from_config import client_from_config
from consensus.planners.drones import make_drone
from consensus.ros.drone_agent import RosDrone, declare_disaster_config, namespace
from consensus.ros.params import make_executor, on_stop, run_node, spin


def make_policies(cfg: DisasterConfig, ids: list[int]):
    """Core agents of drones ``ids``, the thread pool for LLM calls (None for classical agents), the LLM client's
    status function and a close function (the twin of ``consensus.ros.nodes._robots.make_planners``)."""
    transcripts = Path(cfg.output_dir) / "transcripts.jsonl" if cfg.output_dir else None
    if transcripts is not None:
        os.makedirs(transcripts.parent, exist_ok=True)
    client, close_client = client_from_config(cfg, transcripts)
    policies = [make_drone(cfg, i, client) for i in ids]
    if client is None:
        return policies, None, None, close_client
    pool = ThreadPoolExecutor(max_workers=cfg.llm_concurrency, thread_name_prefix="drone")

    def close() -> None:
        pool.shutdown(wait=False, cancel_futures=True)
        close_client()

    return policies, pool, client.status, close


def drone_ids(node: Node, cfg: DisasterConfig) -> list[int]:
    """The drones this process flies: ``drone_id``, else the namespace's ``robot_<i>``, else all (fleet)."""
    rid = node.declare_parameter("drone_id", -1).value
    if rid < 0:
        m = re.fullmatch(r"/?robot_(\d+)", node.get_namespace())
        if m:
            rid = int(m.group(1))
        elif node.get_namespace() in ("", "/"):
            return list(range(cfg.num_drones))
        else:
            raise ConfigError(f"cannot tell the drone index: set parameter drone_id or run in namespace robot_<i> "
                              f"(namespace is '{node.get_namespace()}')")
    if not 0 <= rid < cfg.num_drones:
        raise ConfigError(f"drone_id {rid} out of range for num_drones={cfg.num_drones}")
    return [rid]


def _body(_args: list[str]) -> None:
    main_node = Node("drone")
    cfg = declare_disaster_config(main_node).resolved()
    ids = drone_ids(main_node, cfg)
    fleet = main_node.get_namespace() in ("", "/")
    policies, pool, status, close = make_policies(cfg, ids)
    executor = make_executor("events")
    executor.add_node(main_node)
    drones, nodes = [], []
    sim_time = Parameter("use_sim_time", value=main_node.get_parameter("use_sim_time").value)
    for i, policy in zip(ids, policies):
        node = (Node("drone", namespace=namespace(i), start_parameter_services=False, parameter_overrides=[sim_time])
                if fleet else main_node)
        drones.append(RosDrone(node, cfg, i, policy, pool, status))
        if node is not main_node:
            nodes.append(node)
            executor.add_node(node)
    on_stop(lambda: [d.stop() for d in drones])               # zero velocity before the context goes down
    main_node.get_logger().info(f"{len(drones)} drone(s) up (planner={cfg.planner}, mode={cfg.mode})")
    try:
        spin(executor)
    finally:
        if rclpy.ok():
            for d in drones:
                d.stop()
        close()
        for node in nodes:
            node.destroy_node()
        main_node.destroy_node()


def main() -> int:
    return run_node(_body, "drone")
