"""consensus.scenarios.naming_game.simulate: seeded reproducibility (also across numba thread counts), the
convergence-counting rule, outcomes the model predicts exactly (N = 2) or by symmetry, summaries, bad input, and
the published gpt-4o {his, her} table at N = 24 (read from ../shared, skipped when absent)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numba
import numpy as np
import pytest

from consensus.errors import ConfigError
from consensus.scenarios.naming_game.game import memory_space, state_count
from consensus.scenarios.naming_game.simulate import (
    collective_bias, consensus_time_stats, min_consensus_time, run_seeds, simulate, success_need)

TABLES = Path(__file__).resolve().parents[4] / "shared" / "data" / "naming-game" / "q_tables.json"
ARRAYS = ("converged", "word", "time", "rounds", "share0", "success")


def fixed(p: float, H: int = 5) -> np.ndarray:
    return np.full(state_count(H), p)


def majority_policy(H: int) -> np.ndarray:
    """Symmetric under swapping the words: q = f³ / (f³ + (1 - f)³), f = share of word 0 in the memory; 0.5 empty."""
    ms = memory_space(H)
    q = np.empty(len(ms))
    for i, key in enumerate(ms.keys):
        f = key.count("0") / len(key) if key else 0.5
        q[i] = f ** 3 / (f ** 3 + (1 - f) ** 3)
    return q


def win_stay(p: float) -> np.ndarray:
    """H = 1: after a success repeat its word for sure, otherwise (empty memory, failure) say word 0 with p."""
    ms = memory_space(1)
    q = np.full(len(ms), p)
    q[ms.index["00"]], q[ms.index["11"]] = 1.0, 0.0
    return q


def same(a, b) -> None:
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    if a.trajectory is not None:
        np.testing.assert_array_equal(a.trajectory, b.trajectory)


def within(observed: float, expected: float, sem: float, k: float = 4.0) -> None:
    assert abs(observed - expected) <= k * sem, f"{observed:.4f} vs {expected:.4f} (SEM {sem:.4f})"


# ------------------------------------------------------------------------------------------------ reproducibility
def test_same_seed_identical_different_seed_differs():
    q = majority_policy(3)
    a = simulate(q, 3, 24, 64, seed=7, trajectory=True)
    b = simulate(q, 3, 24, 64, seed=7, trajectory=True)
    same(a, b)
    c = simulate(q, 3, 24, 64, seed=8, trajectory=True)
    assert not np.array_equal(a.time, c.time) or not np.array_equal(a.word, c.word)
    assert not np.array_equal(a.trajectory, c.trajectory, equal_nan=True)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="numba has a single thread on this machine")
def test_identical_with_one_and_two_numba_threads():
    q = majority_policy(5)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = simulate(q, 5, 30, 40, seed=11, trajectory=True)
        numba.set_num_threads(2)
        two = simulate(q, 5, 30, 40, seed=11, trajectory=True)
    finally:
        numba.set_num_threads(before)
    same(one, two)


def test_run_k_does_not_depend_on_the_number_of_runs():
    q = majority_policy(3)
    few, many = simulate(q, 3, 10, 3, seed=5), simulate(q, 3, 10, 9, seed=5)
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(few, name), getattr(many, name)[:3], err_msg=name)


M64 = (1 << 64) - 1


def reference(q, H, N, runs, seed, t_max, threshold, window):
    """The documented model and rule in plain Python on the same xoshiro256** streams, with a list of all outcomes
    in place of the kernel's rings: (converged, word, rounds, share0, success, trajectory) per run."""
    nxt = memory_space(H).NEXT
    thr = [min(round(float(v) * 2 ** 32), 2 ** 32) for v in q]
    need = success_need(threshold, window)
    out = []
    for st in run_seeds(seed, runs):
        s = [int(v) for v in st]

        def draw():
            rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & M64      # noqa: E731
            res = (rotl((s[1] * 5) & M64, 7) * 9) & M64
            t = (s[1] << 17) & M64
            s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45)  # noqa: E702
            return res

        agents, outcomes, traj, conv, word = [0] * N, [], [], False, -1
        for t in range(1, t_max + 1):
            for _ in range(N):
                x = float(draw() >> 11) * 2.0 ** -53 * N
                i = min(int(x), N - 1)
                j = min(int((x - i) * (N - 1)), N - 2)
                j += j >= i
                r = draw()
                a, b = int((r & 0xFFFFFFFF) >= thr[agents[i]]), int((r >> 32) >= thr[agents[j]])
                agents[i], agents[j] = int(nxt[agents[i], a, b]), int(nxt[agents[j], b, a])
                outcomes.append((a, b))
            traj.append(sum(2 - a - b for a, b in outcomes[-N:]) / (2 * N))
            win = outcomes[-window:]
            zeros = sum(2 - a - b for a, b in win)
            if t * N >= window and sum(a == b for a, b in win) >= need:
                conv, word = True, 0 if zeros > window else 1 if zeros < window else win[-1][0]
                break
        out.append((conv, word, t, zeros / (2 * len(win)), sum(a == b for a, b in win) / len(win), traj))
    return out


