"""Mean-field theory of the paper-4 naming game (N → ∞): the rate equation, its integration, fixed points and the
stability of the two consensus states (SI "Mean-field theory through a mapping to a reaction-diffusion process" and
"Fixed points and stability analysis"; Table S1).

Derivation. x_k is the fraction of agents in memory state k (``memory_space(H)`` order, Σ_k x_k = 1). A random pair
is an agent in state i and a partner in state j with probability x_i x_j. The agent says word a (0 = π₁ with
probability q_i, 1 with 1 − q_i), the partner word b, and the agent moves to Γ(i, a, b) (``NEXT[i, a, b]``). So

    P_k(i, j) = Σ_{a,b} q_i(a) q_j(b) [k = Γ(i, a, b)],   q(0) = q, q(1) = 1 − q.

The SI's eq. (16) prints the (π₂, π₂) case as (1 − q(i)) q(j); that is a typo: with it Σ_k P_k(i, j) =
q_i + 2 (1 − q_i) q_j ≠ 1, against its own eq. (17). We use (1 − q(i)) (1 − q(j)), which sums to one.
Counting gains and losses of both agents of a pair and rescaling time by 2 gives the SI's eq. (27):

    dx_k/dt = −x_k + Σ_i Σ_j x_i x_j P_k(i, j).

One time unit is one interaction per agent on average, i.e. half a population round (N/2 pair games). The partner
enters only through Q_0 = Σ_j x_j q_j = q̄ (the population's frequency of word 0) and Q_1 = Σ_j x_j (1 − q_j),
which is 1 − q̄ on the simplex; we use 1 − q̄, so that Σ_k dx_k/dt = 0 exactly and rounding cannot drift off the
simplex (with the quadratic form Σ x is unstable: d(Σx)/dt = (Σx)² − Σx). The gain term is
Σ_i x_i Σ_{a,b} q_i(a) Q_b [k = Γ(i, a, b)]: four scatter-adds, O(N_H) per evaluation (N_H = 1365 for H = 5)
instead of a sum over all pairs of states. ``method="euler"`` with
``dt=1`` is x ← Σ_ij x_i x_j P(i, j), the discrete update of the paper's solver (numerical_solver_full.py).

Fixed points and stability. The uniform states x = δ_n with n = [π₁]^{2H} (every agent remembers H interactions in
which both said word 0) or [π₂]^{2H} are fixed points when q(n) = 1, resp. 0 (``uniform_fixed_points``). Published
tables have q(n) = 1 − 2·10⁻¹⁶ or 0.99999, and like the paper we linearise at δ_n all the same. The Jacobian is
J_km = −δ_km + 2 T_k(m, n), T_k(i, j) = ½ [P_k(i, j) + P_k(j, i)] (eq. 34); since Σ x = 1, the SI removes x_n:
J^red_ij = J_ij − J_in for i, j ≠ n (eqs. 37–38). Its eigenvalue with the largest real part is the "first
eigenvalue" of Table S1 (negative: stable). Memories grow by one pair per interaction, so in order of memory length
J^red is block lower-triangular: each shorter length contributes an exact −1 per state, and only the block of full
memories (4^H − 1 states) needs a numerical eigensolver (``eigenvalues``). When all of its eigenvalues cluster at
−1 (nearly defective: policies that are 0/1 almost everywhere), the computed values scatter by up to ~10⁻²;
``stability`` reports a condition number for that.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from consensus.errors import ConfigError
from consensus.scenarios.naming_game.game import check_memory, memory_space
from consensus.scenarios.naming_game.policy import DEFAULT_WORDS, Policy

METHODS = ("euler", "rk4")
MAX_RECORDED_VALUES = 50_000_000      # trajectory size guard (400 MB of float64)
TIME_UNITS_PER_ROUND = 2.0            # one population round (N pair games) = 2 time units of eq. (27)


@dataclass(frozen=True)
class Trajectory:
    """``x[r]`` at ``times[r]``; ``q_mean[r]`` = Σ_j x_j q_j, the frequency of word 0 (``words[0]``) in utterances."""

    times: np.ndarray
    x: np.ndarray
    q_mean: np.ndarray
    H: int
    words: tuple[str, str]

    @property
    def final(self) -> np.ndarray:
        return self.x[-1]


@dataclass(frozen=True)
class FixedPoint:
    """Result of ``fixed_point``: the state reached, q̄ there, and whether ‖dx/dt‖₁ fell below the tolerance."""

    x: np.ndarray
    q_mean: float
    time: float
    steps: int
    residual: float
    converged: bool


@dataclass(frozen=True)
class Stability:
    """First eigenvalue of the reduced Jacobian at a uniform state, and its condition number (1 when it is the
    exact −1 of the shorter memories; ≳ 10⁸ means the value is only good to ~10⁻² or worse)."""

    eigenvalue: complex
    condition: float

    @property
    def first(self) -> float:
        return float(self.eigenvalue.real)


# ------------------------------------------------------------------------------------------------------- inputs
def _resolve(q: Any, H: int | None) -> tuple[np.ndarray, int, tuple[str, str]]:
    if isinstance(q, Policy):
        if H is not None and check_memory(H) != q.H:
            raise ConfigError(f"H = {H} does not match the policy's memory length H = {q.H}")
        return q.q, q.H, q.words
    if H is None:
        raise ConfigError("H (the memory length) is required when q is an array rather than a Policy")
    pol = Policy(q, H)
    return pol.q, pol.H, pol.words


def _word_index(word: Any, words: tuple[str, str]) -> int:
    if isinstance(word, str):
        if word not in words:
            raise ConfigError(f"word {word!r} is not one of {words}")
        return words.index(word)
    if isinstance(word, (bool, np.bool_)) or word not in (0, 1):
        raise ConfigError(f"word must be 0, 1 or one of {words} (got {word!r})")
    return int(word)


def _state(x: Any, H: int, what: str = "x") -> np.ndarray:
    ms = memory_space(H)
    if x is None:
        out = np.zeros(len(ms))
        out[ms.EMPTY] = 1.0
        return out
    if isinstance(x, Mapping):
        out = np.zeros(len(ms))
        for key, v in x.items():
            if key not in ms.index:
                raise ConfigError(f"{what}: {key!r} is not a memory state of H = {H}")
            out[ms.index[key]] = v
    else:
        try:
            out = np.array(x, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{what} must be an array of fractions ({exc})") from None
    if out.shape != (len(ms),):
        raise ConfigError(f"{what} must have one fraction per memory state, {len(ms)} for H = {H} "
                          f"(got shape {out.shape})")
    if not np.all(np.isfinite(out)) or np.any(out < 0):
        i = int(np.flatnonzero(~np.isfinite(out) | (out < 0))[0])
        raise ConfigError(f"{what}[{ms.keys[i]!r}] = {float(out[i])!r}: fractions must be finite and ≥ 0")
    if abs(out.sum() - 1.0) > 1e-9:
        raise ConfigError(f"{what} must sum to 1 (got {out.sum():.12g})")
    return out


@lru_cache(maxsize=None)
def _targets(H: int) -> np.ndarray:
    """NEXT as one index array: block r = 2a + b holds Γ(i, a, b) for every state i."""
    nxt = memory_space(H).NEXT
    out = np.concatenate([nxt[:, a, b] for a in (0, 1) for b in (0, 1)]).astype(np.intp)
    out.setflags(write=False)
    return out


def _rate(x: np.ndarray, q: np.ndarray, targets: np.ndarray) -> np.ndarray:
    n = x.size
    xq = x * q                       # agents in i saying word 0
    x1 = x - xq                      # ... saying word 1
    q0 = xq.sum()                    # Q_0 = q̄
    q1 = 1.0 - q0                    # Q_1 = 1 − q̄ (then Σ_k dx_k/dt = 0 for any Σ x: no drift off the simplex)
    w = np.empty(4 * n)
    np.multiply(xq, q0, out=w[:n])
    np.multiply(xq, q1, out=w[n:2 * n])
    np.multiply(x1, q0, out=w[2 * n:3 * n])
    np.multiply(x1, q1, out=w[3 * n:])
    return np.bincount(targets, w, minlength=n) - x


# ------------------------------------------------------------------------------------------------- the dynamics
def derivative(x: Any, q: Any, H: int | None = None) -> np.ndarray:
    """dx/dt of eq. (27) at the state ``x`` (array or {state key: fraction}) for the policy ``q``."""
    qa, H, _ = _resolve(q, H)
    return _rate(_state(x, H), qa, _targets(H))


def transition_tensor(q: Any, H: int | None = None) -> np.ndarray:
    """P[k, i, j] = P_k(i, j) (corrected eq. 16), dense: for checks and small H only (H ≤ 3)."""
    qa, H, _ = _resolve(q, H)
    if H > 3:
        raise ConfigError(f"transition_tensor is dense (N_H³ entries); use H ≤ 3 (got H = {H})")
    nxt = memory_space(H).NEXT
    n = qa.size
    P = np.zeros((n, n, n))
    qi = (qa, 1.0 - qa)
    cols = np.arange(n)
    for a in (0, 1):
        for b in (0, 1):
            for i in range(n):
                P[nxt[i, a, b], i, cols] += qi[a][i] * qi[b]
    return P


def integrate(q: Any, H: int | None = None, *, x0: Any = None, dt: float = 1.0, steps: int | None = None,
              t_end: float | None = None, method: str = "euler", record_every: int = 1) -> Trajectory:
    """Integrate eq. (27) from ``x0`` (default: every agent in the empty state).

    Give ``steps`` or ``t_end`` (then dt is shrunk slightly so that the last step ends at t_end). ``method``:
    ``"euler"`` (with dt = 1 the paper's discrete update; dt ≤ 1 keeps x ≥ 0) or ``"rk4"``. Every
    ``record_every``-th state is kept, plus the first and the last.
    """
    qa, H, words = _resolve(q, H)
    x = _state(x0, H, "x0")
    if method not in METHODS:
        raise ConfigError(f"method must be one of {METHODS} (got {method!r})")
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt <= 0:
        raise ConfigError(f"dt must be a positive number (got {dt!r})")
    if (steps is None) == (t_end is None):
        raise ConfigError("give exactly one of steps and t_end")
    if t_end is not None:
        if isinstance(t_end, bool) or not isinstance(t_end, (int, float)) or not math.isfinite(t_end) or t_end < 0:
            raise ConfigError(f"t_end must be a number ≥ 0 (got {t_end!r})")
        steps = math.ceil(t_end / dt - 1e-9)
        dt = t_end / steps if steps else dt
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ConfigError(f"steps must be an integer ≥ 0 (got {steps!r})")
    if isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every < 1:
        raise ConfigError(f"record_every must be an integer ≥ 1 (got {record_every!r})")
    steps, record_every = int(steps), int(record_every)
    recorded = list(range(0, steps + 1, record_every))
    if recorded[-1] != steps:
        recorded.append(steps)
    if len(recorded) * x.size > MAX_RECORDED_VALUES:
        raise ConfigError(f"{len(recorded)} recorded states of {x.size} values are too many; raise record_every")
    xs = np.empty((len(recorded), x.size))
    xs[0] = x
    targets = _targets(H)
    step = _euler if method == "euler" else _rk4
    r = 1
    for s in range(1, steps + 1):
        x, _ = step(x, qa, targets, dt)
        if r < len(recorded) and recorded[r] == s:
            xs[r] = x
            r += 1
    times = np.array(recorded, dtype=float) * dt
    return Trajectory(times, xs, xs @ qa, H, words)


def _euler(x, q, targets, dt):
    f = _rate(x, q, targets)
    return x + dt * f, f


def _rk4(x, q, targets, dt):
    k1 = _rate(x, q, targets)
    k2 = _rate(x + 0.5 * dt * k1, q, targets)
    k3 = _rate(x + 0.5 * dt * k2, q, targets)
    k4 = _rate(x + dt * k3, q, targets)
    return x + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4), k1


def fixed_point(q: Any, H: int | None = None, *, x0: Any = None, dt: float = 1.0, method: str = "euler",
                tol: float = 1e-10, max_steps: int = 100_000) -> FixedPoint:
    """Integrate until ‖dx/dt‖₁ < ``tol`` or ``max_steps``; ``converged`` says which. Near a marginal fixed point
    (first eigenvalue ≈ 0) or on a periodic orbit it may not converge: check the flag."""
    qa, H, _ = _resolve(q, H)
    x = _state(x0, H, "x0")
    if method not in METHODS:
        raise ConfigError(f"method must be one of {METHODS} (got {method!r})")
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt <= 0:
        raise ConfigError(f"dt must be a positive number (got {dt!r})")
    if not tol > 0 or isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0:
        raise ConfigError(f"tol must be > 0 and max_steps an integer ≥ 0 (got {tol!r}, {max_steps!r})")
    targets = _targets(H)
    step = _euler if method == "euler" else _rk4
    s = 0
    while True:
        x_next, f = step(x, qa, targets, dt)
        residual = float(np.abs(f).sum())
        if residual < tol or s >= max_steps:
            break
        x, s = x_next, s + 1
    return FixedPoint(x, float(x @ qa), s * dt, s, residual, residual < tol)


def uniform_state(H: int, word: int) -> int:
    """Index of [π₁]^{2H} (word 0) or [π₂]^{2H} (word 1): H interactions where both said that word."""
    H = check_memory(H)
    return memory_space(H).index[str(_word_index(word, DEFAULT_WORDS)) * (2 * H)]


def uniform_fixed_points(H: int) -> tuple[np.ndarray, np.ndarray]:
    """The two absorbing consensus states as distributions (word 0, word 1): every agent in [π]^{2H}. They are
    fixed points of eq. (27) when q = 1 at [π₁]^{2H}, resp. q = 0 at [π₂]^{2H}."""
    H = check_memory(H)
    out = []
    for word in (0, 1):
        x = np.zeros(len(memory_space(H)))
        x[uniform_state(H, word)] = 1.0
        out.append(x)
    return out[0], out[1]


# ----------------------------------------------------------------------------------------------------- stability
def jacobian(x: Any, q: Any, H: int | None = None) -> np.ndarray:
    """∂(dx_k/dt)/∂x_m of ``derivative`` (dense). Our rate uses Q_1 = 1 − q̄, which conserves Σ x exactly; the SI's
    quadratic form (Q_1 = Σ_j x_j (1 − q_j)) does not, and its eq. (34) Jacobian at δ_n differs from this one by a
    term constant along each row, which the reduction J_ij − J_in removes: ``reduced_jacobian`` is eq. (38)."""
    qa, H, _ = _resolve(q, H)
    x = _state(x, H)
    nxt = memory_space(H).NEXT
    n = qa.size
    pa = (qa, 1.0 - qa)
    q0 = float(x @ qa)
    Q = (q0, 1.0 - q0)
    J = -np.eye(n)
    cols = np.arange(n)
    R = np.zeros((2, n))
    for a in (0, 1):
        for b in (0, 1):
            J[nxt[:, a, b], cols] += pa[a] * Q[b]       # the agent's own state m moves (P_k(m, ·))
            R[b] += np.bincount(nxt[:, a, b], x * pa[a], minlength=n)
    J += np.outer(R[0] - R[1], qa)                      # a partner in state m shifts q̄ by q_m
    return J


def reduced_jacobian(q: Any, H: int | None = None, word: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """(J^red, states): eq. (38) at the uniform state of ``word``; ``states`` are the indices of its rows/columns
    (every state except n)."""
    qa, H, words = _resolve(q, H)
    n = uniform_state(H, _word_index(word, words))
    x = np.zeros(qa.size)
    x[n] = 1.0
    J = jacobian(x, Policy(qa, H, words))
    keep = np.flatnonzero(np.arange(qa.size) != n)
    return J[np.ix_(keep, keep)] - J[keep, n][:, None], keep


def _full_memory_block(qa: np.ndarray, H: int, word: int) -> tuple[np.ndarray, int]:
    """The block of J^red over full memories (length H) except n, and how many shorter states there are."""
    Jr, keep = reduced_jacobian(qa, H, word)
    full = memory_space(H).length[keep] == H
    return Jr[np.ix_(full, full)], int(np.count_nonzero(~full))


def eigenvalues(q: Any, H: int | None = None, word: Any = 0) -> np.ndarray:
    """All N_H − 1 eigenvalues of J^red at the uniform state of ``word``, largest real part first: −1 for each
    state shorter than H (exact, by the block structure) and those of the full-memory block."""
    qa, H, words = _resolve(q, H)
    B, short = _full_memory_block(qa, H, _word_index(word, words))
    ev = np.concatenate([np.linalg.eigvals(B), np.full(short, -1.0 + 0j)])
    return ev[np.argsort(-ev.real, kind="stable")]


def stability(q: Any, H: int | None = None) -> dict[str, Stability]:
    """{word: Stability} at both uniform states (``words`` of the policy; π1/π2 for a bare array)."""
    return _stability(q, H, with_condition=True)


def first_eigenvalues(q: Any, H: int | None = None) -> dict[str, float]:
    """{words[0]: λ, words[1]: λ}: the largest real part of the eigenvalues of the reduced Jacobian (eq. 38) at
    the uniform state of each word, as in Table S1 (negative: that consensus is stable). ``stability`` adds the
    condition number: values from nearly defective spectra (all eigenvalues ≈ −1) are only good to ~10⁻²."""
    return {word: s.first for word, s in _stability(q, H, with_condition=False).items()}


def _stability(q: Any, H: int | None, with_condition: bool) -> dict[str, Stability]:
    qa, H, words = _resolve(q, H)
    out = {}
    for w in (0, 1):
        B, short = _full_memory_block(qa, H, w)
        vals = np.linalg.eigvals(B)
        top = complex(vals[int(np.argmax(vals.real))])
        if short and top.real < -1.0:
            out[words[w]] = Stability(complex(-1.0), 1.0)
        else:
            out[words[w]] = Stability(top, _condition(B, top) if with_condition else math.nan)
    return out


def _condition(B: np.ndarray, lam: complex) -> float:
    """1 / |cos(left, right eigenvector)| of ``lam``; both vectors from two steps of inverse iteration."""
    n = B.shape[0]
    shift = lam + 1e-10 * max(1.0, abs(lam))
    if lam.imag == 0:                                  # real arithmetic is 4× cheaper
        shift = shift.real
    M = B - shift * np.eye(n)
    start = np.random.default_rng(0).standard_normal(n).astype(M.dtype)
    vecs = []
    try:
        for A in (M, M.conj().T):
            v = start
            for _ in range(2):
                v = np.linalg.solve(A, v)
                v /= np.linalg.norm(v)
            vecs.append(v)
    except np.linalg.LinAlgError:
        return math.inf
    c = abs(np.vdot(vecs[1], vecs[0]))
    return math.inf if c == 0 else 1.0 / c
