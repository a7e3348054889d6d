"""How far a robot's collision filter reaches (no ROS): the other robots that can change its command.

The ``nearby`` relay (``consensus.ros.nearby``) sends each robot only the robots within this reach, so its traffic
grows with the neighbours in reach, not with n². The rule is exact: robot i's filtered command with the robots in
reach is the one it would compute with every robot (tests/test_nearby_reach.py checks it to 1e-9 on random scenes,
single integrators and unicycles), as long as the message is used for at most ``horizon_s`` after its stamp.

**When a neighbour's row binds.** Robot i's filter (``consensus.control.collision.filter_velocity``) drops the row of
a neighbour at distance ``dist`` from its filtered point whenever the row's half-plane holds the whole speed disc,
``2 V dist <= b`` with ``b = γ/2 (dist² - d²)``: a dropped row cannot change the command (``V``: the filter's speed
limit, ``d``: the distance it keeps from that neighbour). That is the case for every ``dist >= R(d)``, with
``R(d) = 2V/γ + sqrt((2V/γ)² + d²)`` (``binding_distance``; about 4 m at the defaults: v_max 1 m/s, γ 1/s).

**The pair (i, j) at the relay's stamp T.** The message carries j's position ``x_j`` as the relay holds it, its age
``A_j`` and measured speed ``s_j``; robot i uses it at ticks up to ``T + H`` (``H = horizon_s``). At such a tick:

* ``d`` is what the robot core makes of it (``RobotCore._d_min``): the robot's base distance (``Avoidance.d_min_m``;
  for a unicycle, which filters its point against the others' centres, the clearance plus one offset) plus the age
  at decoding (``<= A_j + H``) times the robot's own last speed (``<= V``) plus ``s_j``. So ``d <= d_ij = base_i +
  (A_j + H) (V_i + s_j)``, and ``R`` grows with ``d``;
* robot i's filtered point is within ``l_i + c_i (A_i + H) + slack`` of its own position ``x_i`` as the relay last
  heard it, ``A_i`` ago (``l``: a unicycle's near-identity offset, 0 otherwise; ``c``: its body's speed limit;
  ``slack``: a localisation jump the robot core still accepts, ``plausibility.JUMP_SLACK_M``, which also covers the
  age of the odometry a state was taken from);
* ``x_j`` itself does not move: robot i compares its point with the position the message carries, so j's motion
  enters only through the age term of ``d``.

So j can bind for i only when ``|x_i - x_j| < R_i(d_ij) + l_i + c_i (A_i + H) + slack``: the reach (``reach_mask``,
which pads it by ``PAD`` for the wire's float32 ages and speeds). A robot the relay has no position of, or distrusts,
gets every robot (its caller's rule).

**The horizon.** A message is used from its arrival until the next one arrives: one control period, plus the
transit and the robot's timer phase (another period), plus one period for a late or lost message:
``H = 3 × control_period_s`` by default (``HORIZON_PERIODS``). A robot that keeps using a message longer (the relay
stalls for more than two periods) may meet, until the next message, a robot left out of it whose row would have
bound; it is then still ``R - d`` (metres, about 4 m at the defaults) beyond the filter's distance when it entered
the reach. The rule assumes one clock (sim time, or synchronised clocks): a robot whose clock runs ahead of the
relay's ages every position by the skew.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: the default horizon in control periods (module docstring)
HORIZON_PERIODS = 3
#: relative and absolute padding of the reach: the wire's float32 ages and speeds, rounding
PAD = 1e-6


def binding_distance(d_min, v_max, gamma):
    """``R(d)`` [m]: the distance from which a neighbour's row of the filter never binds (module docstring);
    vectorised over its arguments."""
    k = 2.0 * np.asarray(v_max, dtype=float) / np.asarray(gamma, dtype=float)
    return k + np.sqrt(k * k + np.square(np.asarray(d_min, dtype=float)))


def core_base_d_min(avoid, nearby_points: bool = False) -> float:
    """The distance a robot core keeps from a neighbour whose position has age 0 (``RobotCore._d_min``): the
    filter's ``d_min_m``, or for a unicycle that filters its point against the others' centres (``nearby_points``
    False: the ROS robots) the clearance plus one offset."""
    if avoid.offset and not nearby_points:
        return float(avoid.clearance_m + avoid.offset)
    return float(avoid.d_min_m)


@dataclass(frozen=True)
class FilterReach:
    """The reach of each robot's filter (arrays ``(n,)``): ``base_m`` (``core_base_d_min``), ``point_v`` (the
    filter's speed limit ``V``, which bounds the robot's own last speed too), ``body_v`` (the speed limit of the
    robot's position, ``c``), ``offset_m`` (``l``), ``gamma``; ``horizon_s`` (``H``), ``slack_m``. A robot with
    ``base_m`` inf (no filter) reaches everyone."""

    base_m: np.ndarray
    point_v: np.ndarray
    body_v: np.ndarray
    offset_m: np.ndarray
    gamma: np.ndarray
    horizon_s: float
    slack_m: float = 0.0

    @classmethod
    def of(cls, avoids: Sequence, *, horizon_s: float, slack_m: float = 0.0,
           nearby_points: bool = False) -> FilterReach:
        """From each robot's ``consensus.control.avoidance.Avoidance`` (None: a robot without the filter)."""
        rows = []
        for av in avoids:
            if av is None:
                rows.append((math.inf, 0.0, 0.0, 0.0, 1.0))
                continue
            body_v = av.v_max if av.unicycle else av.point_v_max
            rows.append((core_base_d_min(av, nearby_points), av.point_v_max, body_v, av.offset, av.gamma))
        base, point_v, body_v, offset, gamma = (np.array(col, dtype=float).reshape(len(rows))
                                                for col in zip(*rows)) if rows else (np.empty(0),) * 5
        if not (math.isfinite(horizon_s) and horizon_s >= 0 and math.isfinite(slack_m) and slack_m >= 0):
            raise ValueError(f"reach: horizon_s and slack_m must be finite and >= 0, got {horizon_s}, {slack_m}")
        return cls(base, point_v, body_v, offset, gamma, float(horizon_s), float(slack_m))

    def reach(self, own_age, age, speed) -> np.ndarray:
        """``(n, n)`` [m]: how far from robot i's position, as the relay holds it (``own_age (n,)`` old), robot j's
        position (``age (n, n)`` old, speed ``speed (n, n)``, as robot i's message carries them) can bind robot i's
        filter before ``horizon_s`` has passed (module docstring). NaN ages or speeds give inf."""
        h = self.horizon_s
        own_age = np.asarray(own_age, dtype=float)
        age = np.maximum(np.asarray(age, dtype=float), 0.0)
        speed = np.maximum(np.asarray(speed, dtype=float), 0.0)
        col = (slice(None), None)
        with np.errstate(invalid="ignore"):
            d = self.base_m[col] + (age + h) * (self.point_v[col] + speed)
            r = (binding_distance(d, self.point_v[col], self.gamma[col]) + self.offset_m[col]
                 + self.body_v[col] * (np.maximum(own_age, 0.0)[col] + h) + self.slack_m)
        return np.where(np.isnan(r), np.inf, r)

    def mask(self, own_xy, own_age, xy, age, speed) -> np.ndarray:
        """``(n, n)`` bool: whether robot j (``xy (n, n, d)``: robot i's copy of its position) lies within robot
        i's reach (``reach``) of robot i's position ``own_xy (n, d)``. Unknown (NaN) own positions or ages: every
        robot."""
        own_xy = np.asarray(own_xy, dtype=float)
        xy = np.asarray(xy, dtype=float)
        with np.errstate(invalid="ignore"):
            dist = np.sqrt(np.sum(np.square(xy - own_xy[:, None, :]), axis=-1))
            r = self.reach(own_age, age, speed)
            inside = dist < r * (1.0 + PAD) + PAD
        unknown = ~(np.isfinite(own_xy).all(axis=1) & np.isfinite(np.asarray(own_age, dtype=float)))
        inside[unknown] = True
        return inside
