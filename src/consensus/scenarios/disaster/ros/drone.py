"""``drone``: disaster-response drones (``consensus.scenarios.disaster.ros.agent.DisasterRobot``), one per process
(namespace ``robot_<i>``, node ``/robot_<i>/agent``) or the whole fleet in one process (root namespace, node
``/fleet``); see ``consensus.ros.fleet``.

The drones read the run's ``/**:`` parameters (``DisasterConfig``, baseline-resolved) and build their core agents
with ``consensus.scenarios.disaster.agents.make_drone``.
"""
from __future__ import annotations

from consensus.ros.fleet import run_robots
from consensus.scenarios.disaster.agents import make_drone
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.ros.params import declare_config
from consensus.scenarios.disaster.ros.agent import DisasterRobot

#: the groups a drone reads whole (``consensus.settings.field_group``: ``control.kp``, ``fleet.num_robots``, ...):
#: the robot process's (``consensus.ros.fleet.run_robots``: layout, LLM client and its thread pool, transcripts) and
#: ``RobotNode``'s through ``drone_control.controller_config`` (control, safety, collision filter); and the single
#: fields it reads of the others: its LLM client's (not the server's port, not a prompt style: the disaster agents
#: have one prompt), the drone agents' (``agents.make_drone``: planner, roles, the LLM's discussion settings, the
#: heuristic's thresholds), the flights' (grid, cells, motion) and the physics knobs the robot core reads (its
#: odometry's creep tolerance: the noise and the drive's lag). The simulator's, the aggregator's, the environment's
#: and the round clock's fields stay theirs
GROUPS = ("run", "control", "fleet")
USES = ("llm_backend", "llm_model", "llm_base_url", "llm_api_key_env", "llm_temperature", "llm_max_tokens",
        "llm_timeout_s", "llm_max_retries", "llm_concurrency", "parse_retries", "replay_path",
        "planner", "roles", "discussion_turns", "baseline", "max_agreement_turns", "inbox_max_messages",
        "message_max_chars", "fallback_policy", "llm_structured",
        "sensor_readings", "width", "height", "containment_per_drone", "misallocation_threshold", "motion",
        "cell_size_m", "actuator_lag_s", "odom_noise_m")


def main() -> int:
    return run_robots(
        "drone",
        lambda node: declare_config(node, DisasterConfig, groups=GROUPS, uses=USES).resolved(),
        lambda cfg, ids, client: [make_drone(cfg, i, client) for i in ids],
        lambda node, cfg, i, planner, pool, status: DisasterRobot(node, cfg, i, planner, pool, status))
