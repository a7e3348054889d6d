"""Where robots with bodies stand around a shared point (consensus.control.packing): the slots (n distinct points
at least the spacing apart, nearest the centre, centre first) and their assignment (each known robot its own slot, the
squared-distance optimum, order kept on a line); whether a packing fits a box (the configs' fence check); the packing
radius summaries judge a packed fleet by."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consensus.control.packing import assign, extent, fits, most_that_fit, slots, slots_radius
from consensus.metrics.convergence import packing_radius

FAST = settings(max_examples=30, deadline=None, derandomize=True)
TOL = 1e-9


def pair_distances(pts: np.ndarray) -> np.ndarray:
    d = np.linalg.norm(pts[:, None, :] - pts[None, :, :], axis=2)
    return d[np.triu_indices(len(pts), 1)]


def lattice(k: int) -> np.ndarray:
    """Every point of the unit triangular lattice with |q|, |r| <= k (basis (1, 0) and (1/2, √3/2))."""
    q, r = np.meshgrid(np.arange(-k, k + 1), np.arange(-k, k + 1), indexing="ij")
    return np.column_stack([q.ravel() + 0.5 * r.ravel(), (math.sqrt(3) / 2) * r.ravel()])


# ---- slots ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 6, 7, 8, 19, 20, 37, 50])
@pytest.mark.parametrize("spacing", [0.3, 0.55, 2.0])
def test_2d_slots_are_n_distinct_points_at_least_the_spacing_apart(n, spacing):
    pts = slots([0.0, 0.0], n, spacing)
    assert pts.shape == (n, 2) and np.isfinite(pts).all()
    if n > 1:
        assert pair_distances(pts).min() >= spacing * (1 - TOL)


@pytest.mark.parametrize("n", [1, 2, 5, 10])
def test_1d_slots_are_a_centred_row_spacing_apart(n):
    pts = slots([2.5], n, 0.4)
    assert pts.shape == (n, 1)
    xs = np.sort(pts[:, 0])
    assert np.allclose(np.diff(xs), 0.4)
    assert xs.mean() == pytest.approx(2.5)


@pytest.mark.parametrize("n", [1, 4, 7, 12, 30, 100, 167, 216])
def test_2d_slots_are_the_lattice_points_nearest_the_centre_centre_first(n):
    """The pattern is the ``n`` lattice points nearest the centre: none left out is nearer than one taken, they come
    ring by ring (distance not decreasing), and the first is the centre itself."""
    spacing = 0.7
    pts = slots([0.0, 0.0], n, spacing) / spacing
    assert np.allclose(pts[0], [0.0, 0.0])
    dist = np.linalg.norm(pts, axis=1)
    assert np.all(np.diff(dist) >= -TOL)
    full = lattice(16)
    assert all(np.min(np.linalg.norm(full - p, axis=1)) < 1e-9 for p in pts)      # lattice points
    taken = np.array([np.min(np.linalg.norm(pts - f, axis=1)) < 1e-9 for f in full])
    left = np.linalg.norm(full[~taken], axis=1)
    assert left.min() >= dist.max() - TOL


@FAST
@given(cx=st.floats(-50, 50), cy=st.floats(-50, 50), n=st.integers(1, 40), spacing=st.floats(0.05, 5.0))
def test_slots_translate_with_the_centre_and_scale_with_the_spacing(cx, cy, n, spacing):
    at_origin = slots([0.0, 0.0], n, 1.0)
    assert np.allclose(slots([cx, cy], n, spacing), np.array([cx, cy]) + spacing * at_origin, atol=1e-9)
    assert np.allclose(slots([cx], n, spacing), cx + spacing * slots([0.0], n, 1.0), atol=1e-9)


def test_slots_radius_is_the_farthest_slot():
    for n in (1, 2, 7, 8, 25):
        assert slots_radius(n, 0.5) == pytest.approx(np.linalg.norm(slots([0, 0], n, 0.5), axis=1).max())
        assert slots_radius(n, 0.5, dim=1) == pytest.approx(np.abs(slots([0.0], n, 0.5)).max())


def test_slots_are_not_writable_views_of_the_cache():
    a = slots([0.0, 0.0], 5, 1.0)
    a[:] = 99.0
    assert np.allclose(slots([0.0, 0.0], 5, 1.0)[0], [0.0, 0.0])


@pytest.mark.parametrize("center, n, spacing", [
    ([math.nan, 0.0], 3, 1.0), ([0.0, math.inf], 3, 1.0), ([0.0, 0.0, 0.0], 3, 1.0), ([], 3, 1.0),
    ([0.0, 0.0], 0, 1.0), ([0.0, 0.0], 3, 0.0), ([0.0, 0.0], 3, -1.0), ([0.0, 0.0], 3, math.inf),
    ([0.0, 0.0], 3, math.nan),
])
def test_bad_slot_requests_are_refused(center, n, spacing):
    with pytest.raises(ValueError, match="slots"):
        slots(center, n, spacing)


# ---- assignment -----------------------------------------------------------------------------------------------------

def brute_force_cost(pos: np.ndarray, spots: np.ndarray) -> float:
    """The least sum of squared distances over every way of giving min(k, m) robots distinct slots."""
    k, m = len(pos), len(spots)
    cost = ((pos[:, None, :] - spots[None, :, :]) ** 2).sum(axis=2)
    if k <= m:
        return min(sum(cost[i, p[i]] for i in range(k)) for p in itertools.permutations(range(m), k))
    return min(sum(cost[r[s], s] for s in range(m)) for r in itertools.permutations(range(k), m))


def check_assignment(out: np.ndarray, pos: np.ndarray, m: int) -> None:
    known = np.isfinite(pos).all(axis=1)
    assert out.shape == (len(pos),) and np.all(out[~known] == -1)
    used = out[out >= 0]
    assert len(set(used.tolist())) == len(used) and np.all(used < m)
    assert len(used) == min(int(known.sum()), m)


@FAST
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(1, 6), extra=st.integers(0, 2))
def test_assignment_is_the_squared_distance_optimum(seed, k, extra):
    rng = np.random.default_rng(seed)
    m = min(k + extra, 6)
    pos = rng.uniform(-3, 3, (k, 2))
    spots = slots(rng.uniform(-1, 1, 2), m, rng.uniform(0.3, 1.0))
    out = assign(pos, spots)
    check_assignment(out, pos, m)
    got = float(((pos - spots[out]) ** 2).sum())
    assert got == pytest.approx(brute_force_cost(pos, spots), abs=1e-9)


@FAST
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(1, 4), extra=st.integers(1, 2))
def test_more_robots_than_slots_leaves_the_others_without_one(seed, m, extra):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-3, 3, (m + extra, 2))
    spots = slots([0.0, 0.0], m, 0.5)
    out = assign(pos, spots)
    check_assignment(out, pos, m)
    assert np.count_nonzero(out == -1) == extra
    served = out >= 0
    got = float(((pos[served] - spots[out[served]]) ** 2).sum())
    assert got == pytest.approx(brute_force_cost(pos, spots), abs=1e-9)


def test_unknown_robots_get_no_slot_and_do_not_take_one():
    spots = slots([0.0, 0.0], 3, 1.0)
    pos = np.array([[math.nan, math.nan], [0.1, 0.0], [5.0, math.inf], [1.0, 0.1]])
    out = assign(pos, spots)
    check_assignment(out, pos, 3)
    assert out[0] == -1 and out[2] == -1
    assert out[1] == 0 and out[3] == 1                      # the centre and the slot at angle 0 (nearest each)
    assert np.array_equal(assign(np.full((2, 2), math.nan), spots), [-1, -1])
    assert np.array_equal(assign(np.zeros((2, 2)), np.empty((0, 2))), [-1, -1])


def test_a_robot_on_a_slot_keeps_it():
    spots = slots([1.0, -1.0], 7, 0.6)
    rng = np.random.default_rng(4)
    order = rng.permutation(7)
    out = assign(spots[order], spots)
    assert np.array_equal(out, order)


@FAST
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(2, 8), extra=st.integers(0, 3))
def test_on_a_line_robots_keep_their_order(seed, k, extra):
    """In 1-D robots cannot pass each other: the optimum keeps their order along the line."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-5, 5, (k, 1))
    spots = slots(rng.uniform(-1, 1, 1), k + extra, rng.uniform(0.2, 1.5))
    out = assign(pos, spots)
    check_assignment(out, pos, k + extra)
    order = np.argsort(pos[:, 0])
    assert np.all(np.diff(spots[out[order], 0]) > 0)


