"""Agent-based simulation of paper 4's naming game: many seeded, independent populations at once, any N ≥ 2.

``simulate(q, H, N, runs, seed)`` plays ``runs`` independent populations of N agents. Every agent starts in the
empty memory (state 0 of ``game.memory_space(H)``) and holds one int32 state index. One interaction picks two
distinct agents uniformly at random; each says word 0 with probability ``q[own state]``; it is a success iff both
said the same word; both memories shift through ``NEXT`` (Methods, eqs. 4-8). One population round = N
interactions; time is measured in population rounds.

Convergence rule (the paper's 0.98 of the last 3N interactions, checked when its code checks): the outcomes of the
last ``window`` interactions (default 3N) are kept in a ring buffer. The check runs only at the end of a population
round t (t = 1, 2, …, ``max_population_rounds``), and only once t·N ≥ ``window`` interactions have happened; the run
has converged at the first such t whose window holds at least ``ceil(threshold · window)`` successes (the product is
rounded to 9 decimals first, so 0.98·50 needs 49, not 50). The consensus time is that t, a whole number of rounds: a
population that always agrees converges at t = ceil(window / N) = 3 (Fig. 4's dotted line; the paper's code stores
the 0-based round index, t − 1). The converged word is the word said in the majority of the 2·window utterances of
that window; a tie goes to the word the first agent of the window's last interaction said, a symmetric rule. (The
paper's code sends ties to word 1. Ties are rare with LLM tables, but not with memoryless ones at tiny N: q = 0.5
everywhere at N = 2 converges on windows of six successes, three 00 and three 11 in 31 % of runs.) A run not
converged after ``max_population_rounds`` rounds has ``converged`` False, word -1 and time NaN.

Reproducibility: ``run_seeds`` gives each run k its own four 64-bit words (a SplitMix64 stream started from
``SeedSequence(seed)``; run k's words do not depend on ``runs``), which seed a xoshiro256** generator living in
the run's local variables. A run's numbers therefore depend only on (seed, k) — not on numba's thread count or
scheduling, and not on numba's global per-thread generator (which the paper's code never seeds; calling it is
also ~4x slower). One 64-bit draw picks the pair (53 bits, via a double), another gives the two words (32 bits
each, compared with q scaled to 2³², so q = 0 and q = 1 are exact). The kernel is compiled once (``cache=True``
keeps it on disk) and runs the populations in parallel (``prange``, numba's current thread count). Do not call
``simulate`` from several Python threads at once (numba's default workqueue threading layer is not thread-safe);
use processes.

``collective_bias`` (share of converged runs on a word, its SEM) and ``consensus_time_stats`` (histogram and mode
of the consensus times) summarise a ``SimResult``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from consensus import extras
from consensus.errors import ConfigError
from consensus.scenarios.naming_game.game import check_memory, check_q, memory_space

# numba is the 'studies' extra: without it this module still imports (success_need, collective_bias, ...) and
# simulate() says which pip install adds it
numba = extras.optional("numba")
if numba is not None:
    from numba import njit, prange
else:
    prange = range

    def njit(*args, **kwargs):
        return lambda f: f

TWO32 = 2.0 ** 32
N_MAX = 10 ** 8

_U7, _U9, _U11, _U17, _U32, _U45, _U5 = (np.uint64(v) for v in (7, 9, 11, 17, 32, 45, 5))
_U64 = np.uint64(64)
_MASK32 = np.uint64(0xFFFFFFFF)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_INV53 = 2.0 ** -53


# ---------------------------------------------------------------------------------------------------------- kernel
@njit(inline="always")
def _rotl(x, k):
    return (x << k) | (x >> (_U64 - k))


@njit(inline="always")
def _xoshiro(s0, s1, s2, s3):
    """xoshiro256** (Blackman & Vigna): one 64-bit output and the next state."""
    out = _rotl(s1 * _U5, _U7) * _U9
    t = s1 << _U17
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, _U45)
    return out, s0, s1, s2, s3


@njit(cache=True)
def _one_run(thr, nxt, N, s0, s1, s2, s3, t_max, window, need, every, traj_row, agents, ring, ring_zero,
             ring_succ):
    """One population from the empty memory; returns (converged, word, rounds, zeros in window, successes in window,
    interactions in window). ``traj_row`` (length 0 when not recorded) gets word 0's share per sampled round;
    ``agents`` (N int32) and the rings are the caller's buffers, reset here.

    The window's counts are kept per population round (a ring of window / N rounds) when N divides the window, as
    the default 3N does, and per interaction (a ring of int8: word-0 utterances 0/1/2, success iff ≠ 1) otherwise.
    Unfilled slots count as successes without word 0; no check happens before they are all overwritten."""
    per_round = window % N == 0
    k_rounds = ring_zero.shape[0]
    agents[:] = 0
    ring[:] = 0
    ring_zero[:] = 0
    ring_succ[:] = N
    pos = 0
    win_zero = 0
    win_succ = window
    nf = float(N)
    nm1 = float(N - 1)
    do_traj = traj_row.shape[0] > 0
    converged = False
    word = -1
    a = 0
    t = 0
    while t < t_max:
        t += 1
        round_zero = 0
        round_succ = 0
        for _ in range(N):
            r, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
            x = float(np.int64(r >> _U11)) * _INV53 * nf
            i = int(x)
            if i >= N:
                i = N - 1
            j = int((x - i) * nm1)
            if j >= N - 1:
                j = N - 2
            if j >= i:
                j += 1
            r, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
            si = agents[i]
            sj = agents[j]
            a = 0 if (r & _MASK32) < thr[si] else 1
            b = 0 if (r >> _U32) < thr[sj] else 1
            agents[i] = nxt[4 * si + 2 * a + b]
            agents[j] = nxt[4 * sj + 2 * b + a]
            n0 = 2 - a - b
            round_zero += n0
            round_succ += n0 != 1
            if not per_round:
                old = ring[pos]
                ring[pos] = n0
                pos += 1
                if pos == window:
                    pos = 0
                win_zero += n0 - old
                win_succ += (n0 != 1) - (old != 1)
        if per_round:
            slot = t % k_rounds
            win_zero += round_zero - ring_zero[slot]
            win_succ += round_succ - ring_succ[slot]
            ring_zero[slot] = round_zero
            ring_succ[slot] = round_succ
        if do_traj and t % every == 0:
            traj_row[t // every - 1] = round_zero / (2.0 * nf)
        if t * N >= window and win_succ >= need:
            converged = True
            word = 0 if win_zero > window else 1 if win_zero < window else a
            break
    filled = min(window, t * N)
    return converged, word, t, win_zero, win_succ - (window - filled), filled


@njit(cache=True, parallel=True)
def _run_all(thr, nxt, N, seeds, t_max, window, need, every, conv, word, rounds, share0, success, traj,
             n_chunks):
    """Run k goes to chunk k % n_chunks; a chunk allocates its buffers once. No result depends on n_chunks."""
    runs = seeds.shape[0]
    per_round = window % N == 0
    for c in prange(n_chunks):
        agents = np.empty(N, dtype=np.int32)
        ring = np.empty(0 if per_round else window, dtype=np.int8)
        ring_zero = np.empty(window // N if per_round else 1, dtype=np.int64)
        ring_succ = np.empty_like(ring_zero)
        for k in range(c, runs, n_chunks):
            cv, w, t, z, s, m = _one_run(thr, nxt, N, seeds[k, 0], seeds[k, 1], seeds[k, 2], seeds[k, 3],
                                         t_max, window, need, every, traj[k], agents, ring, ring_zero,
                                         ring_succ)
            conv[k] = cv
            word[k] = w
            rounds[k] = t
            share0[k] = z / (2.0 * m)
            success[k] = s / m


# ------------------------------------------------------------------------------------------------------ public API
@dataclass
class SimResult:
    """``runs`` populations of one (q, H, N): per-run arrays, index k = run k.

    ``converged`` bool; ``word`` int8 (0/1, -1 if not converged); ``time`` float64 consensus time in population
    rounds (whole numbers, NaN if not converged); ``rounds`` int64 rounds played (= time, or ``max_population_rounds``);
    ``share0`` and ``success``: word 0's share of the utterances and the success rate over the last window when the
    run stopped (for runs that did not converge: where they were stuck). ``trajectory`` float32 (runs, samples):
    word 0's share of the 2N utterances of the population round ``trajectory_rounds[c]``, NaN after the run stopped
    (None unless asked for). ``seed`` is the entropy actually used (drawn when None was passed)."""

    q: np.ndarray
    H: int
    N: int
    runs: int
    seed: int
    max_population_rounds: int
    threshold: float
    window: int
    converged: np.ndarray
    word: np.ndarray
    time: np.ndarray
    rounds: np.ndarray
    share0: np.ndarray
    success: np.ndarray
    trajectory: np.ndarray | None = None
    trajectory_rounds: np.ndarray | None = None
    elapsed_s: float = 0.0

    @property
    def n_converged(self) -> int:
        return int(self.converged.sum())

    @property
    def interactions(self) -> int:
        """Pair interactions played over all runs."""
        return int(self.rounds.sum()) * self.N


def success_need(threshold: float, window: int) -> int:
    """Successes the window must hold: ceil(threshold · window), the product rounded to 9 decimals first."""
    return int(math.ceil(round(threshold * window, 9)))


def min_consensus_time(N: int, window: int | None = None) -> int:
    """The shortest possible consensus time in population rounds: ceil(window / N) (3 for the default 3N)."""
    window = 3 * N if window is None else window
    return -(-window // N)


def _int_arg(name: str, value, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{name} must be an integer (got {value!r})")
    if value < lo or (hi is not None and value > hi):
        rng = f"≥ {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ConfigError(f"{name} must be {rng} (got {value})")
    return int(value)


def run_seeds(seed: int, runs: int) -> np.ndarray:
    """The (runs, 4) uint64 xoshiro256** states: outputs 4k … 4k + 3 of a SplitMix64 stream (the seeding its authors
    recommend) that starts at ``SeedSequence(seed).generate_state(1, uint64)``. Run k's row is the same for every
    ``runs`` > k. An all-zero row (probability 2⁻²⁵⁶) is replaced."""
    start = np.random.SeedSequence(seed).generate_state(1, np.uint64)[0]
    with np.errstate(over="ignore"):
        z = start + np.arange(1, 4 * runs + 1, dtype=np.uint64) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    st = z.reshape(runs, 4)
    st[~st.any(axis=1), 0] = _GOLDEN
    return st


def simulate(q, H: int, N: int, runs: int, seed: int | None, *, max_population_rounds: int = 1000,
             threshold: float = 0.98, window: int | None = None, trajectory: bool = False,
             trajectory_every: int = 1) -> SimResult:
    """Play ``runs`` independent populations of N agents with policy q (P(word 0) per memory state of H) from the
    empty memory, each until it converges or ``max_population_rounds`` population rounds have passed (the rule is the
    module docstring's). ``window`` defaults to 3N interactions. With ``trajectory``, word 0's share of each population
    round is kept every ``trajectory_every`` rounds. Same (q, H, N, seed, settings) → identical results."""
    extras.require("numba", "the naming game's simulation")
    qa = check_q(q, H)
    H = check_memory(H)
    N = _int_arg("N (population size)", N, 2, N_MAX)
    runs = _int_arg("runs", runs, 1)
    max_population_rounds = _int_arg("max_population_rounds", max_population_rounds, 1)
    window = 3 * N if window is None else _int_arg("window", window, 1, 2 ** 31 - 1)
    every = _int_arg("trajectory_every", trajectory_every, 1)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating, np.integer)) \
            or not 0.0 < float(threshold) <= 1.0:
        raise ConfigError(f"threshold must be a number in (0, 1] (got {threshold!r})")
    threshold = float(threshold)
    if seed is None:
        seed = int(np.random.SeedSequence().entropy)
    seed = _int_arg("seed", seed, 0)

    thr = np.minimum(np.round(qa * TWO32), TWO32).astype(np.uint64)
    nxt = np.ascontiguousarray(memory_space(H).NEXT, dtype=np.int32).reshape(-1)
    seeds = run_seeds(seed, runs)
    conv = np.zeros(runs, dtype=np.bool_)
    word = np.full(runs, -1, dtype=np.int8)
    rounds = np.zeros(runs, dtype=np.int64)
    share0 = np.zeros(runs, dtype=np.float64)
    success = np.zeros(runs, dtype=np.float64)
    n_samples = max_population_rounds // every if trajectory else 0
    traj = np.full((runs, n_samples), np.nan, dtype=np.float32)     # (runs, 0) when not recorded
    t0 = time.perf_counter()
    _run_all(thr, nxt, N, seeds, max_population_rounds, window, success_need(threshold, window), every,
             conv, word, rounds, share0, success, traj, min(runs, numba.get_num_threads()))
    elapsed = time.perf_counter() - t0
    times = np.where(conv, rounds, np.nan).astype(np.float64)
    return SimResult(q=qa, H=H, N=N, runs=runs, seed=seed, max_population_rounds=max_population_rounds,
                     threshold=threshold, window=window, converged=conv, word=word, time=times, rounds=rounds,
                     share0=share0, success=success, trajectory=traj if trajectory else None,
                     trajectory_rounds=np.arange(1, n_samples + 1, dtype=np.int64) * every if trajectory else None,
                     elapsed_s=elapsed)


# ------------------------------------------------------------------------------------------------------- summaries
def collective_bias(result: SimResult, word: int = 0) -> tuple[float, float, int]:
    """(share of the converged runs that converged on ``word``, its SEM, number of converged runs). The SEM is the
    sample standard deviation of the 0/1 outcomes (ddof = 1) over √n; NaN when n < 2 (share NaN when n = 0)."""
    if word not in (0, 1):
        raise ConfigError(f"word must be 0 or 1 (got {word!r})")
    won = result.word[result.converged] == word
    n = int(won.size)
    if n == 0:
        return float("nan"), float("nan"), 0
    p = float(won.mean())
    sem = float(np.sqrt(p * (1.0 - p) / (n - 1))) if n > 1 else float("nan")
    return p, sem, n


@dataclass
class ConsensusTimeStats:
    """Consensus times of the converged runs (optionally only those on one word): ``n``, bin ``edges``, ``counts``,
    ``density`` (a PDF: counts / (n · bin width)), ``mode`` (centre of the fullest bin, the earliest on ties),
    ``mean``, ``median``."""

    n: int
    edges: np.ndarray
    counts: np.ndarray
    density: np.ndarray
    mode: float
    mean: float
    median: float


def consensus_time_stats(result: SimResult, *, word: int | None = None, bins=None) -> ConsensusTimeStats:
    """The distribution of consensus times (population rounds) over converged runs, all or those on ``word``.
    ``bins`` None: one bin per whole round from the shortest to the longest time (the times are whole rounds);
    otherwise anything ``np.histogram`` takes (e.g. log-spaced edges as in Fig. 4)."""
    sel = result.converged if word is None else result.converged & (result.word == word)
    t = result.time[sel]
    n = int(t.size)
    if n == 0:
        empty = np.zeros(0)
        return ConsensusTimeStats(0, empty, empty.astype(np.int64), empty, float("nan"), float("nan"), float("nan"))
    if bins is None:
        bins = np.arange(t.min() - 0.5, t.max() + 1.5)
    counts, edges = np.histogram(t, bins=bins)
    widths = np.diff(edges)
    density = counts / (n * widths)
    k = int(np.argmax(counts))
    return ConsensusTimeStats(n=n, edges=edges, counts=counts, density=density, mode=float(0.5 * (edges[k] +
                              edges[k + 1])), mean=float(t.mean()), median=float(np.median(t)))
