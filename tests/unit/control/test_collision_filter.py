"""The barrier-certificate collision filter (consensus.control.collision): simulated scenes at dt = 0.1 s keep every
pair d_min apart with the filter and collide without it; speed limit, least squares, delays, drops, infeasibility."""
from __future__ import annotations

import math

import daqp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consensus.control.collision import (
    POLYGON_SIDES, CollisionCounters, filter_velocities, filter_velocity, near_identity_point, point_velocity,
    safety_distance, unicycle_command,
)
from consensus.control.controller import PController, UnicycleController
from consensus.control.kinematics import step_unicycle
from consensus.errors import ConfigError
from consensus.robots.presets import PRESETS

DT = 0.1
V_MAX = 0.5
D_MIN = 0.5
GAMMA = 1.0
TOL = 1e-9          # numerical tolerance on distances [m]
FAST = settings(max_examples=12, deadline=None, derandomize=True)


def pair_distances(pos: np.ndarray) -> np.ndarray:
    d = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=2)
    return d[np.triu_indices(len(pos), 1)]


def simulate(pos, targets, *, steps=400, filtered=True, d_min=D_MIN, d_filter=None, gamma=GAMMA, delay=0,
             drop=0.0, max_age=0, seed=0):
    """Single integrators with a saturated P controller. Returns (min pair distance per tick, final positions,
    counters, largest commanded speed). ``delay``: neighbour positions are ``delay`` ticks old; ``drop``: each
    neighbour position is lost with this probability per tick (the last one received is used, never older than
    ``max_age`` ticks)."""
    pos = np.array(pos, dtype=float)
    targets = np.asarray(targets, dtype=float)
    n = len(pos)
    ctl = PController(kp=1.0, v_max=V_MAX, deadband=0.0)
    counters = CollisionCounters()
    rng = np.random.default_rng(seed)
    history = [pos.copy()] * (max(delay, max_age) + 1)
    age = np.full((n, n), delay)
    mins, top = [], 0.0
    for _ in range(steps):
        u_nom = ctl.compute_batch(pos, targets)
        if filtered:
            if drop:
                lost = rng.random((n, n)) < drop
                age = np.where(lost & (age < max_age), age + 1, 0)
            hist = np.stack(history)                    # (ticks, n, 2), newest last
            known = hist[len(history) - 1 - age, np.arange(n)[None, :]]
            u, _ = filter_velocities(pos, u_nom, d_min if d_filter is None else d_filter, V_MAX, gamma,
                                     known=known, counters=counters)
        else:
            u = u_nom
        top = max(top, float(np.max(np.linalg.norm(u, axis=1))))
        pos = pos + DT * u
        history = history[1:] + [pos.copy()]
        mins.append(float(pair_distances(pos).min()))
    return np.array(mins), pos, counters, top


def safe_starts(rng: np.random.Generator, n: int, spread: float, d_min: float = D_MIN) -> np.ndarray:
    """n positions in [-spread, spread]² at least 1.05 d_min apart (rejection sampling)."""
    pts: list[np.ndarray] = []
    while len(pts) < n:
        p = rng.uniform(-spread, spread, 2)
        if all(np.linalg.norm(p - q) >= 1.05 * d_min for q in pts):
            pts.append(p)
    return np.array(pts)


# ---- scenes: the filter is what keeps the robots apart ---------------------------------------------------------

@pytest.mark.parametrize("offset_y", [0.0, 0.01, 0.3])
def test_two_robots_head_on(offset_y):
    start = np.array([[-2.0, offset_y], [2.0, 0.0]])
    goal = start[::-1].copy()
    mins, end, counters, top = simulate(start, goal)
    assert mins.min() >= D_MIN - TOL
    assert top <= V_MAX + 1e-12
    assert counters.interventions > 0 and counters.infeasible == 0
    assert counters.min_distance_m >= D_MIN - TOL
    if offset_y:                        # off the exact line the robots slide past each other and arrive
        assert np.allclose(end, goal, atol=0.05)
    off, *_ = simulate(start, goal, filtered=False)
    assert off.min() < 0.1 * D_MIN


