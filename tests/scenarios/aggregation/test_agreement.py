"""Safe and agreeing, headless: robots whose bodies the collision filter keeps apart still agree on one meeting point
and pack around it, on every graph with a rooted spanning tree (hypothesis draws the graph, N and the starts).

Every case must meet all of these (the run is the headless loop: every robot's ``RobotCore``, the one the ROS nodes
call, with the average planner on the neighbours' meeting points):

* agreement: the meeting points' spread at the end is at most ``converge_tol_m`` (``target_spread_m``);
* packing: every robot within ``d_min × (1 + √N)`` of the agreed point (the summary's ``packing_radius_m``; d_min is
  the filter's distance at rest: the clearance for single integrators, plus twice the filtered point's offset for
  unicycles, plus the braking distance for the point mass);
* safety: the closest pair at least the clearance at every tick (starts at least d_min apart);
* time: agreeing and packing take at most
  ``ΔTp · (⌈ln(2 S₀ / tol) / (−ln ρ)⌉ · k + 3) + 3 (S₀ + 2 R) / v_max + 20 s`` where S₀ is the initial spread, R the
  packing radius, ρ the second largest eigenvalue modulus of the averaging matrix ``W = D⁻¹ (I + A)`` (how much one
  round of averaging contracts the meeting points: the graph's own rate, which bodies do not change), and
  ``k = (1 + link_delay_s / ΔTp) / (1 − link_drop_prob)²`` for delayed and dropped deliveries (1 without). The first
  term is the consensus of the meeting points, the second the drive into the packing from anywhere in the start.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from consensus.control.avoidance import avoidance_from_config
from consensus.metrics.convergence import min_pair_distance_series, spread
from consensus.scenarios.aggregation.config import load_config
from consensus.scenarios.aggregation.headless import run_headless

TOPOLOGIES = ("ring", "line", "star", "leader_follower", "random")


def averaging_rate(adj: np.ndarray) -> float:
    """ρ: the second largest eigenvalue modulus of the average planner's matrix ``W = D⁻¹ (I + A)``."""
    w = np.eye(len(adj)) + adj.astype(float)
    w /= w.sum(axis=1, keepdims=True)
    moduli = np.sort(np.abs(np.linalg.eigvals(w)))
    return float(moduli[-2])


def time_bound(cfg, graph, s0: float, radius: float) -> float:
    rho = averaging_rate(graph.adj)
    k = (1.0 + cfg.link_delay_s / cfg.planner_period_s) / (1.0 - cfg.link_drop_prob) ** 2
    rounds = math.ceil(math.log(2.0 * s0 / cfg.converge_tol_m) / -math.log(rho)) * k + 3
    return cfg.planner_period_s * rounds + 3.0 * (s0 + 2.0 * radius) / cfg.v_max + 20.0


def separated_starts(rng: np.random.Generator, n: int, gap: float) -> list[float]:
    """n positions at least ``gap`` apart, uniform in a square that holds them loosely."""
    half = max(4.0, gap * math.sqrt(n) * 1.2)
    pts: list[np.ndarray] = []
    while len(pts) < n:
        p = rng.uniform(-half, half, 2)
        if all(np.linalg.norm(p - q) >= gap for q in pts):
            pts.append(p)
    return [float(v) for v in np.ravel(pts)]


@st.composite
def scenes(draw):
    topology = draw(st.sampled_from(TOPOLOGIES))
    n = draw(st.integers(4, 20))
    seed = draw(st.integers(0, 10_000))
    return topology, n, seed


def check(topology: str, n: int, seed: int, **kw) -> None:
    extra = {"directed": True} if topology == "leader_follower" else {}
    if topology == "random":
        extra = {"topology_p": 0.35}
    cfg = load_config(None, num_robots=n, topology=topology, planner="average", collision_avoidance="cbf",
                      seed=seed, duration_s=1.0, **extra, **kw)
    graph = cfg.graph()
    assume(graph.consensus_check()[0])               # a rooted spanning tree: consensus is possible at all
    avoid = avoidance_from_config(cfg, ros=False)
    starts = separated_starts(np.random.default_rng(seed), n, avoid.d_min_m + 0.05)
    s0 = spread(np.reshape(starts, (n, 2)))
    radius = avoid.d_min_m * (1 + math.sqrt(n))
    bound = time_bound(cfg, graph, s0, radius)
    cfg = cfg.replace(initial_positions=starts, duration_s=bound + 10.0, settle_s=3.0)
    res = run_headless(cfg)
    s = res.summary
    what = (topology, n, seed, kw)
    assert s["converged"] is True and s["converged_on"] == "targets", (what, s)
    assert s["target_spread_m"] <= cfg.converge_tol_m, what
    point = np.asarray(s["consensus_point"])
    assert s["packing_radius_m"] == pytest.approx(radius)
    assert np.linalg.norm(res.positions[-1] - point, axis=1).max() <= radius, what
    assert min_pair_distance_series(res.positions).min() >= avoid.clearance_m - 1e-9, what
    assert s["time_to_converge_s"] <= bound, (what, s["time_to_converge_s"], bound)


