"""Low-level target-tracking controllers (the fast loop of paper 1, Fig. 10c).

* ``PController``: velocity command ``v = kp (target - pos)`` for a single integrator, with norm
  saturation at ``v_max`` (the direction is kept) and a deadband around the target.
* ``UnicycleController``: (v, ω) for a differential-drive robot. It turns in place while the target
  is more than 90° off the heading and never drives backwards.

A robot whose target (or own position) is NaN/inf gets a zero command: it holds still.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import transforms3d

from consensus.control.kinematics import wrap_angle
from consensus.errors import ConfigError


def _require(name: str, value: float, *, positive: bool) -> None:
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool) \
        and math.isfinite(value) and (value > 0 if positive else value >= 0)
    if not ok:
        raise ConfigError(f"controller: '{name}' must be a finite number {'> 0' if positive else '>= 0'}, "
                          f"got {value!r}")


@dataclass
class PController:
    """Saturated proportional controller for a single integrator (world-frame velocity)."""

    kp: float = 1.0        # [1/s]
    v_max: float = 1.0     # [m/s]
    deadband: float = 0.02  # [m]

    def __post_init__(self) -> None:
        _require("kp", self.kp, positive=True)
        _require("v_max", self.v_max, positive=True)
        _require("deadband", self.deadband, positive=False)

    def compute(self, pos: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Velocity ``(d,)`` towards ``target``; ``|v| <= v_max``; zero within the deadband."""
        pos = np.asarray(pos, dtype=float)
        target = np.asarray(target, dtype=float)
        if pos.ndim != 1 or pos.shape != target.shape:
            raise ValueError(f"pos {pos.shape} and target {target.shape} must both have shape (d,)")
        # plain floats: this runs 10x per second per robot, where numpy's per-call overhead dominates
        err = [t - p for t, p in zip(target.tolist(), pos.tolist())]
        dist = math.hypot(*err)
        if not math.isfinite(dist) or dist <= self.deadband:
            return np.zeros(len(err))
        scale = self.kp if self.kp * dist <= self.v_max else self.v_max / dist
        return np.array([e * scale for e in err])

    def compute_batch(self, pos: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Vectorised ``compute`` over rows ``(n, d)``; rows with a non-finite target or position get zero."""
        pos = np.asarray(pos, dtype=float)
        target = np.asarray(target, dtype=float)
        if pos.ndim != 2 or pos.shape != target.shape:
            raise ValueError(f"pos {pos.shape} and target {target.shape} must both have shape (n, d)")
        err = target - pos
        valid = np.all(np.isfinite(err), axis=1)
        err = np.where(valid[:, None], err, 0.0)
        dist = np.linalg.norm(err, axis=1)
        v = self.kp * err
        speed = self.kp * dist
        scale = np.where(speed > self.v_max, self.v_max / np.where(speed > 0, speed, 1.0), 1.0)
        v *= scale[:, None]
        v[dist <= self.deadband] = 0.0
        return v


@dataclass
class UnicycleController:
    """Go-to-point controller for a unicycle: turn towards the target, drive forward only."""

    k_v: float = 1.0       # [1/s]   forward gain on the distance
    k_w: float = 2.0       # [1/s]   yaw-rate gain on the heading error
    v_max: float = 1.0     # [m/s]
    w_max: float = 2.0     # [rad/s]
    deadband: float = 0.02  # [m]

    def __post_init__(self) -> None:
        for name in ("k_v", "k_w", "v_max", "w_max"):
            _require(name, getattr(self, name), positive=True)
        _require("deadband", self.deadband, positive=False)

    def compute(self, pose: np.ndarray, target: np.ndarray) -> tuple[float, float]:
        """``pose`` = (x, y, yaw), ``target`` = (x, y) → (v [m/s], ω [rad/s])."""
        pose = np.asarray(pose, dtype=float)
        target = np.asarray(target, dtype=float)
        if pose.shape != (3,) or target.shape != (2,):
            raise ValueError(f"pose must have shape (3,) and target (2,), got {pose.shape} and {target.shape}")
        v, w = self.compute_batch(pose[None, :], target[None, :])
        return float(v[0]), float(w[0])

    def compute_batch(self, pose: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised ``compute``: poses ``(n, 3)``, targets ``(n, 2)`` → (v ``(n,)``, ω ``(n,)``)."""
        pose = np.asarray(pose, dtype=float)
        target = np.asarray(target, dtype=float)
        if pose.ndim != 2 or pose.shape[1] != 3 or target.shape != (pose.shape[0], 2):
            raise ValueError(f"pose must have shape (n, 3) and target (n, 2), got {pose.shape} and {target.shape}")
        d = target - pose[:, :2]
        valid = np.all(np.isfinite(d), axis=1) & np.isfinite(pose[:, 2])
        d = np.where(valid[:, None], d, 0.0)
        dist = np.linalg.norm(d, axis=1)
        yaw = np.where(valid, pose[:, 2], 0.0)
        heading_err = wrap_angle(np.arctan2(d[:, 1], d[:, 0]) - yaw)
        w = np.clip(self.k_w * heading_err, -self.w_max, self.w_max)
        # cos(err) >= 0 whenever |err| <= 90°, so v is never negative; beyond 90° turn in place.
        v = np.where(np.abs(heading_err) > np.pi / 2, 0.0,
                     np.minimum(self.k_v * dist, self.v_max) * np.cos(heading_err))
        stop = (dist <= self.deadband) | ~valid
        v[stop] = 0.0
        w[stop] = 0.0
        return v, w


def yaw_from_quaternion(x: float, y: float, z: float, w: float) -> float:
    """Yaw [rad] in (-π, π] of a ROS-order quaternion (x, y, z, w); it need not be normalised."""
    q = np.array([w, x, y, z], dtype=float)
    norm = float(np.linalg.norm(q))
    if not math.isfinite(norm) or norm < 1e-12:
        raise ValueError(f"invalid quaternion (x, y, z, w) = ({x}, {y}, {z}, {w})")
    _, _, yaw = transforms3d.euler.quat2euler(q / norm, "sxyz")
    return float(wrap_angle(yaw))


def quaternion_from_yaw(yaw: float) -> tuple[float, float, float, float]:
    """ROS-order quaternion (x, y, z, w) of a pure rotation by ``yaw`` [rad] about z."""
    w, x, y, z = transforms3d.euler.euler2quat(0.0, 0.0, float(yaw), "sxyz")
    return float(x), float(y), float(z), float(w)