def test_four_robots_told_to_meet_at_one_point_pack_around_it():
    start = np.array([[-2.0, -1.9], [2.1, 2.0], [2.0, -2.2], [-1.8, 2.0]])
    meet = np.array([0.3, -0.2])
    mins, end, counters, top = simulate(start, np.tile(meet, (4, 1)), steps=600)
    assert mins.min() >= D_MIN - TOL and top <= V_MAX + 1e-12
    # packed around the point: one robot near it and three touching it, or a square of side d_min (circumradius
    # d_min / sqrt(2)); the last few percent take long at the barrier's exponential approach
    assert np.max(np.linalg.norm(end - meet, axis=1)) <= 1.05 * D_MIN
    off, end_off, *_ = simulate(start, np.tile(meet, (4, 1)), filtered=False, steps=600)
    assert off.min() < 0.01 and np.allclose(end_off, meet, atol=0.01)


def test_twenty_robots_in_a_ring_swap_sides():
    n = 20
    ang = 2 * np.pi * np.arange(n) / n
    start = 4.0 * np.column_stack([np.cos(ang), np.sin(ang)])
    goal = -start + np.random.default_rng(3).normal(0, 0.05, start.shape)   # break the perfect symmetry
    mins, end, counters, top = simulate(start, goal, steps=600)
    assert mins.min() >= D_MIN - TOL and top <= V_MAX + 1e-12
    assert counters.infeasible == 0 and counters.qp_solves > 0     # (they jam in the middle: docs/real-robots.md)
    off, *_ = simulate(start, goal, filtered=False, steps=600)
    assert off.min() < 0.2 * D_MIN


@FAST
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 8), cluster=st.floats(0.0, 1.0))
def test_random_starts_and_targets_stay_apart(seed, n, cluster):
    rng = np.random.default_rng(seed)
    start = safe_starts(rng, n, 3.0)
    goal = rng.uniform(-cluster, cluster, (n, 2))        # cluster = 0: everyone to the same point
    mins, end, counters, top = simulate(start, goal, steps=150)
    assert mins.min() >= D_MIN - TOL
    assert top <= V_MAX + 1e-12
    assert counters.infeasible == 0


@settings(max_examples=6, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 6))
def test_aggregation_converges_near_the_meeting_point(seed, n):
    rng = np.random.default_rng(seed)
    start = safe_starts(rng, n, 3.0)
    meet = rng.uniform(-1, 1, 2)
    mins, end, counters, _ = simulate(start, np.tile(meet, (n, 1)), steps=500)
    assert mins.min() >= D_MIN - TOL
    # n discs of diameter d_min packed around a point fit in a circle of radius ~ d_min * sqrt(n) / 2; a robot
    # pinned behind another (a known CBF deadlock) stays within one more d_min
    assert np.max(np.linalg.norm(end - meet, axis=1)) <= D_MIN * (math.sqrt(n) / 2 + 1.0)
    assert np.min(np.linalg.norm(end - meet, axis=1)) <= D_MIN


# ---- unicycles through the near-identity point ----------------------------------------------------------------

def simulate_unicycles(poses, targets, *, offset, d_min_axes, steps=500, filtered=True):
    """Unicycles (exact arcs) driven by UnicycleController; the filter acts on their near-identity points with
    d_min = d_min_axes + 2 offset. Returns (min point distance, min axis distance) per tick and the end poses."""
    poses = np.array(poses, dtype=float)
    ctl = UnicycleController(k_v=1.0, k_w=2.0, v_max=V_MAX, w_max=V_MAX / offset, deadband=0.0)
    d_points = safety_distance(d_min_axes / 2, margin=0.0, offset=offset)
    pts_min, axes_min = [], []
    for _ in range(steps):
        v, w = ctl.compute_batch(poses, targets)
        if filtered:
            u_nom = point_velocity(poses[:, 2], v, w, offset)
            u, _ = filter_velocities(near_identity_point(poses, offset), u_nom, d_points, V_MAX, GAMMA)
            assert np.all(np.linalg.norm(u, axis=1) <= V_MAX + 1e-12)
            v, w = unicycle_command(poses[:, 2], u, offset)
        poses = step_unicycle(poses, v, w, DT)
        pts_min.append(pair_distances(near_identity_point(poses, offset)).min())
        axes_min.append(pair_distances(poses[:, :2]).min())
    return np.array(pts_min), np.array(axes_min), poses, d_points


