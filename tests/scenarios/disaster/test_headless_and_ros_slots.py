"""The disaster headless drones and the ROS drones pack into the same slots (issue 42).

Sent to one cell, the drones of a headless kinematic flight (``headless.KinematicFlight``: the drones' robot cores
stepped by the fleet core) and the ROS drones (each core built as its node's ``RobotNode`` builds it, sent by the
flight command its ``DisasterRobot._fly_to`` calls, ``drone_control.fly_to_cell``, with the action list as it travels,
told the relay's census and stepped as a fleet of one, as a drone's own process steps it) take the same slot, drone
for drone, from the same positions; together they take the slots the grid node judges them by
(``metrics.CellSlots``). Through ROS: tests/ros/test_disaster_ros.py
(``test_drone_node_answers_with_its_core_agent_and_flies_only_to_grid_cells``)."""
from __future__ import annotations

import numpy as np
import pytest

from consensus.control.avoidance import avoidance_from_config
from consensus.control.fleet_core import FleetCore
from consensus.control.robot_core import Nearby, RobotCore
from consensus.robots.map import fleet_avoidance, fleet_footprint
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.scenarios.disaster.drone_control import controller_config, fly_to_cell
from consensus.scenarios.disaster.headless import KinematicFlight
from consensus.scenarios.disaster.metrics import CellSlots

N = 8


def _ros_core(base, i: int) -> RobotCore:
    """Drone ``i``'s robot core as its node builds it (``consensus.ros.robot.RobotNode``, no robots file): the ROS
    rule's filter with the fleet's footprint, and the relay's census subscribed when the relay sends the robots in
    reach only (``nearby_horizon_s`` > 0)."""
    avoid = avoidance_from_config(base, ros=True, kinematics=base.kinematics, v_max=base.v_max, w_max=base.w_max,
                                  radius=None, fleet_radius=fleet_footprint(base))
    core = RobotCore(base, i, None, pool=None, kinematics=base.kinematics, v_max=base.v_max, w_max=base.w_max,
                     avoid=avoid, meeting_points=False)
    core.census_expected = base.nearby_horizon_s > 0
    return core


def ros_goals(cfg: DisasterConfig, pos: np.ndarray, goals: list) -> np.ndarray:
    """``(n, 2)``: where each ROS drone heads at its first control tick after the flight phase sent it to
    ``goals[i]``, every drone at ``pos``."""
    base, _ = controller_config(cfg)
    actions = [list(g) for g in goals]                  # a StateRecord's actions, as they travel
    ids = np.arange(len(pos))
    census = Nearby.of(pos, ids=ids)
    out = []
    for i in ids:
        core = _ros_core(base, int(i))
        core.observe(0.0, pos[i])
        if core.census_expected:
            assert core.check_census(0.0, census, 0.0) == 0
        fly_to_cell(core, goals[i], actions, cfg.cell_size_m, 0.0)
        others = ids[ids != i]
        (cmd,) = FleetCore([core]).step(0.0, [Nearby.of(pos[others], ids=others)])
        assert cmd.goal is not None, cmd
        out.append(cmd.goal)
    return np.array(out, dtype=float)


def headless_goals(cfg: DisasterConfig, cells: list, goals: list) -> tuple[np.ndarray, np.ndarray]:
    """The headless drones' start positions and where each heads at the flight's first control tick."""
    flight = KinematicFlight(cfg, cells)
    pos = flight.pos.copy()
    flight.fly(goals)
    return pos, flight.targets[0]


@pytest.mark.parametrize("cell", [(0, 0), (9, 9), (0, 5), (9, 3), (5, 0), (4, 4)])
def test_headless_and_ros_drones_sent_to_one_cell_stand_in_the_same_slots(cell):
    cfg = DisasterConfig(num_robots=N, motion="kinematic", collision_avoidance="cbf", round_time_s=0.1,
                         control_period_s=0.1, seed=1)
    base, _ = controller_config(cfg)
    cs = CellSlots(cfg.cell_size_m, fleet_avoidance(base, ros=True), base.packing_gap_m, base.workspace)
    rng = np.random.default_rng(cell)
    elsewhere = [(2, 7), (7, 7), (2, 2), (7, 2), (5, 8), (8, 5), (1, 4)]      # the others' cells, one drone each
    for k in (1, 2, 3, 4, 5, 7):
        starts = [(int(x), int(y)) for x, y in rng.integers(0, 10, (N, 2))]
        chosen = rng.permutation(N)[:k]
        rest = iter(c for c in elsewhere if c != cell)
        goals = [cell if i in chosen else next(rest) for i in range(N)]
        pos, headless = headless_goals(cfg, starts, goals)
        ros = ros_goals(cfg, pos, goals)
        assert np.allclose(headless, ros, atol=1e-9), (cell, k, headless - ros)
        dist = np.linalg.norm(headless[chosen][:, None, :] - cs.slots(cell, k)[None, :, :], axis=2)
        assert dist.min(axis=1).max() < 1e-9, (cell, k)                      # each in one of the grid's slots ...
        assert sorted(dist.argmin(axis=1).tolist()) == list(range(k))        # ... one drone a slot