# ---- the packing radius ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, d", [(1, 0.45), (4, 0.45), (9, 1.0), (100, 0.3)])
def test_packing_radius_formula(n, d):
    assert packing_radius(n, d) == pytest.approx(d * (1 + math.sqrt(n)))


@pytest.mark.parametrize("d", [0.0, -1.0, math.inf, math.nan])
def test_packing_radius_needs_a_positive_d_min(d):
    with pytest.raises(ValueError):
        packing_radius(4, d)


@pytest.mark.parametrize("gap_frac", [0.0, 0.3, 0.9])
def test_every_slot_lies_within_the_packing_radius(gap_frac):
    """Summaries judge a packed fleet by packing_radius(n, d_min); the slots (spacing d_min + gap, gap <= 0.9 d_min)
    must lie within it, or a fleet standing in its slots would be judged unconverged."""
    d = 0.45
    for n in range(1, 201):
        far = np.linalg.norm(slots([0.0, 0.0], n, d * (1 + gap_frac)), axis=1).max()
        assert far <= packing_radius(n, d) + TOL, n


# ---- fit ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 19, 40])
def test_extent_is_the_slots_bounding_box(n):
    pts = slots([3.0, -1.0], n, 0.55)
    assert np.allclose(extent(n, 0.55), pts.max(axis=0) - pts.min(axis=0))
    assert extent(n, 0.55, dim=1)[0] == pytest.approx(0.55 * (n - 1))


def test_fits_compares_the_extent_with_the_box_on_every_axis():
    assert fits(1, 0.55, [0.0, 0.0], [0.0, 0.0]) is None                  # one robot: a point box holds it
    assert fits(2, 0.55, [0.0, 0.0], [0.55, 0.0]) is None                 # two side by side along x
    msg = fits(2, 0.55, [0.0, 0.0], [0.5, 5.0])                           # a slot too narrow on x alone
    assert msg == "2 slots 0.55 m apart span 0.55 × 0 m, but the box is 0.5 × 5 m"
    assert fits(3, 1.0, [0.0], [2.0]) is None and fits(4, 1.0, [0.0], [2.0]) is not None       # 1-D: (n-1) s
    assert fits(1, 1.0, [0.0], [-0.1]) is not None                        # an empty box holds nobody
    with pytest.raises(ValueError):
        fits(2, 1.0, [0.0, 0.0, 0.0], [1.0, 1.0, 1.0])


@FAST
@given(w=st.floats(0.0, 6.0), h=st.floats(0.0, 6.0), spacing=st.floats(0.2, 2.0))
def test_most_that_fit_is_the_largest_n_that_fits(w, h, spacing):
    most = most_that_fit(spacing, [0.0, 0.0], [w, h], limit=200)
    ok = [fits(n, spacing, [0.0, 0.0], [w, h]) is None for n in range(1, 202)]
    assert ok[:most] == [True] * most and (most == 200 or not any(ok[most:]))
