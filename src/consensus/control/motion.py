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
    scenario's recorder then records instead of each robot's odometry;
  * ``executables``: its ROS executables (executable -> module with ``main()``), which ``consensus.registry``
    adds to the package's;
  * ``drives``: the robot presets (``consensus.robots.presets``) it stands in for: a robots file whose robots all
    have one of them keeps this ``sim`` (a vendor's simulator of those robots: ``turtlebot3_fake``,
    ``crazyswarm2``), where any other real robots run with ``sim: none``;
  * ``sim_time``: ``"required"`` (it is the clock: ``--use-sim-time``), ``"forbidden"`` (its nodes run on the
    wall clock) or ``"optional"``; a run that breaks the rule is refused (``check_clock``).

  Each simulator is one package ``consensus.sims.<name>`` whose ``SIM`` is its record, listed by one line of
  ``consensus.sims.SIMULATORS`` (``LISTED``); this module holds only the record's type and the registry, which
  loads that list on its first use (``register_sim`` adds one more). ``consensus.sims.sim_processes`` /
  ``prepare_sim`` are what a scenario calls (docs/architecture.md, "How to add a simulator").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from consensus.loader import Registry, load

SINGLE_INTEGRATOR = "single_integrator"
UNICYCLE = "unicycle"
POINT_MASS_PID = "point_mass_pid"
KINEMATICS = (SINGLE_INTEGRATOR, UNICYCLE, POINT_MASS_PID)
SIM_TIME_RULES = ("required", "forbidden", "optional")      # Simulator.sim_time


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
    executables: dict = field(default_factory=dict)   # its ROS executables: executable -> module with main()
    drives: tuple[str, ...] = ()  # the robot presets it simulates (a robots file of those keeps this sim)
    sim_time: str = "optional"    # SIM_TIME_RULES: "required" | "forbidden" | "optional"

    def __post_init__(self) -> None:
        if self.sim_time not in SIM_TIME_RULES:
            raise ValueError(f"Simulator {self.name}: sim_time {self.sim_time!r} is not one of {SIM_TIME_RULES}")

    def check_clock(self, use_sim_time: bool) -> None:
        """One ``ConfigError`` when a run's clock breaks this simulator's ``sim_time`` rule."""
        from consensus.errors import ConfigError

        if self.sim_time == "required" and not use_sim_time:
            raise ConfigError(f"sim '{self.name}' is the run's clock (it publishes /clock): run it with "
                              f"--use-sim-time (ros2 launch: use_sim_time:=true)")
        if self.sim_time == "forbidden" and use_sim_time:
            raise ConfigError(f"sim '{self.name}' runs on the wall clock (its nodes stamp and time out by it, and "
                              f"nothing publishes /clock): drop --use-sim-time (use_sim_time:=false)")

    def make_processes(self, cfg, params: dict, *, use_sim_time: bool = False) -> list:
        self.check_clock(use_sim_time)
        return _call(self.processes, cfg, params, use_sim_time=use_sim_time)

    def make_ready(self, cfg, **options: Any) -> tuple[Any, dict]:
        return _call(self.prepare, cfg, **options) if self.prepare else (cfg, {})

    def make_world(self, cfg, start, *, seed: int = 0) -> Any:
        return _call(self.world, cfg, start, seed=seed) if self.world else None


#: where the simulators are listed: ``consensus.sims.SIMULATORS``, one ``"module:attr"`` of a ``Simulator`` record
#: each, in order (the first is the default of ``sim``), loaded on the first question to the registry
LISTED = "consensus.sims:SIMULATORS"

#: every simulator by name (``consensus.loader.Registry``); an unknown name is a ``ValueError`` naming the valid ones
#: (configs refuse an unknown ``sim`` in their checks, so it is a programming error)
_SIMS: Registry[Simulator] = Registry("sim")


def _sims() -> Registry[Simulator]:
    """``_SIMS``, the listed simulators registered into it first if it is still empty (also a test's copy)."""
    if not _SIMS.names():
        for target in load(LISTED):
            _SIMS.register(_record(target))
    return _SIMS


def _record(sim: Simulator | str) -> Simulator:
    record = load(sim) if isinstance(sim, str) else sim
    if not isinstance(record, Simulator):
        raise TypeError(f"{sim!r} is not a consensus.control.motion.Simulator")
    return record


def register_sim(sim: Simulator | str) -> Simulator:
    """Register a simulator after the listed ones: its record, or the ``"module:attr"`` naming it (a simulator
    outside ``consensus.sims``, e.g. a test's)."""
    return _sims().register(_record(sim))


def sim_names() -> tuple[str, ...]:
    """Every simulator's name, in registration order (the first is the default of ``sim``)."""
    return _sims().names()


def sim_spec(name: str) -> Simulator:
    """The simulator called ``name`` (``_SIMS``)."""
    return _sims().get(name)
