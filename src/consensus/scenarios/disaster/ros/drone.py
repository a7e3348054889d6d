"""``drone``: disaster-response drones (``consensus.scenarios.disaster.ros.agent.RosDrone``), one per process
(namespace ``robot_<i>``, node ``/robot_<i>/agent``) or the whole fleet in one process (root namespace, node
``/fleet``); see ``consensus.ros.fleet``.

The drones read the run's ``/**:`` parameters (``DisasterConfig``, baseline-resolved) and build their core agents
with ``consensus.scenarios.disaster.agents.make_drone``.
"""
from __future__ import annotations

from consensus.ros.fleet import run_robots
from consensus.scenarios.disaster.agents import make_drone
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.scenarios.disaster.ros.agent import RosDrone, declare_disaster_config
from consensus.settings import PHYSICS

#: what the drones do not read: the simulator's choice and the LLM server's port (the other processes'), the prompt
#: style (the disaster agents have one prompt), the aggregator's fields (mode, strategy), the environment's (the grid
#: owns it) and the round clock's (the grid's). Every other field is a parameter of ``/fleet`` (``/robot_<i>/agent``):
#: the robot process's (``consensus.ros.fleet.run_robots``: layout, LLM client and its thread pool, transcripts;
#: ``RobotAgent`` through ``drone_control.controller_config``: control, safety, collision filter), the drone agents'
#: (``agents.make_drone``: planner, roles, the LLM's discussion settings, the heuristic's thresholds) and the
#: flights' (grid, cells, motion)
#: the physics knobs the robot core reads (its odometry's creep tolerance: the noise and the drive's lag)
CORE_READS_NOT = tuple(p for p in PHYSICS if p not in ("actuator_lag_s", "odom_noise_m"))
NOT_USED = frozenset({"sim", "llm_port", "prompt_style", "mode", "strategy", "volatility", "rounds", "max_active",
                      "p_new", "initial_disasters", "alpha", "beta", "misallocation_cost", "misallocation",
                      "high_severity", "report_noise", "round_time_s", "round_timeout_s", "flight_time_factor",
                      "flight_slack_s", *CORE_READS_NOT})
USES = tuple(name for name in DisasterConfig.field_names() if name not in NOT_USED)


def main() -> int:
    return run_robots(
        "drone",
        lambda node: declare_disaster_config(node, USES).resolved(),
        lambda cfg, ids, client: [make_drone(cfg, i, client) for i in ids],
        lambda node, cfg, i, policy, pool, status: RosDrone(node, cfg, i, policy, pool, status))
