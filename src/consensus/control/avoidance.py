"""Collision avoidance as the controllers use it (no ROS): the control group's settings
(``consensus.settings.ControlParams``: ``collision_avoidance``, ``safety_margin_m``, ``cbf_gamma``,
``footprint_radius_m``) turned into the barrier-certificate filter of ``consensus.control.collision``, between a
controller's nominal command and the robot, in each kinematics:

* ``single_integrator``: the world-frame velocity is filtered as it is;
* ``unicycle``: the robot is filtered on its near-identity point ``l = v_max / w_max`` ahead of the wheel axis
  (``l`` so the point's speed limit never asks for more than ``w_max``). The controller's ``(v, ω)`` becomes the
  point's velocity, is filtered with the point's speed limit ``hypot(v_max, l w_max)`` (which every nominal command
  meets: a command far from everyone passes unchanged), and goes back to ``(v, ω)``; when that asks for more than
  ``v_max`` or ``w_max`` both are scaled down together (a scaled command stays safe: every pair's constraint admits
  the zero command, so it admits every point between it and the filtered one);
* ``point_mass_pid`` (paper 1's 15 kg mass, ``kinematics.PointMassPID``): the velocity set-point is filtered and
  ``d_min`` grows by the braking distance ``v_max² / a_max`` with ``a_max`` = the mass's force limit / mass.

Distances (module ``collision``): ``clearance_m = r_i + r_j + safety_margin_m`` is what the filter keeps between
the robots' centres (their footprints plus the margin): the *d_min* that summaries and tests check.
``d_min_m`` is the distance the filter keeps between its points: ``clearance_m`` plus ``2 l`` (unicycles), the
braking distance (point mass) and ``2 v τ`` for neighbour positions up to ``delay_s`` = τ old (a fixed worst case,
0 by default: the robot core adds instead, per neighbour and tick, that position's measured age times the pair's
measured closing speed, ``consensus.control.robot_core``). A robot does not know its neighbours' footprints:
``r_j`` is the largest footprint of the fleet (``fleet_radius``).
"""
from __future__ import annotations


import numpy as np

from consensus.control.collision import (CollisionCounters, filter_velocities, filter_velocity,
                                         near_identity_point, point_velocity, safety_distance, unicycle_command)
from consensus.control.dynamics import dynamics_of


