"""Paper 2, appendix D: the simplified random-iteration model of consensus-diversity dynamics.

N agents hold scalar states ``x_i``; the environment has a moving optimum ``a*``. One round (t -> t+1)::

    mu(t)     = (1/N) sum_j x_j(t)
    x_i(t+1)  = (1 - alpha) x_i(t) + alpha mu(t) + gamma (a*(t) - x_i(t)) + beta eps_i(t),   eps_i(t) ~ N(0, 1)
    a*(t+1)   = a*(t) + Delta(t)   with probability shock_freq, else a*(t);   Delta(t) ~ U(-shock_size, shock_size)

(paper: the update equation of appendix D and its eq. 4, with ``Delta ~ U[-1, 1]`` as the paper's example,
``shock_size = 1`` by default). Choices the paper leaves open, fixed here:

* initial states: ``x_i(0) ~ U(-1, 1)`` independently, ``a*(0) = 0``;
* order within a round: the agents update from ``x(t)``, ``mu(t)`` and ``a*(t)``; the shock then moves
  ``a*(t) -> a*(t+1)``. Agents therefore see a shock one round after it happens, and ``x(t+1)`` is scored
  against the already shocked ``a*(t+1)``;
* the metrics average over the states *after* each update, ``t = 1..T`` (the paper's sums run from 1 to T;
  the random initial state ``t = 0`` is not scored)::

      D_opt      = (1/T) sum_{t=1..T} (1/N) sum_i |x_i(t) - a*(t)|
      d_bar      = (1/T) sum_{t=1..T} (1/N) sum_i |x_i(t) - mu(t)|
      perf_score = 1 - D_opt                       (negative when D_opt > 1, as in the paper)

* random stream: each run has its own ``numpy.random.default_rng(seed)`` and draws, in this order,
  ``x(0)`` (N uniforms), T shock uniforms, T jump sizes and the (T, N) noise matrix. Every draw is made
  whatever the parameters, so the same seed gives the same ``x(0)``, shock times and noise for every
  ``alpha``, ``beta``, ``gamma`` and ``shock_freq`` (common random numbers within a seed).

Stability (not enforced): the deviations from the mean evolve as ``y(t+1) = (1 - alpha - gamma) y(t) + beta
(eps - mean eps)`` and the mean as ``mu(t+1) = (1 - gamma) mu(t) + gamma a*(t) + beta mean(eps)``, so the
iteration stays bounded only for ``alpha + gamma < 2`` (and ``gamma < 2`` when ``N = 1``).

Consequence for the paper's "optimal beta" remark: ``x(t)`` is linear in ``(x(0), a*, eps)``, so
``x_i(t) - a*(t) = m_i(t) + beta G_i(t)`` with ``m`` independent of the noise and ``G`` zero-mean Gaussian.
``E|m + beta G|`` is non-decreasing in ``beta`` (convex and even in ``beta``), hence the expected ``D_opt``
never decreases with ``beta`` for any ``alpha``, ``gamma``, ``shock_freq`` or N: an interior optimum of the
expected ``perf_score`` cannot exist in this model; a sampled one is sampling noise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from numbers import Integral, Real
from typing import Sequence

import numpy as np

from consensus.errors import ConfigError

#: initial states are drawn from U(-INIT_HALF_WIDTH, INIT_HALF_WIDTH)
INIT_HALF_WIDTH = 1.0


@dataclass(frozen=True)
class TheoryParams:
    alpha: float = 0.1          # consensus weight, in [0, 1]
    beta: float = 0.0           # noise ("diversity") scale, >= 0
    gamma: float = 0.1          # pull towards the optimum a*(t), >= 0
    shock_freq: float = 0.2     # per-round shock probability, in [0, 1]
    shock_size: float = 1.0     # Delta ~ U(-shock_size, shock_size), >= 0
    num_agents: int = 10        # N >= 1 (agents of the group)
    rounds: int = 100           # T >= 1

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "gamma", "shock_freq", "shock_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
                raise ConfigError(f"{name} must be a finite number (got {value!r})")
        for name, lo, hi in (("alpha", 0.0, 1.0), ("shock_freq", 0.0, 1.0)):
            if not lo <= getattr(self, name) <= hi:
                raise ConfigError(f"{name} must be in [{lo:g}, {hi:g}] (got {getattr(self, name)!r})")
        for name in ("beta", "gamma", "shock_size"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0 (got {getattr(self, name)!r})")
        for name in ("num_agents", "rounds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1 (got {value!r})")


@dataclass
class TheoryRun:
    """One or a batch of runs. With a batch of B seeds every array gets a leading axis of length B."""
    x: np.ndarray          # (T+1, N) states x(0..T)
    a_star: np.ndarray     # (T+1,) optimum a*(0..T)
    d_opt: float | np.ndarray
    d_bar: float | np.ndarray
    perf_score: float | np.ndarray


def tracking_metrics(x: np.ndarray, a_star: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(D_opt, d_bar)`` of the scored states ``x`` (..., T, N) against ``a_star`` (..., T); see module doc."""
    x = np.asarray(x, dtype=float)
    a_star = np.asarray(a_star, dtype=float)
    d_opt = np.abs(x - a_star[..., None]).mean(axis=(-2, -1))
    d_bar = np.abs(x - x.mean(axis=-1, keepdims=True)).mean(axis=(-2, -1))
    return d_opt, d_bar


