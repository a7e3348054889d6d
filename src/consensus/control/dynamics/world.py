"""The world a fleet's bodies move in: one interface (``World``) for the kinematic world here and MuJoCo's
(``consensus.sims.mujoco.world.MujocoWorld``), used by the ROS ``sim`` node and by the headless loops."""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from consensus.control.dynamics.base import dynamics_of


class World(Protocol):
    """N bodies: ``set_commands(cmd (n, 3))`` (vx, vy, wz as the robots command them), ``advance(seconds)``,
    ``poses()`` (true, ``(n, 3)``: x, y, yaw), ``reported_poses()`` (what the robots' odometry says: noise and
    offsets of a world that has them), ``velocities()`` (world frame, ``(n, 3)``), ``time`` [s] and
    ``judgement()`` (the world's own verdict on the run: contacts of a physics world; empty here) and ``save_xml(dir)``
    (what the world is made of, next to a run's results: MuJoCo's ``world.xml``; nothing here)."""

    time: float

    def set_commands(self, cmd: np.ndarray) -> None: ...

    def advance(self, seconds: float) -> Any: ...

    def poses(self) -> np.ndarray: ...

    def reported_poses(self) -> np.ndarray: ...

    def velocities(self) -> np.ndarray: ...

    def judgement(self) -> dict[str, Any]: ...

    def save_xml(self, out_dir) -> None: ...


class KinematicWorld:
    """Bodies moved exactly by their kinematics (``cfg.kinematics``'s ``Dynamics``), one step per ``advance``; the
    odometry is the truth. ``start``: ``(n, 2)`` or ``(n, 3)`` (yaw 0 when absent); ``cfg``: a config with
    ``kinematics`` and ``dim`` (a ``consensus.settings.RobotBaseConfig``)."""

    def __init__(self, cfg, start, *, seed: int = 0) -> None:
        start = np.asarray(start, dtype=float)
        n = len(start)
        self.dim = int(cfg.dim)
        self.dynamics = dynamics_of(cfg.kinematics)
        self.pose = np.zeros((n, 3))
        self.pose[:, : start.shape[1]] = start[:, :3]
        self.mover = self.dynamics.mover(n, self.dim)
        self.cmd = np.zeros((n, 3))
        self.goals: np.ndarray | None = None
        self.time = 0.0

    def set_commands(self, cmd: np.ndarray) -> None:
        """The commands until the next call (``World``)."""
        self.cmd = np.asarray(cmd, dtype=float)
        self.goals = None

    def drive_to(self, goals: np.ndarray) -> None:
        """Paper 1's point mass without a collision filter: until the next ``set_commands``, each body's PID acts on
        its goal (``goals`` ``(n, dim)``, where each robot is going) instead of the velocity set-point, as in the
        paper's code. Only a mover with a mass (``Dynamics.has_mass``) takes goals."""
        if not self.dynamics.has_mass:
            raise ValueError(f"drive_to: {type(self.dynamics).__name__} bodies have no PID to give a goal to")
        self.goals = np.asarray(goals, dtype=float)

    def advance(self, seconds: float) -> int:
        self.pose = self.mover.step(self.pose, self.cmd, seconds, self.goals)
        self.time += float(seconds)
        return 1

    def poses(self) -> np.ndarray:
        return self.pose

    def reported_poses(self) -> np.ndarray:
        return self.pose

    def velocities(self) -> np.ndarray:
        return self.mover.velocities()

    def judgement(self) -> dict[str, Any]:
        return {}

    def save_xml(self, out_dir) -> None:
        """Nothing to save: the kinematic world is its config (in the run's manifest)."""
