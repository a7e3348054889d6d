"""The naming game of paper 4 (Methods, "Model definition"): memory states, the shift function, payoffs.

Two words π₁ (index 0) and π₂ (index 1). An agent's memory holds its last h ≤ H interactions, oldest first, each as
(own word a, partner's word b): M_h = {a₁, b₁, …, a_h, b_h}. All agents start in the empty state. After an
interaction where the agent said π and its partner π′ the memory becomes Γ(M, π, π′): the pair is appended, and
when h = H the oldest pair is dropped (eqs. 7-8). There are N_H = (4^{H+1} − 1)/3 states (1365 for H = 5).

State keys (the text form, shared with the published tables in ``../shared/data/naming-game``): ``""`` is the
empty memory; otherwise the digits 0/1 interleave own and partner word, oldest first: ``"01"`` = one interaction,
I said word 0, my partner said word 1. State indices: all states of length 0, then 1, …, then H pairs; within a
length, in increasing binary order of the digit string (so index 0 is the empty state, 1..4 are "00", "01", "10",
"11"). ``MemorySpace(H)`` holds the keys, the index of every key, and ``NEXT[s, a, b]``: the index of
Γ(state s, a, b) — the one table the simulation and the mean-field theory need.

A policy q gives, for every state, the probability of saying word 0 (π₁). Payoffs: +100 for a success (both said
the same word), −50 for a failure (``PAYOFF_SUCCESS``, ``PAYOFF_FAILURE``).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from consensus.errors import ConfigError

WORDS_PER_GAME = 2
PAYOFF_SUCCESS = 100
PAYOFF_FAILURE = -50
H_MIN, H_MAX = 1, 6


def state_count(H: int) -> int:
    """N_H = (4^{H+1} − 1) / 3."""
    return (4 ** (H + 1) - 1) // 3


def check_memory(H: int) -> int:
    if isinstance(H, bool) or not isinstance(H, (int, np.integer)) or not H_MIN <= int(H) <= H_MAX:
        raise ConfigError(f"memory length H must be an integer from {H_MIN} to {H_MAX} (got {H!r})")
    return int(H)


class MemorySpace:
    """The memory states of length ≤ H: ``keys[i]`` (text form), ``index[key]``, ``length[i]`` (pairs held),
    ``NEXT[i, a, b]`` = index of Γ(keys[i], a, b), ``EMPTY`` = 0. Use ``memory_space(H)`` (cached)."""

    EMPTY = 0

    def __init__(self, H: int) -> None:
        self.H = check_memory(H)
        keys: list[str] = []
        for h in range(self.H + 1):
            keys += [format(v, f"0{2 * h}b") if h else "" for v in range(4 ** h)]
        self.keys = keys
        self.index = {k: i for i, k in enumerate(keys)}
        self.length = np.array([len(k) // 2 for k in keys], dtype=np.int8)
        nxt = np.empty((len(keys), 2, 2), dtype=np.int32)
        for i, k in enumerate(keys):
            for a in (0, 1):
                for b in (0, 1):
                    nxt[i, a, b] = self.index[shift(k, a, b, self.H)]
        nxt.setflags(write=False)
        self.NEXT = nxt
        assert len(keys) == state_count(self.H)

    def __len__(self) -> int:
        return len(self.keys)

    def pairs(self, key_or_index) -> list[tuple[int, int]]:
        """The memory as (own, partner) pairs, oldest first."""
        key = self.keys[key_or_index] if not isinstance(key_or_index, str) else key_or_index
        return [(int(key[2 * i]), int(key[2 * i + 1])) for i in range(len(key) // 2)]


def shift(key: str, a: int, b: int, H: int) -> str:
    """Γ(M, a, b) on the text form: append (a, b); drop the oldest pair when the memory already held H."""
    new = key + f"{int(a)}{int(b)}"
    return new[2:] if len(key) // 2 >= H else new


@lru_cache(maxsize=None)
def memory_space(H: int) -> MemorySpace:
    return MemorySpace(H)


def payoff(own: int, partner: int) -> int:
    return PAYOFF_SUCCESS if own == partner else PAYOFF_FAILURE


def check_q(q, H: int, label: str = "q") -> np.ndarray:
    """q as a read-only float64 array with one probability per memory state of H; one ConfigError naming the first
    bad state otherwise (the policy tables and the simulation check their input with this)."""
    H = check_memory(H)
    try:
        arr = np.array(q, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{label}: q must be an array of numbers (probabilities; {exc})") from None
    n = state_count(H)
    if arr.shape != (n,):
        raise ConfigError(f"{label}: q must have one entry per memory state, {n} for H = {H} (got shape {arr.shape})")
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0.0) | (arr > 1.0))
    if bad.size:
        i = int(bad[0])
        what = "is not finite (non-finite)" if not np.isfinite(arr[i]) else "is outside [0, 1]"
        more = f" ({bad.size} bad states in all)" if bad.size > 1 else ""
        raise ConfigError(f"{label}: q[{memory_space(H).keys[i]!r}] (state {i}) = {float(arr[i])!r} {what}{more}")
    arr.setflags(write=False)
    return arr
