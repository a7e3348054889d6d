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
10 to 50 µs for these two-variable problems; ``filter_velocity_many`` and ``filter_velocities`` solve the QPs of
all their robots together with an exact batched dual active-set instead). Before it, three exact shortcuts:

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
is checked by simulation (tests/unit/control/test_collision_filter.py), not proven.

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
from consensus.extras import optional

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
    """Running totals of the filter over robot-steps (one robot's filtering in one control tick = one step).

    ``open_axes`` is not a total: the number of the fence's axes on which the filter has no wall rows because the
    fence less the body is empty there (an axis narrower than ``2 (r + l)``; the configs refuse one,
    ``consensus.robots.map.check_fence``, but a unicycle's offset ``l = v_max / w_max`` may grow at run time). Its
    owner (``consensus.control.avoidance.Avoidance``) sets it; every step recorded while it is not 0 counts as
    ``unwalled``, so a robot that drives without its walls is never silent about it."""

    steps: int = 0
    interventions: int = 0       # commands changed by more than INTERVENTION_TOL
    infeasible: int = 0          # steps with no safe command: the robot was stopped
    invalid: int = 0             # steps with a non-finite own position: the robot was stopped
    qp_solves: int = 0           # steps that needed the QP (the others took a fast path)
    min_distance_m: float = math.inf   # nearest known neighbour ever seen by the filter
    unwalled: int = 0            # steps filtered without the wall rows of ``open_axes`` axes
    open_axes: int = 0           # the axes without wall rows now (set by the filter's owner; not a total)

    def record(self, info: FilterInfo | BatchInfo) -> None:
        if isinstance(info, FilterInfo):
            self.steps += 1
            self.unwalled += self.open_axes > 0
            self.interventions += info.intervened
            self.infeasible += info.method == "infeasible"
            self.invalid += info.method == "invalid"
            self.qp_solves += info.method in ("qp", "infeasible")
            self.min_distance_m = min(self.min_distance_m, info.min_distance_m)
            return
        method, intervened, dist = info.method, info.intervened, info.min_distance_m
        self.steps += int(method.size)
        if self.open_axes:
            self.unwalled += int(method.size)
        self.interventions += int(np.count_nonzero(intervened))
        self.infeasible += int(np.count_nonzero(method == INFEASIBLE))
        self.invalid += int(np.count_nonzero(method == INVALID))
        self.qp_solves += int(np.count_nonzero((method == QP) | (method == INFEASIBLE)))
        if dist.size:
            self.min_distance_m = min(self.min_distance_m, float(np.min(dist)))

    def as_dict(self) -> dict:
        return {"steps": self.steps, "interventions": self.interventions, "infeasible": self.infeasible,
                "invalid": self.invalid, "qp_solves": self.qp_solves,
                "min_distance_m": self.min_distance_m if math.isfinite(self.min_distance_m) else None,
                "unwalled": self.unwalled, "open_axes": self.open_axes}


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
    0`` still satisfies every row, so the QP stays feasible. An infinite bound (``-inf``/``inf`` on an axis) has no
    wall row: the filter's owner leaves an axis narrower than the body open that way, counted
    (``CollisionCounters.open_axes``).
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


