"""Collision avoidance in the scenarios' robots (issue 19): the disaster drones' kinematic flight (headless) with the
filter on and off, the cells packed drones attend, their start positions (consensus.scenarios.disaster.headless);
the packing tolerance of arrival checks (consensus.metrics.convergence.arrival_radius)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from consensus.metrics.convergence import arrival_radius, min_pair_distance_series, packing_radius
from consensus.runs.rundir import read_trajectories
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.scenarios.disaster.headless import attended_cells, run_disaster_headless, start_positions

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