@pytest.mark.parametrize("scene", ["head_on", "meet"])
def test_unicycles_keep_their_axes_apart(scene):
    offset = 0.1
    if scene == "head_on":
        poses = np.array([[-2.0, 0.05, 0.0], [2.0, 0.0, np.pi]])
        targets = poses[::-1, :2].copy()
    else:
        poses = np.array([[-2.0, -2.0, 0.3], [2.0, 2.1, -2.0], [2.0, -2.0, 2.5], [-2.1, 2.0, -1.0]])
        targets = np.zeros((4, 2))
    pts, axes, _, d_points = simulate_unicycles(poses, targets, offset=offset, d_min_axes=D_MIN)
    # the point moves along an arc, not the straight line the filter assumed (seen: < 1e-7 m at dt = 0.1 s)
    assert pts.min() >= d_points - 1e-4
    assert axes.min() >= D_MIN - 1e-4
    _, axes_off, _, _ = simulate_unicycles(poses, targets, offset=offset, d_min_axes=D_MIN, filtered=False)
    assert axes_off.min() < 0.5 * D_MIN


@FAST
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 6))
def test_random_unicycles_stay_apart(seed, n):
    rng = np.random.default_rng(seed)
    offset = 0.1
    start = safe_starts(rng, n, 3.0, d_min=D_MIN + 2 * offset)
    poses = np.column_stack([start, rng.uniform(-np.pi, np.pi, n)])
    pts, axes, _, d_points = simulate_unicycles(poses, rng.uniform(-0.5, 0.5, (n, 2)), offset=offset,
                                                d_min_axes=D_MIN, steps=200)
    assert pts.min() >= d_points - 1e-4
    assert axes.min() >= D_MIN - 1e-4


def test_near_identity_transform_round_trips():
    rng = np.random.default_rng(1)
    yaw, u = rng.uniform(-4, 4, 50), rng.normal(size=(50, 2))
    v, w = unicycle_command(yaw, u, 0.15)
    assert np.allclose(point_velocity(yaw, v, w, 0.15), u)
    assert np.allclose(near_identity_point(np.array([1.0, 2.0, np.pi / 2]), 0.15), [1.0, 2.15])
    v1, w1 = unicycle_command(0.0, np.array([0.2, 0.3]), 0.1)
    assert (v1, w1) == pytest.approx((0.2, 3.0))
    with pytest.raises(ConfigError, match="'offset'"):
        unicycle_command(0.0, np.array([0.2, 0.3]), 0.0)


# ---- delayed and dropped neighbour positions ------------------------------------------------------------------

def crossing_scene(n=6, seed=0):
    rng = np.random.default_rng(seed)
    start = safe_starts(rng, n, 2.5, d_min=2 * D_MIN)
    return start, -start + rng.normal(0, 0.1, start.shape)


@pytest.mark.parametrize("delay", [1, 3])
def test_delayed_positions_with_the_inflated_margin_keep_d_min(delay):
    d_filter = safety_distance(D_MIN / 2, margin=0.0, v_max=V_MAX, delay_s=delay * DT)
    assert d_filter == pytest.approx(D_MIN + 2 * V_MAX * delay * DT)
    for seed in range(4):
        start, goal = crossing_scene(seed=seed)
        mins, *_ = simulate(start, goal, d_filter=d_filter, delay=delay, steps=300)
        assert mins.min() >= D_MIN - TOL, seed
    # the margin is what covers the delay: the head-on pair, filtered on positions 3 ticks old without it
    start = np.array([[-2.0, 0.01], [2.0, 0.0]])
    bare, *_ = simulate(start, start[::-1].copy(), delay=3, gamma=1 / DT)
    assert bare.min() < D_MIN - 0.01


