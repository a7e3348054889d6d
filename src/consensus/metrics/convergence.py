"""Convergence metrics of a multi-robot run (positions in metres, times in seconds).

Missing data: a robot whose row is NaN (or inf) at some time step is ignored at that time step
only. The spread of fewer than two present robots is 0.0 for one robot and NaN for none; in
``time_to_converge`` a time step counts as converged only if at least two robots are present
(``min(2, n)``) and their spread is below the tolerance, so a step where most robots are missing
cannot fake convergence.

Non-finite results (e.g. a centroid when no robot is present) are reported as ``None`` in the
JSON-able dictionaries.
"""
from __future__ import annotations

import math

import numpy as np

#: time steps are processed in chunks of about this many pairwise distances (memory bound)
_CHUNK_ELEMENTS = 4_000_000

def _valid_rows(positions: np.ndarray) -> np.ndarray:
    positions = np.asarray(positions, dtype=float)
    if positions.ndim != 2:
        raise ValueError(f"positions must have shape (n, d), got {positions.shape}")
    return positions[np.all(np.isfinite(positions), axis=1)]


def spread(positions: np.ndarray) -> float:
    """Diameter of the group: max pairwise Euclidean distance over the present (finite) rows."""
    p = _valid_rows(positions)
    if len(p) == 0:
        return math.nan
    if len(p) == 1:
        return 0.0
    diff = p[:, None, :] - p[None, :, :]
    return float(np.sqrt((diff * diff).sum(axis=-1).max()))


