"""Collision avoidance in the scenarios' robots (issue 19): the disaster drones' kinematic flight (headless) with the
filter on and off, the cells packed drones attend, their start positions (consensus.scenarios.disaster.headless);
the packing tolerance of arrival checks (consensus.metrics.convergence.arrival_radius); the slots of ROS drones that
share a cell, as the drones take them (consensus.scenarios.disaster.drone_control.fly_to_cell) and as the grid node
judges them (consensus.scenarios.disaster.metrics.CellSlots)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from consensus.control.packing import centred
from consensus.metrics.convergence import arrival_radius, min_pair_distance_series, packing_radius
from consensus.runs.rundir import read_trajectories
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.scenarios.disaster.environment import cell_centre
from consensus.scenarios.disaster.headless import attended_cells, run_disaster_headless, start_positions
from consensus.scenarios.disaster.metrics import ARRIVE_FRACTION, CellSlots

CLEARANCE = 2 * 0.2 + 0.05          # the control group's footprints and margin


def _flight(mode: str, tmp_path, **kw):
    out = tmp_path / mode
    cfg = DisasterConfig(num_robots=6, rounds=8, motion="kinematic", collision_avoidance=mode, seed=3, **kw)
    summary = run_disaster_headless(cfg, out_dir=out)
    _, positions, _ = read_trajectories(out / "trajectories.csv")
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").open()]
    return summary, positions, rounds


def test_kinematic_drones_with_cbf_never_come_closer_than_d_min(tmp_path):
    s, positions, rounds = _flight("cbf", tmp_path)
    mins = min_pair_distance_series(positions)
    assert s["collision_avoidance"] == "cbf" and s["clearance_m"] == pytest.approx(CLEARANCE)
    assert mins.min() >= CLEARANCE - 2e-4, mins.min()          # (the CSV keeps 4 decimals)
    assert s["min_pair_distance_m"] == pytest.approx(mins.min(), abs=2e-4)
    assert s["collision"]["interventions"] > 0 and s["collision"]["infeasible"] == 0
    # the filter had work to do: several drones were sent to one cell
    assert any(len({tuple(a) for a in r["decision"]["actions"]}) < 6 for r in rounds)
    assert s["coverage_rate"] > 0.5


def test_the_same_flight_without_the_filter_collides(tmp_path):
    s, positions, _ = _flight("none", tmp_path)
    assert s["collision_avoidance"] == "none" and "collision" not in s
    assert min_pair_distance_series(positions).min() < 0.1 < CLEARANCE


def test_teleport_has_no_velocities_to_filter():
    s = run_disaster_headless(DisasterConfig(num_robots=3, rounds=2, collision_avoidance="cbf", seed=3))
    assert s["collision_avoidance"] == "none" and "collision" not in s


def test_packed_drones_attend_their_shared_cell_and_a_lone_one_the_cell_under_it():
    cfg = DisasterConfig(num_robots=4)
    d_min = 0.45
    goal = (3, 3)                                   # centre (3.5, 3.5)
    pos = np.array([[3.5, 3.5], [3.5 + 0.46, 3.5], [3.5 - 0.46, 3.5], [3.5, 3.5 - 0.7]])   # 3 packed, over 3 cells
    goals = [goal, goal, goal, goal]
    assert attended_cells(pos, goals, cfg, None) == [(3, 3), (3, 3), (3, 3), (3, 2)]       # point drones: by position
    assert attended_cells(pos, goals, cfg, d_min) == [goal] * 4     # within packing_radius(4, d_min) = 0.9 m
    far = pos + np.array([0.0, -1.0])                               # the last one 1.7 m off: still under its cell
    assert attended_cells(far, goals, cfg, d_min)[3] == (3, 1)
    # a lone drone gets half a cell, however large d_min is
    assert attended_cells(np.array([[3.5, 2.9]]), [goal], cfg, d_min) == [(3, 2)]
    assert arrival_radius(0.5, 1, d_min) == 0.5 and arrival_radius(0.5, 4, d_min) == packing_radius(4, d_min)
    assert arrival_radius(0.5, 4, None) == 0.5


def test_drones_sharing_a_start_cell_start_d_min_apart():
    cfg = DisasterConfig(num_robots=5)
    cells = [(2, 2), (2, 2), (2, 2), (5, 5), (2, 2)]
    pos = start_positions(cfg, cells, 0.45)
    assert np.allclose(pos[3], [5.5, 5.5])
    shared = pos[[0, 1, 2, 4]]
    gaps = np.linalg.norm(shared[:, None] - shared[None], axis=2)[np.triu_indices(4, 1)]
    assert gaps.min() >= 0.45 and np.linalg.norm(shared - [2.5, 2.5], axis=1).max() < 0.5
    assert np.allclose(start_positions(cfg, cells, None)[1], [2.5, 2.5])


# --------------------------------------------------------------------------------------- drones sharing a cell (ROS)
def _ros_slots(**kw):
    """The filter of the ROS drones of a disaster run (the grid's view) and the cells' slots."""
    from consensus.robots.map import fleet_avoidance
    from consensus.scenarios.disaster.drone_control import controller_config

    cfg = DisasterConfig(**kw)
    base, _ = controller_config(cfg)
    avoid = fleet_avoidance(base, ros=True)
    return cfg, base, avoid, CellSlots(cfg.cell_size_m, avoid, base.packing_gap_m, base.workspace)


@pytest.mark.parametrize("cell", [(0, 0), (9, 9), (0, 5), (9, 3), (5, 0), (4, 4)])
def test_drones_sent_to_one_cell_take_the_slots_the_grid_judges_them_by(cell):
    """Each drone's core (``RobotCore.set_meeting_point`` with the group, sent to ``packing.centred`` as the drones are)
    takes a distinct slot, and together they take exactly ``CellSlots.slots``: at walls and corners too."""
    from consensus.control.robot_core import Nearby, RobotCore

    cfg, base, avoid, cs = _ros_slots(num_robots=7)
    assert avoid.d_min_m == pytest.approx(CLEARANCE) and cs.spacing == pytest.approx(CLEARANCE + 0.1)
    rng = np.random.default_rng(cell)
    for k in range(1, 8):
        pos = rng.uniform(0.5, 9.5, (k, 2))
        goals = []
        for i in range(k):
            core = RobotCore(base, i, avoid=avoid)
            core.observe(0.0, pos[i])
            core.set_meeting_point(centred(cell_centre(cell, 1.0), k, avoid.d_min_m + core.gap), 0.0,
                            group=list(range(k)))
            others = [j for j in range(k) if j != i]
            goals.append(core.step(0.0, Nearby.of(pos[others], ids=others)).goal)
        slots = cs.slots(cell, k)
        assert np.allclose(np.sort(np.array(goals), axis=0), np.sort(slots, axis=0)), (cell, k)
        gaps = np.linalg.norm(slots[:, None] - slots[None], axis=2)[np.triu_indices(k, 1)]
        assert (gaps >= cs.spacing - 1e-9).all()                          # the pattern is moved, never squeezed
        assert ((slots >= 0.2 - 1e-9) & (slots <= 9.8 + 1e-9)).all()      # bodies inside the grid
        assert cs.radius(cell, k) == pytest.approx(np.linalg.norm(slots - cell_centre(cell, 1.0), axis=1).max())


def test_slots_are_centred_on_the_cell_and_more_drones_than_fit_are_crowded():
    cfg, _, avoid, cs = _ros_slots(num_robots=9)
    centre = cell_centre((4, 4), 1.0)
    assert np.allclose(cs.slots((4, 4), 1), [centre]) and cs.radius((4, 4), 1) == 0.0
    # two drones: 0.275 m either side of the centre (the packing alone puts them at the centre and 0.55 m beside it)
    assert np.allclose(np.sort(cs.slots((4, 4), 2)[:, 0]), centre[0] + np.array([-0.275, 0.275]))
    assert np.allclose(centred(centre, 1, cs.spacing), centre)
    # defaults (1 m cells, 0.55 m spacing): up to 3 drones fit every cell, 4 all but the left/right edge, 5+ none
    cells = [(x, y) for x in range(10) for y in range(10)]
    assert all(cs.fits(c, k) for c in cells for k in (1, 2, 3))
    assert {c for c in cells if not cs.fits(c, 4)} == {c for c in cells if c[0] in (0, 9)}
    assert not any(cs.fits(c, k) for c in cells for k in (5, 6, 9))
    assert cs.crowded([(4, 4)] * 3 + [(0, 4)] * 4 + [(7, 7)] * 2) == [[0, 4, 4]]
    assert cs.crowded([(4, 4)] * 9) == [[4, 4, 9]]
    # larger cells fit more: 9 drones in 2 m cells
    assert _ros_slots(num_robots=9, cell_size_m=2.0)[3].fits((4, 4), 9)
    # a drone in its slot has arrived; arriving is attending (half a cell beyond the farthest slot, at least the
    # headless packing's arrival_radius)
    for cell, k in (((4, 4), 1), ((4, 4), 3), ((0, 0), 5), ((9, 9), 9)):
        r = cs.radius(cell, k)
        assert cs.arrive_radius(cell, k) == pytest.approx(r + ARRIVE_FRACTION)
        assert cs.attend_radius(cell, k) == pytest.approx(max(r + 0.5, arrival_radius(0.5, k, avoid.d_min_m)))
        assert cs.arrive_radius(cell, k) < cs.attend_radius(cell, k)


def test_drones_in_their_slots_attend_their_cell_even_over_a_neighbour():
    cfg, _, avoid, cs = _ros_slots(num_robots=6)
    goals = [(0, 0)] * 6                                  # crowded in a corner: slots reach over (1, 0) and (0, 1)
    pos = cs.slots((0, 0), 6)
    radii = [cs.attend_radius((0, 0), 6)] * 6
    assert attended_cells(pos, goals, cfg, avoid.d_min_m, radii) == goals
    assert any(c != (0, 0) for c in attended_cells(pos, goals, cfg, None))   # by position: some over a neighbour
    far = pos + np.array([3.0, 0.0])                      # far off: the cells under them
    assert attended_cells(far, goals, cfg, avoid.d_min_m, radii) == attended_cells(far, goals, cfg, None)
