"""Every launch file of the package, built from the registry: ``launch/<scenario>.launch.py`` is two lines.

    from consensus.runs.launch_file import launch_description
    def generate_launch_description():
        return launch_description("aggregation")

(``launch/turtlesim.launch.py`` is the aggregation's with the ``sim`` argument defaulting to ``turtlesim``:
``launch_description("aggregation", sim="turtlesim")``.)

The launch arguments are the same in every launch file for the same ideas (``COMMON_ARGS``: ``config``,
``use_sim_time``, ``output_dir``, ``seed``, ``num_robots``, ``single_process``, ``llm_backend``,
``llm_model``, ``llm_base_url``), plus the scenario's own (``Scenario.launch_args``); every argument but ``config`` and
``use_sim_time`` is the config field of the same name. An empty value keeps the config file's value. The config is
validated before any process starts, and an argument the launch file does not declare is refused with one clear
message (``ros2 launch`` itself would ignore it silently). The processes are the scenario's ``processes(cfg)`` -
the same list ``consensus run <scenario>`` starts - as ``launch_ros.actions.Node`` actions; the launch shuts down
when the process marked ``ends_run`` exits. ``launch/gazebo.launch.py`` is the aggregation with gz sim in place of
the builtin ``sim`` (a ``LaunchVariant``: ``consensus.sims.gazebo.world.GAZEBO``). ``security:=true`` (with
``keystore:=DIR``, default ``$ROS_SECURITY_KEYSTORE``) runs every node in its SROS2 enclave, as
``consensus run --security`` does (``consensus.runs.security``; refused where the DDS lacks the security plugins).
``namespace:=fleet_a`` runs the whole run under ``/fleet_a`` (``/fleet_a/robot_0/cmd_vel``, ``/fleet_a/recorder``),
so two fleets can share a ROS domain; ``/diagnostics``, ``/tf``, ``/clock`` and the e-stop stay absolute.

``launch`` and ``launch_ros`` come with a ROS 2 install (they are not on PyPI), so they are imported only here.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from consensus.errors import ConfigError
from consensus.runs import security
from consensus.runs.processes import (EXPENDABLE, FINISH_GRACE_S, FINISHES, NEEDED, STOP_FIRST, ProcessSpec,
                                      writes_record)

COMMON_ARGS = ("num_robots", "seed", "single_process", "llm_backend", "llm_model", "llm_base_url",
               "output_dir")


#: not a config field: the ROS namespace of the whole run, so that two fleets can share a domain
NAMESPACE_ARG = ("namespace", "", "ROS namespace of the whole run (e.g. fleet_a: /fleet_a/robot_0/cmd_vel, "
                                  "/fleet_a/recorder); empty: the root namespace")
_NAME_PART = r"[A-Za-z_][A-Za-z0-9_]*"

#: SROS2 (``consensus.runs.security``): not config fields; argument -> (default, description)
SECURITY_ARGS = {
    "security": ("false", "true: every node in its SROS2 enclave (enforced; docs/real-robots.md)"),
    "keystore": ("", "the SROS2 keystore of security:=true (default: $ROS_SECURITY_KEYSTORE; made if missing)"),
}


def node_actions(specs: list[ProcessSpec], params_file: Path) -> list:
    """One ``launch_ros.actions.Node`` per spec (the run's parameters file, then the spec's own parameters; another
    package's node only its own); the whole launch shuts down when the process marked ``ends_run`` exits - with an
    error (``ros2 launch`` exits 1, one line naming the process) when it failed, so a failed run is never reported
    as a success. Any other process that dies with an error ends the run the same way, except a robot's own
    process (``expendable``: unless it was the last robot left) and ``GOES_ON_WITHOUT`` (the bag recorder), as under
    ``consensus run``. At the end of the run the processes that stop first (``ProcessSpec.stop_stage``
    ``STOP_FIRST``: the drones' links, which land them) get SIGINT alone, and the launch shuts down once they have
    exited (or after their grace); a Ctrl-C of ``ros2 launch`` still signals every process at once."""
    import signal

    from launch.actions import EmitEvent, RegisterEventHandler, TimerAction
    from launch.event_handlers import OnProcessExit
    from launch.events import Shutdown
    from launch.events.process import SignalProcess
    from launch_ros.actions import Node

    from consensus.errors import ConsensusError

    firsts: dict[str, object] = {}          # path -> the Node action of each process that stops first
    firsts_left: set[str] = set()

    def shutdown(name):
        return [EmitEvent(event=Shutdown(reason=f"{name} finished the run"))]

    def end_of_run(event, context, name):
        if event.returncode not in (0, None, -2, 130):           # -2 / 130: stopped by Ctrl-C with the launch
            raise ConsensusError(f"{name} ended the run with exit code {event.returncode} (its error is above)")
        live = [path for path in firsts if path in firsts_left]
        if not live:
            return shutdown(name)
        grace = max(spec.grace_s for spec in specs if spec.path in live) or 10.0
        return [*(EmitEvent(event=SignalProcess(signal_number=signal.SIGINT,
                                                process_matcher=lambda action, node=firsts[path]: action is node))
                  for path in live),
                TimerAction(period=grace, actions=shutdown(name))]

    def first_stopped(event, context, name):
        firsts_left.discard(name)
        if not firsts_left and not context.is_shutdown:
            return shutdown(f"{name} (the last of the processes that stop first)")
        return lost(event, context, name)

    def died(event, context) -> bool:
        # the exits of a launch that is shutting down, and a stop by a signal, are not deaths
        return not (context.is_shutdown or event.returncode in (0, None, -2, 130, -15, 143))

    def lost(event, context, name):
        # as under `consensus run`: a process the run needs (the sim, the fleet, the topology node...) that dies ends
        # the run with an error; a robot's own process (single_process:=false) or the bag recorder may die, the run
        # goes on (the recorder lists a lost robot)
        if not died(event, context):
            return None
        raise ConsensusError(f"process '{name}' exited with code {event.returncode}; the run ended (its error is "
                             f"above)")

    robots = {spec.path for spec in specs if spec.expendable}
    robots_lost: set[str] = set()

    def robot_lost(event, context, name):
        # the last robot process that dies ends the run, as under `consensus run` (nothing would move again)
        if not died(event, context):
            return None
        robots_lost.add(name)
        if robots_lost >= robots:
            raise ConsensusError(f"every robot process died (the last: '{name}', exit code {event.returncode}); "
                                 f"the run ended (its error is above)")
        return None

    actions = []
    for spec in specs:
        own = spec.own_params_file(params_file.parent)     # another package's parameter tree, in the run directory
        node = Node(package=spec.package, executable=spec.executable, name=spec.name,
                    namespace=spec.namespace or None,
                    parameters=([str(params_file)] if spec.ours else []) + ([str(own)] if own else [])
                    + [spec.ros_params],
                    ros_arguments=security.enclave_args(spec) or None,     # security:=true: its enclave
                    output="screen", emulate_tty=True,
                    **({"sigterm_timeout": str(FINISH_GRACE_S)} if writes_record(spec) else {}))
        actions.append(node)
        on_death = {FINISHES: functools.partial(end_of_run, name=spec.name),           # ProcessSpec.death_rule
                    EXPENDABLE: functools.partial(robot_lost, name=spec.path),
                    NEEDED: functools.partial(lost, name=spec.name)}.get(spec.death_rule)    # GOES_ON: nothing
        if spec.stop_stage == STOP_FIRST:
            firsts[spec.path] = node
            firsts_left.add(spec.path)
            on_death = functools.partial(first_stopped, name=spec.path)
        if on_death is not None:
            actions.append(RegisterEventHandler(OnProcessExit(target_action=node, on_exit=on_death)))
    return actions


def launch_arguments(name: str) -> dict[str, str]:
    """The config-field launch arguments of scenario ``name`` (``COMMON_ARGS`` its config has, ``sim`` where it
    has that field, then its own ``launch_args``): argument -> description, the field's doc and unit
    (``settings.field_help``); ``llm_backend`` and ``sim`` name the registered backends and simulators."""
    from consensus.control.motion import sim_names
    from consensus.llm.backends import names as backend_names
    from consensus.registry import scenario
    from consensus.settings import field_help

    sc = scenario(name)
    cls = sc.config_cls
    own = set(cls.field_names())
    args = {k: field_help(cls, k) for k in (*COMMON_ARGS, "sim", *sc.launch_args) if k in own}
    choices = {"llm_backend": backend_names(), "sim": sim_names()}
    return {k: f"{' | '.join(choices[k])}: {v}" if k in choices else v for k, v in args.items()}


def launch_description(name: str, *, variant: LaunchVariant | None = None, **defaults: str):
    """The ``LaunchDescription`` of scenario ``name`` (module docstring); ``defaults``: launch arguments whose
    default is not empty (e.g. ``sim="turtlesim"`` in launch/turtlesim.launch.py); ``variant``: another world
    for the same scenario (``LaunchVariant``, e.g. gz sim in launch/gazebo.launch.py)."""
    from consensus.runs.ament import package_share
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    from consensus.registry import scenario

    sc = scenario(name)
    fields = launch_arguments(name)
    share = package_share("consensus")
    if share is None:
        raise ConfigError("the consensus package is not in the ament index (AMENT_PREFIX_PATH): install it "
                          "(pip install . with AMENT_PREFIX_PATH=$VIRTUAL_ENV, or colcon build and source "
                          "install/setup.bash)")
    default_config = os.path.join(share, "config", sc.config_file)
    args = [DeclareLaunchArgument("config", default_value=default_config, description="the /**: parameters file"),
            DeclareLaunchArgument(NAMESPACE_ARG[0], default_value=NAMESPACE_ARG[1], description=NAMESPACE_ARG[2]),
            DeclareLaunchArgument("use_sim_time", default_value=str(bool(variant and variant.use_sim_time)).lower(),
                                  description="the sim publishes /clock and all other nodes follow it")]
    unknown = sorted(set(defaults) - set(fields))
    if unknown:
        raise ValueError(f"launch_description('{name}'): no launch argument(s) {', '.join(unknown)}")
    args += [DeclareLaunchArgument(arg, default_value=str(defaults.get(arg, "")), description=desc)
             for arg, desc in fields.items()]
    variant = variant or LaunchVariant()
    args += [DeclareLaunchArgument(arg, default_value=default, description=desc)
             for arg, (default, desc) in {**SECURITY_ARGS, **variant.args}.items()]
    declared = {"config", "use_sim_time", NAMESPACE_ARG[0], *fields, *SECURITY_ARGS, *variant.args}
    return LaunchDescription(args + [OpaqueFunction(function=functools.partial(_setup, name=name, declared=declared,
                                                                               variant=variant))])


class LaunchVariant:
    """A launch file that runs a scenario in another world (e.g. ``consensus.sims.gazebo.world.GAZEBO``): its extra
    launch arguments (name -> (default, description)), the default of ``use_sim_time``, the config overrides it
    needs (``overrides(context)``; may check what must be installed) and the actions it starts in place of the
    plain node list (``actions(cfg, specs, params_file, context)``)."""

    args: dict[str, tuple[str, str]] = {}
    use_sim_time: bool = False

    def overrides(self, context) -> dict:
        return {}

    def actions(self, cfg, specs: list[ProcessSpec], params_file: Path, context) -> list:
        return node_actions(specs, params_file)


def _setup(context, name: str, declared: set[str], variant: LaunchVariant):
    from launch.substitutions import LaunchConfiguration

    from consensus.registry import scenario
    from consensus.runs.processes import prepare_run
    from consensus.runs.rundir import default_run_dir
    from consensus.settings import load_flat

    given = getattr(context, "launch_configurations", context)     # a LaunchContext (or a plain mapping)
    unknown = sorted(set(given) - declared)
    sc = scenario(name)
    renamed = sc.config_cls.renamed_fields() if hasattr(sc.config_cls, "renamed_fields") else {}
    for arg in unknown:
        if arg in renamed and renamed[arg] in declared:
            raise ConfigError(f"{name}.launch.py: launch argument {arg} is now called {renamed[arg]} (one meaning "
                              f"per word across scenarios)")
    if unknown:
        raise ConfigError(f"{name}.launch.py: unknown launch argument(s) {', '.join(unknown)}; "
                          f"valid: {', '.join(sorted(declared))}")
    config_file = LaunchConfiguration("config").perform(context)
    ns = given.get(NAMESPACE_ARG[0], "").strip().strip("/")
    if ns and not re.fullmatch(rf"{_NAME_PART}(/{_NAME_PART})*", ns):
        raise ConfigError(f"{name}.launch.py: namespace:={ns}: not a ROS namespace (letters, digits and _, parts "
                          f"separated by /, each not starting with a digit)")
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context).lower() in ("true", "1")
    overrides = {arg: LaunchConfiguration(arg).perform(context) for arg in launch_arguments(name)}
    overrides = {k: v for k, v in overrides.items() if v != ""}
    overrides.update(variant.overrides(context))        # e.g. checks that gz is installed, before anything starts
    # validated here, before any process starts: a bad value stops the launch with one clear message
    cfg = load_flat(sc.config_cls, config_file or None, **overrides)
    secured = given.get("security", "false").strip().lower()
    if secured not in ("true", "false", "1", "0", ""):
        raise ConfigError(f"{name}.launch.py: security:={secured}: expected true or false")
    if secured in ("true", "1"):        # exported to this process: every node started after inherits it
        security.enable(given.get("keystore", "") or None, num_robots=getattr(cfg, "num_robots", 1),
                        single_process=getattr(cfg, "single_process", False),
                        robots_file=getattr(cfg, "robots_file", ""))
    out = cfg.output_dir or default_run_dir(name)
    if sc.prepare is not None:
        cfg, params_file = sc.prepare(cfg, out)
    else:
        cfg, params_file = prepare_run(cfg, out, scenario=name)
    specs = sc.processes(cfg, use_sim_time=use_sim_time)
    if security.enabled():
        security.check_keystore(os.environ.get("ROS_SECURITY_KEYSTORE", ""), specs)
    actions = variant.actions(cfg, specs, params_file, context)
    if not ns:
        return actions
    from launch.actions import GroupAction
    from launch_ros.actions import PushRosNamespace

    # every node (and so every relative name: the robots' topics, health, the graph) under /<ns>; not scoped, so the
    # end-of-run handlers stay registered for the whole launch
    return [GroupAction([PushRosNamespace(ns), *actions], scoped=False)]
