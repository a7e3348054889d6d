"""The ``Dynamics`` interface and its registry (``consensus.control.dynamics``)."""
from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from consensus.loader import Registry


class Mover(Protocol):
    """N bodies of one kinematics, integrated: ``step`` returns the poses ``(n, 3)`` (x, y, yaw) after ``dt`` under
    ``cmd (n, 3)`` (vx, vy, wz as the robots command them: ``Dynamics`` says what they mean); ``velocities`` are the
    bodies' world-frame velocities ``(n, 3)`` (vx, vy, wz) after it."""

    def step(self, pose: np.ndarray, cmd: np.ndarray, dt: float, goals: np.ndarray | None = None) -> np.ndarray: ...

    def velocities(self) -> np.ndarray: ...


class Dynamics:
    """One kinematics: everything the rest of the code may ask about how a body moves. Stateless (one instance per
    kinematics, shared); the integration state lives in its ``Mover``."""

    name: str = ""
    summary: str = ""
    #: commanded by a forward speed and a turn rate (``Command.vx``, ``Command.wz``); its odometry carries a heading
    #: the robot reads, and its collision filter works on a point ``offset`` ahead of the wheel axis
    turns: bool = False
    #: a body with mass (it coasts; its command is a velocity set-point it reaches at ``a_max``)
    has_mass: bool = False
    #: the braking deceleration the filter's ``d_min`` may count on [m/s²] (inf: it stops at once)
    a_max: float = math.inf
    #: the dimensions it moves in
    dims: tuple[int, ...] = (1, 2)

    @property
    def holonomic(self) -> bool:
        """Does a world-frame velocity command move it at once, sideways too (a single integrator: a holonomic
        turtle)?"""
        return not self.turns and not self.has_mass

    @property
    def watches_creep(self) -> bool:
        """Can its odometry be checked against its commands' integral (``robot_core.CreepWatch``)? Not a mass:
        its velocity follows the command late and coasts."""
        return not self.has_mass

    # ---------------------------------------------------------------- the robot's side
    def controller(self, *, kp: float, v_max: float, w_max: float, deadband: float):
        """The fast-loop controller towards a goal (``consensus.control.controller``)."""
        from consensus.control.controller import PController

        return PController(kp=kp, v_max=v_max, deadband=deadband)

    def offset(self, v_max: float, w_max: float) -> float:
        """How far ahead of the body's centre its filtered point is [m]."""
        return 0.0

    def point_v_max(self, v_max: float, w_max: float) -> float:
        """The filtered point's speed limit [m/s]."""
        return v_max

    def filter_point(self, pos: np.ndarray, yaw: float, offset: float) -> np.ndarray:
        """The point its collision filter keeps clear of the others (its position here)."""
        return pos

    def drive(self, ctrl, pos: np.ndarray, yaw: float, goal, dim: int) -> tuple[float, float, float, float]:
        """``(vx, vy, wz, speed)``: the controller's command towards ``goal`` with no filter."""
        vel = ctrl.compute(pos, goal)
        return float(vel[0]), float(vel[1]) if dim > 1 else 0.0, 0.0, float(np.linalg.norm(vel))

    def nominal(self, ctrl, pos: np.ndarray, yaw: float, goal, *, offset: float, point_v_max: float, kp: float,
                deadband: float) -> tuple[np.ndarray, np.ndarray]:
        """``(point, u_nom)``: the filtered point and its nominal velocity towards ``goal``."""
        return pos, ctrl.compute(pos, goal)

    def command(self, yaw: float, u: np.ndarray, offset: float, cap, dim: int) -> tuple[float, float, float]:
        """``(vx, vy, wz)`` that moves the filtered point at the (filtered) world velocity ``u``; ``cap(v, w)``
        scales a turning command into the speed limits."""
        return float(u[0]), float(u[1]) if dim > 1 else 0.0, 0.0

    def record_command(self, creep, now: float, vx: float, vy: float, wz: float, yaw: float) -> None:
        """Tell the robot's ``CreepWatch`` the command given at ``now``."""
        creep.command(now, (vx, vy))

    # ---------------------------------------------------------------- the world's side
    def mover(self, n: int, dim: int) -> Mover:
        """N bodies of this kinematics in ``dim`` dimensions."""
        raise NotImplementedError

    def odom_twist(self, vel: np.ndarray, yaw: np.ndarray) -> np.ndarray:
        """World-frame velocities ``(n, 3)`` as its odometry reports them (the world frame here)."""
        return vel


#: every kinematics' dynamics by name (``consensus.loader.Registry``); an unknown name is a ``ValueError`` naming the
#: valid ones (configs refuse an unknown ``kinematics`` in their checks, so it is a programming error)
_DYNAMICS: Registry[Dynamics] = Registry("kinematics")


def register_dynamics(dynamics: Dynamics) -> Dynamics:
    return _DYNAMICS.register(dynamics)


def dynamics_names() -> tuple[str, ...]:
    return _DYNAMICS.names()


def dynamics_of(name: str) -> Dynamics:
    """The dynamics of the kinematics ``name`` (``_DYNAMICS``)."""
    return _DYNAMICS.get(name)
