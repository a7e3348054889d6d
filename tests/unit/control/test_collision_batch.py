"""The batched collision filter (consensus.control.collision.filter_velocity_many, issue 29): every robot's command
and FilterInfo equal the per-robot ``filter_velocity``'s on random scenes (both dimensions, dense packs, infeasible
pairs, identical positions, walls, per-robot v_max / gamma, NaN padding and NaN inputs); each fast path and each
QP outcome is taken where it should be; bad input gets one clear error."""
from __future__ import annotations

import numpy as np
import pytest

import consensus.control.collision as col
from consensus.control.collision import (
    INVALID, METHODS, NOMINAL, QP, SCALED, filter_velocities, filter_velocity,
    filter_velocity_many,
)
from consensus.errors import ConfigError

TOL = 1e-6


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch):
    """The batched active-set must finish every robot itself: its per-robot DAQP guard is never needed here."""
    def refuse(*args, **kwargs):
        raise AssertionError("filter_velocity_many fell back to the per-robot _solve_qp")
    monkeypatch.setattr(col, "_solve_qp", refuse)
    yield


def per_robot(points, u_nom, neighbours, d_min, v_max, gamma, bounds=None):
    """Each robot through filter_velocity, with the real _solve_qp (DAQP)."""
    n, k, dim = neighbours.shape
    dm = np.broadcast_to(np.asarray(d_min, float), (n, k)) if np.ndim(d_min) else np.full((n, k), float(d_min))
    vm, gm = np.broadcast_to(v_max, (n,)), np.broadcast_to(gamma, (n,))
    out, infos = np.empty((n, dim)), []
    for i in range(n):
        f = np.all(np.isfinite(neighbours[i]), axis=1)
        b = None
        if bounds is not None and not (np.isnan(bounds[0][i]).any() or np.isnan(bounds[1][i]).any()):
            b = (bounds[0][i], bounds[1][i])
        out[i], info = filter_velocity(points[i], u_nom[i], neighbours[i][f], dm[i][f], float(vm[i]),
                                       float(gm[i]), bounds=b)
        infos.append(info)
    return out, infos


def check_equal(points, u_nom, neighbours, d_min, v_max, gamma=1.0, bounds=None):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(col, "_solve_qp", _REAL_SOLVE_QP)
        want, infos = per_robot(points, u_nom, neighbours, d_min, v_max, gamma, bounds)
    got, info = filter_velocity_many(points, u_nom, neighbours, d_min, v_max, gamma, bounds=bounds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL)
    for i, expected in enumerate(infos):
        assert info.robot(i) == expected, f"robot {i}"
    return info


_REAL_SOLVE_QP = col._solve_qp


def all_to_all(points):
    """What every robot knows: all the others (n, n-1, d)."""
    n = len(points)
    return np.stack([np.delete(points, i, axis=0) for i in range(n)]) if n > 1 else np.zeros((n, 0, points.shape[1]))


def hex_pack(n, spacing, rng):
    side = int(np.ceil(np.sqrt(n))) + 1
    ij = np.stack(np.meshgrid(np.arange(side), np.arange(side)), axis=-1).reshape(-1, 2).astype(float)
    pts = np.column_stack([ij[:, 0] + 0.5 * (ij[:, 1] % 2), ij[:, 1] * np.sqrt(3) / 2]) * spacing
    pts = pts[np.argsort(np.linalg.norm(pts - pts.mean(axis=0), axis=1))[:n]]
    return pts + rng.uniform(-0.02, 0.02, pts.shape) * spacing


@pytest.mark.parametrize("seed", range(40))
def test_random_scenes_equal_per_robot(seed):
    rng = np.random.default_rng(seed)
    dim = 1 + seed % 2
    n, k = int(rng.integers(2, 30)), int(rng.integers(1, 12))
    scale = rng.uniform(1.0, 8.0)
    pts = rng.uniform(-scale, scale, (n, dim))
    nb = pts[:, None, :] + rng.normal(0.0, scale / 3, (n, k, dim))
    nb[rng.random((n, k)) < 0.2] = np.nan                        # unknown / padding
    nb[0, 0] = pts[0]                                            # a neighbour at the robot's own position
    if n > 3:
        nb[3, -1] = nb[3, 0]                                     # two neighbours at the same place
    dm = rng.uniform(0.2, 1.0, (n, k))
    dm[~np.all(np.isfinite(nb), axis=2)] = np.nan                # ignored for unknown rows
    u = rng.normal(0.0, 0.6, (n, dim))                           # many faster than v_max
    vm, gm = rng.uniform(0.2, 1.0, n), rng.uniform(0.5, 5.0, n)
    bounds = None
    if seed % 4 < 2:
        lo, hi = pts - rng.uniform(0, 0.5, (n, dim)), pts + rng.uniform(0, 0.5, (n, dim))
        lo[rng.random(n) < 0.3] = np.nan                         # these robots have no bounds
        bounds = (lo, hi)
    if n > 4:
        pts[1, 0] = np.nan                                       # own position unknown: invalid
        u[2, -1] = np.inf                                        # nominal unknown: treated as zero
    info = check_equal(pts, u, nb, dm, vm, gm, bounds)
    if n > 4:
        assert info.method[1] == INVALID and info.intervened[2]


