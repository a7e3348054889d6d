"""Classical (non-LLM) planners: the strategies paper 1 observed LLM agents use (section 3.1).

* ``AveragePlanner``: the average strategy, with or without the robot's own state (Fig. 2a/2b).
* ``StubbornPlanner``: stay where you are (Fig. 3b, the stubborn personality).
* ``SuggestiblePlanner``: move to someone else's position (Fig. 3a); here the nearest
  in-neighbour, which makes two suggestible agents swap places forever (Fig. 6b).

They use no LLM, never fall back, and give a short reasoning string like the LLM's.
"""
from __future__ import annotations

import numpy as np

from consensus.control.planner import PlanRequest, PlanResult
from consensus.scenarios.aggregation.prompts import format_position


def _check(req: PlanRequest, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Own state (dim,) and neighbour states (k, dim) as float arrays; ValueError naming the bad one otherwise."""
    try:   # fast path: one array for all states, one finiteness check
        states = np.array([req.own, *req.neighbors], dtype=float).reshape(len(req.neighbors) + 1, dim)
        if np.isfinite(states).all():
            return states[0], states[1:]
    except (ValueError, TypeError):
        pass
    own = np.asarray(req.own, dtype=float).reshape(-1)
    if own.shape != (dim,) or not np.all(np.isfinite(own)):
        raise ValueError(f"robot {req.robot_id}: own state must be {dim} finite numbers, got {req.own!r}")
    for k, nb in enumerate(req.neighbors):
        arr = np.asarray(nb, dtype=float).reshape(-1)
        if arr.shape != (dim,) or not np.all(np.isfinite(arr)):
            raise ValueError(f"robot {req.robot_id}: neighbour {k} state must be {dim} finite numbers, got {nb!r}")
    raise AssertionError("unreachable: every state passed its check")  # pragma: no cover


def _check_dim(dim: int) -> int:
    if dim not in (1, 2):
        raise ValueError(f"dim must be 1 or 2 (got {dim})")
    return dim


class AveragePlanner:
    """Target = mean of the own state and the in-neighbours' states (or of the neighbours only)."""

    def __init__(self, dim: int, include_self: bool = True) -> None:
        self.dim = _check_dim(dim)
        self.include_self = include_self

    def plan(self, req: PlanRequest) -> PlanResult:
        own, neighbors = _check(req, self.dim)
        if not len(neighbors):
            return PlanResult(meeting_point=own.copy(),
                              reasoning=f"No neighbours visible; staying at {format_position(own)}")
        count = len(neighbors) + self.include_self
        target = (neighbors.sum(axis=0) + (own if self.include_self else 0.0)) / count
        return PlanResult(meeting_point=target,
                          reasoning=f"Average of {count} positions: {format_position(target)}")

    def reset(self) -> None:
        """Stateless."""


class StubbornPlanner:
    """Target = own state."""

    def __init__(self, dim: int) -> None:
        self.dim = _check_dim(dim)

    def plan(self, req: PlanRequest) -> PlanResult:
        own, _ = _check(req, self.dim)
        return PlanResult(meeting_point=own.copy(), reasoning=f"Staying at {format_position(own)}")

    def reset(self) -> None:
        """Stateless."""


class SuggestiblePlanner:
    """Target = the nearest in-neighbour's state (ties broken by a seeded draw); no neighbour -> stay."""

    def __init__(self, dim: int, seed: int | None = None) -> None:
        self.dim = _check_dim(dim)
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def plan(self, req: PlanRequest) -> PlanResult:
        own, neighbors = _check(req, self.dim)
        if not len(neighbors):
            return PlanResult(meeting_point=own.copy(),
                              reasoning=f"No neighbours visible; staying at {format_position(own)}")
        dist = np.linalg.norm(neighbors - own, axis=1)
        nearest = np.flatnonzero(dist == dist.min())
        k = int(nearest[0]) if len(nearest) == 1 else int(self._rng.choice(nearest))
        target = neighbors[k].copy()
        return PlanResult(meeting_point=target,
                          reasoning=f"Moving to the nearest neighbour at {format_position(target)}")

    def reset(self) -> None:
        """Restart the tie-breaking draws from the seed."""
        self._rng = np.random.default_rng(self.seed)