class Avoidance:
    """The filter of one robot (``filter``/``filter_unicycle``) or of a whole fleet that knows every position
    (``filter_batch``/``filter_batch_unicycle``, headless loops); counts into ``counters``."""

    def __init__(self, *, kinematics: str, v_max: float, w_max: float, gamma: float, margin: float, radius: float,
                 fleet_radius: float | None = None, delay_s: float = 0.0, fence=None) -> None:
        self.kinematics = kinematics
        self.dynamics = dynamics_of(kinematics)
        self.gamma = float(gamma)
        self.unicycle = self.dynamics.turns
        self._radii = (float(radius), float(radius if fleet_radius is None else max(radius, fleet_radius)))
        self._margin = float(margin)
        self.clearance_m = float(sum(self._radii) + margin)
        self.delay_s = float(delay_s)
        self.counters = CollisionCounters()
        self.set_limits(v_max, w_max)
        # the geofence less the footprint (and a unicycle's offset): the filtered point's box, a barrier too
        self.bounds = None
        self._fence = None if fence is None else tuple(np.asarray(x, dtype=float) for x in fence)
        if self._fence is not None:
            self._set_bounds()

    def set_limits(self, v_max: float, w_max: float) -> None:
        """The speed limits (at start, and when ``v_max``/``w_max`` change at run time): the unicycle's offset
        ``l = v_max / w_max``, the filtered point's speed limit and ``d_min`` follow them."""
        self.v_max, self.w_max = float(v_max), float(w_max)
        self.offset = self.dynamics.offset(self.v_max, self.w_max)
        self.point_v_max = self.dynamics.point_v_max(self.v_max, self.w_max)     # the filtered point's speed limit
        a_max = self.dynamics.a_max
        self.d_min_m = safety_distance(*self._radii, margin=self._margin, offset=self.offset, v_max=self.point_v_max,
                                       a_max=a_max, delay_s=self.delay_s)
        if getattr(self, "_fence", None) is not None:
            self._set_bounds()

    def _set_bounds(self) -> None:
        """``bounds``: the geofence less the body (the footprint, plus a unicycle's offset: its filtered point is
        ``l`` ahead of its centre), the box the filter keeps the robot's point in. An axis narrower than the body
        (``2 (r + l)``: no point of it keeps the whole body inside) has no wall rows (``-inf, inf``); it never takes
        the other axes' walls with it, and it is counted: ``counters.open_axes`` (every step filtered while it is
        not 0 is ``unwalled``). The configs refuse such a fence (``consensus.robots.map.check_fence``); it can still
        come at run time, when ``v_max``/``w_max`` change a unicycle's offset."""
        inset = self._radii[0] + self.offset
        lo, hi = self._fence
        narrow = hi - lo < 2 * inset
        self.bounds = (np.where(narrow, -np.inf, lo + inset), np.where(narrow, np.inf, hi - inset))
        self.counters.open_axes = int(np.count_nonzero(narrow))

    def box(self, fence_lo, fence_hi) -> tuple[np.ndarray, np.ndarray]:
        """The box the filter keeps a robot's point in: ``bounds`` (the geofence less the body), or for a filter made
        without a fence the fence ``[fence_lo, fence_hi]`` less half the clearance."""
        if self.bounds is not None:
            lo, hi = self.bounds
            return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
        c = 0.5 * self.clearance_m
        return np.asarray(fence_lo, dtype=float) + c, np.asarray(fence_hi, dtype=float) - c

    def batch_row(self, dim: int):
        """This robot's share of a batched solve (``collision.filter_velocity_many``, the fleet core): its filtered
        point's speed limit, ``gamma`` and its box ``(lo, hi)`` (``bounds``; NaN rows ``(2, dim)``: no box)."""
        return self.point_v_max, self.gamma, self.bounds if self.bounds is not None else np.full((2, dim), np.nan)

    def record(self, info) -> None:
        """Count a solve made outside this filter (one robot's ``info`` of a batched solve) in ``counters``."""
        self.counters.record(info)

    # ------------------------------------------------------------------ one robot (ROS robot base)
    def filter(self, pos, u_nom, neighbours, d_min=None) -> np.ndarray:
        """A world-frame velocity ``(d,)`` for the robot at ``pos`` from its nominal one and the positions
        ``(k, d)`` it knows of the others; ``d_min``: one per neighbour (the robot core adds each position's age
        margin, ``consensus.control.robot_core``), default ``d_min_m``."""
        u, _ = filter_velocity(pos, u_nom, neighbours, self.d_min_m if d_min is None else d_min, self.point_v_max,
                               self.gamma, counters=self.counters, bounds=self.bounds)
        return u

    def filter_unicycle(self, pose, v: float, w: float, neighbours) -> tuple[float, float]:
        """``(v, ω)`` for the unicycle at ``pose`` = (x, y, yaw) from its nominal ``(v, ω)`` (module docstring)."""
        pose = np.asarray(pose, dtype=float)
        point = near_identity_point(pose, self.offset)
        u_nom = point_velocity(pose[2], v, w, self.offset)
        u = self.filter(point, u_nom, neighbours)
        v2, w2 = unicycle_command(pose[2], u, self.offset)
        return self.cap(v2, w2)

    def cap(self, v, w):
        """A turning command ``(v, ω)`` scaled (its turn kept) into ``v_max`` and ``w_max``."""
        scale = np.minimum(1.0, np.minimum(self.v_max / np.maximum(np.abs(v), 1e-300),
                                           self.w_max / np.maximum(np.abs(w), 1e-300)))
        if np.ndim(scale) == 0:
            return float(v * scale), float(w * scale)
        return v * scale, w * scale

    # ------------------------------------------------------------------ a fleet that knows every position
    def filter_batch(self, positions, u_nom, known=None) -> np.ndarray:
        """World-frame velocities ``(n, d)`` of every robot (each filters its own command; ``known``: what each
        robot believes the others' positions are, default the true ones)."""
        u, _ = filter_velocities(positions, u_nom, self.d_min_m, self.point_v_max, self.gamma, known=known,
                                 counters=self.counters)
        return u

    def filter_batch_unicycle(self, pose, v, w) -> tuple[np.ndarray, np.ndarray]:
        """``(v, ω)`` of every unicycle ``pose (n, 3)`` from the nominal ones, every robot filtering on its
        near-identity point against the others' near-identity points."""
        pose = np.asarray(pose, dtype=float)
        points = near_identity_point(pose, self.offset)
        u = self.filter_batch(points, point_velocity(pose[:, 2], v, w, self.offset))
        v2, w2 = unicycle_command(pose[:, 2], u, self.offset)
        return self.cap(v2, w2)

    def info(self) -> dict:
        """What a run's summary and a robot's status report: the distances and the counters."""
        return {"clearance_m": self.clearance_m, "d_min_m": self.d_min_m, "offset_m": self.offset,
                "gamma": self.gamma, "delay_s": self.delay_s, **self.counters.as_dict()}


