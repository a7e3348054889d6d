"""Protection layer between planners/controllers and the robots: geofence, speed limit, staleness."""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from collections.abc import Sequence

import numpy as np

from consensus.errors import ConfigError


@dataclass(frozen=True, eq=False)
class Geofence:
    """Axis-aligned box ``lo <= p <= hi`` (per axis, metres)."""

    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self) -> None:
        lo = np.array(self.lo, dtype=float).reshape(-1)
        hi = np.array(self.hi, dtype=float).reshape(-1)
        if lo.shape != hi.shape or lo.size == 0:
            raise ConfigError(f"geofence: lo {lo.shape} and hi {hi.shape} must be non-empty and of equal length")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ConfigError(f"geofence: bounds must be finite, got lo={lo.tolist()} hi={hi.tolist()}")
        if not np.all(lo < hi):
            axis = int(np.flatnonzero(~(lo < hi))[0])
            raise ConfigError(f"geofence: axis {axis} needs min < max, got min={lo[axis]} max={hi[axis]}")
        lo.setflags(write=False)
        hi.setflags(write=False)
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Geofence):
            return NotImplemented
        return bool(np.array_equal(self.lo, other.lo) and np.array_equal(self.hi, other.hi))

    def __hash__(self) -> int:
        return hash((self.lo.tobytes(), self.hi.tobytes()))

    @property
    def dim(self) -> int:
        return int(self.lo.size)

    @classmethod
    def from_bounds(cls, bounds: Sequence[float]) -> Geofence:
        """``[xmin, xmax]`` (1-D) or ``[xmin, xmax, ymin, ymax]`` (2-D)."""
        if isinstance(bounds, (str, bytes)) or not isinstance(bounds, (Sequence, np.ndarray)):
            raise ConfigError(f"geofence: bounds must be a list [xmin, xmax] or [xmin, xmax, ymin, ymax], "
                              f"got {bounds!r}")
        vals = list(bounds)
        if len(vals) not in (2, 4):
            raise ConfigError(f"geofence: bounds must have 2 ([xmin, xmax]) or 4 ([xmin, xmax, ymin, ymax]) "
                              f"numbers, got {len(vals)}: {vals!r}")
        for k, v in enumerate(vals):
            if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v):
                raise ConfigError(f"geofence: bounds[{k}] = {v!r} is not a finite number")
        arr = np.asarray(vals, dtype=float).reshape(-1, 2)
        return cls(lo=arr[:, 0], hi=arr[:, 1])

    def to_bounds(self) -> list[float]:
        """Inverse of ``from_bounds``: ``[xmin, xmax(, ymin, ymax)]``."""
        return np.column_stack([self.lo, self.hi]).reshape(-1).tolist()

    def _point(self, p: np.ndarray) -> np.ndarray:
        p = np.asarray(p, dtype=float)
        if p.shape != self.lo.shape:
            raise ValueError(f"geofence: point shape {p.shape} does not match the fence dimension {self.dim}")
        return p

    def clamp(self, p: np.ndarray) -> tuple[np.ndarray, bool]:
        """(point clamped into the box, whether it changed). NaN/inf input raises ``ValueError``."""
        p = self._point(p)
        if not np.all(np.isfinite(p)):
            raise ValueError(f"geofence: cannot clamp a non-finite point {p.tolist()}")
        q = np.clip(p, self.lo, self.hi)
        return q, bool(np.any(q != p))

    def contains(self, p: np.ndarray) -> bool:
        """True iff ``p`` is finite and inside the box (boundary included)."""
        p = self._point(p)
        return bool(np.all(np.isfinite(p)) and np.all(p >= self.lo) and np.all(p <= self.hi))


def limit_speed(v: np.ndarray, v_max: float) -> np.ndarray:
    """Norm saturation of a velocity ``(d,)`` or of each row of ``(n, d)``; direction is kept.

    Non-finite velocities become zero (the safe command: stop).
    """
    if not (v_max > 0 and math.isfinite(v_max)):
        raise ValueError(f"v_max must be a finite number > 0, got {v_max}")
    v = np.array(v, dtype=float)
    rows = np.atleast_2d(v)
    bad = ~np.all(np.isfinite(rows), axis=1)
    rows[bad] = 0.0
    speed = np.linalg.norm(rows, axis=1)
    over = speed > v_max
    rows[over] *= (v_max / speed[over])[:, None]
    return rows.reshape(v.shape)


def is_stale(stamp_s: float | None, now_s: float, timeout_s: float) -> bool:
    """True if no stamp, a non-finite stamp, or the stamp is older than ``timeout_s`` at ``now_s``."""
    if not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise ValueError(f"timeout_s must be a finite number > 0, got {timeout_s}")
    if stamp_s is None or not math.isfinite(stamp_s):
        return True
    return now_s - stamp_s > timeout_s
