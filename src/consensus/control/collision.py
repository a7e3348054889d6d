"""Collision avoidance between robots: a barrier-certificate safety filter on velocity commands (no ROS).

Wang, Ames, Egerstedt, "Safety barrier certificates for collision-free multirobot systems", IEEE T-RO 33(3), 2017,
the filter of the Robotarium. The filter sits between a
controller's nominal command and the robot (``filter_velocity`` for one robot, ``filter_velocities`` for a whole
fleet in a headless loop or a simulator).

**The filter.** Each robot is a single integrator ``ṗ_i = u_i`` (dimension 1 or 2). Every pair must keep
``h_ij = |p_i - p_j|² - d_min² >= 0``. The certificate ``ḣ_ij >= -γ h_ij`` is split between the two robots:
*decentralised*, each robot takes half the responsibility and assumes that its neighbour filters its own command
the same way (a robot that does not, e.g. one outside the communication graph, breaks the guarantee). Robot i
sends the velocity closest to its nominal one (least squares) that satisfies, for each neighbour j it knows of,

    -2 (p_i - p_j)ᵀ u_i <= γ h_ij / 2,        |u_i| <= v_max.

**Discrete time.** Held for ``dt`` and computed by both robots from positions of the same instant, the two halves
add to ``2 p_ijᵀ (u_i - u_j) >= -γ h_ij``, so ``h(t + dt) = h + 2 dt p_ijᵀ Δu + dt² |Δu|² >= (1 - γ dt) h``:
with ``γ dt <= 1`` (``gamma <= 1 / dt``: 10 at 10 Hz) every sample keeps the pair ``d_min`` apart, not only the
continuous-time limit. A smaller ``γ`` brakes earlier and more gently (the default 1/s starts braking at about
``|p_ij| - d_min ≈ 2 v_max / γ`` for two robots approaching at full speed).

**Speed limit.** The fast paths below and the QP use the exact disc ``|u| <= v_max`` whenever its answer lies
inside it: the QP is first solved without the speed limit, and that result is the exact optimum when it is
within ``v_max`` (always so when ``|u_nom| <= v_max`` and every pair is at least ``d_min`` apart: projecting onto
a convex set that contains 0 never lengthens a vector). Otherwise the QP is solved again with the disc replaced
by the regular 16-gon *inscribed* in it (apothem ``v_max cos(π/16) ≈ 0.981 v_max``), so it stays linear and its
result never exceeds ``v_max``; then the robot may lose up to 1.9 % of its top speed. A final norm clamp removes
rounding. In 1-D the interval ``[-v_max, v_max]`` is exact.

**Solver and fast paths.** The QP is solved by DAQP (a dense dual active-set solver: exact active-set solutions in
10 to 50 µs for these two-variable problems). Before it, three exact shortcuts:

1. a row whose half-plane contains the whole speed disc (``2 |p_ij| v_max <= γ h_ij / 2``) can never bind and is
   dropped (far neighbours cost one distance each);
2. a nominal command that satisfies every row is returned unchanged (``nominal``); one that satisfies every row
   but is too fast is scaled onto the disc if that point still satisfies them (``scaled``);
3. with exactly one violated row, the projection onto its half-plane, ``u = u_nom - a (aᵀ u_nom - b) / |a|²``, is
   the QP's optimum whenever it satisfies the other rows and the speed limit (``closed_form``).

**Infeasible.** With every pair at least ``d_min`` apart, ``u = 0`` satisfies every row, so the QP always has a
solution. It can fail only when a pair is already closer than ``d_min`` (stale or wrong positions, a robot that
does not filter) and the rows ask for more separation speed than ``v_max`` allows: then the robot stops (zero
command) and the step is counted as ``infeasible``. A pair inside ``d_min`` whose rows are feasible is pushed
apart (``h`` recovers at the rate ``γ``).

**Unknown neighbours.** A neighbour position that is NaN (never received) is ignored: the robot cannot avoid what
it does not know of. A position that is *old* (delayed or dropped messages) is used as it is; the rule for the
margin that covers it is ``safety_distance(..., delay_s=τ)``: ``d_min`` grows by ``2 v_max τ`` for positions up to
``τ`` seconds old (each robot of the pair may have moved ``v_max τ`` since the other last heard of it). This rule
is checked by simulation (tests/test_collision_filter.py), not proven.

**Unicycles.** A differential-drive robot is filtered on its *near-identity point* ``q = p + l (cos θ, sin θ)``, a
point ``l`` ahead of the wheel axis, which is a single integrator under the transform
``v = cos θ u_x + sin θ u_y``, ``ω = (-sin θ u_x + cos θ u_y) / l`` (``unicycle_command``; the nominal ``u`` of a
unicycle controller's ``(v, ω)`` is ``point_velocity``). The wheel axes of two robots whose points are ``d`` apart
are at least ``d - 2 l`` apart, so ``d_min`` must include ``2 l`` (``safety_distance(..., offset=l)``). The
transform may ask for driving backwards and for ``|ω|`` up to ``v_max / l``: choose ``l >= v_max / w_max`` or the
robot's own yaw-rate cap bends the point's path away from the filtered one.

**Second order (the PID point mass of ``kinematics.PointMassPID``).** Filtering the commanded velocity set-point of
a robot that accelerates at most ``a_max`` is a first-order approximation: the robot still moves while it brakes.
Its braking distance ``v_max² / (2 a_max)`` is added to ``d_min`` once per robot of the pair
(``safety_distance(..., v_max=..., a_max=...)``). This is a margin, not a proof (a higher-order barrier would be).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import daqp
import numpy as np

from consensus.errors import ConfigError

#: sides of the regular polygon inscribed in the speed disc that the QP uses in 2-D
POLYGON_SIDES = 16
#: a candidate command satisfies a row when ``aᵀ u <= b + FEASIBILITY_TOL`` [m²/s]
FEASIBILITY_TOL = 1e-9
#: a command "changed" (an intervention) when some component moved by more than this [m/s]
INTERVENTION_TOL = 1e-9
#: a QP result that violates a row by more than this [m²/s] is treated as infeasible (never seen; a guard)
QP_CHECK_TOL = 1e-7
#: default clearance added to the two footprints [m]
DEFAULT_MARGIN_M = 0.05

METHODS = ("nominal", "scaled", "closed_form", "qp", "infeasible", "invalid")
NOMINAL, SCALED, CLOSED_FORM, QP, INFEASIBLE, INVALID = range(len(METHODS))


def _positive(name: str, value, *, allow_inf: bool = False) -> float:
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool) \
        and value > 0 and (allow_inf or math.isfinite(value))
    if not ok:
        raise ConfigError(f"collision filter: '{name}' must be a {'' if allow_inf else 'finite '}number > 0, "
                          f"got {value!r}")
    return float(value)


def _non_negative(name: str, value) -> float:
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool) \
        and math.isfinite(value) and value >= 0
    if not ok:
        raise ConfigError(f"collision filter: '{name}' must be a finite number >= 0, got {value!r}")
    return float(value)


def safety_distance(radius_i: float, radius_j: float | None = None, *, margin: float = DEFAULT_MARGIN_M,
                    offset: float = 0.0, v_max: float = 0.0, a_max: float = math.inf,
                    delay_s: float = 0.0) -> float:
    """``d_min`` [m] between the filtered points of two robots (``radius_j`` defaults to ``radius_i``).

    ``r_i + r_j + margin`` (footprints and clearance) ``+ 2 offset`` (unicycles filtered on points ``offset`` ahead
    of their wheel axes) ``+ v_max² / a_max`` (each robot's braking distance ``v_max² / (2 a_max)``, for robots
    that track a velocity set-point with bounded acceleration) ``+ 2 v_max delay_s`` (neighbour positions up to
    ``delay_s`` old). Module docstring: what each term covers.
    """
    r_i = _positive("radius_i", radius_i)
    r_j = r_i if radius_j is None else _positive("radius_j", radius_j)
    d = r_i + r_j + _non_negative("margin", margin) + 2.0 * _non_negative("offset", offset)
    v = _non_negative("v_max", v_max)
    a = _positive("a_max", a_max, allow_inf=True)
    if math.isfinite(a):
        d += v * v / a
    return d + 2.0 * v * _non_negative("delay_s", delay_s)


@dataclass(frozen=True)
class FilterInfo:
    """What ``filter_velocity`` did for one robot."""

    method: str             # one of METHODS
    intervened: bool        # the command changed by more than INTERVENTION_TOL
    neighbours: int         # neighbours with a known (finite) position
    rows: int               # of those, the ones whose constraint could bind within the speed limit
    min_distance_m: float   # distance to the nearest known neighbour (inf without one)

    @property
    def infeasible(self) -> bool:
        return self.method == "infeasible"


@dataclass(frozen=True)
class BatchInfo:
    """What ``filter_velocities`` did, per robot (arrays of length n)."""

    method: np.ndarray           # int codes into METHODS
    intervened: np.ndarray       # bool
    neighbours: np.ndarray       # int
    rows: np.ndarray             # int
    min_distance_m: np.ndarray   # float

    @property
    def infeasible(self) -> np.ndarray:
        return self.method == INFEASIBLE

    def robot(self, i: int) -> FilterInfo:
        return FilterInfo(METHODS[int(self.method[i])], bool(self.intervened[i]), int(self.neighbours[i]),
                          int(self.rows[i]), float(self.min_distance_m[i]))


@dataclass
class CollisionCounters:
    """Running totals of the filter over robot-steps (one robot's filtering in one control tick = one step)."""

    steps: int = 0
    interventions: int = 0       # commands changed by more than INTERVENTION_TOL
    infeasible: int = 0          # steps with no safe command: the robot was stopped
    invalid: int = 0             # steps with a non-finite own position: the robot was stopped
    qp_solves: int = 0           # steps that needed the QP (the others took a fast path)
    min_distance_m: float = math.inf   # nearest known neighbour ever seen by the filter

    def record(self, info: FilterInfo | BatchInfo) -> None:
        if isinstance(info, FilterInfo):
            self.steps += 1
            self.interventions += info.intervened
            self.infeasible += info.method == "infeasible"
            self.invalid += info.method == "invalid"
            self.qp_solves += info.method in ("qp", "infeasible")
            self.min_distance_m = min(self.min_distance_m, info.min_distance_m)
            return
        method, intervened, dist = info.method, info.intervened, info.min_distance_m
        self.steps += int(method.size)
        self.interventions += int(np.count_nonzero(intervened))
        self.infeasible += int(np.count_nonzero(method == INFEASIBLE))
        self.invalid += int(np.count_nonzero(method == INVALID))
        self.qp_solves += int(np.count_nonzero((method == QP) | (method == INFEASIBLE)))
        if dist.size:
            self.min_distance_m = min(self.min_distance_m, float(np.min(dist)))

    def as_dict(self) -> dict:
        return {"steps": self.steps, "interventions": self.interventions, "infeasible": self.infeasible,
                "invalid": self.invalid, "qp_solves": self.qp_solves,
                "min_distance_m": self.min_distance_m if math.isfinite(self.min_distance_m) else None}


_UNIT_POLYGONS = {1: (np.array([[1.0], [-1.0]]), np.ones(2))}
_ang = 2.0 * np.pi * np.arange(POLYGON_SIDES) / POLYGON_SIDES
_UNIT_POLYGONS[2] = (np.column_stack([np.cos(_ang), np.sin(_ang)]),
                     np.full(POLYGON_SIDES, math.cos(math.pi / POLYGON_SIDES)))


_EYE = {1: np.eye(1), 2: np.eye(2)}


def _daqp(a: np.ndarray, b: np.ndarray, u0: np.ndarray) -> np.ndarray | None:
    """argmin |u - u0|² s.t. ``a u <= b`` (DAQP); None if infeasible."""
    x, _, exitflag, _ = daqp.solve(_EYE[u0.size], -u0, np.ascontiguousarray(a), np.ascontiguousarray(b),
                                   primal_tol=1e-10)
    if exitflag < 1:
        return None
    x = np.array(x, dtype=float)
    return x if all(map(math.isfinite, x.tolist())) else None


def _solve_qp(a: np.ndarray, b: np.ndarray, u0: np.ndarray, v_max: float) -> np.ndarray | None:
    """argmin |u - u0|² s.t. ``a u <= b`` and the speed limit; None if infeasible.

    First without the speed limit: a result within ``v_max`` is then the exact optimum (always the case when
    ``|u0| <= v_max`` and every row admits ``u = 0``, since projecting onto a convex set that contains 0 never
    lengthens a vector). Otherwise again with the 16-gon inscribed in the speed disc."""
    x = _daqp(a, b, u0)
    if x is None:
        return None
    speed = math.sqrt(float(x @ x))
    if speed > v_max:
        poly_a, poly_b = _UNIT_POLYGONS[u0.size]
        x = _daqp(np.vstack([a, poly_a]), np.concatenate([b, v_max * poly_b]), u0)
        if x is None:
            return None
        speed = math.sqrt(float(x @ x))
        if speed > v_max:                   # rounding only: the polygon lies inside the disc
            x *= v_max / speed
    if float((a @ x - b).max()) > QP_CHECK_TOL:
        return None
    return x


def _safe_command(a: np.ndarray, b: np.ndarray, u0: np.ndarray, v_max: float) -> tuple[np.ndarray, int]:
    """One robot: its binding rows ``a (m, d) u <= b (m,)`` and finite nominal ``u0 (d,)`` -> (command, method)."""
    speed = math.sqrt(float(u0 @ u0))
    if a.shape[0] == 0:
        return (u0, NOMINAL) if speed <= v_max else (u0 * (v_max / speed), SCALED)
    # (array methods rather than np.* functions: this runs per robot per tick, where call overhead dominates)
    excess = a @ u0 - b
    n_viol = int((excess > 0).sum())
    if n_viol == 0:
        if speed <= v_max:
            return u0, NOMINAL
        us = u0 * (v_max / speed)           # the projection onto the disc, if it satisfies every row
        if (a @ us <= b + FEASIBILITY_TOL).all():
            return us, SCALED
    elif n_viol == 1:                       # the projection onto the one violated half-plane, if it is enough
        j = int(excess.argmax())
        aj = a[j]
        aa = float(aj @ aj)
        if aa > 0:
            uc = u0 - aj * (float(excess[j]) / aa)
            if float(uc @ uc) <= v_max * v_max and (a @ uc <= b + FEASIBILITY_TOL).all():
                return uc, CLOSED_FORM
    x = _solve_qp(a, b, u0, v_max)
    return (np.zeros_like(u0), INFEASIBLE) if x is None else (x, QP)


def _check_common(v_max: float, gamma: float) -> tuple[float, float]:
    return _positive("v_max", v_max), _positive("gamma", gamma)


def _check_d_min(d_min, shape: tuple[int, ...]) -> np.ndarray | float:
    if isinstance(d_min, (int, float)) and not isinstance(d_min, bool) and math.isfinite(d_min) and d_min > 0:
        return float(d_min)
    arr = np.asarray(d_min, dtype=float)
    if arr.ndim and arr.shape != shape:
        raise ValueError(f"collision filter: d_min must be a number or have shape {shape}, got {arr.shape}")
    if not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
        raise ConfigError(f"collision filter: 'd_min' must be finite numbers > 0, got {d_min!r}")
    return arr if arr.ndim else float(arr)


def filter_velocity(p_i, u_nom, neighbours_p, d_min, v_max: float, gamma: float = 1.0, *,
                    counters: CollisionCounters | None = None, bounds=None) -> tuple[np.ndarray, FilterInfo]:
    """The safe velocity of one robot (module docstring).

    ``p_i`` (d,) its position, ``u_nom`` (d,) its nominal world-frame velocity, ``neighbours_p`` (k, d) the
    positions it knows of its neighbours (NaN rows: unknown, ignored), ``d_min`` a number or one per neighbour
    (k,), ``v_max`` [m/s], ``gamma`` [1/s]. Returns ``(u (d,), FilterInfo)``; ``|u| <= v_max`` always. A
    non-finite own position gives a zero command (``invalid``); a non-finite ``u_nom`` is treated as zero.

    ``bounds`` = ``(lo (d,), hi (d,))``, optional: a box the point must stay in (the geofence less the footprint),
    as barrier rows too: ``h = hi - p >= 0`` and ``p - lo >= 0`` per axis, ``ḣ >= -γ h``, i.e. ``u_a <= γ (hi_a -
    p_a)`` and ``-u_a <= γ (p_a - lo_a)``. No command, filtered or not, then takes the robot out of the box (one
    outside is brought back in at the rate γ). With every pair at least ``d_min`` apart and the robot inside, ``u =
    0`` still satisfies every row, so the QP stays feasible.
    """
    v_max, gamma = _check_common(v_max, gamma)
    p = np.asarray(p_i, dtype=float)
    u = np.asarray(u_nom, dtype=float)
    if p.ndim != 1 or p.size not in (1, 2) or u.shape != p.shape:
        raise ValueError(f"collision filter: p_i and u_nom must both have shape (d,) with d 1 or 2, "
                         f"got {p.shape} and {u.shape}")
    nb = np.asarray(neighbours_p, dtype=float).reshape(-1, p.size)
    dm = _check_d_min(d_min, (nb.shape[0],))
    finite_nom = all(map(math.isfinite, u.tolist()))
    u0 = u if finite_nom else np.zeros_like(u)
    if not all(map(math.isfinite, p.tolist())):
        cmd, method, n_known, n_rows, nearest = np.zeros_like(u), INVALID, 0, 0, math.inf
    else:
        dp = p - nb
        dist2 = np.einsum("kd,kd->k", dp, dp)
        known = np.isfinite(dist2)
        if not known.all():
            dp, dist2 = dp[known], dist2[known]
            dm = dm[known] if isinstance(dm, np.ndarray) else dm
        b = (0.5 * gamma) * (dist2 - dm * dm)
        dist = np.sqrt(dist2)
        bind = 2.0 * v_max * dist > b
        a_rows, b_rows = -2.0 * dp[bind], b[bind]
        if bounds is not None:
            lo, hi = (np.asarray(x, dtype=float).reshape(p.size) for x in bounds)
            eye = np.eye(p.size)
            fa = np.vstack([eye, -eye])
            fb = gamma * np.concatenate([hi - p, p - lo])
            near = fb < v_max                     # a wall row can bind only within v_max / γ of the wall
            a_rows, b_rows = np.vstack([a_rows, fa[near]]), np.concatenate([b_rows, fb[near]])
        cmd, method = _safe_command(a_rows, b_rows, u0, v_max)
        n_known, n_rows = int(dist.size), int(len(b_rows))
        nearest = float(dist.min()) if dist.size else math.inf
    intervened = not finite_nom or any(abs(c - n) > INTERVENTION_TOL for c, n in zip(cmd.tolist(), u0.tolist()))
    info = FilterInfo(METHODS[method], intervened, n_known, n_rows, nearest)
    if counters is not None:
        counters.record(info)
    return cmd if cmd is not u else cmd.copy(), info


def filter_velocities(positions, u_nom, d_min, v_max: float, gamma: float = 1.0, *, known=None, neighbours=None,
                      counters: CollisionCounters | None = None) -> tuple[np.ndarray, BatchInfo]:
    """``filter_velocity`` for all n robots at once (the rows and the nominal check vectorised; each robot still
    uses only what it knows).

    ``positions`` (n, d): each robot's own position. ``u_nom`` (n, d). ``known`` (n, n, d), optional:
    ``known[i, j]`` is where robot i believes robot j is (delayed; NaN = unknown); default the true positions.
    ``neighbours`` (n, n) bool, optional: whom robot i takes into account (default everyone; the diagonal is
    ignored). ``d_min``: a number or (n, n). Returns ``(u (n, d), BatchInfo)``.
    """
    v_max, gamma = _check_common(v_max, gamma)
    pos = np.asarray(positions, dtype=float)
    u = np.asarray(u_nom, dtype=float)
    if pos.ndim != 2 or pos.shape[1] not in (1, 2) or u.shape != pos.shape:
        raise ValueError(f"collision filter: positions and u_nom must both have shape (n, d) with d 1 or 2, "
                         f"got {pos.shape} and {u.shape}")
    n, dim = pos.shape
    others = pos[None, :, :] if known is None else np.asarray(known, dtype=float)
    if known is not None and others.shape != (n, n, dim):
        raise ValueError(f"collision filter: known must have shape {(n, n, dim)}, got {others.shape}")
    mask = np.ones((n, n), bool) if neighbours is None else np.array(neighbours, dtype=bool)
    if mask.shape != (n, n):
        raise ValueError(f"collision filter: neighbours must have shape {(n, n)}, got {mask.shape}")
    np.fill_diagonal(mask, False)
    dm = _check_d_min(d_min, (n, n))
    valid = np.all(np.isfinite(pos), axis=1)
    finite_nom = np.all(np.isfinite(u), axis=1)
    u0 = np.where(finite_nom[:, None], u, 0.0)

    dp = np.where(valid[:, None], pos, 0.0)[:, None, :] - others
    with np.errstate(invalid="ignore"):
        dist2 = np.einsum("nkd,nkd->nk", dp, dp)
    has = mask & valid[:, None] & np.isfinite(dist2)
    dist2 = np.where(has, dist2, np.inf)
    dist = np.sqrt(dist2)
    b = (0.5 * gamma) * (dist2 - dm * dm)
    bind = has & (2.0 * v_max * dist > b)
    excess = -2.0 * np.einsum("nkd,nd->nk", np.where(bind[:, :, None], dp, 0.0), u0) - b
    speed = np.linalg.norm(u0, axis=1)
    nominal = ~np.any(bind & (excess > 0), axis=1) & (speed <= v_max)

    out = u0.copy()
    method = np.full(n, NOMINAL)
    method[~valid] = INVALID
    out[~valid] = 0.0
    for i in np.flatnonzero(valid & ~nominal):
        sel = bind[i]
        out[i], method[i] = _safe_command(-2.0 * dp[i, sel], b[i, sel], u0[i], v_max)
    intervened = ~finite_nom | np.any(np.abs(out - u0) > INTERVENTION_TOL, axis=1)
    info = BatchInfo(method, intervened, np.count_nonzero(has, axis=1), np.count_nonzero(bind, axis=1),
                     np.min(dist, axis=1))
    if counters is not None:
        counters.record(info)
    return out, info


# -- unicycles: the near-identity point -------------------------------------------------------------------------

def _offset(offset: float) -> float:
    return _positive("offset", offset)


def near_identity_point(pose, offset: float) -> np.ndarray:
    """The point ``offset`` [m] ahead of the wheel axis: pose(s) ``(..., 3)`` = (x, y, yaw) -> ``(..., 2)``."""
    pose = np.asarray(pose, dtype=float)
    if pose.shape[-1:] != (3,):
        raise ValueError(f"pose must have shape (..., 3), got {pose.shape}")
    l_ = _offset(offset)
    return pose[..., :2] + l_ * np.stack([np.cos(pose[..., 2]), np.sin(pose[..., 2])], axis=-1)


def point_velocity(yaw, v, w, offset: float) -> np.ndarray:
    """World velocity ``(..., 2)`` of the near-identity point of a unicycle driving at ``(v, ω)``: the nominal
    ``u`` to filter when the nominal command comes from a unicycle controller."""
    yaw, v, w = (np.asarray(x, dtype=float) for x in (yaw, v, w))
    l_ = _offset(offset)
    c, s = np.cos(yaw), np.sin(yaw)
    return np.stack([c * v - s * l_ * w, s * v + c * l_ * w], axis=-1)


def unicycle_command(yaw, u, offset: float) -> tuple[np.ndarray | float, np.ndarray | float]:
    """``(v, ω)`` that moves the near-identity point at the world velocity ``u (..., 2)``:
    ``v = cos θ u_x + sin θ u_y``, ``ω = (-sin θ u_x + cos θ u_y) / l``. Scalars in, floats out."""
    yaw = np.asarray(yaw, dtype=float)
    u = np.asarray(u, dtype=float)
    if u.shape[-1:] != (2,):
        raise ValueError(f"u must have shape (..., 2), got {u.shape}")
    l_ = _offset(offset)
    c, s = np.cos(yaw), np.sin(yaw)
    v = c * u[..., 0] + s * u[..., 1]
    w = (-s * u[..., 0] + c * u[..., 1]) / l_
    if np.ndim(v) == 0:
        return float(v), float(w)
    return v, w