def spread_series(positions: np.ndarray) -> np.ndarray:
    """``spread`` at every time step of ``(T, n, d)`` positions → ``(T,)``."""
    positions = np.asarray(positions, dtype=float)
    if positions.ndim != 3:
        raise ValueError(f"positions must have shape (T, n, d), got {positions.shape}")
    t_len, n, _ = positions.shape
    valid = np.all(np.isfinite(positions), axis=2)                     # (T, n)
    count = valid.sum(axis=1)
    # Replace missing rows by a present robot of the same step: duplicates do not change the diameter.
    first = np.argmax(valid, axis=1)
    filled = np.where(valid[:, :, None], positions, positions[np.arange(t_len), first][:, None, :])
    out = np.zeros(t_len)
    chunk = max(1, _CHUNK_ELEMENTS // max(n * n, 1))
    for a in range(0, t_len, chunk):
        p = filled[a:a + chunk] - filled[a:a + chunk, :1]   # relative coordinates: no cancellation far from 0
        sq = np.einsum("tnd,tnd->tn", p, p)
        d2 = sq[:, :, None] + sq[:, None, :] - 2.0 * p @ p.transpose(0, 2, 1)
        out[a:a + chunk] = np.sqrt(np.maximum(d2.max(axis=(1, 2)), 0.0))
    out[count == 0] = np.nan
    out[count == 1] = 0.0
    return out


def consensus_point(positions: np.ndarray) -> np.ndarray:
    """Centroid ``(d,)`` of the present rows (all NaN if no robot is present)."""
    positions = np.asarray(positions, dtype=float)
    p = _valid_rows(positions)
    if len(p) == 0:
        return np.full(positions.shape[1], np.nan)
    return p.mean(axis=0)


def _check_series(times: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    times = np.asarray(times, dtype=float)
    positions = np.asarray(positions, dtype=float)
    if positions.ndim != 3:
        raise ValueError(f"positions must have shape (T, n, d), got {positions.shape}")
    if times.shape != (positions.shape[0],):
        raise ValueError(f"times {times.shape} must have shape (T,) with T = {positions.shape[0]}")
    return times, positions


def converged_mask(positions: np.ndarray, tol: float) -> np.ndarray:
    """``(T,)`` bool: enough robots present (``min(2, n)``) and spread < ``tol`` at that step."""
    positions = np.asarray(positions, dtype=float)
    if not (tol > 0 and math.isfinite(tol)):
        raise ValueError(f"tol must be a finite number > 0, got {tol}")
    present = np.all(np.isfinite(positions), axis=2).sum(axis=1)
    with np.errstate(invalid="ignore"):
        return (present >= min(2, positions.shape[1])) & (spread_series(positions) < tol)


def time_to_converge(times: np.ndarray, positions: np.ndarray, tol: float) -> float | None:
    """First time after which the spread stays below ``tol`` until the end; ``None`` if it never does."""
    times, positions = _check_series(times, positions)
    if len(times) == 0:
        return None
    ok = converged_mask(positions, tol)
    if not ok[-1]:
        return None
    bad = np.flatnonzero(~ok)
    first = 0 if len(bad) == 0 else int(bad[-1]) + 1
    return float(times[first])


# Why a run ended (summary.json's ``end_reason``)
END_REASONS = ("converged_and_settled", "duration", "max_rounds", "interrupted")


class SettleWatch:
    """Ends a run early once consensus has been *shown*: the spread stayed below ``tol`` (as ``converged_mask``
    judges it) for ``settle_s`` seconds without a break. ``settle_s = 0`` never ends a run (studies that need a fixed
    duration). Fed one ``(t, spread)`` sample at a time, in time order; no clock of its own (headless loop and ROS
    recorder alike)."""

    def __init__(self, tol: float, settle_s: float) -> None:
        if not (tol > 0 and math.isfinite(tol)):
            raise ValueError(f"tol must be a finite number > 0, got {tol}")
        if not (settle_s >= 0 and math.isfinite(settle_s)):
            raise ValueError(f"settle_s must be a finite number >= 0, got {settle_s}")
        self.tol, self.settle_s = float(tol), float(settle_s)
        self.since: float | None = None            # start of the current stretch below tol

    def update(self, t: float, spread_m: float) -> bool:
        """Note the spread at time ``t``; True when the run may end (held below tol for settle_s)."""
        if math.isfinite(spread_m) and spread_m < self.tol:
            if self.since is None:
                self.since = float(t)
        else:
            self.since = None
        return self.settle_s > 0 and self.since is not None and t - self.since >= self.settle_s

    def held_s(self, t: float) -> float:
        """How long the spread has been below tol at time ``t`` (0 when it is not)."""
        return 0.0 if self.since is None else max(0.0, float(t) - self.since)


class LossWatch:
    """Which robots of a run are alive, judged on what each robot itself sends (its ``state``), so that agreement is
    judged on the living while every body still counts for safety.

    A robot is lost once nothing came from it for ``timeout_s`` after its last message, or, for a robot never heard
    at all, for ``first_s`` after the recording began (``t0``: its process died before its first state, or never
    started). A lost
    robot that speaks again is back. ``losses`` lists every loss and return in order (``{"robot", "event": "lost" |
    "back", "t_s"}``, a loss also with ``last_state_s``: None for a robot never heard). ``sample()`` notes who counts
    at each recorded sample; ``members()`` is that as a ``(T, n)`` mask in which a robot never heard during the whole
    run counts at no sample (its body stood there, but it never took part in the agreement). Times in seconds on the
    caller's clock; no clock of its own (the recorder's node clock, sim time or not)."""

    def __init__(self, n: int, timeout_s: float, first_s: float | None = None) -> None:
        if not (timeout_s > 0 and math.isfinite(timeout_s)):
            raise ValueError(f"timeout_s must be a finite number > 0, got {timeout_s}")
        self.timeout_s = float(timeout_s)
        # a robot never heard is given this long after the recording began (a process slow to start on a loaded
        # machine is not a dead one); at least the timeout
        self.first_s = max(self.timeout_s, float(first_s if first_s is not None else timeout_s))
        self.last_seen = np.full(int(n), np.nan)           # when each robot was last heard (NaN: never)
        self.lost: dict[int, float] = {}                    # robot -> run time it was declared lost
        self.losses: list[dict] = []
        self._members: list[np.ndarray] = []

    def heard(self, robot: int, now: float) -> None:
        self.last_seen[robot] = now

    def update(self, now: float, t0: float) -> list[dict]:
        """Judge every robot at ``now`` (recording began at ``t0``); returns the new events (also in ``losses``)."""
        new = []
        for i, seen in enumerate(self.last_seen):
            never = bool(np.isnan(seen))
            silent = now - (t0 if never else seen) > (self.first_s if never else self.timeout_s)
            if silent and i not in self.lost:
                self.lost[i] = now - t0
                new.append({"robot": i, "event": "lost", "t_s": round(now - t0, 3),
                            "last_state_s": None if never else round(float(seen) - t0, 3)})
            elif not silent and not never and i in self.lost:
                del self.lost[i]
                new.append({"robot": i, "event": "back", "t_s": round(now - t0, 3)})
        self.losses.extend(new)
        return new

    def living(self) -> np.ndarray:
        """``(n,)`` bool: the robots not lost now."""
        alive = np.ones(len(self.last_seen), dtype=bool)
        alive[list(self.lost)] = False
        return alive

    def sample(self) -> np.ndarray:
        """Note (and return) who counts at the sample being recorded: the robots not lost now."""
        alive = self.living()
        self._members.append(alive)
        return alive

    def members(self) -> np.ndarray:
        """``(T, n)`` bool, one row per ``sample()``: who counted for agreement, never-heard robots at no sample."""
        n = len(self.last_seen)
        out = np.asarray(self._members, dtype=bool).reshape(-1, n)
        return out & ~np.isnan(self.last_seen)[None, :]


def on_the_living(series: np.ndarray, members: np.ndarray) -> np.ndarray:
    """``(T, n, d)`` positions or targets with the rows of robots that do not count (``members`` False) as NaN:
    what the convergence judgement (``convergence_summary``) reads when it is judged on the living."""
    series = np.asarray(series, dtype=float)
    members = np.asarray(members, dtype=bool)
    if series.ndim != 3 or members.shape != series.shape[:2]:
        raise ValueError(f"members {members.shape} must be the (T, n) of series {series.shape}")
    return np.where(members[:, :, None], series, np.nan)


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _time_from_mask(times: np.ndarray, ok: np.ndarray) -> float | None:
    if len(times) == 0 or not ok[-1]:
        return None
    bad = np.flatnonzero(~ok)
    return float(times[0 if len(bad) == 0 else int(bad[-1]) + 1])


def convergence_summary(times: np.ndarray, positions: np.ndarray, tol: float,
                        initial_positions: np.ndarray | None = None, *, targets: np.ndarray | None = None,
                        d_min: float | None = None, packing_slack: float = 0.0) -> dict:
    """JSON-able summary of a run.

    Keys: converged, converged_on, tolerance_m, final_spread_m (the positions'), consensus_point,
    time_to_converge_s, initial_spread_m, initial_centroid, distance_consensus_to_initial_centroid_m,
    farthest_from_consensus_m (the robot farthest from the consensus point at the end); with ``targets`` also
    target_spread_m (the final targets' spread: the planners' agreement) and min_pair_distance_m (the closest two
    robots ever came). ``initial_positions`` defaults to ``positions[0]``.

    Without ``d_min`` (point robots) a run has converged when the positions' spread stays below ``tol`` to the end
    (``converged_on: "positions"``), and the consensus point is the final centroid of the positions. With
    ``d_min`` (robots kept ``d_min`` apart by collision avoidance, which cannot meet at one point) it is judged
    by ``packed_agreement_mask`` (``converged_on: "targets"``): the targets' spread below ``tol`` (the robots agree
    on a meeting point) and every robot within ``packing_radius(n, d_min)`` (reported as packing_radius_m) of the
    targets' centroid, which is then the consensus point: the agreed meeting point.
    ``packing_slack``: added to the packing radius (the recorder: ``silent_bound_m`` for each dead robot, whose
    body's keep-out inside the packing pushes the living out by up to that).
    """
    times, positions = _check_series(times, positions)
    if len(times) == 0:
        raise ValueError("convergence_summary needs at least one time step")
    init = positions[0] if initial_positions is None else np.asarray(initial_positions, dtype=float)
    if init.shape != positions.shape[1:]:
        raise ValueError(f"initial_positions {init.shape} must have shape {positions.shape[1:]}")
    if d_min is not None and targets is None:
        raise ValueError("judging convergence with d_min needs the targets")
    extra: dict = {}
    if d_min is None:
        ttc = time_to_converge(times, positions, tol)
        final_c = consensus_point(positions[-1])
        on = "positions"
    else:
        radius = packing_radius(positions.shape[1], d_min) + float(packing_slack)
        ttc = _time_from_mask(times, packed_agreement_mask(positions, targets, tol, radius))
        final_c = consensus_point(np.asarray(targets, dtype=float)[-1])
        on = "targets"
        extra.update(d_min_m=float(d_min), packing_radius_m=radius)
    if targets is not None:
        tg = np.asarray(targets, dtype=float)
        if tg.shape != positions.shape:
            raise ValueError(f"targets {tg.shape} must have the shape of positions {positions.shape}")
        extra["target_spread_m"] = _num(spread(tg[-1])) if np.isfinite(tg[-1]).all(axis=1).any() else None
        mins = min_pair_distance_series(positions)
        extra["min_pair_distance_m"] = _num(float(np.nanmin(mins))) if np.isfinite(mins).any() else None
    with np.errstate(invalid="ignore"):
        far = np.linalg.norm(positions[-1] - final_c, axis=1)
    extra["farthest_from_consensus_m"] = _num(float(np.nanmax(far))) if np.isfinite(far).any() else None
    init_c = consensus_point(init)
    return {
        "converged": ttc is not None,
        "converged_on": on,
        "tolerance_m": float(tol),
        "final_spread_m": _num(spread(positions[-1])),
        "consensus_point": [_num(v) for v in final_c],
        "time_to_converge_s": ttc,
        "initial_spread_m": _num(spread(init)),
        "initial_centroid": [_num(v) for v in init_c],
        "distance_consensus_to_initial_centroid_m": _num(float(np.linalg.norm(final_c - init_c))),
        **extra,
    }


def min_pair_distance_series(positions: np.ndarray) -> np.ndarray:
    """Smallest distance between two present robots at every time step of ``(T, n, d)`` positions → ``(T,)``
    (NaN where fewer than two robots are present)."""
    positions = np.asarray(positions, dtype=float)
    if positions.ndim != 3:
        raise ValueError(f"positions must have shape (T, n, d), got {positions.shape}")
    t_len, n, _ = positions.shape
    out = np.full(t_len, np.nan)
    if n < 2:
        return out
    iu = np.triu_indices(n, k=1)
    chunk = max(1, _CHUNK_ELEMENTS // max(n * n, 1))
    for a in range(0, t_len, chunk):
        p = positions[a:a + chunk]
        diff = p[:, :, None, :] - p[:, None, :, :]
        with np.errstate(invalid="ignore"):
            d = np.sqrt((diff * diff).sum(axis=-1))[:, iu[0], iu[1]]      # (t, pairs), NaN for absent robots
        d = np.where(np.isfinite(d), d, np.inf)
        m = d.min(axis=1)
        out[a:a + chunk] = np.where(np.isfinite(m), m, np.nan)
    return out


def packing_radius(n: int, d_min: float) -> float:
    """How far from their agreed point ``n`` robots kept ``d_min`` apart (the clearance between centres that their
    collision filter keeps at rest; for unicycles plus twice the filtered point's offset) may stand once packed:
    ``d_min × (1 + √n)``. Their slots (``consensus.control.packing``: a hexagonal packing of spacing ``d_min +
    packing_gap_m``) lie within it for any gap up to ``0.9 d_min``."""
    if not (d_min > 0 and math.isfinite(d_min)):
        raise ValueError(f"d_min must be a finite number > 0, got {d_min}")
    return (1.0 + math.sqrt(max(int(n), 1))) * float(d_min)


def arrival_radius(tolerance: float, k: int, d_min: float | None) -> float:
    """How close to its goal point a robot must be to count as arrived when ``k`` robots (itself included) were
    sent to that point: ``tolerance``, or with collision avoidance (``d_min``) and ``k >= 2`` at least
    ``packing_radius(k, d_min)`` (robots kept ``d_min`` apart pack around a shared point instead of reaching it)."""
    if d_min is None or int(k) < 2:
        return float(tolerance)
    return max(float(tolerance), packing_radius(k, d_min))


def packed_agreement_mask(positions: np.ndarray, targets: np.ndarray, tol: float, radius: float) -> np.ndarray:
    """``(T,)`` bool, consensus of robots that cannot meet at one point (collision avoidance): the planners agree
    (the spread of the present targets is below ``tol``, as ``converged_mask`` judges positions) and every present
    robot stands within ``radius`` (``packing_radius``) of the targets' centroid."""
    positions = np.asarray(positions, dtype=float)
    targets = np.asarray(targets, dtype=float)
    if positions.shape != targets.shape or positions.ndim != 3:
        raise ValueError(f"positions {positions.shape} and targets {targets.shape} must both be (T, n, d)")
    agree = converged_mask(targets, tol)
    valid_t = np.all(np.isfinite(targets), axis=2)
    with np.errstate(invalid="ignore"):
        centre = np.nansum(np.where(valid_t[:, :, None], targets, 0.0), axis=1) / np.maximum(
            valid_t.sum(axis=1), 1)[:, None]
        dist = np.linalg.norm(positions - centre[:, None, :], axis=2)
    present = np.all(np.isfinite(positions), axis=2)
    packed = np.all(~present | (dist <= radius), axis=1)
    return agree & packed & valid_t.any(axis=1)


def planned_vs_actual_error(positions: np.ndarray, targets: np.ndarray) -> dict:
    """Tracking error |position - planned target| over all (time, robot) pairs where both are finite.

    Returns ``{"mean_m", "max_m", "final_mean_m", "samples"}`` (``None`` values when there are no samples).
    """
    positions = np.asarray(positions, dtype=float)
    targets = np.asarray(targets, dtype=float)
    if positions.ndim != 3 or positions.shape != targets.shape:
        raise ValueError(f"positions {positions.shape} and targets {targets.shape} must both be (T, n, d)")
    err = np.linalg.norm(positions - targets, axis=2)
    ok = np.isfinite(err)
    final = err[-1][ok[-1]] if len(err) else np.empty(0)
    return {
        "mean_m": float(err[ok].mean()) if ok.any() else None,
        "max_m": float(err[ok].max()) if ok.any() else None,
        "final_mean_m": float(final.mean()) if len(final) else None,
        "samples": int(ok.sum()),
    }
