"""``robot``: aggregation robots (the robot core behind ``consensus.ros.robot.RobotNode``), one per process
(namespace ``robot_<i>``, node ``/robot_<i>/agent``) or the whole fleet in one process (root namespace, node
``/fleet``); see ``consensus.ros.fleet``."""
from __future__ import annotations

from consensus.ros.fleet import run_robots
from consensus.ros.params import declare_config
from consensus.ros.robot import RobotNode
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.settings import ControlParams, runtime_fields
from consensus.scenarios.aggregation.planners.factory import planners_from_config


#: the groups a robot reads whole (``consensus.settings.field_group``: its parameters ``control.kp``, ``llm.backend``,
#: ...), and the single fields it reads of the scenario's group; the sim's, the recorder's, the topology node's, the
#: bag's, the live view's and the physics world's stay theirs (``ros2 param list /robot_0/agent``)
GROUPS = ("run", "llm", "control", "fleet", "planner", "world", "robot")
USES = ("planner", "personalities", "keep_history", "meeting_points", "topology", "link_delay_s", "link_drop_prob")


def main() -> int:
    return run_robots(
        "robot",
        lambda node: declare_config(node, AggregationConfig, runtime=runtime_fields(ControlParams),
                                    groups=GROUPS, uses=USES),
        lambda cfg, ids, client: [planners_from_config(cfg, client)[i] for i in ids],
        lambda node, cfg, i, planner, pool, status: RobotNode(
            node, cfg, i, planner, pool, status,
            # robots with bodies agree on meeting points (AggregationConfig.meeting_points; the LLM is shown them
            # beside the positions only with `on`, by its planner)
            meeting_points=cfg.planner != "llm" and cfg.plans_on_meeting_points(ros=True)))
