"""``robot``: aggregation robots (the robot core behind ``consensus.ros.robot.RobotAgent``), one per process
(namespace ``robot_<i>``, node ``/robot_<i>/agent``) or the whole fleet in one process (root namespace, node
``/fleet``); see ``consensus.ros.fleet``."""
from __future__ import annotations

from consensus.ros.fleet import run_robots
from consensus.ros.params import declare_config
from consensus.ros.robot import RobotAgent
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.settings import PHYSICS, ControlParams, runtime_fields
from consensus.scenarios.aggregation.planners.factory import planners_from_config


#: what the robots do not read (the sim's, the recorder's, the topology node's, the bag's and the live view's
#: fields): every other field is a parameter of ``/fleet`` (``/robot_<i>/agent``)
NOT_USED = frozenset({"sim", "sim_rate_hz", "publish_clock", "init_radius", "initial_positions", "duration_s",
                      "converge_tol_m", "settle_s", "markers", "neighbor_rate_hz", "adjacency", "directed",
                      "topology_p", "leader", "bag", "bag_exclude", "foxglove", "foxglove_host",
                      *PHYSICS})      # the physics world's (sim: mujoco), read by its simulator node
USES = tuple(name for name in AggregationConfig.field_names() if name not in NOT_USED)


def main() -> int:
    return run_robots(
        "robot",
        lambda node: declare_config(node, AggregationConfig, runtime=runtime_fields(ControlParams), uses=USES),
        lambda cfg, ids, client: [planners_from_config(cfg, client)[i] for i in ids],
        lambda node, cfg, i, planner, pool, status: RobotAgent(
            node, cfg, i, planner, pool, status,
            # robots with bodies agree on meeting points (AggregationConfig.meeting_points; the LLM is shown them
            # beside the positions only with `on`, by its planner)
            meeting_points=cfg.planner != "llm" and cfg.plans_on_meeting_points(ros=True)))