def test_dropped_positions_with_the_inflated_margin_keep_d_min():
    max_age = 3
    d_filter = safety_distance(D_MIN / 2, margin=0.0, v_max=V_MAX, delay_s=max_age * DT)
    for seed in range(4):
        start, goal = crossing_scene(seed=seed)
        mins, _, counters, _ = simulate(start, goal, d_filter=d_filter, drop=0.5, max_age=max_age, steps=300,
                                        seed=seed)
        assert mins.min() >= D_MIN - TOL, seed
        assert counters.interventions > 0


def test_unknown_neighbours_are_ignored_and_a_missing_own_position_stops():
    u, info = filter_velocity([0.0, 0.0], [0.5, 0.0], [[0.6, 0.0], [np.nan, np.nan]], D_MIN, V_MAX)
    assert info.neighbours == 1 and info.rows == 1 and info.intervened
    u2, _ = filter_velocity([0.0, 0.0], [0.5, 0.0], [[0.6, 0.0]], D_MIN, V_MAX)
    assert np.array_equal(u, u2)
    c = CollisionCounters()
    u, info = filter_velocity([np.nan, 0.0], [0.5, 0.0], [[0.6, 0.0]], D_MIN, V_MAX, counters=c)
    assert np.array_equal(u, [0.0, 0.0]) and info.method == "invalid" and c.invalid == 1
    u, info = filter_velocity([0.0, 0.0], [0.3, 0.1], np.zeros((0, 2)), D_MIN, V_MAX)
    assert np.array_equal(u, [0.3, 0.1]) and not info.intervened and info.min_distance_m == math.inf


# ---- the QP itself ---------------------------------------------------------------------------------------------

def test_infeasible_step_stops_and_is_counted():
    c = CollisionCounters()
    # already 0.1 m apart with d_min 0.5: the row asks for u_x <= -0.6 m/s, more than v_max = 0.5
    u, info = filter_velocity([0.0, 0.0], [0.2, 0.0], [[0.1, 0.0]], D_MIN, V_MAX, counters=c)
    assert np.array_equal(u, [0.0, 0.0]) and info.infeasible
    # coincident robots: no direction separates them
    u, info = filter_velocity([1.0, 1.0], [0.2, 0.0], [[1.0, 1.0]], D_MIN, V_MAX, counters=c)
    assert np.array_equal(u, [0.0, 0.0]) and info.infeasible
    assert c.infeasible == 2 and c.steps == 2 and c.min_distance_m == 0.0
    # closer than d_min but separable within v_max: pushed apart instead
    u, info = filter_velocity([0.0, 0.0], [0.2, 0.0], [[0.45, 0.0]], D_MIN, V_MAX)
    assert not info.infeasible and u[0] < 0


def test_batch_infeasible_robot_stops_while_the_others_move():
    pos = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0]])
    u_nom = np.array([[0.2, 0.0], [-0.2, 0.0], [0.3, 0.0]])
    u, info = filter_velocities(pos, u_nom, D_MIN, V_MAX)
    assert info.infeasible.tolist() == [True, True, False]
    assert np.array_equal(u[:2], np.zeros((2, 2))) and np.array_equal(u[2], [0.3, 0.0])


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(1, 6))
def test_filtered_command_is_safe_within_speed_and_least_squares(seed, k):
    rng = np.random.default_rng(seed)
    p = np.zeros(2)
    nb = safe_starts(rng, k + 1, 1.5)[1:] + 0.0
    nb = nb[np.linalg.norm(nb, axis=1) >= D_MIN] if len(nb) else nb
    u_nom = rng.uniform(-1.0, 1.0, 2)
    u, info = filter_velocity(p, u_nom, nb, D_MIN, V_MAX, GAMMA)
    assert np.linalg.norm(u) <= V_MAX + 1e-12
    dp = p - nb
    h = np.sum(dp * dp, axis=1) - D_MIN**2
    assert np.all(-2 * dp @ u <= GAMMA * h / 2 + 1e-9)
    # no feasible command in the speed disc is noticeably closer to u_nom (the QP uses the inscribed 16-gon:
    # it may give away up to v_max (1 - cos(pi/16)) of speed)
    cand = rng.uniform(-V_MAX, V_MAX, (20000, 2))
    cand = cand[np.linalg.norm(cand, axis=1) <= V_MAX]
    ok = np.all(-2 * cand @ dp.T <= GAMMA * h / 2, axis=1)
    best = np.min(np.linalg.norm(cand[ok] - u_nom, axis=1))
    assert np.linalg.norm(u - u_nom) <= best + V_MAX * (1 - math.cos(math.pi / POLYGON_SIDES)) + 1e-9
    if info.method == "nominal":
        assert np.array_equal(u, u_nom) and not info.intervened


