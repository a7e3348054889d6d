"""Combining proposals without an LLM: majority vote, averaging, unanimity (paper 3, Fig. 1b/1c).

A *proposal* is one agent's answer. Three kinds are known (``KINDS``):

* ``numeric``: a float or a 1-D ``np.ndarray``;
* ``categorical``: any hashable value, either a *label* (e.g. the string "Sports") or a *grid cell*
  ``tuple[int, int]`` (paper 2's drones); a cell is a tuple or list of exactly two integers
  (``bool`` is not an integer here);
* ``allocation``: a 2-D ``np.ndarray`` (resources x regions, paper 3's resource allocation).

``None`` is a failed proposal everywhere: it is ignored by ``majority_vote`` and ``average`` and it
blocks unanimity (a failed agent has agreed to nothing).

Rules:

* ``majority_vote``: the value proposed most often, by exact equality of whole proposals (arrays are
  compared element by element after ``-0.0 -> 0.0``; an allocation plan wins only if the very same
  plan is proposed more often than any other), or by equality of a caller's ``key`` (texts: their normalised
  answers). Ties go to the tied value whose first proposal comes
  first (lowest agent index), so when every proposal differs the first valid one wins.
* ``average``: numeric/allocation: element-wise arithmetic mean of the valid proposals (a float for
  scalar proposals, an array otherwise). Grid cells: the mean cell rounded half up per axis,
  ``floor(mean + 0.5)`` (so the mean of (0, 0) and (1, 1) is (1, 1)); Python ints are returned.
  Labels cannot be averaged: ``ConfigError``.
* ``unanimous``: all proposals valid and equal: ``np.allclose`` (default tolerances, same shape)
  for numeric/allocation, ``==`` for categorical. An empty sequence is not unanimous.
"""
from __future__ import annotations

import math
from numbers import Integral
from typing import Any, Callable, Sequence

import numpy as np

from consensus.errors import ConfigError

KINDS = ("numeric", "categorical", "allocation")


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ConfigError(f"aggregation kind must be one of {', '.join(KINDS)}; got {kind!r}")
    return kind


def is_cell(value: Any) -> bool:
    """True for a grid cell: a tuple or list of exactly two integers (not bools)."""
    return (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(v, Integral) and not isinstance(v, bool) for v in value))


def _vote_key(value: Any) -> Any:
    """A hashable key equal for equal proposals (arrays by shape and values, -0.0 == 0.0)."""
    if isinstance(value, np.ndarray):
        arr = np.asarray(value, dtype=float) + 0.0
        return ("ndarray", arr.shape, arr.tobytes())
    if isinstance(value, list):
        return ("list", tuple(value))
    return value


def majority_vote(proposals: Sequence[Any], key: Callable[[Any], Any] | None = None) -> Any:
    """The most frequent valid proposal (tie: earliest first occurrence); None if all failed. With ``key``, proposals
    count as equal when their keys are (e.g. texts that say the same answer); the first proposal of the winning key
    is returned."""
    counts: dict[Any, int] = {}
    first: dict[Any, Any] = {}
    for value in proposals:
        if value is None:
            continue
        key_value = _vote_key(value) if key is None else key(value)
        if key_value not in counts:
            counts[key_value] = 0
            first[key_value] = value
        counts[key_value] += 1
    if not counts:
        return None
    return first[max(counts, key=counts.__getitem__)]   # max keeps the first of equal counts (insertion order)


def average(proposals: Sequence[Any], kind: str) -> Any:
    """Element-wise mean (numeric/allocation) or rounded mean cell (categorical cells); None if all failed."""
    check_kind(kind)
    valid = [p for p in proposals if p is not None]
    if not valid:
        return None
    if kind == "categorical":
        if not all(is_cell(p) for p in valid):
            raise ConfigError("averaging needs numbers or grid cells; categorical labels cannot be averaged")
        n = len(valid)
        return tuple(math.floor(sum(int(p[k]) for p in valid) / n + 0.5) for k in range(2))
    arrays = [np.asarray(p, dtype=float) for p in valid]
    if any(a.shape != arrays[0].shape for a in arrays):
        raise ValueError(f"cannot average proposals of different shapes: {sorted({a.shape for a in arrays})}")
    mean = np.mean(arrays, axis=0)
    return float(mean) if mean.ndim == 0 else mean


def unanimous(proposals: Sequence[Any], kind: str) -> bool:
    """All proposals valid and equal (np.allclose for numeric/allocation, == for categorical)."""
    if not proposals or any(p is None for p in proposals):
        return False
    first = proposals[0]
    if kind == "categorical":
        return all(p == first for p in proposals[1:])
    ref = np.asarray(first, dtype=float)
    for p in proposals[1:]:
        arr = np.asarray(p, dtype=float)
        if arr.shape != ref.shape or not np.allclose(arr, ref):
            return False
    return True


def default_agree(kind: str) -> Callable[[Sequence[Any]], bool]:
    """The default agreement test of ``kind`` (``unanimous``)."""
    check_kind(kind)
    return lambda proposals: unanimous(proposals, kind)
