"""Safe and agreeing through real ROS 2 nodes: 6 robots with bodies (the default collision filter of a ROS run) on
a ring, a line, a star and a directed leader-follower graph agree on one meeting point and pack around it.

Judged on what the simulator says the bodies did (every robot's ``odom`` in the run's MCAP bag), not on the
``state`` topic the robots broadcast: no two bodies ever closer than their clearance, every body within
``clearance × (1 + √N)`` of the agreed point at the end, and at rest the closest pair at most 0.15 m beyond the
clearance (the filter's distance at rest is the clearance: no fixed age budget). The meeting points are the
summary's (``target_spread_m`` below ``converge_tol_m``), reached within 90 s.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from support.bag_odometry import odometry_in_bag
from consensus.scenarios.aggregation.config import load_config

pytestmark = pytest.mark.ros

N = 6


def odometry_track(run) -> tuple[float, np.ndarray]:
    """(closest distance between two bodies at any odometry message, the last odometry position of every robot)."""
    odom = odometry_in_bag(run)
    return odom.closest, odom.final()


#: one undirected and one directed graph: what only ROS shows is the graph enforced on the wire and the packing in the
#: simulator; every graph (line and star too) is judged headless by
#: tests/scenarios/aggregation/test_agreement.py's property tests, on the same ROS-free core
@pytest.mark.parametrize("topology", ["ring", "leader_follower"])
def test_six_robots_with_bodies_agree_on_one_point_and_pack_around_it(topology, tmp_path):
    from consensus.scenarios.aggregation.runner import run_ros

    extra = {"directed": True, "leader": 2} if topology == "leader_follower" else {}
    cfg = load_config(None, num_robots=N, topology=topology, planner="average", duration_s=90.0, settle_s=3.0,
                      seed=5, **extra)
    assert cfg.resolved_collision_avoidance(ros=True) == "cbf"            # the default of every ROS run
    summary = run_ros(cfg, tmp_path / "run", echo=None)
    closest, final = odometry_track(tmp_path / "run")
    clearance = summary["clearance_m"]
    assert summary["converged"] is True and summary["end_reason"] == "converged_and_settled", summary
    assert summary["converged_on"] == "targets" and summary["target_spread_m"] < cfg.converge_tol_m
    assert summary["time_to_converge_s"] <= 90.0
    assert len(final) == N and closest >= clearance, (closest, clearance)
    point = np.asarray(summary["consensus_point"])
    assert np.linalg.norm(final - point, axis=1).max() <= clearance * (1 + math.sqrt(N))
    at_rest = np.linalg.norm(final[:, None] - final[None], axis=2)[np.triu_indices(N, 1)].min()
    assert at_rest <= clearance + 0.15, at_rest
    assert isinstance(summary["deadlocks"], int)
    if topology == "leader_follower":                 # the leader hears nobody: the others meet where it stands
        from consensus.control.kinematics import initial_positions

        assert np.linalg.norm(point - initial_positions(cfg)[2]) < cfg.converge_tol_m


def _average_of_what_it_is_shown(body: dict) -> str:
    """A scripted LLM: the mean of every point written in its prompt (positions and, with meeting_points on, the
    meeting points too), in the paper's answer format."""
    import re

    text = body["messages"][-1]["content"]
    pairs = [(float(a), float(b)) for a, b in re.findall(r"\((-?[\d.]+),\s*(-?[\d.]+)\)", text)]
    x, y = np.mean(pairs, axis=0) if pairs else (0.0, 0.0)
    return f"Reasoning: the mean of the {len(pairs)} points I am shown. Position: ({x:.4f}, {y:.4f})"


def test_four_llm_robots_with_bodies_agree_through_a_fake_endpoint(tmp_path):
    """4 LLM robots (paper style, the others' meeting points shown: meeting_points on) whose endpoint answers the
    average of what it is shown agree on one meeting point with the default filter, and their bodies never touch."""
    from support.fake_openai_server import FakeOpenAIServer, Reply

    from consensus.scenarios.aggregation.runner import run_ros

    with FakeOpenAIServer(lambda body: Reply(_average_of_what_it_is_shown(body))) as srv:
        cfg = load_config(None, num_robots=4, planner="llm", llm_backend="openai", llm_base_url=srv.base_url,
                          llm_model="fake", prompt_style="paper", meeting_points="on", planner_period_s=1.0,
                          duration_s=60.0, settle_s=6.0, seed=9)
        # settle_s: the run ends that long after the meeting points agree, and the bodies come after them (with 3 s a
        # body was once still 1.38 m from the point, 1.35 m allowed, in a fresh clone's full run on 2026-11-30)
        summary = run_ros(cfg, tmp_path / "run", echo=None)
        # (chat bodies: on a loaded CI host one recorded request once had no body at all; cause not found)
        shown = [r["messages"][-1]["content"] for r in srv.requests if r.get("messages")]
    assert any("intend to meet" in text for text in shown)               # the option reached the prompt
    closest, final = odometry_track(tmp_path / "run")
    assert summary["converged"] is True and summary["target_spread_m"] < cfg.converge_tol_m, summary
    assert summary["llm_fallbacks"] == 0 and closest >= summary["clearance_m"]
    point = np.asarray(summary["consensus_point"])
    assert np.linalg.norm(final - point, axis=1).max() <= summary["clearance_m"] * (1 + math.sqrt(4))