def test_closed_form_is_the_projection_onto_the_one_active_row():
    p, nb = np.zeros(2), np.array([[1.0, 0.2]])
    u_nom = np.array([0.4, 0.0])
    u, info = filter_velocity(p, u_nom, nb, D_MIN, V_MAX, GAMMA)
    assert info.method == "closed_form" and info.intervened
    a = -2 * (p - nb[0])
    b = GAMMA * (np.sum((p - nb[0]) ** 2) - D_MIN**2) / 2
    assert a @ u == pytest.approx(b, abs=1e-12)
    assert np.allclose(u, u_nom - a * (a @ u_nom - b) / (a @ a))
    # the same problem through DAQP directly, with a polygon much finer than the filter's
    ang = 2 * np.pi * np.arange(720) / 720
    poly = np.column_stack([np.cos(ang), np.sin(ang)])
    A = np.vstack([a, poly])
    bu = np.concatenate([[b], np.full(720, V_MAX)])
    x, _, flag, _ = daqp.solve(np.eye(2), -u_nom, A, bu, np.full(721, -1e30), np.zeros(721, dtype=np.int32))
    assert flag == 1 and np.allclose(u, x, atol=1e-9)


def test_a_binding_speed_limit_uses_the_inscribed_polygon():
    # the half-plane alone gives (0.083, 2.0), far beyond v_max: the QP then meets the polygon's edge
    u, info = filter_velocity([0.0, 0.0], [2.0, 2.0], [[0.6, 0.0]], D_MIN, V_MAX, GAMMA)
    assert info.method == "qp"
    assert V_MAX * math.cos(math.pi / POLYGON_SIDES) - 1e-9 <= np.linalg.norm(u) <= V_MAX
    assert 1.2 * u[0] <= GAMMA * (0.36 - 0.25) / 2 + 1e-9 and u[1] > 0.45


def test_far_neighbours_are_pruned_and_too_fast_commands_scaled():
    u, info = filter_velocity([0.0, 0.0], [0.3, 0.0], [[50.0, 0.0], [0.0, -40.0]], D_MIN, V_MAX)
    assert info.rows == 0 and info.method == "nominal" and not info.intervened and info.neighbours == 2
    u, info = filter_velocity([0.0, 0.0], [3.0, 4.0], [[50.0, 0.0]], D_MIN, V_MAX)
    assert info.method == "scaled" and np.allclose(u, [0.3, 0.4])


def test_one_dimensional_robots():
    u, info = filter_velocity([0.0], [0.5], [[0.6]], D_MIN, V_MAX)
    assert -2 * (0.0 - 0.6) * u[0] <= GAMMA * (0.36 - 0.25) / 2 + 1e-12 and info.intervened
    pos = np.array([[-2.0], [2.0]])
    mins, *_ = [], None
    for _ in range(200):
        u, _ = filter_velocities(pos, np.array([[V_MAX], [-V_MAX]]), D_MIN, V_MAX, GAMMA)
        pos = pos + DT * u
        mins.append(abs(pos[0, 0] - pos[1, 0]))
    assert min(mins) >= D_MIN - TOL


