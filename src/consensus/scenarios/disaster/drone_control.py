"""The drones' control: the ``RobotBaseConfig`` a drone's robot core runs with, and the one flight command that sends
a drone's core to its chosen cell, in a ROS run (its ``RobotNode``, the ``sim``, the grid's nearby relay) and
headless (``headless.KinematicFlight``) alike, so headless and ROS drones sent to one cell stand in the same slots."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from consensus.control.packing import centred
from consensus.runs.processes import robot_base_overrides
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.scenarios.disaster.world import Cell, cell_centre
from consensus.settings import RobotBaseConfig

if TYPE_CHECKING:
    from consensus.control.robot_core import RobotCore

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


def fly_to_cell(core: RobotCore, cell: Cell, actions: Sequence | None, cell_size_m: float,
                now: float | None = None) -> tuple[np.ndarray, bool]:
    """Send the drone whose robot core is ``core`` to ``cell``: to its centre, ``((x + 0.5) s, (y + 0.5) s)`` with
    s = ``cell_size_m``. With the collision filter (``core.avoid``) the k drones whose action is ``cell``
    (``actions``: every drone's chosen cell, in drone order, as they travelled; None: unknown) pack there as one
    group (``RobotCore.set_meeting_point``'s ``group``, the slots of ``consensus.control.packing``), sent to
    ``packing.centred`` so that their k slots are centred on the cell (``metrics.CellSlots``: where they stand,
    whether they fit the cell). Returns ``set_meeting_point``'s point and whether it was clamped into the geofence."""
    group = [j for j, a in enumerate(actions or ()) if same_cell(a, cell)] or None
    point = cell_centre(cell, cell_size_m)
    if group is not None and core.avoid is not None:
        point = centred(point, len(group), core.avoid.d_min_m + core.gap)
    return core.set_meeting_point(point, now, group=group)


def same_cell(action: Any, cell: Cell) -> bool:
    """Is ``action`` (a drone's flight action: a tuple, or a list as it travelled) the cell ``cell``?"""
    try:
        return isinstance(action, (list, tuple)) and len(action) == 2 and (int(action[0]), int(action[1])) == cell
    except (TypeError, ValueError):
        return False
