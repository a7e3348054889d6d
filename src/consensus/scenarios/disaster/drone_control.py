"""The drones' controller settings: the ``RobotBaseConfig`` a drone's robot core runs with, in a ROS run (its
``RobotAgent``, the ``sim``, the grid's nearby relay) and headless (``headless.KinematicFlight``) alike."""
from __future__ import annotations

from typing import Any

from consensus.runs.processes import robot_base_overrides
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.settings import RobotBaseConfig

SIM_RATE_HZ = 20.0
STATUS_PERIOD_S = 1.0      # planner/status of every drone


def controller_config(cfg: DisasterConfig, **settings: Any) -> tuple[RobotBaseConfig, dict[str, Any]]:
    """The ``RobotBaseConfig`` a kernel robot component (the drones' controller, ``sim``, ``llm_server``) runs
    with in a disaster run, and the parameters such a node must get on top of the disaster params file.

    A kernel node reads the disaster file's values of the shared groups (``seed``, ``num_robots``, control and
    safety, ``llm_*``) and its own defaults for the rest. ``settings`` on top of these make the controller of the
    grid world: 2-D, geofence = the grid, the round clock as the planner (status every ``STATUS_PERIOD_S``),
    ``num_robots`` = the (baseline-resolved) number of drones. The config is validated here (ConfigError); the
    overrides are the settings above and every other field whose value differs from what the node would read."""
    wanted = dict(dim=2, planner_period_s=max(STATUS_PERIOD_S, cfg.control_period_s), workspace=cfg.grid_bounds(),
                  sim_rate_hz=SIM_RATE_HZ)
    return robot_base_overrides(cfg, {**wanted, **settings}, values=cfg.resolved(),
                                source="disaster run (controller/sim settings)")