def _draws(p: TheoryParams, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x(0) (N,), the shock jumps (T,) and the noise (T, N) of one seed, in the documented stream order."""
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(-INIT_HALF_WIDTH, INIT_HALF_WIDTH, p.num_agents)
    shock = rng.random(p.rounds) < p.shock_freq
    jumps = rng.uniform(-p.shock_size, p.shock_size, p.rounds) * shock
    eps = rng.standard_normal((p.rounds, p.num_agents))
    return x0, jumps, eps


def _linear_recursion(factor: float, start: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """``z(1..T)`` of ``z(t+1) = factor z(t) + u(t)``: ``start`` = z(0) (B, K), ``inputs`` = u(0..T-1) (B, T, K).

    Closed form ``z(t+1) = factor^(t+1) z(0) + sum_{s<=t} factor^(t-s) u(s)`` as one matrix product.
    """
    rounds = inputs.shape[1]
    powers = float(factor) ** np.arange(rounds + 2.0)       # factor^0 .. factor^(T+1)
    powers[-1] = 0.0                                         # the index _lags uses for s > t
    weights = powers[_lags(rounds)]                          # weights[t, s] = factor^(t-s), 0 for s > t
    return weights @ inputs + powers[1:-1, None] * start[:, None, :]


@lru_cache(maxsize=8)
def _lags(rounds: int) -> np.ndarray:
    """(T, T) indices ``t - s`` for ``s <= t``, ``T + 1`` above the diagonal (read-only, cached per T)."""
    k = np.arange(rounds)
    lags = k[:, None] - k[None, :]
    lags[lags < 0] = rounds + 1
    lags.flags.writeable = False
    return lags


def simulate_batch(p: TheoryParams, seeds: Sequence[int], x0: np.ndarray | None = None) -> TheoryRun:
    """Run the model once per seed, vectorised over the seeds (the same as one ``simulate`` per seed).

    ``x0`` (N,) or (B, N) replaces the drawn initial states (the draws are still made, so the shocks and the
    noise of a seed do not change).
    """
    draws = [_draws(p, int(s)) for s in seeds]
    if not draws:
        raise ConfigError("simulate_batch needs at least one seed")
    x0_drawn, jumps, eps = (np.stack(d) for d in zip(*draws))
    if x0 is not None:
        x0_drawn = np.broadcast_to(np.asarray(x0, dtype=float), x0_drawn.shape)
    # mean and deviations from the mean evolve separately (module doc); x = mu + y
    mean0 = x0_drawn.mean(axis=1, keepdims=True)
    eps_mean = eps.mean(axis=2, keepdims=True)
    a_star = np.concatenate([np.zeros((len(draws), 1)), np.cumsum(jumps, axis=1)], axis=1)
    with np.errstate(over="ignore", invalid="ignore"):   # an unstable alpha + gamma >= 2 may overflow
        mu = _linear_recursion(1.0 - p.gamma, mean0, p.gamma * a_star[:, :-1, None] + p.beta * eps_mean)
        y = _linear_recursion(1.0 - p.alpha - p.gamma, x0_drawn - mean0, p.beta * (eps - eps_mean))
        x = np.concatenate([x0_drawn[:, None, :], mu + y], axis=1)
        d_opt, d_bar = tracking_metrics(x[:, 1:], a_star[:, 1:])
    return TheoryRun(x=x, a_star=a_star, d_opt=d_opt, d_bar=d_bar, perf_score=1.0 - d_opt)


def simulate(p: TheoryParams, seed: int, x0: np.ndarray | None = None) -> TheoryRun:
    """One run (see module doc); metrics are plain floats."""
    run = simulate_batch(p, [seed], x0)
    return TheoryRun(x=run.x[0], a_star=run.a_star[0], d_opt=float(run.d_opt[0]),
                     d_bar=float(run.d_bar[0]), perf_score=float(run.perf_score[0]))