@pytest.mark.parametrize("dim", [1, 2])
@pytest.mark.parametrize("seed", range(6))
def test_dense_packs_equal_per_robot(dim, seed):
    """Packed robots (at or just inside d_min of each other) pushed inwards: many binding rows, two active rows,
    the speed-limit pass, infeasible pairs."""
    rng = np.random.default_rng(100 + seed)
    n, d_min = 40, 0.5
    spacing = d_min * (0.9 + 0.05 * seed)
    if dim == 2:
        pts = hex_pack(n, spacing, rng)
    else:
        pts = (np.arange(n) * spacing + rng.uniform(-0.02, 0.02, n))[:, None]
    u = (pts.mean(axis=0) - pts) * rng.uniform(0.2, 2.0, (n, 1))
    info = check_equal(pts, u, all_to_all(pts), d_min, 0.5, rng.uniform(0.5, 3.0, n))
    if seed == 5 and dim == 2:                                   # 1.15 d_min apart: feasible, the QP at work
        assert np.count_nonzero(info.method == QP) > 0 and not info.infeasible.any()


def test_gathering_fleet_over_time_equal_per_robot():
    """The benchmark's scene for 60 ticks: robots converge on a point and pack; equal at every tick."""
    rng = np.random.default_rng(7)
    pts = rng.uniform(-5, 5, (30, 2))
    seen = set()
    for _ in range(60):
        u = np.clip(-pts, -0.5, 0.5)
        info = check_equal(pts, u, all_to_all(pts), 0.5, 0.5, 1.0)
        seen.update(info.method.tolist())
        pts = pts + 0.1 * filter_velocity_many(pts, u, all_to_all(pts), 0.5, 0.5, 1.0)[0]
    assert {NOMINAL, SCALED, QP} <= seen


def one(p, u, nb, d_min=0.5, v_max=0.5, gamma=1.0, bounds=None):
    """One robot through both filters; returns the batch's method name."""
    p, u, nb = np.atleast_2d(p).astype(float), np.atleast_2d(u).astype(float), np.asarray(nb, float)[None]
    b = None if bounds is None else (np.atleast_2d(bounds[0]).astype(float), np.atleast_2d(bounds[1]).astype(float))
    info = check_equal(p, u, nb, d_min, v_max, gamma, b)
    return METHODS[int(info.method[0])]


def test_each_path_is_taken():
    far = [[5.0, 0.0]]
    assert one([0, 0], [0.3, 0], far) == "nominal"
    assert one([0, 0], [2.0, 0], far) == "scaled"
    assert one([0, 0], [0.3, 0], np.zeros((0, 2))) == "nominal"
    assert one([0, 0], [0.3, 0.4], [[0.8, 0.0]]) == "closed_form"                 # one row violated
    assert one([0, 0], [0.5, 0.0], [[0.6, 0.3], [0.6, -0.3]]) == "qp"              # two rows
    assert one([0, 0], [3.0, 2.0], [[0.8, 0.0]]) == "qp"                           # projection too fast
    assert one([0, 0], [0.3, 0], [[0.0, 0.0]]) == "infeasible"                     # zero row, 0 <= b < 0
    assert one([0, 0], [0.3, 0], [[0.2, 0.0], [-0.2, 0.0]]) == "infeasible"        # squeezed inside d_min
    assert one([np.nan, 0], [0.3, 0], far) == "invalid"
    assert one([0, 0], [0.5, 0.0], far, bounds=([-1, -1], [0.1, 1])) == "closed_form"   # a wall row
    assert one([0], [0.3], [[0.8]]) == "closed_form"
    assert one([0], [0.3], [[0.2], [-0.2]]) == "infeasible"
    assert one([0], [2.0], [[-0.8]]) == "scaled"


def test_qp_with_speed_limit_pass_keeps_within_v_max():
    """Two rows whose unconstrained optimum is faster than v_max: solved again with the 16-gon."""
    p, u, nb = np.zeros((1, 2)), np.array([[4.0, 0.5]]), np.array([[[0.8, 0.2], [0.8, -0.6]]])
    info = check_equal(p, u, nb, 0.5, 0.5)
    assert METHODS[int(info.method[0])] == "qp"
    assert np.linalg.norm(filter_velocity_many(p, u, nb, 0.5, 0.5)[0]) <= 0.5 + 1e-12


