"""A robot core's side of the collision filter (no ROS): ``FilterAdapter`` turns one robot's goal and what it knows
of the others into the barrier-certificate filter's input (``consensus.control.avoidance.Avoidance``) and the
filter's output into the robot's command; it owns the honest d_min (``consensus.control.robot_core``, "Honest d_min"
and "Silent bodies"): ``neighbour_margins``, ``d_min`` for one robot and ``d_min_rows`` for a fleet's robots at once
(the fleet core's batched filter, ``consensus.control.fleet_core``). It reads the filter only through its public
attributes and ``batch_row``/``record``."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from consensus.control.robot_state import EMPTY, Nearby, RobotState

FRESH_AGE_S = 1.0       # a neighbour position older than this (plus link_delay_s) is a silent body's [s]


def neighbour_margins(ages, speeds, own_speed, body_v_max, fresh_s, bound):
    """What the filter adds to its distance at rest for each neighbour (``consensus.control.robot_core``, "Honest
    d_min" and "Silent bodies"): a position at most ``fresh_s`` old gets its age times the closing speed
    (``own_speed`` plus the neighbour's measured speed); an older one (a silent body) gets its own possible motion
    since it was sent, at least at ``body_v_max``, up to ``bound`` (``silent_bound_m``; or the margin it had when it
    turned silent, if larger). Negative ages and speeds count as 0. Arrays broadcast (the fleet core passes ``(n, 1)``
    own values)."""
    a = np.maximum(ages, 0.0)
    s = np.maximum(speeds, 0.0)
    closing = own_speed + s
    silent = np.minimum(a * (own_speed + np.maximum(s, body_v_max)), np.maximum(bound, fresh_s * closing))
    return np.where(a > fresh_s, silent, a * closing)


class FilterAdapter:
    """The filter ``avoid`` of the robot whose state is ``state``, as its core uses it. ``nearby_points``: the
    others' positions are their filtered points (a unicycle's near-identity points: the headless loop knows them),
    not their centres (the ROS ``state`` they broadcast); ``fresh_s``: a position older than it is a silent body's,
    whose keep-out grows up to ``silent_bound``."""

    def __init__(self, state: RobotState, avoid, dynamics, *, nearby_points: bool, fresh_s: float,
                 silent_bound: float) -> None:
        self.state, self.avoid, self.dynamics = state, avoid, dynamics
        # a unicycle filters its near-identity point: against the others' points (``nearby_points``) d_min is the
        # filter's; against their centres it is the clearance plus one offset, which keeps the wheel axes the
        # clearance apart
        self.nearby_points = bool(nearby_points)
        self.fresh_s, self.silent_bound = float(fresh_s), float(silent_bound)

    def nominal(self, ctrl, goal) -> tuple[np.ndarray, np.ndarray]:
        """The filtered point (the position; a unicycle's near-identity point, which goes to the goal by a P law with
        the point's speed limit) and its nominal velocity towards ``goal``."""
        st, av = self.state, self.avoid
        return self.dynamics.nominal(ctrl, st.pos, st.yaw, goal, offset=av.offset, point_v_max=av.point_v_max,
                                     kp=st.cfg.kp, deadband=st.cfg.deadband)

    def points_of(self, nearby: Nearby | None) -> np.ndarray:
        """The positions the filter keeps clear of, ``(k, d)``."""
        dim = self.state.dim
        return EMPTY[:, :dim] if nearby is None else np.asarray(nearby.positions, dtype=float)[:, :dim]

    def filter(self, point, nominal, nearby: Nearby | None) -> np.ndarray:
        """The filter's velocity for ``point`` from ``nominal``, keeping ``d_min(nearby)`` from each of ``nearby``."""
        return self.avoid.filter(point, nominal, self.points_of(nearby), d_min=self.d_min(nearby))

    def command(self, u) -> tuple[float, float, float]:
        """The robot's command ``(vx, vy, wz)`` from the filter's output ``u``; ``u``'s speed is the last speed."""
        st = self.state
        st.last_speed = float(np.linalg.norm(u))
        return self.dynamics.command(st.yaw, u, self.avoid.offset, self.avoid.cap, st.dim)

    def own_point(self) -> np.ndarray:
        """Where this robot counts among the others it knows (the slot assignment): its near-identity point for a
        unicycle that knows the others' points (``nearby_points``), else its position."""
        st = self.state
        if self.avoid is not None and self.nearby_points:
            return self.dynamics.filter_point(st.pos, st.yaw, self.avoid.offset)
        return st.pos

    def d_min_base(self) -> float:
        """The filter's distance to a neighbour at rest whose position is fresh (``d_min`` adds the rest)."""
        if self.avoid.offset and not self.nearby_points:
            return self.avoid.clearance_m + self.avoid.offset
        return self.avoid.d_min_m

    @property
    def body_v_max(self) -> float:
        """The speed a silent neighbour may have moved at: the fleet's limit, or this robot's if higher."""
        return max(float(self.state.cfg.v_max), self.state.v_max)

    def d_min(self, nearby: Nearby | None) -> np.ndarray | float:
        """Per neighbour: the filter's d_min plus the margin of its position's age (``neighbour_margins``: the
        honest d_min of a fresh position, a silent body's growing keep-out); ``d_min_rows`` is the same for a fleet's
        robots at once."""
        base = self.d_min_base()
        if nearby is None or not len(nearby.ages):
            return base
        return base + neighbour_margins(np.asarray(nearby.ages, dtype=float), np.asarray(nearby.speeds, dtype=float),
                                        self.state.last_speed, self.body_v_max, self.fresh_s, self.silent_bound)

    def keep_out(self, ages, speeds) -> np.ndarray:
        """The distance from silent bodies of these ages and speeds that no packing slot may lie within (the robot
        at rest: a slot is where it will stand)."""
        return self.d_min_base() + neighbour_margins(ages, speeds, 0.0, self.body_v_max, self.fresh_s,
                                                     self.silent_bound)

    def batch_row(self, dim: int) -> tuple[float, float, np.ndarray]:
        """This robot's share of a batched solve: ``Avoidance.batch_row``."""
        return self.avoid.batch_row(dim)

    def record(self, info) -> None:
        """Count a batched solve's outcome for this robot in its filter's counters."""
        self.avoid.record(info)


def d_min_rows(filters: Sequence[FilterAdapter], ages: np.ndarray, speeds: np.ndarray) -> np.ndarray:
    """``FilterAdapter.d_min`` of several robots at once: row r is ``filters[r]``'s distance to each neighbour whose
    position is ``ages[r, k]`` old and was moving at ``speeds[r, k]`` (the fleet core's batched filter)."""
    base = np.array([f.d_min_base() for f in filters])
    own = np.array([[f.state.last_speed, f.body_v_max, f.fresh_s, f.silent_bound] for f in filters])
    with np.errstate(invalid="ignore"):           # inf x 0 of an empty entry: never read
        return base[:, None] + neighbour_margins(ages, speeds, own[:, 0:1], own[:, 1:2], own[:, 2:3], own[:, 3:4])
