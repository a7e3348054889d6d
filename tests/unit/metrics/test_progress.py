"""The progress estimate a person reads while an LLM run goes (issue 44): rounds, time per round, time left."""
from __future__ import annotations

import math

import pytest

from consensus.metrics.progress import ProgressEstimate


def test_a_spread_halving_every_10_s_round_is_estimated_from_the_rounds_it_saw():
    est = ProgressEstimate(tol=0.1)
    e = None
    for k in range(4):                              # rounds complete at 10, 20, 30, 40 s; spread 8, 4, 2, 1 m
        e = est.update(10.0 * (k + 1), k + 1, 8.0 / 2 ** k)
        e = est.update(10.0 * (k + 1) + 5.0, k + 1, 8.0 / 2 ** k)       # a progress line between rounds
    assert e.rounds == 4 and e.s_per_round == pytest.approx(10.0) and e.rate == pytest.approx(0.5)
    assert e.left_s == pytest.approx(math.log2(1.0 / 0.1) * 10.0)      # 1 m -> 0.1 m: 3.32 halvings of 10 s
    assert e.text() == "rounds 4 (10.0 s/round), consensus in ~33 s"


def test_no_estimate_before_two_rounds_or_while_the_spread_does_not_shrink():
    est = ProgressEstimate(tol=0.1)
    assert est.update(0.0, 0, 5.0).text() == "rounds 0 (n/a), consensus in n/a"
    assert est.update(12.0, 1, 5.0).left_s is None
    grows = est.update(24.0, 2, 6.0)
    assert grows.s_per_round == pytest.approx(12.0) and grows.rate > 1 and grows.left_s is None
    assert est.update(30.0, 2, math.nan).left_s is None
    assert est.update(31.0, 2, 0.05).left_s == 0.0                 # within the tolerance: nothing left


def test_the_time_per_round_follows_the_recent_rounds():
    est = ProgressEstimate(tol=0.1, window=2)
    for k, t in enumerate([30.0, 60.0, 90.0, 95.0, 100.0, 105.0], start=1):   # slow at first, then 5 s a round
        e = est.update(t, k, 1.0)
    assert e.s_per_round == pytest.approx(5.0)


def test_a_bad_tolerance_is_one_clear_error():
    with pytest.raises(ValueError, match="tolerance"):
        ProgressEstimate(tol=0.0)
