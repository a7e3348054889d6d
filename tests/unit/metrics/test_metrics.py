"""Convergence metrics on hand-built trajectories."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from consensus.metrics.convergence import (
    consensus_point,
    convergence_summary,
    converged_mask,
    planned_vs_actual_error,
    spread,
    spread_series,
    time_to_converge,
)

NAN = math.nan


def test_spread_of_known_shapes():
    assert spread(np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0]])) == pytest.approx(5.0)
    s = math.sqrt(3) / 2
    assert spread(np.array([[0.0, 0.0], [1.0, 0.0], [0.5, s]])) == pytest.approx(1.0)
    assert spread(np.array([[2.0], [-1.0], [0.5]])) == pytest.approx(3.0)
    assert spread(np.array([[7.0, 7.0]])) == 0.0


def test_spread_and_centroid_ignore_missing_rows():
    p = np.array([[0.0, 0.0], [NAN, NAN], [3.0, 0.0], [100.0, NAN], [0.0, 4.0]])
    assert spread(p) == pytest.approx(5.0)
    assert np.allclose(consensus_point(p), [1.0, 4.0 / 3.0])
    assert math.isnan(spread(np.full((3, 2), NAN)))
    assert np.all(np.isnan(consensus_point(np.full((3, 2), NAN))))


def test_spread_series_matches_per_step_spread():
    rng = np.random.default_rng(3)
    pos = 1e4 + rng.uniform(-1.0, 1.0, (40, 7, 2)) * rng.uniform(1e-4, 10.0, (40, 1, 1))
    pos[rng.random((40, 7)) < 0.3] = NAN
    pos[5] = NAN
    pos[6, 1:] = NAN
    pos[6, 0] = [1.0, 2.0]
    series = spread_series(pos)
    expected = np.array([spread(p) for p in pos])
    assert np.array_equal(np.isnan(series), np.isnan(expected))
    ok = ~np.isnan(expected)
    assert np.allclose(series[ok], expected[ok], rtol=1e-9, atol=1e-12)
    assert series[6] == 0.0


def _line_up(spreads: list[float]) -> np.ndarray:
    """Two robots on the x axis at ±s/2, so the spread at each step is exactly s."""
    s = np.asarray(spreads)[:, None]
    return np.stack([np.hstack([-s / 2, 0 * s]), np.hstack([s / 2, 0 * s])], axis=1)


def test_time_to_converge_takes_the_last_entry_below_tolerance():
    times = np.arange(8) * 0.5
    pos = _line_up([4.0, 2.0, 0.05, 0.08, 0.5, 0.09, 0.05, 0.01])  # dips at t=1.0, rises at t=2.0
    assert time_to_converge(times, pos, tol=0.1) == pytest.approx(2.5)
    assert time_to_converge(times, pos, tol=1.0) == pytest.approx(1.0)
    assert time_to_converge(times, pos, tol=10.0) == pytest.approx(0.0)


def test_time_to_converge_never_is_none():
    times = np.arange(5, dtype=float)
    assert time_to_converge(times, _line_up([4.0, 2.0, 0.05, 0.05, 0.3]), tol=0.1) is None
    assert time_to_converge(np.empty(0), np.empty((0, 2, 2)), tol=0.1) is None


def test_missing_robots_cannot_fake_convergence():
    times = np.arange(4, dtype=float)
    pos = _line_up([3.0, 0.05, 0.05, 0.05])
    pos[1, 1] = NAN            # only one robot visible at t=1 → that step does not count
    assert list(converged_mask(pos, 0.1)) == [False, False, True, True]
    assert time_to_converge(times, pos, 0.1) == 2.0
    three = np.concatenate([pos, np.full((4, 1, 2), NAN)], axis=1)  # a third robot never seen
    assert time_to_converge(times, three, 0.1) == 2.0


def test_convergence_summary_values_and_json():
    times = np.array([0.0, 1.0, 2.0])
    pos = np.array([
        [[0.0, 0.0], [4.0, 0.0], [2.0, 6.0]],
        [[1.0, 1.0], [3.0, 1.0], [2.0, 3.0]],
        [[2.01, 2.0], [2.0, 2.0], [2.0, 2.01]],
    ])
    s = convergence_summary(times, pos, tol=0.05)
    json.dumps(s, allow_nan=False)
    assert s["converged"] is True
    assert s["time_to_converge_s"] == 2.0
    assert s["initial_spread_m"] == pytest.approx(math.hypot(2.0, 6.0))
    assert s["initial_centroid"] == pytest.approx([2.0, 2.0])
    assert s["consensus_point"] == pytest.approx([2.01 / 3 + 4 / 3, 2.01 / 3 + 4 / 3])
    assert s["final_spread_m"] == pytest.approx(math.hypot(0.01, 0.01))
    assert s["distance_consensus_to_initial_centroid_m"] == pytest.approx(math.hypot(0.01 / 3, 0.01 / 3))
    other = convergence_summary(times, pos, tol=0.001, initial_positions=np.zeros((3, 2)))
    assert other["converged"] is False and other["time_to_converge_s"] is None
    assert other["initial_spread_m"] == 0.0


def test_convergence_summary_all_missing_is_json_safe():
    s = convergence_summary(np.array([0.0]), np.full((1, 2, 2), NAN), tol=0.1)
    json.dumps(s, allow_nan=False)
    assert s["converged"] is False and s["final_spread_m"] is None and s["consensus_point"] == [None, None]


def test_shape_and_tolerance_errors():
    with pytest.raises(ValueError, match="times"):
        time_to_converge(np.arange(3), np.zeros((4, 2, 2)), 0.1)
    with pytest.raises(ValueError, match="tol"):
        time_to_converge(np.arange(2), np.zeros((2, 2, 2)), 0.0)
    with pytest.raises(ValueError, match="initial_positions"):
        convergence_summary(np.arange(2), np.zeros((2, 2, 2)), 0.1, initial_positions=np.zeros((3, 2)))


def test_planned_vs_actual_error():
    pos = np.zeros((2, 2, 2))
    tgt = np.array([[[3.0, 4.0], [NAN, NAN]], [[0.0, 1.0], [0.0, 0.0]]])
    e = planned_vs_actual_error(pos, tgt)
    assert e["samples"] == 3
    assert e["mean_m"] == pytest.approx(2.0) and e["max_m"] == pytest.approx(5.0)
    assert e["final_mean_m"] == pytest.approx(0.5)


def test_settle_watch_needs_an_unbroken_stretch_below_tolerance():
    from consensus.metrics.convergence import SettleWatch

    w = SettleWatch(tol=0.1, settle_s=3.0)
    samples = [(0, 1.0), (1, 0.05), (2, 0.05), (3, 0.2), (4, 0.05), (5, 0.09), (6, 0.05), (6.9, 0.01), (7, 0.01)]
    ends = [w.update(t, sp) for t, sp in samples]
    assert ends == [False] * 8 + [True]            # the break at t=3 restarts the clock: below tol since t=4
    assert w.held_s(7) == 3.0
    assert not w.update(8, float("nan")) and w.held_s(8) == 0.0        # no spread (robots missing) is no consensus
    never = SettleWatch(tol=0.1, settle_s=0.0)                           # 0: never ends a run
    assert not any(never.update(t, 0.0) for t in range(100))
    with pytest.raises(ValueError, match="settle_s"):
        SettleWatch(0.1, -1.0)
    with pytest.raises(ValueError, match="tol"):
        SettleWatch(0.0, 1.0)
