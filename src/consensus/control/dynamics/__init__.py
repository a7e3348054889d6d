"""How a body moves under its commands, one ``Dynamics`` per kinematics (the VMAS shape), and the one ``World`` that
moves a fleet's bodies: the only place that knows what a kinematics means.

* ``Dynamics`` (``consensus.control.dynamics.base``): the rules of one kinematics, registered by its name
  (``ControlParams.kinematics``: ``single_integrator``, ``unicycle``, ``point_mass_pid``;
  ``consensus.control.motion.KINEMATICS``): its controller, the point its collision filter keeps clear and how a
  filtered velocity becomes its command, what its odometry's twist means, and the ``Mover`` that integrates N
  bodies. ``dynamics_of(name)`` gives it; code elsewhere asks it, never compares the name.
* ``World`` (``consensus.control.dynamics.world``): ``set_commands``, ``advance``, ``poses``, ``reported_poses``,
  ``velocities``, ``judgement``. ``KinematicWorld`` integrates the dynamics; MuJoCo's world
  (``consensus.sims.mujoco.world.MujocoWorld``) has the same shape. The ROS ``sim`` node wraps one, and so do the
  headless loops (aggregation and disaster).

Adding a kinematics: a ``Dynamics`` subclass in ``models.py`` and its ``register_dynamics`` line.
"""
from __future__ import annotations

from consensus.control.dynamics.base import Dynamics, Mover, dynamics_names, dynamics_of, register_dynamics
from consensus.control.dynamics import models as _models  # noqa: F401  (registers the built-in kinematics)

__all__ = ["Dynamics", "Mover", "dynamics_names", "dynamics_of", "register_dynamics"]