def sum_collision(records: list[dict]) -> dict:
    """The fleet's totals of several robots' ``Avoidance.info()`` records (steps, interventions, infeasible,
    invalid, qp_solves, unwalled summed; min_distance_m the smallest)."""
    out = {k: int(sum(r.get(k) or 0 for r in records)) for k in ("steps", "interventions", "infeasible", "invalid",
                                                                 "qp_solves", "unwalled")}
    mins = [r["min_distance_m"] for r in records if isinstance(r.get("min_distance_m"), (int, float))]
    out["min_distance_m"] = min(mins) if mins else None
    return out


def avoidance_from_config(cfg, *, ros: bool, kinematics: str | None = None, v_max: float | None = None,
                          w_max: float | None = None, radius: float | None = None,
                          fleet_radius: float | None = None, delay_s: float = 0.0, workspace=None) -> Avoidance | None:
    """The filter of a robot of ``cfg`` (a config with the control group), or None when the rule of
    ``ControlParams.resolved_collision_avoidance(ros=...)`` says ``none``. ``kinematics``, ``v_max``, ``w_max``,
    ``radius`` default to the config's (a robots file's entry passes its preset's). The config's ``workspace``
    (the geofence; ``workspace`` instead for a config without one, e.g. a disaster run's grid) less the footprint
    binds the filter too (``filter_velocity``'s ``bounds``)."""
    if cfg.resolved_collision_avoidance(ros=ros) != "cbf":
        return None
    r = cfg.footprint_radius_m if radius is None else radius
    fence = None
    workspace = getattr(cfg, "workspace", None) if workspace is None else workspace
    if workspace is not None and len(workspace) in (2, 4):
        ws = np.asarray(workspace, dtype=float).reshape(-1, 2)
        fence = (ws[:, 0], ws[:, 1])
    return Avoidance(kinematics=kinematics or cfg.kinematics, v_max=cfg.v_max if v_max is None else v_max,
                     w_max=cfg.w_max if w_max is None else w_max, gamma=cfg.cbf_gamma, margin=cfg.safety_margin_m,
                     radius=r, fleet_radius=fleet_radius, delay_s=delay_s, fence=fence)


def within_reach(own, own_age, others, others_age, *, d_min: float, v_max: float, horizon_s: float) -> np.ndarray:
    """Which of ``others`` (k, d) a robot at ``own`` (d,) can meet within ``horizon_s``: those whose distance is at
    most ``d_min + v_max own_age + 2 v_max others_age + 2 v_max horizon_s``. Each position may be ``age`` [s] old
    (``v_max`` each); the filter widens its distance to a neighbour by the neighbour's age times the pair's closing
    speed (one more ``v_max`` on the other's age, ``consensus.control.robot_core``); and the pair may close at
    ``2 v_max`` for the horizon. A robot outside it cannot become one of the filter's constraints before the horizon
    ends: with ``γ dt <= 1`` a pair that enters the filter's set at a distance above its ``d_min`` is kept apart from
    then on (``consensus.control.collision``). ``own`` unknown (not finite): every one of them (a robot is never
    left without the others because its own position is missing). ``v_max``: the fastest filtered point's speed
    (a unicycle's near-identity point is faster than its centre)."""
    own = np.asarray(own, dtype=float).reshape(-1)
    if not len(others_age):
        return np.zeros(0, bool)
    others = np.asarray(others, dtype=float).reshape(len(others_age), -1)
    if not np.all(np.isfinite(own)) or not np.isfinite(own_age):
        return np.ones(len(others), bool)
    reach = d_min + v_max * (max(float(own_age), 0.0) + 2.0 * np.maximum(np.asarray(others_age, dtype=float), 0.0)) \
        + 2.0 * v_max * horizon_s
    d = np.linalg.norm(others - own[: others.shape[1]], axis=1)
    return d <= reach
