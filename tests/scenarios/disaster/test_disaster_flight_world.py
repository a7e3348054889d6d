"""The disaster headless flight moves its drones in the world layer (consensus.control.dynamics.world)."""
from __future__ import annotations

import numpy as np

from consensus.control.dynamics.world import KinematicWorld


def test_the_disaster_flight_moves_its_drones_in_the_kinematic_world():
    from consensus.scenarios.disaster.config import DisasterConfig
    from consensus.scenarios.disaster.headless import KinematicFlight, start_cells

    cfg = DisasterConfig(num_robots=3, motion="kinematic", seed=2)
    flight = KinematicFlight(cfg, start_cells(cfg))
    assert isinstance(flight.world, KinematicWorld)
    before = flight.pos.copy()
    flight.fly(start_cells(cfg)[::-1])
    assert np.array_equal(flight.pos, flight.world.poses()[:, :2]) and not np.array_equal(flight.pos, before)
    assert np.array_equal(flight.positions[-1], flight.pos)


def test_headless_drones_pack_into_the_slots_the_ros_drones_and_the_grid_use():
    """The headless flight runs the drones' robot cores (as the ROS drones do): the drones sent to one cell stand
    in the slots the grid node judges them by (CellSlots: the ROS drones' packing), one drone a slot, and attend
    their chosen cell even over a neighbouring one."""
    from consensus.scenarios.disaster.config import DisasterConfig
    from consensus.scenarios.disaster.headless import KinematicFlight

    cfg = DisasterConfig(num_robots=4, motion="kinematic", collision_avoidance="cbf", width=5, height=5,
                         round_time_s=15.0, seed=4)
    flight = KinematicFlight(cfg, [(0, 0), (4, 4), (0, 4), (4, 0)])
    goals = [(2, 2), (2, 2), (2, 2), (0, 0)]
    attended = flight.fly(goals)
    assert attended == goals
    slots = flight.slots.slots((2, 2), 3)
    end = flight.pos[:3]
    dist = np.linalg.norm(end[:, None, :] - slots[None, :, :], axis=2)
    assert dist.min(axis=1).max() < 0.05                     # every drone in a slot ...
    assert sorted(dist.argmin(axis=1).tolist()) == [0, 1, 2]  # ... one drone a slot
    assert np.linalg.norm(flight.pos[3] - flight.slots.slots((0, 0), 1)[0]) < 0.05
    summary = flight.collision_summary()
    assert summary["collision_avoidance"] == "cbf" and summary["min_pair_distance_m"] >= 0.45 - 1e-6
