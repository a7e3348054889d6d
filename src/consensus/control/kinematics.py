"""Robot motion models, vectorised over N robots (used by the simulator). ``dt`` is in seconds.

* Single integrator: ``p' = v``; the commanded velocity is in the world frame (robots keep yaw 0).
* Unicycle: ``x' = v cos θ, y' = v sin θ, θ' = ω``, integrated exactly along the arc for constant
  (v, ω) over the step; yaw is wrapped to (-π, π].
* Point mass with a PID force (``PointMassPID``), the robot model of paper 1's public 2-D code: mass 15 kg;
  per axis F = Kp e + Kd (e - e_prev) / dt with Kp = 1.2, Ki = 0, Kd = 6, e = target - position; the force
  vector's norm clipped to 50 N; a = F / m; v += a dt, the speed clipped to 3 m/s; p += v dt + a dt² / 2 (the new
  velocity, as the code does); no friction. ``e_prev`` starts at 0 and is never reset, so a new target gives a
  derivative kick, as in the code. The code also rounds positions to 2 decimals each step; this model does not.
"""
from __future__ import annotations

import numpy as np

#: below this |ω| [rad/s] the unicycle step uses the straight-line (midpoint heading) formula
OMEGA_EPS = 1e-9


def wrap_angle(a: np.ndarray | float) -> np.ndarray | float:
    """Wrap angle(s) to (-π, π]."""
    wrapped = np.pi - np.mod(np.pi - np.asarray(a, dtype=float), 2.0 * np.pi)
    return float(wrapped) if np.ndim(wrapped) == 0 else wrapped


def _check_dt(dt: float) -> float:
    dt = float(dt)
    if not np.isfinite(dt) or dt < 0:
        raise ValueError(f"dt must be a finite, non-negative number of seconds, got {dt}")
    return dt


def step_single_integrator(pos: np.ndarray, vel_cmd: np.ndarray, dt: float) -> np.ndarray:
    """Advance positions ``(n, d)`` by world-frame velocities ``(n, d)`` for ``dt`` seconds."""
    pos = np.asarray(pos, dtype=float)
    vel_cmd = np.asarray(vel_cmd, dtype=float)
    if pos.shape != vel_cmd.shape:
        raise ValueError(f"pos {pos.shape} and vel_cmd {vel_cmd.shape} must have the same shape")
    if not np.all(np.isfinite(vel_cmd)):
        raise ValueError("vel_cmd contains NaN or inf")
    return pos + vel_cmd * _check_dt(dt)


def step_unicycle(pose: np.ndarray, v: np.ndarray, w: np.ndarray, dt: float) -> np.ndarray:
    """Advance poses ``(n, 3)`` = (x, y, yaw) by forward speeds ``v (n,)`` and yaw rates ``w (n,)``."""
    pose = np.asarray(pose, dtype=float)
    if pose.ndim != 2 or pose.shape[1] != 3:
        raise ValueError(f"pose must have shape (n, 3), got {pose.shape}")
    n = pose.shape[0]
    v = np.broadcast_to(np.asarray(v, dtype=float), (n,))
    w = np.broadcast_to(np.asarray(w, dtype=float), (n,))
    if not (np.all(np.isfinite(v)) and np.all(np.isfinite(w))):
        raise ValueError("v or w contains NaN or inf")
    dt = _check_dt(dt)
    x, y, th = pose[:, 0], pose[:, 1], pose[:, 2]
    th_new = th + w * dt
    turning = np.abs(w) > OMEGA_EPS
    w_safe = np.where(turning, w, 1.0)
    th_mid = th + 0.5 * w * dt
    dx = np.where(turning, v / w_safe * (np.sin(th_new) - np.sin(th)), v * dt * np.cos(th_mid))
    dy = np.where(turning, -v / w_safe * (np.cos(th_new) - np.cos(th)), v * dt * np.sin(th_mid))
    return np.column_stack([x + dx, y + dy, wrap_angle(th_new)])


class PointMassPID:
    """N point masses driven to their targets by paper 1's PID force (module docstring); vectorised over robots."""

    def __init__(self, n: int, dim: int = 2, *, mass: float = 15.0, kp: float = 1.2, kd: float = 6.0,
                 max_force: float = 50.0, max_speed: float = 3.0) -> None:
        if not (mass > 0 and max_force > 0 and max_speed > 0):
            raise ValueError("mass, max_force and max_speed must be positive")
        self.mass, self.kp, self.kd = float(mass), float(kp), float(kd)
        self.max_force, self.max_speed = float(max_force), float(max_speed)
        self.vel = np.zeros((n, dim))
        self.prev_error = np.zeros((n, dim))

    @staticmethod
    def _clip_norm(v: np.ndarray, limit: float) -> np.ndarray:
        norm = np.linalg.norm(v, axis=1, keepdims=True)
        return np.where(norm > limit, v / np.maximum(norm, 1e-300) * limit, v)

    def target_for_velocity(self, pos: np.ndarray, u: np.ndarray, dt: float) -> np.ndarray:
        """The target ``(n, dim)`` whose PID force brings the velocity to ``u`` in the next step of ``dt`` (as far
        as the force limit allows: the mass then accelerates or brakes at ``max_force / mass``): a velocity
        command for the mass, e.g. a collision filter's set-point (``consensus.control.avoidance``). The force
        wanted is ``m (u - v) / dt``; the error that gives it is ``(F + kd e_prev / dt) / (kp + kd / dt)``."""
        pos = np.asarray(pos, dtype=float)
        dt = _check_dt(dt)
        if dt == 0:
            return pos.copy()
        force = self.mass * (np.asarray(u, dtype=float) - self.vel) / dt
        error = (force + self.kd * self.prev_error / dt) / (self.kp + self.kd / dt)
        return pos + error

    def step(self, pos: np.ndarray, target: np.ndarray, dt: float) -> np.ndarray:
        """Positions ``(n, dim)`` after one step of ``dt`` s towards ``target`` ``(n, dim)``."""
        pos = np.asarray(pos, dtype=float)
        target = np.asarray(target, dtype=float)
        if pos.shape != self.vel.shape or target.shape != pos.shape:
            raise ValueError(f"pos and target must have shape {self.vel.shape}")
        if not np.all(np.isfinite(target)):
            raise ValueError("target contains NaN or inf")
        dt = _check_dt(dt)
        if dt == 0:
            return pos.copy()
        error = target - pos
        force = self._clip_norm(self.kp * error + self.kd * (error - self.prev_error) / dt, self.max_force)
        acc = force / self.mass
        self.vel = self._clip_norm(self.vel + acc * dt, self.max_speed)
        self.prev_error = error
        return pos + self.vel * dt + 0.5 * acc * dt * dt


def initial_positions(cfg) -> np.ndarray:
    """(n, dim) start positions of ``cfg`` (a ``consensus.settings.RobotBaseConfig``): the configured ones, or seeded
    uniform draws clipped to the workspace."""
    given = cfg.initial_positions_array()
    if given is not None:
        return given
    rng = np.random.default_rng(cfg.seed)
    pos = rng.uniform(-cfg.init_radius, cfg.init_radius, size=(cfg.num_robots, cfg.dim))
    lo, hi = cfg.workspace_bounds()
    return np.clip(pos, lo, hi)