@pytest.mark.parametrize("N, H, window", [(5, 2, None), (5, 2, 17), (2, 1, None), (7, 3, 4)])
def test_kernel_matches_a_plain_python_reference(N, H, window):
    q = np.random.default_rng(N + H).uniform(0.0, 1.0, state_count(H))
    q[memory_space(H).index["00" * H]] = 1.0                   # an absorbing consensus on each word
    q[memory_space(H).index["11" * H]] = 0.0
    r = simulate(q, H, N, 6, seed=3, max_population_rounds=60, window=window, trajectory=True)
    for k, (conv, word, t, share0, success, traj) in enumerate(reference(q, H, N, 6, 3, 60, 0.98, window or 3 * N)):
        assert (r.converged[k], r.word[k], r.rounds[k]) == (conv, word, t)
        assert r.share0[k] == pytest.approx(share0) and r.success[k] == pytest.approx(success)
        np.testing.assert_allclose(r.trajectory[k, :t], traj, rtol=1e-6)
    assert r.converged.any()


# ------------------------------------------------------------------------------------------- convergence counting
def test_success_need_counts_ceil_of_threshold_times_window():
    assert success_need(0.98, 72) == 71          # N = 24: 70.56 -> 71 of 72
    assert success_need(0.98, 50) == 49          # 0.98 * 50 = 49.000000000000007 in floating point
    assert success_need(0.98, 6) == 6            # N = 2: all six
    assert success_need(1.0, 300) == 300
    assert success_need(0.5, 3) == 2


@pytest.mark.parametrize("N", [2, 3, 24, 1000, 100_000])
def test_always_agreeing_population_converges_exactly_after_3N_interactions(N):
    r = simulate(fixed(1.0), 5, N, 2, seed=1, trajectory=True)
    assert r.converged.all() and (r.word == 0).all()
    assert (r.time == 3.0).all() and (r.rounds == 3).all() and min_consensus_time(N) == 3
    assert (r.share0 == 1.0).all() and (r.success == 1.0).all()
    assert r.interactions == 2 * 3 * N
    np.testing.assert_array_equal(r.trajectory[:, :3], 1.0)
    assert np.isnan(r.trajectory[:, 3:]).all() and r.trajectory.shape == (2, 1000)
    r1 = simulate(fixed(0.0), 5, N, 2, seed=1, threshold=1.0)
    assert (r1.word == 1).all() and (r1.time == 3.0).all()


@pytest.mark.parametrize("window, expected", [(1, 1), (24, 1), (25, 2), (48, 2), (49, 3), (72, 3), (100, 5)])
def test_check_waits_for_a_full_window_and_the_end_of_a_round(window, expected):
    r = simulate(fixed(1.0, 2), 2, 24, 1, seed=0, window=window)
    assert r.time[0] == expected == min_consensus_time(24, window)


def test_consensus_times_are_whole_rounds_not_before_3():
    r = simulate(majority_policy(5), 5, 24, 200, seed=2)
    t = r.time[r.converged]
    assert t.size > 150 and (t >= 3).all() and (t == np.round(t)).all()


def test_max_population_rounds_caps_a_run_that_never_converges():
    r = simulate(fixed(0.5), 5, 24, 20, seed=3, max_population_rounds=50)
    assert not r.converged.any() and (r.word == -1).all() and np.isnan(r.time).all()
    assert (r.rounds == 50).all() and abs(r.success.mean() - 0.5) < 0.05
    assert collective_bias(r)[2] == 0 and math.isnan(collective_bias(r)[0])
    assert consensus_time_stats(r).n == 0


# -------------------------------------------------------------------------------------------- predicted outcomes
def test_win_stay_pair_n2_matches_exact_prediction():
    """N = 2, win-stay/lose-redraw with bias p: the pair redraws until its first success, on word 0 with
    probability p² / s (s = p² + (1 - p)²), then never fails; consensus at t = 3 iff the first interaction
    succeeded (probability s)."""
    p = 0.6
    s = p * p + (1 - p) ** 2
    r = simulate(win_stay(p), 1, 2, 3000, seed=4)
    assert r.converged.all()
    share, sem, n = collective_bias(r)
    within(share, p * p / s, sem)
    at3 = float((r.time == 3).mean())
    within(at3, s, math.sqrt(s * (1 - s) / n))
    assert consensus_time_stats(r).mode == 3.0


@pytest.mark.parametrize("p", [0.5, 0.55])
def test_fixed_bias_n2_matches_exact_prediction(p):
    """q = p everywhere: interactions are i.i.d.; a success is 00 with probability π = p² / s. The run converges on
    a window of six successes, whose words are i.i.d. given the successes: word 0 wins with probability
    P(Bin(6, π) ≥ 4) + ½ P(Bin(6, π) = 3) (a tie goes to the last interaction's word). p = 0.5 gives ½."""
    pi = p * p / (p * p + (1 - p) ** 2)
    binom = [math.comb(6, k) * pi ** k * (1 - pi) ** (6 - k) for k in range(7)]
    expected = sum(binom[4:]) + 0.5 * binom[3]
    r = simulate(fixed(p), 5, 2, 3000, seed=5)
    share, sem, n = collective_bias(r)
    assert n > 2900
    within(share, expected, sem)


