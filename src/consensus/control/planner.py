"""The planner interface shared by every planner (classical and LLM).

A planner belongs to one robot and may keep state between rounds (memory). It
maps the robot's own state and the states of its in-neighbours (only those it
is allowed to hear, see ``consensus.graphs``) to a new meeting point.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np


@dataclass(frozen=True)
class PlanRequest:
    """``own`` and ``neighbors`` are the states the planner's rule runs on: the positions (the papers' point robots,
    and the LLM's default wording), or the meeting points (robots with bodies: ``consensus.control.robot_core``).
    Both are also given by name, for planners that show both (the LLM with ``meeting_points: on``); a caller that
    knows only one kind leaves the others None."""

    robot_id: int
    own: np.ndarray                 # shape (dim,)
    neighbors: Sequence[np.ndarray]  # in-neighbour states, each shape (dim,); may be empty
    round: int                      # 0-based planning round of this robot
    own_position: np.ndarray | None = None                   # where the robot stands
    neighbor_positions: Sequence[np.ndarray] | None = None   # where its in-neighbours stand (same order)
    own_meeting_point: np.ndarray | None = None              # its meeting point (its last one, or its position)
    neighbor_meeting_points: Sequence[np.ndarray] | None = None   # its in-neighbours' meeting points


@dataclass
class PlanResult:
    meeting_point: np.ndarray | None   # new meeting point, shape (dim,); None = keep the last one
    reasoning: str = ""            # free text shown to humans and recorded (bounded length)
    fallback: bool = False         # True when the planner could not produce a valid meeting point itself
    fallback_reason: str = ""      # short machine-readable reason, e.g. "unparseable", "llm_error", "clamped"
    llm_calls: int = 0             # number of LLM requests this plan used (including retries)
    clamped: bool = False          # True when the meeting point was clamped into the geofence
    extra: dict = field(default_factory=dict)


class Planner(Protocol):
    dim: int

    def plan(self, req: PlanRequest) -> PlanResult: ...

    def reset(self) -> None: ...
