"""Reliability kappa(tau) (paper 3, eq. (2)) and the exact AURC on hand-computed inputs."""
import numpy as np
import pytest

from consensus.metrics.reliability import aurc, kappa, reliability_curve

SCORES = [0.2, 0.5, 0.5, 1.0]


@pytest.mark.parametrize("tau,expected", [(0.0, 1.0), (0.2, 1.0), (0.21, 0.75), (0.5, 0.75), (0.6, 0.25),
                                          (1.0, 0.25), (1.01, 0.0), (-5.0, 1.0)])
def test_kappa_counts_scores_at_or_above_the_threshold(tau, expected):
    assert kappa(SCORES, tau) == expected


def test_curve_matches_kappa_pointwise_in_the_given_order():
    taus = [1.0, 0.0, 0.5, 0.3, 0.2]
    assert reliability_curve(SCORES, taus).tolist() == [kappa(SCORES, t) for t in taus] == [0.25, 1, 0.75, 0.75, 1]


def test_aurc_is_the_mean_clipped_score():
    assert aurc(SCORES) == pytest.approx(0.55)
    assert aurc([-0.5, 1.5]) == pytest.approx(0.5)
    assert aurc([1.0] * 30) == 1.0 and aurc([0.0]) == 0.0


def test_trapezoid_on_a_grid_is_within_half_a_step_and_exact_at_midpoints():
    rng = np.random.default_rng(3)
    scores = rng.uniform(0, 1, 200)
    grid = np.linspace(0, 1, 101)
    trap = np.trapezoid(reliability_curve(scores, grid), grid)
    assert abs(trap - aurc(scores)) <= 0.005 + 1e-12
    assert abs(trap - aurc(scores)) > 1e-6                          # the grid really is an approximation
    mids = grid[:-1][rng.integers(0, 100, 50)] + 0.005
    assert np.trapezoid(reliability_curve(mids, grid), grid) == pytest.approx(aurc(mids), abs=1e-12)
    fine = np.linspace(0, 1, 100_001)
    assert np.trapezoid(reliability_curve(scores, fine), fine) == pytest.approx(aurc(scores), abs=1e-5)


def test_bad_scores_are_errors():
    with pytest.raises(ValueError, match="at least one"):
        aurc([])
    with pytest.raises(ValueError, match="finite"):
        kappa([0.5, float("nan")], 0.5)
