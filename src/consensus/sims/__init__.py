"""Simulators and external worlds the robots can move in, one package each: ``builtin`` (our ``sim`` node),
``turtlesim``, ``gazebo`` (gz sim), ``none`` (real robots), ``mujoco``, and the vendors' driver-level simulators
``turtlebot3_fake`` (TurtleBot 3's fake node) and ``crazyswarm2`` (crazyswarm2's simulator).

A simulator's package holds everything of it: its record ``SIM`` (a ``consensus.control.motion.Simulator``) in its
``__init__`` (which imports nothing else, so naming a simulator imports none of its code), its world, process
factory and checks, and its ROS node in its ``ros`` module (the only module of it that may import rclpy). One line
of ``SIMULATORS`` registers it: the registry of ``consensus.control.motion`` loads them in this order on its first
use (the first is the default of ``sim``).

This package also holds what every scenario that moves robots calls, so each takes its ``sim`` the same way:
``prepare_sim(cfg)`` before anything starts (``check_run`` first for ``consensus run``), then
``sim_processes(cfg, params, use_sim_time=...)`` in its process list, ``params`` being what it would give the
built-in ``sim`` process (start positions, workspace, ``publish_clock``, ...).
"""
from __future__ import annotations

from typing import Any

from consensus.control.motion import sim_spec
from consensus.errors import ConfigError

#: every simulator: one ``"module:attr"`` of its ``Simulator`` record each (docs/architecture.md, "How to add a
#: simulator")
SIMULATORS = (
    "consensus.sims.builtin:SIM",
    "consensus.sims.turtlesim:SIM",
    "consensus.sims.gazebo:SIM",
    "consensus.sims.none:SIM",
    "consensus.sims.mujoco:SIM",
    "consensus.sims.turtlebot3_fake:SIM",
    "consensus.sims.crazyswarm2:SIM",
)


def sim_processes(cfg, params: dict, *, use_sim_time: bool = False) -> list:
    """The processes of ``cfg.sim`` (the built-in ``sim`` for a config without that field)."""
    return sim_spec(getattr(cfg, "sim", "builtin")).make_processes(cfg, params, use_sim_time=use_sim_time)


def prepare_sim(cfg, **options: Any) -> tuple[Any, dict]:
    """``cfg`` made ready for its simulator (checks before anything starts, the settings it needs) and the changes
    for the manifest (field -> [was, now]; empty when none)."""
    return sim_spec(getattr(cfg, "sim", "builtin")).make_ready(cfg, **options)


def headless_world(cfg, start, *, seed: int = 0):
    """The world a headless loop moves ``cfg``'s bodies in, its robots at ``start`` ((n, 3): x, y, yaw): the
    simulator's own (``Simulator.world``: MuJoCo's for ``sim: mujoco``), else the kinematic world
    (``consensus.control.dynamics.world.KinematicWorld``, the one the built-in ``sim`` node wraps)."""
    world = sim_spec(getattr(cfg, "sim", "builtin")).make_world(cfg, start, seed=seed)
    if world is None:
        from consensus.control.dynamics.world import KinematicWorld

        world = KinematicWorld(cfg, start, seed=seed)
    return world


def check_run(cfg, *, headless: bool, world_ok: bool = True) -> None:
    """One ``ConfigError`` when ``consensus run`` cannot use ``cfg.sim`` this way (headless, or launch-only; a
    simulator whose bodies live in a world, headless, for a scenario whose headless loop has none: ``world_ok``,
    ``Scenario.headless_world``)."""
    sim = sim_spec(getattr(cfg, "sim", "builtin"))
    if headless and not sim.headless:
        raise ConfigError(f"sim '{sim.name}' runs the robots as ROS 2 nodes: drop --headless")
    if headless and sim.world and not world_ok:
        raise ConfigError(f"sim '{sim.name}' moves bodies in its world, which this scenario's headless loop does not "
                          f"use: drop --headless (its ROS run moves them in {sim.name})")
    if sim.launch_only:
        raise ConfigError(f"sim '{sim.name}' starts with {sim.summary}: ros2 launch consensus {sim.launch_only}")