def test_filter_velocities_uses_batch_and_agrees():
    """The headless fleet's filter: equal to filter_velocity per robot (it now solves its QPs in one batch)."""
    rng = np.random.default_rng(3)
    pos = hex_pack(50, 0.55, rng)
    u = np.clip(pos.mean(axis=0) - pos, -0.5, 0.5)
    got, info = filter_velocities(pos, u, 0.5, 0.5, 1.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(col, "_solve_qp", _REAL_SOLVE_QP)
        want, infos = per_robot(pos, u, all_to_all(pos), 0.5, 0.5, 1.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL)
    assert [info.robot(i) for i in range(len(pos))] == infos
    assert np.count_nonzero(info.method == QP) > 0


def test_empty_fleet_and_no_neighbours():
    u, info = filter_velocity_many(np.zeros((0, 2)), np.zeros((0, 2)), np.zeros((0, 3, 2)), 0.5, 0.5)
    assert u.shape == (0, 2) and info.method.size == 0
    u, info = filter_velocity_many(np.zeros((2, 2)), np.array([[1.0, 0], [0.1, 0]]), np.zeros((2, 0, 2)), 0.5, 0.5)
    np.testing.assert_allclose(u, [[0.5, 0], [0.1, 0]])
    assert info.method.tolist() == [SCALED, NOMINAL] and np.isinf(info.min_distance_m).all()


def test_unknown_d_min_entries_are_ignored_but_known_ones_checked():
    pts, u = np.zeros((1, 2)), np.array([[0.3, 0.0]])
    nb = np.array([[[1.0, 0.0], [np.nan, np.nan]]])
    filter_velocity_many(pts, u, nb, np.array([[0.5, np.nan]]), 0.5)
    with pytest.raises(ConfigError, match="d_min"):
        filter_velocity_many(pts, u, nb, np.array([[-0.5, 0.5]]), 0.5)
    with pytest.raises(ConfigError, match="d_min"):
        filter_velocity_many(pts, u, nb, np.array([[np.nan, 0.5]]), 0.5)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"points": np.zeros((2, 3))}, ValueError, "shape"),
    ({"u_nom": np.zeros((3, 2))}, ValueError, "shape"),
    ({"neighbours": np.zeros((2, 2))}, ValueError, "neighbours"),
    ({"neighbours": np.zeros((3, 1, 2))}, ValueError, "neighbours"),
    ({"d_min": np.ones((2, 2))}, ValueError, "d_min"),
    ({"d_min": 0.0}, ConfigError, "d_min"),
    ({"d_min": float("nan")}, ConfigError, "d_min"),
    ({"v_max": -1.0}, ConfigError, "v_max"),
    ({"v_max": np.array([0.5, np.inf])}, ConfigError, "v_max"),
    ({"v_max": np.ones(3)}, ValueError, "v_max"),
    ({"gamma": 0}, ConfigError, "gamma"),
    ({"gamma": True}, ValueError, "gamma"),
    ({"bounds": (np.zeros((2, 2)), np.zeros((1, 2)))}, ValueError, "bounds"),
])
def test_bad_input(kwargs, error, match):
    args = {"points": np.zeros((2, 2)), "u_nom": np.zeros((2, 2)), "neighbours": np.ones((2, 1, 2)),
            "d_min": 0.5, "v_max": 0.5, "gamma": 1.0}
    args.update(kwargs)
    bounds = args.pop("bounds", None)
    with pytest.raises(error, match=match):
        filter_velocity_many(args.pop("points"), args.pop("u_nom"), args.pop("neighbours"), args.pop("d_min"),
                             args.pop("v_max"), args.pop("gamma"), bounds=bounds)


def test_the_compiled_active_set_takes_the_numpy_versions_steps():
    """The batched QP compiled by numba (``_active_set_kernel``, the default) and the numpy version reach the same
    optimum, feasibility and active rows on random problems, with and without a start (the speed-limit pass)."""
    from consensus.control import collision as c

    rng = np.random.default_rng(29)
    q, m = 300, 12
    a = rng.normal(size=(q, m, 2))
    b = rng.normal(0.2, 1.0, size=(q, m))
    pad = rng.random((q, m)) < 0.3                       # padding rows, as the callers pass them
    a[pad], b[pad] = 0.0, np.inf
    u0 = rng.normal(0, 2.0, size=(q, 2))
    compiled = c._active_set(a, b, u0)
    numpy_ = c._batch_active_set(a, b, u0)
    assert compiled[2].all() and numpy_[2].all()         # every problem finished
    np.testing.assert_array_equal(compiled[1], numpy_[1])
    assert 0 < compiled[1].sum() < q                     # feasible and infeasible problems both
    ok = compiled[1]
    np.testing.assert_allclose(compiled[0][ok], numpy_[0][ok], atol=1e-9)
    np.testing.assert_array_equal(np.sort(compiled[3][ok], axis=1), np.sort(numpy_[3][ok], axis=1))
    # from a start: the numpy result with more rows (the 16-gon pass continues from the first pass's optimum)
    start = tuple(np.array(x) for x in (numpy_[0], numpy_[3], numpy_[4]))
    more_a = np.concatenate([a, rng.normal(size=(q, 4, 2))], axis=1)
    more_b = np.concatenate([b, rng.uniform(0.5, 2.0, (q, 4))], axis=1)
    c1 = c._active_set(more_a[ok], more_b[ok], u0[ok], start=tuple(x[ok] for x in start))
    c2 = c._batch_active_set(more_a[ok], more_b[ok], u0[ok], start=tuple(x[ok] for x in start))
    np.testing.assert_array_equal(c1[1], c2[1])
    np.testing.assert_allclose(c1[0][c1[1]], c2[0][c2[1]], atol=1e-9)