def _fleet_arrays(positions, u_nom, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A fleet's positions and nominal velocities as float arrays, both ``(n, d)`` with d 1 or 2 (else ValueError)."""
    pos = np.asarray(positions, dtype=float)
    u = np.asarray(u_nom, dtype=float)
    if pos.ndim != 2 or pos.shape[1] not in (1, 2) or u.shape != pos.shape:
        raise ValueError(f"collision filter: {name} and u_nom must both have shape (n, d) with d 1 or 2, "
                         f"got {pos.shape} and {u.shape}")
    return pos, u


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
    pos, u = _fleet_arrays(positions, u_nom, "positions")
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
    rest = np.flatnonzero(valid & ~nominal)
    if rest.size:                                   # their QPs together (filter_velocity_many)
        ii, jj, slot, m = _compact(bind[rest])
        a_rows = np.zeros((rest.size, m, dim))
        a_rows[ii, slot] = -2.0 * dp[rest[ii], jj]
        b_rows = np.full((rest.size, m), np.inf)
        b_rows[ii, slot] = b[rest[ii], jj]
        out[rest], method[rest] = _safe_commands(a_rows, b_rows, u0[rest], np.full(rest.size, v_max))
    intervened = ~finite_nom | np.any(np.abs(out - u0) > INTERVENTION_TOL, axis=1)
    info = BatchInfo(method, intervened, np.count_nonzero(has, axis=1), np.count_nonzero(bind, axis=1),
                     np.min(dist, axis=1))
    if counters is not None:
        counters.record(info)
    return out, info


# -- the filter of many robots at once (issue 29) ----------------------------------------------------------------

#: GI's primal step ``z`` is zero (the new row's normal lies in the span of the active normals) when
#: ``|z|² <= _SPAN_TOL |a_p|²``
_SPAN_TOL = 1e-20
#: a row counts as satisfied by the batched active-set when ``aᵀ u - b <= _QP_PRIMAL_TOL`` (DAQP's primal_tol)
_QP_PRIMAL_TOL = 1e-10
#: iterations of the batched active-set before the unfinished robots go to DAQP one by one (a guard)
_QP_MAX_ITER = 100
#: the batched QP compiled by numba (``_active_set_kernel``); False: the numpy version (``_batch_active_set``)
COMPILED_QP = True


def _compact(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The rows ``mask (n, k)`` selects, each robot's first: ``(i, j, slot, m)``, row ``(i, j)`` goes to
    ``(i, slot)`` of an ``(n, m)`` array."""
    counts = np.count_nonzero(mask, axis=1)
    ii, jj = np.nonzero(mask)
    slot = np.arange(ii.size) - np.repeat(np.cumsum(counts) - counts, counts)
    return ii, jj, slot, int(counts.max()) if counts.size else 0


def _batch_active_set(a: np.ndarray, b: np.ndarray, u0: np.ndarray, start=None):
    """``argmin |u - u0|² s.t. a u <= b`` for q problems at once, ``a (q, m, 2)``, ``b (q, m)`` (padding rows:
    ``a = 0, b = inf``), ``u0 (q, 2)``: the dual active-set method of Goldfarb and Idnani with ``H = I``.

    From the unconstrained optimum ``u0`` (or ``start = (u, active, multipliers)``, an earlier call's optimum for
    a subset of the rows), add a violated row ``p`` (the farthest from its half-plane): the primal step is along
    ``z = P a_p`` (``P`` projects onto the null space of the active normals), the active multipliers move by
    ``-t r`` with ``N r = a_p - z``; a full step (``a_pᵀ u = b_p``) makes ``p`` active, a partial one (an active
    multiplier reaches zero first) drops that row and tries ``p`` again. In 2-D at most two (independent) rows
    are active. No step possible (``z = 0`` and no ``r_j > 0``) with ``p`` violated: infeasible (so a violated
    zero row, ``0ᵀ u <= b < 0``, is infeasible, as DAQP decides it). Every unfinished robot takes one step per
    iteration. Returns ``(u, feasible, done, active, multipliers)``; robots not done after ``_QP_MAX_ITER``
    iterations are left to the caller."""
    q, m, _ = a.shape
    aa = np.einsum("qmd,qmd->qm", a, a)
    with np.errstate(divide="ignore"):
        scale = np.where(aa > 0, 1.0 / np.sqrt(aa), 1e150)   # a violated zero row is tried first
    if start is None:
        u, act, lam = u0.copy(), np.full((q, 2), -1), np.zeros((q, 2))
    else:
        u, act, lam = (np.array(x) for x in start)
    is_act = np.zeros((q, m), bool)
    for slot in (0, 1):
        has = np.flatnonzero(act[:, slot] >= 0)
        is_act[has, act[has, slot]] = True
    pend, lam_p = np.full(q, -1), np.zeros(q)
    done, feasible = np.zeros(q, bool), np.ones(q, bool)
    for _ in range(_QP_MAX_ITER):
        need = np.flatnonzero((pend < 0) & ~done)
        if need.size:                                   # optimal, or the next row to add
            s = np.einsum("qmd,qd->qm", a[need], u[need]) - b[need]
            viol = (s > _QP_PRIMAL_TOL) & ~is_act[need]
            some = viol.any(axis=1)
            done[need[~some]] = True
            pick = need[some]
            if pick.size:
                pend[pick] = np.argmax(np.where(viol[some], s[some] * scale[pick], -np.inf), axis=1)
                lam_p[pick] = 0.0
        run = np.flatnonzero(~done)
        if run.size == 0:
            break
        p = pend[run]
        ap = a[run, p]
        has = act[run] >= 0
        nrm = a[run[:, None], np.maximum(act[run], 0)]  # (r, 2, 2): the active normals
        a0, a1 = nrm[:, 0], nrm[:, 1]
        two = has[:, 1]
        one = has[:, 0] & ~two
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(one, np.einsum("rd,rd->r", a0, ap) / np.einsum("rd,rd->r", a0, a0), 0.0)
            det = a0[:, 0] * a1[:, 1] - a0[:, 1] * a1[:, 0]
            r = np.column_stack([np.where(two, (ap[:, 0] * a1[:, 1] - ap[:, 1] * a1[:, 0]) / det, c),
                                 np.where(two, (a0[:, 0] * ap[:, 1] - a0[:, 1] * ap[:, 0]) / det, 0.0)])
        z = np.where(two[:, None], 0.0, ap - c[:, None] * a0)
        zz = np.einsum("rd,rd->r", z, z)                # = a_pᵀ z
        step = zz > _SPAN_TOL * aa[run, p]
        s_p = np.einsum("rd,rd->r", ap, u[run]) - b[run, p]
        t1 = np.where(step, s_p / np.where(step, zz, 1.0), np.inf)
        shrink = has & (r > 0)
        ratio = np.where(shrink, lam[run] / np.where(shrink, r, 1.0), np.inf)
        k = (ratio[:, 1] < ratio[:, 0]).astype(int)
        t2 = ratio[np.arange(run.size), k]
        stuck = ~step & np.isinf(t2)
        if stuck.any():
            done[run[stuck]] = True
            feasible[run[stuck]] = False
        full = step & (t1 <= t2)
        t = np.where(stuck, 0.0, np.where(full, t1, t2))
        u[run] -= np.where(step, t, 0.0)[:, None] * z
        lam[run] = np.where(has, lam[run] - t[:, None] * r, 0.0)
        lam_p[run] += t
        f = run[full]                                   # full step: p joins the active set
        if f.size:
            slot = has[full, 0].astype(int)
            act[f, slot], lam[f, slot] = pend[f], lam_p[f]
            is_act[f, pend[f]] = True
            pend[f] = -1
        part = ~full & ~stuck                           # partial step: the row whose multiplier reached 0 leaves
        if part.any():
            g, kk = run[part], k[part]
            is_act[g, act[g, kk]] = False
            low = g[kk == 0]                            # slot 1 moves down to slot 0
            act[low, 0], lam[low, 0] = act[low, 1], lam[low, 1]
            act[g, 1], lam[g, 1] = -1, 0.0
    return u, feasible, done, act, lam


def _active_set_kernel(a, b, u0, u, act, lam):  # pragma: no cover - compiled; tested through its callers
    """``_batch_active_set`` compiled (numba, ``_compiled()``), one problem after the other with the same steps and
    the same choices (the numpy version takes one step of every unfinished problem per iteration: ~20 numpy calls
    each, whose overhead dominated a fleet's tick). ``u``, ``act``, ``lam`` (the start) are updated in place;
    returns ``(feasible, done)``."""
    q, m, _ = a.shape
    feasible = np.ones(q, np.bool_)
    done = np.zeros(q, np.bool_)
    for i in range(q):
        is_act = np.zeros(m, np.bool_)
        for slot in range(2):
            if act[i, slot] >= 0:
                is_act[act[i, slot]] = True
        pend = -1
        lam_p = 0.0
        for _ in range(_QP_MAX_ITER):
            if pend < 0:                                # optimal, or the next row to add
                best = -np.inf
                for j in range(m):
                    if is_act[j]:
                        continue
                    s = a[i, j, 0] * u[i, 0] + a[i, j, 1] * u[i, 1] - b[i, j]
                    if s > _QP_PRIMAL_TOL:
                        aa = a[i, j, 0] * a[i, j, 0] + a[i, j, 1] * a[i, j, 1]
                        v = s * (1.0 / np.sqrt(aa) if aa > 0 else 1e150)
                        if v > best:
                            best, pend = v, j
                if pend < 0:
                    done[i] = True
                    break
                lam_p = 0.0
            p = pend
            apx, apy = a[i, p, 0], a[i, p, 1]
            has0, has1 = act[i, 0] >= 0, act[i, 1] >= 0
            r0, r1, zx, zy = 0.0, 0.0, apx, apy
            if has1:                                    # two active rows: no primal step
                a0x, a0y = a[i, act[i, 0], 0], a[i, act[i, 0], 1]
                a1x, a1y = a[i, act[i, 1], 0], a[i, act[i, 1], 1]
                det = a0x * a1y - a0y * a1x
                r0 = (apx * a1y - apy * a1x) / det
                r1 = (a0x * apy - a0y * apx) / det
                zx, zy = 0.0, 0.0
            elif has0:
                a0x, a0y = a[i, act[i, 0], 0], a[i, act[i, 0], 1]
                r0 = (a0x * apx + a0y * apy) / (a0x * a0x + a0y * a0y)
                zx, zy = apx - r0 * a0x, apy - r0 * a0y
            zz = zx * zx + zy * zy
            step = zz > _SPAN_TOL * (apx * apx + apy * apy)
            s_p = apx * u[i, 0] + apy * u[i, 1] - b[i, p]
            t1 = s_p / zz if step else np.inf
            ratio0 = lam[i, 0] / r0 if (has0 and r0 > 0) else np.inf
            ratio1 = lam[i, 1] / r1 if (has1 and r1 > 0) else np.inf
            k = 1 if ratio1 < ratio0 else 0
            t2 = ratio1 if k == 1 else ratio0
            if not step and np.isinf(t2):               # no step possible, p violated: infeasible
                done[i] = True
                feasible[i] = False
                break
            full = step and t1 <= t2
            t = t1 if full else t2
            if step:
                u[i, 0] -= t * zx
                u[i, 1] -= t * zy
            lam[i, 0] = lam[i, 0] - t * r0 if has0 else 0.0
            lam[i, 1] = lam[i, 1] - t * r1 if has1 else 0.0
            lam_p += t
            if full:                                    # p joins the active set
                slot = 1 if has0 else 0
                act[i, slot], lam[i, slot] = p, lam_p
                is_act[p] = True
                pend = -1
            else:                                       # the row whose multiplier reached 0 leaves
                is_act[act[i, k]] = False
                if k == 0:
                    act[i, 0], lam[i, 0] = act[i, 1], lam[i, 1]
                act[i, 1], lam[i, 1] = -1, 0.0
    return feasible, done


_COMPILED: list = []


def _compiled():
    """The compiled kernel: numba is imported (~0.8 s) and the kernel compiled or loaded from numba's cache on first
    use, so a process that never filters a fleet (a recorder, a relay) does not pay for it. None without numba (the
    'studies' extra, not in the base install): the numpy version then solves the same problems, more slowly."""
    if not _COMPILED:
        numba = optional("numba")
        _COMPILED.append(numba.njit(cache=True)(_active_set_kernel) if numba is not None else None)
    return _COMPILED[0]


def _active_set(a: np.ndarray, b: np.ndarray, u0: np.ndarray, start=None):
    """``_batch_active_set``'s contract, compiled (``_active_set_kernel``) unless ``COMPILED_QP`` is off or numba is
    not installed."""
    if not COMPILED_QP or _compiled() is None:
        return _batch_active_set(a, b, u0, start)
    q = a.shape[0]
    if start is None:
        u, act, lam = u0.copy(), np.full((q, 2), -1, dtype=np.int64), np.zeros((q, 2))
    else:
        u, act, lam = (np.array(x) for x in start)
        act = act.astype(np.int64)
    feasible, done = _compiled()(np.ascontiguousarray(a, dtype=float), np.ascontiguousarray(b, dtype=float),
                                 u0, u, act, lam)
    return u, feasible, done, act, lam


def warm_up() -> None:
    """Compile (or load from numba's cache) the batched QP now, not in a robot's first control tick."""
    _active_set(np.array([[[1.0, 0.0]]]), np.array([[0.0]]), np.array([[1.0, 0.0]]))


def _batch_qp(a: np.ndarray, b: np.ndarray, u0: np.ndarray, v_max: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_solve_qp`` for q robots at once: rows ``a (q, m, d)``, ``b (q, m)`` (padding: ``a = 0, b = inf``),
    ``u0 (q, d)``, ``v_max (q,)``. Returns ``(x (q, d), ok (q,))`` (``ok`` False: infeasible, ``x`` zero)."""
    q, m, dim = a.shape
    if dim == 1:                                        # 1-D as 2-D with u_y = 0 (its optimum)
        a2 = np.concatenate([a, np.zeros_like(a)], axis=2)
        u2 = np.column_stack([u0[:, 0], np.zeros(q)])
    else:
        a2, u2 = a, u0
    poly_a, poly_b = _UNIT_POLYGONS[dim]
    if dim == 1:
        poly_a = np.column_stack([poly_a[:, 0], np.zeros(len(poly_a))])

    x, ok, fin, act, lam = _active_set(a2, b, u2)
    fallback = ~fin
    speed = np.sqrt(np.einsum("qd,qd->q", x, x))
    again = np.flatnonzero(fin & ok & (speed > v_max))
    if again.size:      # again with the polygon inscribed in the speed disc, from the optimum without it
        x2, ok2, fin2, _, _ = _active_set(
            np.concatenate([a2[again], np.broadcast_to(poly_a, (again.size,) + poly_a.shape)], axis=1),
            np.concatenate([b[again], v_max[again, None] * poly_b[None, :]], axis=1), u2[again],
            start=(x[again], act[again], lam[again]))
        x[again], ok[again] = x2, ok2
        fallback[again[~fin2]] = True
        sp = np.sqrt(np.einsum("qd,qd->q", x2, x2))
        clamp = again[fin2 & ok2 & (sp > v_max[again])]   # rounding only: the polygon lies inside the disc
        if clamp.size:
            x[clamp] *= (v_max[clamp] / np.sqrt(np.einsum("qd,qd->q", x[clamp], x[clamp])))[:, None]
    x = x[:, :dim].copy()
    ok &= np.all(np.isfinite(x), axis=1)
    if m:
        ok &= ~(np.max(np.einsum("qmd,qd->qm", a, x) - b, axis=1) > QP_CHECK_TOL)
    for i in np.flatnonzero(fallback):                  # never seen: the iteration cap
        rows = np.isfinite(b[i])
        xi = _solve_qp(a[i, rows], b[i, rows], u0[i], float(v_max[i]))
        x[i], ok[i] = (np.zeros(dim), False) if xi is None else (xi, True)
    x[~ok] = 0.0
    return x, ok


def _safe_commands(a: np.ndarray, b: np.ndarray, u0: np.ndarray, v_max: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_safe_command`` for n robots at once: each robot's rows ``a (n, m, d)``, ``b (n, m)`` (padding rows:
    ``a = 0, b = inf``), finite ``u0 (n, d)``, ``v_max (n,)``. The same fast paths with the same tests, then the
    remaining robots' QPs together (``_batch_qp``). Returns ``(u (n, d), method (n,))``."""
    n = u0.shape[0]
    speed = np.sqrt(np.einsum("nd,nd->n", u0, u0))
    out = u0.copy()
    method = np.full(n, QP)
    excess = np.einsum("nmd,nd->nm", a, u0) - b
    n_viol = np.count_nonzero(excess > 0, axis=1)
    slow = speed <= v_max
    method[(n_viol == 0) & slow] = NOMINAL
    sc = np.flatnonzero((n_viol == 0) & ~slow)          # scaled onto the disc, if that satisfies every row
    if sc.size:
        us = u0[sc] * (v_max[sc] / speed[sc])[:, None]
        good = np.all(np.einsum("nmd,nd->nm", a[sc], us) <= b[sc] + FEASIBILITY_TOL, axis=1)
        out[sc[good]], method[sc[good]] = us[good], SCALED
    cf = np.flatnonzero(n_viol == 1)                    # the projection onto the one violated half-plane
    if cf.size:
        j = np.argmax(excess[cf], axis=1)
        aj = a[cf, j]
        aa = np.einsum("nd,nd->n", aj, aj)
        cf, j, aj, aa = cf[aa > 0], j[aa > 0], aj[aa > 0], aa[aa > 0]
        uc = u0[cf] - aj * (excess[cf, j] / aa)[:, None]
        good = (np.einsum("nd,nd->n", uc, uc) <= v_max[cf] * v_max[cf]) \
            & np.all(np.einsum("nmd,nd->nm", a[cf], uc) <= b[cf] + FEASIBILITY_TOL, axis=1)
        out[cf[good]], method[cf[good]] = uc[good], CLOSED_FORM
    qp = np.flatnonzero(method == QP)
    if qp.size:
        x, ok = _batch_qp(a[qp], b[qp], u0[qp], v_max[qp])
        out[qp] = x
        method[qp[~ok]] = INFEASIBLE
    return out, method


def _per_robot(name: str, value, n: int) -> np.ndarray:
    """A number or one per robot (n,), each finite and > 0 -> (n,)."""
    if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        arr = np.full(n, float(value))
    else:
        arr = np.asarray(value, dtype=float)
        if arr.shape != (n,):
            raise ValueError(f"collision filter: '{name}' must be a number or have shape ({n},), got {arr.shape}")
    if not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
        raise ConfigError(f"collision filter: '{name}' must be finite numbers > 0, got {value!r}")
    return arr


def filter_velocity_many(points, u_nom, neighbours, d_min, v_max, gamma=1.0, *, bounds=None
                         ) -> tuple[np.ndarray, BatchInfo]:
    """``filter_velocity`` of n robots in one vectorised call, each with its own neighbours (issue 29).

    ``points (n, d)`` the robots' own positions, ``u_nom (n, d)``, d 1 or 2; ``neighbours (n, k, d)``: where
    robot i believes others are (NaN rows: unknown or padding, ignored); ``d_min`` a number or ``(n, k)``
    (entries of unknown rows are ignored); ``v_max`` and ``gamma`` a number or ``(n,)``; ``bounds`` None or
    ``(lo (n, d), hi (n, d))`` (a robot with a NaN in its ``lo`` or ``hi`` row has no bounds; an infinite entry no
    wall on that side). Robot i's command
    is ``filter_velocity(points[i], u_nom[i], its known neighbours, their d_min, v_max[i], gamma[i],
    bounds=(lo[i], hi[i]) or None)`` (to rounding): the same rows, the same fast paths, and the robots that need
    the QP solved together by an exact batched dual active-set (``_batch_active_set``, compiled by numba:
    ``_active_set_kernel``) with ``_solve_qp``'s speed-limit pass. A neighbour at exactly the robot's own
    position gives a zero row ``0ᵀ u <= b < 0``: infeasible, as DAQP decides it (zero command, ``infeasible``).
    Returns ``(u (n, d), BatchInfo)``.
    """
    pos, u = _fleet_arrays(points, u_nom, "points")
    n, dim = pos.shape
    nb = np.asarray(neighbours, dtype=float)
    if nb.ndim != 3 or nb.shape[0] != n or nb.shape[2] != dim:
        raise ValueError(f"collision filter: neighbours must have shape ({n}, k, {dim}), got {nb.shape}")
    k = nb.shape[1]
    vm, gm = _per_robot("v_max", v_max, n), _per_robot("gamma", gamma, n)
    if isinstance(d_min, (int, float, np.floating, np.integer)) and not isinstance(d_min, bool):
        if not (math.isfinite(d_min) and d_min > 0):
            raise ConfigError(f"collision filter: 'd_min' must be a finite number > 0, got {d_min!r}")
        dm2 = float(d_min) ** 2
    else:
        dm = np.asarray(d_min, dtype=float)
        if dm.shape != (n, k):
            raise ValueError(f"collision filter: d_min must be a number or have shape {(n, k)}, got {dm.shape}")
        with np.errstate(invalid="ignore"):
            bad = np.all(np.isfinite(nb), axis=2) & ~(np.isfinite(dm) & (dm > 0))
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise ConfigError(f"collision filter: 'd_min' must be finite numbers > 0 for every known neighbour, "
                              f"got {dm[i, j]!r} for robot {i}, neighbour {j}")
        dm2 = dm * dm
    valid = np.all(np.isfinite(pos), axis=1)
    finite_nom = np.all(np.isfinite(u), axis=1)
    u0 = np.where(finite_nom[:, None], u, 0.0)

    with np.errstate(invalid="ignore", over="ignore"):
        dp = pos[:, None, :] - nb
        dist2 = np.einsum("nkd,nkd->nk", dp, dp)
        has = np.isfinite(dist2)                        # (an invalid robot's are all NaN)
        dist2[~has] = np.inf
        dist = np.sqrt(dist2)
        b = (0.5 * gm)[:, None] * (dist2 - dm2)
        bind = has & (2.0 * vm[:, None] * dist > b)
    ii, jj, slot, m = _compact(bind)
    a_rows = np.zeros((n, m, dim))
    a_rows[ii, slot] = -2.0 * dp[ii, jj]
    b_rows = np.full((n, m), np.inf)
    b_rows[ii, slot] = b[ii, jj]
    n_rows = np.count_nonzero(bind, axis=1)
    if bounds is not None:
        lo, hi = (np.asarray(x, dtype=float) for x in bounds)
        if lo.shape != (n, dim) or hi.shape != (n, dim):
            raise ValueError(f"collision filter: bounds must be (lo, hi) of shape {(n, dim)} each, "
                             f"got {lo.shape} and {hi.shape}")
        eye = np.eye(dim)
        with np.errstate(invalid="ignore"):
            fb = gm[:, None] * np.concatenate([hi - pos, pos - lo], axis=1)
            walled = valid & ~np.any(np.isnan(lo) | np.isnan(hi), axis=1)   # a NaN in a robot's row: no bounds
            near = walled[:, None] & (fb < vm[:, None])
        a_rows = np.concatenate([a_rows, np.broadcast_to(np.vstack([eye, -eye]), (n, 2 * dim, dim))], axis=1)
        b_rows = np.concatenate([b_rows, np.where(near, fb, np.inf)], axis=1)
        n_rows += np.count_nonzero(near, axis=1)

    out = np.zeros_like(u0)
    method = np.full(n, INVALID)
    ok = np.flatnonzero(valid)
    if ok.size:
        out[ok], method[ok] = _safe_commands(a_rows[ok], b_rows[ok], u0[ok], vm[ok])
    intervened = ~finite_nom | np.any(np.abs(out - u0) > INTERVENTION_TOL, axis=1)
    info = BatchInfo(method, intervened, np.count_nonzero(has, axis=1), n_rows, np.min(dist, axis=1, initial=np.inf))
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
