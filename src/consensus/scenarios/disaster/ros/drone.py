"""``drone``: disaster-response drones (``consensus.scenarios.disaster.ros.agent.RosDrone``), one per process
(namespace ``robot_<i>``, node ``/robot_<i>/agent``) or the whole fleet in one process (root namespace, node
``/fleet``); see ``consensus.ros.fleet``.

The drones read the run's ``/**:`` parameters (``DisasterConfig``, baseline-resolved) and build their core agents
with ``consensus.scenarios.disaster.agents.make_drone``.
"""
from __future__ import annotations

from consensus.ros.fleet import run_robots
from consensus.scenarios.disaster.agents import make_drone
from consensus.scenarios.disaster.ros.agent import RosDrone, declare_disaster_config


def main() -> int:
    return run_robots(
        "drone",
        lambda node: declare_disaster_config(node).resolved(),
        lambda cfg, ids, client: [make_drone(cfg, i, client) for i in ids],
        lambda node, cfg, i, policy, pool, status: RosDrone(node, cfg, i, policy, pool, status))
