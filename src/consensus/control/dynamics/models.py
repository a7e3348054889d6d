"""The built-in kinematics (``consensus.control.dynamics``): the single integrator, the unicycle and paper 1's point
mass. The integration itself is ``consensus.control.kinematics`` (vectorised over N bodies)."""
from __future__ import annotations

import math

import numpy as np

from consensus.control.kinematics import PointMassPID, step_single_integrator, step_unicycle
from consensus.control.motion import POINT_MASS_PID, SINGLE_INTEGRATOR, UNICYCLE
from consensus.control.dynamics.base import Dynamics, register_dynamics

_MASS = PointMassPID(1)


def _pose(pose: np.ndarray) -> np.ndarray:
    pose = np.asarray(pose, dtype=float)
    if pose.ndim != 2 or pose.shape[1] != 3:
        raise ValueError(f"pose must have shape (n, 3), got {pose.shape}")
    return pose.copy()


class _VelocityMover:
    """Bodies that move at their commanded world-frame velocity (a single integrator)."""

    def __init__(self, n: int, dim: int) -> None:
        self.dim = dim
        self.vel = np.zeros((n, 3))

    def step(self, pose, cmd, dt, goals=None):
        out = _pose(pose)
        cmd = np.asarray(cmd, dtype=float)
        out[:, : self.dim] = step_single_integrator(out[:, : self.dim], cmd[:, : self.dim], dt)
        self.vel[:, : self.dim] = cmd[:, : self.dim]      # the other columns stay 0
        return out

    def velocities(self):
        return self.vel.copy()          # updated in place by step: a caller's copy stays its own


class _UnicycleMover:
    """Unicycles: ``cmd[:, 0]`` is the forward speed, ``cmd[:, 2]`` the turn rate."""

    def __init__(self, n: int) -> None:
        self.vel = np.zeros((n, 3))

    def step(self, pose, cmd, dt, goals=None):
        cmd = np.asarray(cmd, dtype=float)
        out = step_unicycle(_pose(pose), cmd[:, 0], cmd[:, 2], dt)
        self.vel = np.column_stack([cmd[:, 0] * np.cos(out[:, 2]), cmd[:, 0] * np.sin(out[:, 2]), cmd[:, 2]])
        return out

    def velocities(self):
        return self.vel


class _MassMover:
    """Paper 1's point masses (``PointMassPID``). The command is a world-frame velocity set-point: the PID is given
    the target whose force brings the velocity to it (``PointMassPID.target_for_velocity``), so the mass brakes at its
    force limit. ``goals`` (paper 1's code: the headless loop without a collision filter) give the PID the goal
    itself instead, as the paper's robot does."""

    def __init__(self, n: int, dim: int) -> None:
        self.dim = dim
        self.mass = PointMassPID(n, dim)

    def step(self, pose, cmd, dt, goals=None):
        out = _pose(pose)
        p = out[:, : self.dim]
        if goals is None:
            goals = self.mass.target_for_velocity(p, np.asarray(cmd, dtype=float)[:, : self.dim], dt)
        out[:, : self.dim] = self.mass.step(p, np.asarray(goals, dtype=float)[:, : self.dim], dt)
        return out

    def velocities(self):
        vel = np.zeros((len(self.mass.vel), 3))
        vel[:, : self.dim] = self.mass.vel
        return vel


class SingleIntegrator(Dynamics):
    name = SINGLE_INTEGRATOR
    summary = "velocity commands in the world frame (robots keep yaw 0)"

    def mover(self, n, dim):
        return _VelocityMover(n, dim)


class Unicycle(Dynamics):
    name = UNICYCLE
    summary = "forward speed and turn rate (differential drive); filtered on its near-identity point"
    turns = True
    dims = (2,)

    def controller(self, *, kp, v_max, w_max, deadband):
        from consensus.control.controller import UnicycleController

        return UnicycleController(k_v=kp, v_max=v_max, w_max=w_max, deadband=deadband)

    def offset(self, v_max, w_max):
        return v_max / w_max

    def point_v_max(self, v_max, w_max):
        # the near-identity point moves at up to hypot(v, l w) = sqrt(2) v_max
        return math.hypot(v_max, self.offset(v_max, w_max) * w_max)

    def filter_point(self, pos, yaw, offset):
        from consensus.control.collision import near_identity_point

        return near_identity_point(np.array([pos[0], pos[1], yaw]), offset)

    def drive(self, ctrl, pos, yaw, goal, dim):
        v, w = ctrl.compute(np.array([pos[0], pos[1], yaw]), goal)
        return float(v), 0.0, float(w), abs(float(v))

    def nominal(self, ctrl, pos, yaw, goal, *, offset, point_v_max, kp, deadband):
        """The near-identity point goes to the goal by a P law with the point's speed limit."""
        point = self.filter_point(pos, yaw, offset)
        err = np.asarray(goal, dtype=float) - point
        dist = float(np.linalg.norm(err))
        return point, (np.zeros(2) if dist <= deadband else err * min(kp, point_v_max / dist))

    def command(self, yaw, u, offset, cap, dim):
        from consensus.control.collision import unicycle_command

        v, w = cap(*unicycle_command(yaw, u, offset))
        return float(v), 0.0, float(w)

    def record_command(self, creep, now, vx, vy, wz, yaw):
        creep.command(now, vx, wz, yaw)

    def mover(self, n, dim):
        return _UnicycleMover(n)

    def odom_twist(self, vel, yaw):
        """The body frame: the forward speed, no side-slip reported, the turn rate."""
        yaw = np.asarray(yaw, dtype=float)
        return np.stack([vel[:, 0] * np.cos(yaw) + vel[:, 1] * np.sin(yaw), np.zeros(len(yaw)), vel[:, 2]], 1)


class PointMass(Dynamics):
    name = POINT_MASS_PID
    summary = "paper 1's 15 kg point mass driven by a PID force (its command: a velocity set-point)"
    has_mass = True
    a_max = _MASS.max_force / _MASS.mass

    def mover(self, n, dim):
        return _MassMover(n, dim)


register_dynamics(SingleIntegrator())
register_dynamics(Unicycle())
register_dynamics(PointMass())
