"""Collision avoidance through real ROS 2 nodes (issue 19): robots planned by an LLM (the fake endpoint) and by the
average planner gather with no pair ever closer than d_min, checked from the run's MCAP bag (every robot's odom),
also with delayed and dropped neighbour positions; the filtered commands never exceed v_max."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from support.bag_odometry import odometry_in_bag
from consensus.scenarios.aggregation.config import load_config

pytestmark = pytest.mark.ros


def _ring(n: int, radius: float = 4.0) -> list[float]:
    ang = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False) + 0.3
    return [float(v) for v in np.column_stack([radius * np.cos(ang), radius * np.sin(ang)]).ravel()]


def _averaging_llm(body: dict) -> str:
    """A scripted LLM that answers the average of all positions written in its prompt."""
    text = body["messages"][-1]["content"]
    pairs = [(float(a), float(b)) for a, b in re.findall(r"\((-?[\d.]+),\s*(-?[\d.]+)\)", text)]
    x, y = np.mean(pairs, axis=0) if pairs else (0.0, 0.0)
    return json.dumps({"reasoning": f"average of {len(pairs)} positions", "position": [x, y]})


def _from_bag(run) -> tuple[float, float, int]:
    """(smallest distance between two robots' odometry at any message, fastest cmd_vel, robots seen)."""
    odom = odometry_in_bag(run)
    return odom.closest, odom.fastest_cmd, odom.robots


def test_six_llm_robots_agree_and_never_come_closer_than_d_min(tmp_path):
    from support.fake_openai_server import FakeOpenAIServer, Reply

    from consensus.scenarios.aggregation.runner import run_ros

    with FakeOpenAIServer(lambda body: Reply(_averaging_llm(body))) as srv:
        cfg = load_config(None, num_robots=6, planner="llm", llm_backend="openai", llm_base_url=srv.base_url,
                          llm_model="fake", planner_period_s=1.0, duration_s=40.0, settle_s=3.0, seed=2,
                          initial_positions=_ring(6))
        summary = run_ros(cfg, tmp_path / "run", echo=None)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["collision_avoidance"] == "cbf"                 # auto: cbf in a ROS run
    assert manifest["collision_avoidance"] == {"requested": "auto", "resolved": "cbf"}
    d_min = summary["clearance_m"]
    assert d_min == pytest.approx(2 * cfg.footprint_radius_m + cfg.safety_margin_m)
    closest, fastest, robots = _from_bag(tmp_path / "run")
    assert robots == 6 and closest >= d_min, (closest, d_min)
    assert 0.5 < fastest <= cfg.v_max + 1e-9                                  # they moved, never above v_max
    # agreement: the targets met and every robot packed around them; the positions did not (they cannot)
    assert summary["converged"] is True and summary["converged_on"] == "targets", summary
    assert summary["target_spread_m"] < cfg.converge_tol_m < d_min < summary["final_spread_m"]
    assert summary["min_pair_distance_m"] >= d_min
    assert summary["llm_calls"] >= 6 and summary["llm_fallbacks"] == 0
    col = summary["collision"]
    assert col["interventions"] > 0 and col["infeasible"] == 0 and col["steps"] > 0
    assert all("collision" in st for st in summary["per_robot"])
    assert summary["callback_errors"] == 0 and summary["bad_messages"] == 0


def test_delayed_and_dropped_positions_keep_pairs_apart(tmp_path):
    """The topology's link delay and drops reach the filter too: each neighbour position travels with its age, and
    the robot widens its distance to it by that age times the closing speed (consensus.control.robot_core), which
    keeps the footprints apart; at rest the fleet's d_min is the clearance (no fixed age budget)."""
    from consensus.scenarios.aggregation.runner import run_ros

    cfg = load_config(None, num_robots=6, planner="average", planner_period_s=1.0, duration_s=30.0, settle_s=3.0,
                      link_delay_s=0.3, link_drop_prob=0.3, seed=4, initial_positions=_ring(6))
    summary = run_ros(cfg, tmp_path / "run", echo=None)
    closest, fastest, robots = _from_bag(tmp_path / "run")
    assert robots == 6 and closest >= summary["clearance_m"], (closest, summary["clearance_m"])
    assert fastest <= cfg.v_max + 1e-9
    assert summary["d_min_m"] == pytest.approx(summary["clearance_m"])
    assert summary["converged"] is True, summary
