"""The typed boundary between a robot core's parts (no ROS): what a ``consensus.control.robot_core.RobotCore`` takes
(``Heard``, ``Nearby``), what it gives (``Command``) and the state its parts share (``RobotState``: the robot's
pose, its meeting point, its last commanded speed, its counters, its settings), so that the planner schedule
(``schedule``), the safety gate (``safety_gate``), the goal and packing (``goal``) and the filter adapter
(``filter_adapter``) each read and write one named thing instead of each other's attributes."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from consensus.control.safety import Geofence

COUNTERS = ("llm_calls", "llm_fallbacks", "clamped", "overruns", "planner_errors", "stale_stops", "estops",
            "deadlocks", "census_fallbacks", "pose_suspect_stops", "odom_creeps", "slots_blocked", "blocked",
            "news_waits", "suggestions", "suggestions_refused", "rounds_dropped")
EMPTY = np.empty((0, 2))


@dataclass(frozen=True)
class Heard:
    """What a robot heard of its in-neighbours for planning (the communication graph's deliveries, in the same
    order): their positions and their meeting points (their planners' last meeting points; a robot that has not planned
    yet is its position). ``(k, d)`` each."""

    positions: np.ndarray
    meeting_points: np.ndarray

    @classmethod
    def none(cls, dim: int) -> Heard:
        return cls(np.empty((0, dim)), np.empty((0, dim)))


@dataclass(frozen=True)
class Nearby:
    """Every other robot the collision filter must keep clear of, whatever the graph: ``positions (k, d)``, each
    position's age ``ages (k,)`` [s] and each robot's measured speed ``speeds (k,)`` [m/s] (zeros: not measured),
    ``ids (k,)`` (robot indices; -1 unknown)."""

    positions: np.ndarray
    ages: np.ndarray
    speeds: np.ndarray
    ids: np.ndarray

    @classmethod
    def of(cls, positions, ages=None, speeds=None, ids=None) -> Nearby:
        p = np.asarray(positions, dtype=float)
        k = len(p)
        return cls(p, np.zeros(k) if ages is None else np.asarray(ages, dtype=float),
                   np.zeros(k) if speeds is None else np.asarray(speeds, dtype=float),
                   np.full(k, -1) if ids is None else np.asarray(ids, dtype=int))


@dataclass(frozen=True)
class Command:
    """One control tick's output. ``vx, vy`` world frame (single integrator, point mass set-point) or ``vx`` = v and
    ``wz`` = ω (unicycle); ``reason``: ``ok`` | ``estopped`` | ``stale_odom`` | ``no_round`` | ``no_plan`` |
    ``no_nearby`` | ``stale_nearby`` |
    ``pose_suspect`` | ``blocked``; ``goal``: where the controller drove (None when stopped)."""

    vx: float = 0.0
    vy: float = 0.0
    wz: float = 0.0
    reason: str = "ok"
    goal: np.ndarray | None = None


@dataclass(eq=False)
class RobotState:
    """What every part of one robot's core reads: its settings (``cfg``, replaced by ``set_limits``; ``v_max``,
    ``w_max``: this robot's limits), its accepted pose (``pos``, ``yaw`` and when it came, ``odom_stamp``), its
    meeting point (``meeting_point``) and when its planner was last alive (``last_round_done``), its last commanded
    speed (``last_speed``: the world-frame speed of the filtered point) and its counters (``status()``'s, in their
    order)."""

    cfg: object
    id: int
    dim: int
    geofence: Geofence
    v_max: float
    w_max: float
    pos: np.ndarray | None = None
    yaw: float = 0.0
    odom_stamp: float | None = None
    meeting_point: np.ndarray | None = None
    last_round_done: float | None = None
    last_speed: float = 0.0
    counters: dict = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))


def heard_at(now: float, stamp: float | None) -> float:
    """When a relay's message counts as sent: its stamp, or ``now`` (its receipt) if that is earlier or there is no
    stamp, so that a sender's clock ahead of ours never makes a message younger (``nearby_horizon_s``)."""
    return float(now if stamp is None else min(stamp, now))
