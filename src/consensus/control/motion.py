"""How robots move, by name: the kinematics and the simulator registry. The one place these names are written.

* Kinematics (``ControlParams.kinematics``): ``SINGLE_INTEGRATOR`` (velocity commands, the default), ``UNICYCLE``
  (forward speed and turn rate) and ``POINT_MASS_PID`` (paper 1's 2-D robot); ``KINEMATICS`` lists them. What each
  means is its ``consensus.control.dynamics.Dynamics``.
* Simulators (``sim``, ``consensus.settings.SimParams``): who moves the robots of a ROS run. A ``Simulator`` record
  names its process factory and its checks as ``"module:function"`` (imported on first use, so naming a simulator
  imports none of its code):

  * ``processes(cfg, params, *, use_sim_time) -> [ProcessSpec]``: the processes that move the robots, given
    ``params``, the parameters the scenario gives its simulator process (``publish_clock``, the start positions,
    the workspace, ...); empty for a world the robots' own drivers move (``none``);
  * ``prepare(cfg, **options) -> (cfg, changes)`` (optional): checks before anything starts (installed, a display)
    and the settings the simulator needs; ``changes`` (field -> [was, now]) goes into the manifest;
  * ``headless``: a ``--headless`` run may name it (the robots then move in the headless loop);
  * ``world`` (optional): ``"module:Class"`` of the world a headless loop moves the bodies in (``Class(cfg, start,
    seed=...)``, a ``consensus.control.dynamics.world.World``: ``consensus.sims.headless_world``); without one the
    loop moves them in the kinematic world (``KinematicWorld``, the one the built-in ``sim`` node wraps);
  * ``launch_only``: it starts only through this launch file (``consensus run`` says so);
  * ``renderer`` (optional): ``"module:function"`` drawing a run's recorded poses in its world, the frames of
    ``consensus.runs.video`` (``render_frames(params, times, poses, width, height)``);
  * ``ground_truth``: it publishes every robot's true pose, all in one message (``names.GROUND_TRUTH``), which a
    scenario's recorder then records instead of each robot's odometry.

  ``consensus.sims.sim_processes`` / ``prepare_sim`` are what a scenario calls. Adding a simulator is one
  ``register_sim`` call here and its module (docs/architecture.md, "How to add a simulator").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from consensus.loader import Registry, load

SINGLE_INTEGRATOR = "single_integrator"
UNICYCLE = "unicycle"
POINT_MASS_PID = "point_mass_pid"
KINEMATICS = (SINGLE_INTEGRATOR, UNICYCLE, POINT_MASS_PID)


def _call(target: str, *args: Any, **kwargs: Any) -> Any:
    return load(target)(*args, **kwargs)


@dataclass(frozen=True)
class Simulator:
    name: str
    summary: str                  # one line: what moves the robots
    processes: str                # "module:function": processes(cfg, params, *, use_sim_time) -> [ProcessSpec]
    prepare: str = ""             # "module:function": prepare(cfg, **options) -> (cfg, changes); "" = nothing to do
    headless: bool = True         # a --headless run may name it
    launch_only: str = ""         # the launch file it starts through (consensus run refuses it, naming that file)
    world: str = ""               # "module:Class": the world a headless loop moves the bodies in ("" = kinematics)
    renderer: str = ""            # "module:function": render_frames(params, times, poses, width, height) -> frames
    ground_truth: bool = False    # it publishes every robot's true pose on names.GROUND_TRUTH (the run's record)

    def make_processes(self, cfg, params: dict, *, use_sim_time: bool = False) -> list:
        return _call(self.processes, cfg, params, use_sim_time=use_sim_time)

    def make_ready(self, cfg, **options: Any) -> tuple[Any, dict]:
        return _call(self.prepare, cfg, **options) if self.prepare else (cfg, {})

    def make_world(self, cfg, start, *, seed: int = 0) -> Any:
        return _call(self.world, cfg, start, seed=seed) if self.world else None


#: every simulator by name (``consensus.loader.Registry``); an unknown name is a ``ValueError`` naming the valid ones
#: (configs refuse an unknown ``sim`` in their checks, so it is a programming error)
_SIMS: Registry[Simulator] = Registry("sim")


def register_sim(sim: Simulator) -> Simulator:
    return _SIMS.register(sim)


def sim_names() -> tuple[str, ...]:
    """Every simulator's name, in registration order (the first is the default of ``sim``)."""
    return _SIMS.names()


def sim_spec(name: str) -> Simulator:
    """The simulator called ``name`` (``_SIMS``)."""
    return _SIMS.get(name)


BUILTIN = register_sim(Simulator(
    "builtin", "our simulator node `sim` (consensus.ros.sim): the kinematics above, odometry and /clock",
    "consensus.sims:builtin_processes", ground_truth=True))
TURTLESIM = register_sim(Simulator(
    "turtlesim", "ROS 2's turtlesim and our bridge (docs/turtlesim.md)", "consensus.sims.turtlesim:processes",
    prepare="consensus.sims.turtlesim:prepare", headless=False))
GAZEBO = register_sim(Simulator(
    "gazebo", "gz sim and its bridge (docs/gazebo.md)", "consensus.sims:builtin_processes",
    launch_only="gazebo.launch.py"))
NONE = register_sim(Simulator(
    "none", "no simulator: real robots (robots_file) or another driver move them", "consensus.sims:no_processes"))
MUJOCO = register_sim(Simulator(
    "mujoco", "a MuJoCo physics world (consensus.sims.mujoco_world): bodies with mass that really collide, and the "
    "contacts it counts", "consensus.sims.mujoco_world:processes", prepare="consensus.sims.mujoco_world:prepare",
    world="consensus.sims.mujoco_world:MujocoWorld", renderer="consensus.sims.mujoco_world:render_frames",
    ground_truth=True))
