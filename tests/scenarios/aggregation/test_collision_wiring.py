"""Collision avoidance wired into the runs (issue 19): the headless aggregation with the filter on and off, the
``auto`` rule, the summary's keys (consensus.control.avoidance, consensus.metrics.convergence)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from consensus.control.avoidance import Avoidance, avoidance_from_config
from consensus.errors import ConfigError
from consensus.metrics.convergence import min_pair_distance_series, packing_radius
from consensus.scenarios.aggregation.config import load_config
from consensus.scenarios.aggregation.headless import run_headless


def _ring(n: int, radius: float = 6.0, seed: int = 0) -> list[float]:
    """n robots around a circle (jittered), every pair well over a metre apart."""
    ang = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False) + 0.1
    pos = np.column_stack([radius * np.cos(ang), radius * np.sin(ang)])
    pos += np.random.default_rng(seed).normal(0.0, 0.2, pos.shape)
    return [float(v) for v in pos.ravel()]


def _run(n: int, mode: str, kinematics: str = "single_integrator", **kw):
    cfg = load_config(None, num_robots=n, planner="average", duration_s=40.0, seed=1, collision_avoidance=mode,
                      kinematics=kinematics, initial_positions=_ring(n, seed=n), **kw)
    return cfg, run_headless(cfg)


@pytest.mark.parametrize("kinematics", ["single_integrator", "unicycle", "point_mass_pid"])
@pytest.mark.parametrize("n", [4, 20])
def test_headless_aggregation_with_cbf_keeps_d_min_and_still_agrees(n, kinematics):
    cfg, res = _run(n, "cbf", kinematics)
    s = res.summary
    clearance = 2 * cfg.footprint_radius_m + cfg.safety_margin_m
    mins = min_pair_distance_series(res.positions)
    assert s["collision_avoidance"] == "cbf" and s["clearance_m"] == pytest.approx(clearance)
    assert mins.min() >= clearance - 1e-9, (mins.min(), clearance)          # never closer than d_min
    assert s["min_pair_distance_m"] == pytest.approx(mins.min())
    # they agree: the targets meet (the average planner on a complete graph) and every robot packs around them
    assert s["converged"] is True and s["converged_on"] == "targets" and s["target_spread_m"] < cfg.converge_tol_m
    final_c = np.asarray(s["consensus_point"])
    radius = packing_radius(n, s["d_min_m"])
    assert np.linalg.norm(res.positions[-1] - final_c, axis=1).max() <= radius
    # and they did gather: from a 12 m circle into the packing (not just stood still)
    start = np.linalg.norm(res.positions[0] - final_c, axis=1).min()
    assert s["initial_spread_m"] > 10.0 and np.linalg.norm(res.positions[-1] - final_c, axis=1).mean() < 0.6 * start
    col = s["collision"]
    assert col["interventions"] > 0 and col["infeasible"] == 0 and col["steps"] == n * (len(res.times) - 1)


@pytest.mark.parametrize("n", [4, 20])
def test_the_same_scene_without_the_filter_collides(n):
    cfg, res = _run(n, "none")
    s = res.summary
    assert s["collision_avoidance"] == "none" and "collision" not in s
    assert s["min_pair_distance_m"] < 0.1 < 2 * cfg.footprint_radius_m + cfg.safety_margin_m
    # point robots: unchanged behaviour, convergence judged on the positions
    assert s["converged"] is True and s["converged_on"] == "positions" and s["final_spread_m"] < cfg.converge_tol_m


def test_filtered_commands_never_exceed_v_max():
    """The speed of every robot at every step (single integrator: the command itself) stays within v_max."""
    cfg, res = _run(20, "cbf", v_max=0.7)
    speed = np.linalg.norm(np.diff(res.positions, axis=0), axis=2) / cfg.control_period_s
    assert speed.max() <= 0.7 + 1e-9 and speed.max() > 0.5


def test_unicycle_commands_stay_within_both_limits():
    av = Avoidance(kinematics="unicycle", v_max=0.22, w_max=2.84, gamma=1.0, margin=0.05, radius=0.105)
    rng = np.random.default_rng(3)
    for _ in range(300):
        pose = np.array([*rng.uniform(-1, 1, 2), rng.uniform(-np.pi, np.pi)])
        v, w = av.filter_unicycle(pose, rng.uniform(0, 0.22), rng.uniform(-2.84, 2.84), rng.uniform(-1, 1, (3, 2)))
        assert abs(v) <= 0.22 + 1e-12 and abs(w) <= 2.84 + 1e-12
    # far from everyone the nominal command passes unchanged
    assert av.filter_unicycle([0.0, 0.0, 0.3], 0.2, 1.5, [[50.0, 50.0]]) == pytest.approx((0.2, 1.5))


def test_auto_rule_cbf_in_ros_and_with_robots_files_none_headless(tmp_path):
    cfg = load_config(None)
    assert cfg.collision_avoidance == "auto"
    assert cfg.resolved_collision_avoidance(ros=True) == "cbf"
    assert cfg.resolved_collision_avoidance(ros=False) == "none"
    assert avoidance_from_config(cfg, ros=False) is None
    assert load_config(None, collision_avoidance="none").resolved_collision_avoidance(ros=True) == "none"
    assert load_config(None, collision_avoidance="cbf").resolved_collision_avoidance(ros=False) == "cbf"
    robots = tmp_path / "robots.yaml"
    robots.write_text("robots:\n  a: {preset: turtlebot3, initial_pose: [0, 0]}\n  b: {preset: turtlebot4, "
                      "initial_pose: [1, 0]}\n")
    real = load_config(None, robots_file=str(robots))
    assert real.resolved_collision_avoidance(ros=False) == "cbf"
    from consensus.robots.map import fleet_footprint
    assert fleet_footprint(real) == pytest.approx(0.17)                  # the largest preset's footprint


@pytest.mark.parametrize("field,value,words", [
    ("collision_avoidance", "maybe", "unknown collision_avoidance"),
    ("cbf_gamma", 20.0, "at most 1 / control_period_s"),
    ("cbf_gamma", 0.0, r"cbf_gamma must be in \[1e-06, 1000\]"),
    ("safety_margin_m", -0.1, r"safety_margin_m must be in \[0, 10\]"),
    ("footprint_radius_m", float("nan"), r"footprint_radius_m must be in \[0.001, 100\] \(got nan\)"),
])
def test_bad_collision_settings_are_one_clear_error(field, value, words):
    with pytest.raises(ConfigError, match=words):
        load_config(None, **{field: value})


def test_headless_run_dir_records_the_resolved_mode_and_the_new_summary_keys(tmp_path):
    from consensus.scenarios.aggregation.runner import run_headless_to_dir

    cfg = load_config(None, num_robots=4, planner="average", duration_s=20.0, initial_positions=_ring(4))
    s = run_headless_to_dir(cfg, tmp_path / "none")
    manifest = json.loads((tmp_path / "none" / "manifest.json").read_text())
    assert manifest["config"]["collision_avoidance"] == "none"
    assert manifest["collision_avoidance"] == {"requested": "auto", "resolved": "none"}
    assert s["converged_on"] == "positions" and s["min_pair_distance_m"] < 0.1
    s = run_headless_to_dir(cfg.replace(collision_avoidance="cbf"), tmp_path / "cbf")
    manifest = json.loads((tmp_path / "cbf" / "manifest.json").read_text())
    assert manifest["config"]["collision_avoidance"] == "cbf"
    assert s["converged"] is True and s["converged_on"] == "targets" and s["min_pair_distance_m"] >= 0.45
    assert s["collision"]["interventions"] > 0 and s["collision_avoidance"] == "cbf"
    assert (tmp_path / "cbf" / "paths.png").is_file()