# derandomized: the same examples in every run (a CI run must not depend on a fresh draw); 60 random examples of each
# test passed when they were written
SETTINGS = settings(max_examples=10, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


@SETTINGS
@given(scenes())
def test_bodies_agree_pack_and_never_touch_on_every_graph(scene):
    check(*scene)


#: the variants on half as many scenes as the base test (derandomized too: the same five scenes in every run)
VARIANT_SETTINGS = settings(SETTINGS, max_examples=5)


@VARIANT_SETTINGS
@given(scenes(), st.sampled_from([0.2, 0.5]), st.sampled_from([0.1, 0.3]))
def test_the_same_with_delayed_and_dropped_deliveries(scene, delay, drop):
    check(*scene, link_delay_s=delay, link_drop_prob=drop)


@VARIANT_SETTINGS
@given(scenes(), st.sampled_from(["unicycle", "point_mass_pid"]))
def test_the_same_for_unicycles_and_the_point_mass(scene, kinematics):
    check(*scene, kinematics=kinematics)


def test_point_robots_are_unchanged_by_the_core():
    """The papers' point robots (``none``): the consensus is the positions', no packing keys."""
    cfg = load_config(None, num_robots=6, topology="ring", planner="average", duration_s=60.0, seed=3)
    s = run_headless(cfg).summary
    assert s["collision_avoidance"] == "none" and s["converged_on"] == "positions" and "deadlocks" not in s
    assert s["converged"] is True and s["final_spread_m"] < cfg.converge_tol_m


def test_the_meeting_points_are_what_the_classical_planners_average():
    """With bodies the average planner runs on the neighbours' meeting points: on a complete graph every robot's
    round-1 target is the mean of everyone's start (their round-0 meeting points), whatever the bodies do."""
    n = 5
    cfg = load_config(None, num_robots=n, topology="complete", planner="average", collision_avoidance="cbf",
                      duration_s=4.0, seed=8)
    res = run_headless(cfg)
    first = [e for e in res.plan_log if e["round"] == 0]
    start = res.positions[0]
    assert len(first) == n and all(np.allclose(e["target"], start.mean(axis=0)) for e in first)


class CentroidOfTheOthers:
    """A stand-in for the embedded model in the ``tools`` style (docs/model-card.md: it answers
    ``move_to_centroid`` of the other robots every time): one tool call naming every robot but itself."""

    model = "centroid-of-the-others"

    def complete(self, req):
        import json
        import re

        from consensus.llm.base import ChatResponse

        names = sorted(set(re.findall(r"robot_\d+", req.messages[-1]["content"])))
        return ChatResponse(text="", tool_calls=[{"id": "c0", "name": "move_to_centroid",
                                                  "arguments": json.dumps({"robots": names})}])


@pytest.mark.parametrize("meeting_points", ["on", "off"])
def test_tool_robots_agree_with_bodies_only_when_shown_the_meeting_points(meeting_points):
    """The demo's failure, headless: 4 LLM robots with bodies that each go to the centroid of the others. On the
    positions the robots hold (``off``, the paper's wording) their targets stay about a body's spacing apart for
    good; on the others' meeting points (``on``) they agree, then pack."""
    cfg = load_config(None, num_robots=4, planner="llm", prompt_style="tools", collision_avoidance="cbf",
                      meeting_points=meeting_points, duration_s=120.0, settle_s=3.0, seed=4, llm_concurrency=1)
    s = run_headless(cfg, CentroidOfTheOthers()).summary
    assert s["llm_fallbacks"] == 0
    if meeting_points == "on":
        assert s["converged"] is True and s["target_spread_m"] < cfg.converge_tol_m
        assert s["end_reason"] == "converged_and_settled"
    else:
        assert s["converged"] is False and s["target_spread_m"] > cfg.converge_tol_m