def test_batch_matches_the_per_robot_filter_with_neighbour_masks_and_stale_positions():
    rng = np.random.default_rng(7)
    n = 12
    pos = safe_starts(rng, n, 2.0)
    u_nom = rng.uniform(-0.7, 0.7, (n, 2))
    known = pos[None, :, :] + rng.normal(0, 0.02, (n, n, 2))      # each robot's slightly stale view
    known[2, 5] = np.nan                                           # robot 2 never heard of robot 5
    mask = rng.random((n, n)) < 0.6
    d_min = np.full((n, n), D_MIN)
    d_min[0, :] = d_min[:, 0] = 0.6                                # a bigger robot
    c_batch = CollisionCounters()
    u, info = filter_velocities(pos, u_nom, d_min, V_MAX, GAMMA, known=known, neighbours=mask, counters=c_batch)
    c_single = CollisionCounters()
    for i in range(n):
        sel = mask[i] & (np.arange(n) != i)
        ui, fi = filter_velocity(pos[i], u_nom[i], known[i, sel], d_min[i, sel], V_MAX, GAMMA, counters=c_single)
        assert np.allclose(u[i], ui, atol=1e-12), i
        assert fi == info.robot(i)
    assert c_batch == c_single and c_batch.interventions > 0


def test_counters_count_interventions_and_track_the_nearest_neighbour():
    c = CollisionCounters()
    filter_velocity([0.0, 0.0], [0.1, 0.0], [[3.0, 0.0]], D_MIN, V_MAX, counters=c)
    filter_velocity([0.0, 0.0], [0.5, 0.0], [[0.7, 0.0]], D_MIN, V_MAX, counters=c)
    assert c.steps == 2 and c.interventions == 1 and c.min_distance_m == pytest.approx(0.7)
    assert c.as_dict()["interventions"] == 1 and CollisionCounters().as_dict()["min_distance_m"] is None


@pytest.mark.parametrize("kwargs, field", [
    ({"v_max": 0.0}, "v_max"), ({"v_max": math.inf}, "v_max"), ({"gamma": -1.0}, "gamma"),
    ({"gamma": float("nan")}, "gamma"), ({"d_min": 0.0}, "d_min"), ({"d_min": [0.5, -1.0]}, "d_min"),
])
def test_bad_parameters_are_config_errors(kwargs, field):
    args = {"d_min": D_MIN, "v_max": V_MAX, "gamma": GAMMA} | kwargs
    with pytest.raises(ConfigError, match=f"'{field}'"):
        filter_velocity([0.0, 0.0], [0.1, 0.0], [[1.0, 0.0], [0.0, 1.0]], **args)


# ---- footprints and d_min --------------------------------------------------------------------------------------

def test_safety_distance_terms():
    assert safety_distance(0.105, margin=0.05) == pytest.approx(0.26)
    assert safety_distance(0.105, 0.17, margin=0.05, offset=0.1) == pytest.approx(0.525)
    # PointMassPID (50 N / 15 kg, 3 m/s): each robot brakes over v^2 / (2 a)
    assert safety_distance(0.2, margin=0.0, v_max=3.0, a_max=50 / 15) == pytest.approx(0.4 + 9 / (50 / 15))
    assert safety_distance(0.2, margin=0.0, v_max=0.5, delay_s=0.3) == pytest.approx(0.7)
    with pytest.raises(ConfigError, match="'radius_i'"):
        safety_distance(0.0)
    with pytest.raises(ConfigError, match="'margin'"):
        safety_distance(0.1, margin=-0.1)


def test_every_preset_has_a_footprint():
    radii = {name: p.footprint_radius_m for name, p in PRESETS.items()}
    assert radii["turtlebot3"] == 0.105 and radii["turtlebot4"] == 0.17
    assert radii["crazyflie"] > 0.05                     # body plus a downwash margin
    assert radii["generic"] == radii["sim"] == 0.2