def test_fixed_bias_far_above_half_nearly_always_word_0():
    r = simulate(fixed(0.999), 5, 24, 300, seed=6)
    share, sem, n = collective_bias(r)
    assert n == 300 and share == 1.0
    assert np.nanmax(r.time) <= 5


def test_word_symmetric_policy_has_no_collective_bias():
    r = simulate(majority_policy(3), 3, 24, 2000, seed=9)
    share, sem, n = collective_bias(r)
    assert n > 1900
    within(share, 0.5, sem)
    share1, sem1, n1 = collective_bias(r, word=1)
    assert n1 == n and share1 == pytest.approx(1 - share) and sem1 == pytest.approx(sem)


# ------------------------------------------------------------------------------------------------------ summaries
def test_trajectory_sampling_every_k_rounds():
    r = simulate(majority_policy(3), 3, 24, 20, seed=1, max_population_rounds=100, trajectory=True, trajectory_every=4)
    assert r.trajectory.shape == (20, 25) and r.trajectory.dtype == np.float32
    np.testing.assert_array_equal(r.trajectory_rounds, np.arange(4, 101, 4))
    for k in range(20):
        done = r.trajectory_rounds <= r.rounds[k]
        row = r.trajectory[k]
        assert np.all((row[done] >= 0) & (row[done] <= 1)) and np.isnan(row[~done]).all()
    assert simulate(fixed(1.0, 1), 1, 5, 2, seed=0).trajectory is None


def test_consensus_time_stats_histogram_and_mode():
    r = simulate(majority_policy(5), 5, 24, 300, seed=12)
    st = consensus_time_stats(r)
    assert st.n == r.n_converged and st.counts.sum() == st.n
    assert np.all(np.diff(st.edges) == 1.0) and st.edges[0] == np.nanmin(r.time) - 0.5
    assert st.density.sum() == pytest.approx(1.0)
    assert st.counts[int(st.mode - st.edges[0] - 0.5)] == st.counts.max()
    assert st.mean == pytest.approx(np.nanmean(r.time))
    on0, on1 = consensus_time_stats(r, word=0), consensus_time_stats(r, word=1)
    assert on0.n + on1.n == st.n
    logged = consensus_time_stats(r, bins=np.geomspace(1, 1000, 31))
    assert logged.counts.sum() == st.n and logged.density @ np.diff(logged.edges) == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("kwargs, match", [
    ({"q": np.full(10, 0.5)}, "one entry per memory state"),
    ({"q": np.r_[np.nan, np.full(20, 0.5)]}, "non-finite"),
    ({"q": np.r_[1.5, np.full(20, 0.5)]}, r"\[0, 1\]"),
    ({"q": np.r_[-0.1, np.full(20, 0.5)]}, r"\[0, 1\]"),
    ({"q": "abc"}, "probabilities"),
    ({"H": 0}, "memory length"),
    ({"H": 7}, "memory length"),
    ({"N": 1}, "N"),
    ({"N": 2.5}, "N"),
    ({"runs": 0}, "runs"),
    ({"max_population_rounds": 0}, "max_population_rounds"),
    ({"threshold": 0.0}, "threshold"),
    ({"threshold": 1.2}, "threshold"),
    ({"window": 0}, "window"),
    ({"trajectory_every": 0}, "trajectory_every"),
    ({"seed": -1}, "seed"),
])
def test_bad_input_raises_config_error(kwargs, match):
    args = {"q": np.full(state_count(2), 0.5), "H": 2, "N": 4, "runs": 1, "seed": 0, **kwargs}
    with pytest.raises(ConfigError, match=match):
        simulate(args.pop("q"), args.pop("H"), args.pop("N"), args.pop("runs"), args.pop("seed"), **args)


def test_collective_bias_rejects_a_third_word():
    r = simulate(fixed(1.0, 1), 1, 2, 1, seed=0)
    with pytest.raises(ConfigError):
        collective_bias(r, word=2)


# ---------------------------------------------------------------------------------------------- published tables
@pytest.mark.skipif(not TABLES.exists(), reason=f"published q tables not found at {TABLES} (reference data)")
def test_gpt4o_his_her_n24_collective_bias_towards_his():
    """Fig. 2 / Results: GPT populations converge on *his* in {her, his} at N = 24, with a near-neutral individual
    bias (q(empty) = 0.47 for *his*)."""
    table = next(t for t in json.loads(TABLES.read_text())["tables"]
                 if t["model"] == "gpt-4o" and sorted(t["words"]) == ["her", "his"])
    H = int(table["memory_size"])
    ms = memory_space(H)
    q = np.empty(len(ms))
    for key, value in table["q"].items():
        q[ms.index[key]] = value
    his = table["words"].index("his")
    r = simulate(q, H, 24, 400, seed=2024)
    share, sem, n = collective_bias(r, word=his)
    assert n >= 395
    assert share > 0.5 + 3 * sem, (share, sem)
    individual = q[ms.EMPTY] if his == 0 else 1 - q[ms.EMPTY]
    assert individual < 0.5                         # individually the agents lean (slightly) the other way
