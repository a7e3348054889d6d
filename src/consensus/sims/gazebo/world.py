"""Gazebo (gz sim) in place of the builtin ``sim``: an SDF world with one model per robot and the ros_gz_bridge
configuration that joins it to the ROS graph. Targets ROS 2 Kilted with Gazebo Ionic (the pairing of REP 2000 and
of ros_gz's ``kilted`` branch); see docs/gazebo.md.

The world starts every robot where the builtin ``sim`` would (the run's initial positions, or the ``sim`` process's
own ``initial_positions``, e.g. the disaster drones' start cells). Each model is named ``robot_<i>`` and gets

* ``kinematics: unicycle`` -> a differential-drive ground robot (two wheels and a caster) driven by the
  ``DiffDrive`` system;
* ``kinematics: single_integrator`` (the default, and the disaster drones) -> a velocity-controlled body: the
  ``VelocityControl`` system sets its body-frame velocity directly, gravity is off and it holds ``height`` metres
  (``FLY_HEIGHT_M`` unless given). A documented simplification of a multicopter (no rotors, no attitude dynamics);
  without collisions, so bodies pass through each other like the builtin ``sim``'s points;

and an ``OdometryPublisher`` that publishes the model's world pose (frame ``world``, child ``robot_<i>/base_link``,
like the builtin ``sim``). The bridge maps ``/robot_<i>/cmd_vel`` (ROS -> gz), ``/robot_<i>/odom`` (gz -> ROS) and
``/clock`` (gz -> ROS; every node then runs with ``use_sim_time``). DiffDrive's own odometry (dead reckoning from the
start pose) goes to ``wheel_odometry`` and is not bridged.

    consensus gazebo-world --scenario aggregation --robots 4 --out /tmp/gz    # world.sdf + bridge.yaml

``launch/gazebo.launch.py`` writes the same two files into the run directory and starts ``gz sim`` and the bridge.
"""
from __future__ import annotations

import argparse
import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from consensus.errors import ConfigError
from consensus.control.motion import SINGLE_INTEGRATOR, UNICYCLE
from consensus.control.dynamics import dynamics_of
from consensus.runs.launch_file import LaunchVariant, node_actions
from consensus.settings import RobotBaseConfig

ROS_DISTRO, GZ_RELEASE = "kilted", "ionic"
INSTALL_HINT = (f"install ros_gz for ROS 2 {ROS_DISTRO.capitalize()} (it brings Gazebo {GZ_RELEASE.capitalize()}): "
                f"sudo apt install ros-{ROS_DISTRO}-ros-gz, then source /opt/ros/{ROS_DISTRO}/setup.bash")
FLY_HEIGHT_M = 2.0                 # velocity-controlled bodies hold this height
WHEEL_RADIUS, WHEEL_SEPARATION = 0.1, 0.35
ODOM_RATE_HZ = 20.0                # like the builtin sim's sim_rate_hz default
TWIST, ODOM, CLOCK = (("geometry_msgs/msg/Twist", "gz.msgs.Twist"), ("nav_msgs/msg/Odometry", "gz.msgs.Odometry"),
                      ("rosgraph_msgs/msg/Clock", "gz.msgs.Clock"))


def require() -> None:
    """ConfigError naming what to install unless the ``gz`` tool and the ``ros_gz_bridge`` package are found."""
    missing = [] if shutil.which("gz") else ["the `gz` command (Gazebo)"]
    from consensus.runs.ament import package_prefix

    if package_prefix("ros_gz_bridge") is None:       # no ament index or no such package: both mean "not installed"
        missing.append("the ROS package ros_gz_bridge")
    if missing:
        raise ConfigError(f"gazebo: {' and '.join(missing)} not found; {INSTALL_HINT}")


@dataclass(frozen=True)
class Robot:
    name: str            # model name = ROS namespace robot_<i>
    x: float
    y: float
    drive: str           # "diff_drive" | "velocity"
    z: float = 0.0

    @property
    def cmd_topic(self) -> str:
        return f"/model/{self.name}/cmd_vel"

    @property
    def odom_topic(self) -> str:
        return f"/model/{self.name}/odometry"


def sim_config(cfg, specs=()) -> RobotBaseConfig:
    """The settings the builtin ``sim`` process of ``specs`` would run with in a run of config ``cfg``: the fields
    ``cfg`` shares with ``RobotBaseConfig``, then that process's own parameters (e.g. the disaster drones' start
    cells as ``initial_positions``)."""
    own = next((dict(s.params) for s in specs if s.executable == "sim"), {})
    own.pop("use_sim_time", None)
    shared = {n: getattr(cfg, n) for n in RobotBaseConfig.field_names() if n in cfg.field_names()}
    return RobotBaseConfig.from_dict({**shared, **own}, source="gazebo world")


def robots(base: RobotBaseConfig, height: float = FLY_HEIGHT_M) -> list[Robot]:
    """One model per robot at the run's initial positions (``consensus.control.kinematics.initial_positions``)."""
    from consensus.control.kinematics import initial_positions

    pos = initial_positions(base)
    drive = "diff_drive" if dynamics_of(base.kinematics).turns else "velocity"
    z = WHEEL_RADIUS if drive == "diff_drive" else height
    return [Robot(f"robot_{i}", float(p[0]), float(p[1]) if base.dim == 2 else 0.0, drive, z)
            for i, p in enumerate(pos)]


def _el(parent, tag: str, text=None, **attrs):
    e = ET.SubElement(parent, tag, {k: str(v) for k, v in attrs.items()})
    if text is not None:
        e.text = str(text)
    return e


def _plugin(parent, system: str, filename: str, **params):
    p = _el(parent, "plugin", filename=f"gz-sim-{filename}-system", name=f"gz::sim::systems::{system}")
    for k, v in params.items():
        _el(p, k, v)
    return p


def _link(model, name: str, shape: str, size, mass: float, pose: str = "", *, collide=True,
          gravity=True, mu=None):
    link = _el(model, "link", name=name)
    if pose:
        _el(link, "pose", pose)
    if not gravity:
        _el(link, "gravity", "false")
    inertial = _el(link, "inertial")
    _el(inertial, "mass", mass)
    inertia = _el(inertial, "inertia")
    for k in ("ixx", "iyy", "izz"):
        _el(inertia, k, round(mass * 0.01, 6))
    for part in ("visual", "collision") if collide else ("visual",):
        g = _el(_el(_el(link, part, name=part), "geometry"), shape)
        _el(g, "size" if shape == "box" else "radius", size)
        if shape == "cylinder":
            _el(g, "length", 0.05)
    if mu is not None:
        ode = _el(_el(_el(link.find("collision"), "surface"), "friction"), "ode")
        _el(ode, "mu", mu)
        _el(ode, "mu2", mu)
    return link


def _model(world, robot: Robot) -> None:
    model = _el(world, "model", name=robot.name)
    _el(model, "pose", f"{robot.x!r} {robot.y!r} {robot.z!r} 0 0 0")
    if robot.drive == "diff_drive":
        _link(model, "base_link", "box", "0.4 0.3 0.1", 2.0)
        for side, y in (("left", WHEEL_SEPARATION / 2), ("right", -WHEEL_SEPARATION / 2)):
            _link(model, f"{side}_wheel", "cylinder", WHEEL_RADIUS, 0.2, f"0 {y:g} 0 -1.5707963 0 0")
            joint = _el(model, "joint", name=f"{side}_wheel_joint", type="revolute")
            _el(joint, "parent", "base_link")
            _el(joint, "child", f"{side}_wheel")
            _el(_el(joint, "axis"), "xyz", "0 0 1")
        _link(model, "caster", "sphere", WHEEL_RADIUS / 2, 0.1, f"-0.15 0 {-WHEEL_RADIUS / 2:g} 0 0 0", mu=0.0)
        caster = _el(model, "joint", name="caster_joint", type="fixed")
        _el(caster, "parent", "base_link")
        _el(caster, "child", "caster")
        _plugin(model, "DiffDrive", "diff-drive", left_joint="left_wheel_joint", right_joint="right_wheel_joint",
                wheel_separation=WHEEL_SEPARATION, wheel_radius=WHEEL_RADIUS, topic=robot.cmd_topic,
                odom_topic=f"/model/{robot.name}/wheel_odometry", tf_topic=f"/model/{robot.name}/wheel_tf")
    else:
        _link(model, "base_link", "box", "0.4 0.4 0.08", 1.0, collide=False, gravity=False)
        _plugin(model, "VelocityControl", "velocity-control", topic=robot.cmd_topic)
    _plugin(model, "OdometryPublisher", "odometry-publisher", odom_topic=robot.odom_topic, odom_frame="world",
            robot_base_frame=f"{robot.name}/base_link", odom_publish_frequency=ODOM_RATE_HZ,
            tf_topic=f"/model/{robot.name}/pose")


def world_sdf(models: list[Robot], *, name: str = "consensus") -> str:
    """An SDF 1.10 world: physics (1 ms steps, real time), the Physics / UserCommands / SceneBroadcaster systems, a
    sun, a ground plane and ``models``."""
    sdf = ET.Element("sdf", version="1.10")
    world = _el(sdf, "world", name=name)
    physics = _el(world, "physics", name="1ms", type="ignored")
    _el(physics, "max_step_size", 0.001)
    _el(physics, "real_time_factor", 1.0)
    for system, filename in (("Physics", "physics"), ("UserCommands", "user-commands"),
                             ("SceneBroadcaster", "scene-broadcaster")):
        _plugin(world, system, filename)
    sun = _el(world, "light", type="directional", name="sun")
    _el(sun, "cast_shadows", "true")
    _el(sun, "pose", "0 0 10 0 0 0")
    _el(sun, "direction", "-0.5 0.1 -0.9")
    ground = _el(world, "model", name="ground_plane")
    _el(ground, "static", "true")
    link = _el(ground, "link", name="link")
    for part in ("collision", "visual"):
        plane = _el(_el(_el(link, part, name=part), "geometry"), "plane")
        _el(plane, "normal", "0 0 1")
        _el(plane, "size", "100 100")
    for robot in models:
        _model(world, robot)
    ET.indent(sdf)
    return '<?xml version="1.0"?>\n' + ET.tostring(sdf, encoding="unicode") + "\n"


def bridge_config(models: list[Robot]) -> list[dict]:
    """ros_gz_bridge's YAML entries: each robot's cmd_vel (ROS -> gz) and odom (gz -> ROS), and /clock."""
    def entry(ros, gz, types, direction):
        return dict(ros_topic_name=ros, gz_topic_name=gz, ros_type_name=types[0], gz_type_name=types[1],
                    direction=direction)

    entries = [entry("/clock", "/clock", CLOCK, "GZ_TO_ROS")]
    for r in models:
        entries += [entry(f"/{r.name}/cmd_vel", r.cmd_topic, TWIST, "ROS_TO_GZ"),
                    entry(f"/{r.name}/odom", r.odom_topic, ODOM, "GZ_TO_ROS")]
    return entries


def write_files(cfg, specs, out: str | Path, height: float = FLY_HEIGHT_M) -> tuple[Path, Path]:
    """Write ``world.sdf`` and ``bridge.yaml`` for a run of ``cfg`` with processes ``specs`` into ``out``."""
    import yaml

    models = robots(sim_config(cfg, specs), height)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    world, bridge = out / "world.sdf", out / "bridge.yaml"
    world.write_text(world_sdf(models))
    bridge.write_text(yaml.safe_dump(bridge_config(models), sort_keys=False))
    return world, bridge


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``consensus gazebo-world``."""
    p.add_argument("--scenario", default="aggregation", help="a scenario with ROS processes (aggregation, disaster)")
    p.add_argument("--config", type=Path, help="its /**: params file (default: the packaged one)")
    p.add_argument("--robots", type=int, help="number of robots")
    p.add_argument("--seed", type=int)
    p.add_argument("--kinematics", choices=(SINGLE_INTEGRATOR, UNICYCLE), help="unicycle: diff-drive robots")
    p.add_argument("--height", type=float, default=FLY_HEIGHT_M, help="height of velocity-controlled bodies [m]")
    p.add_argument("--out", type=Path, required=True, help="directory for world.sdf and bridge.yaml")


def command(args: argparse.Namespace, default_config: Callable[[str], Path | None]) -> int:
    """``consensus gazebo-world``: write world.sdf and bridge.yaml for the scenario's run; print their paths."""
    from consensus.registry import scenario
    from consensus.settings import load_flat

    sc = scenario(args.scenario)
    if sc.processes is None:
        raise ConfigError(f"scenario '{args.scenario}' has no ROS processes to put in a world")
    given = dict(num_robots=args.robots, seed=args.seed, kinematics=args.kinematics)
    cfg = load_flat(sc.config_cls, args.config or default_config(sc.config_file),
                    **{k: v for k, v in given.items() if v is not None})
    for path in write_files(cfg, sc.processes(cfg), args.out, args.height):
        print(path)
    return 0


class GazeboLaunch(LaunchVariant):
    """launch/gazebo.launch.py: the scenario's processes but the builtin ``sim`` in gz sim (module docstring)."""

    use_sim_time = True
    args = {"kinematics": (UNICYCLE, "unicycle: diff-drive robots | single_integrator: velocity-controlled "
                                       "bodies at a fixed height"),
            "gz_args": ("-r", "arguments of `gz sim` before the world file, e.g. '-r -s' (no GUI)")}

    def overrides(self, context) -> dict:
        from launch.substitutions import LaunchConfiguration

        require()           # gz and ros_gz_bridge, before the run directory is made
        return {"sim": "gazebo", "kinematics": LaunchConfiguration("kinematics").perform(context)}

    def actions(self, cfg, specs, params_file, context) -> list:
        """``gz sim`` on the run's generated world, the ros_gz bridge, and the run's processes but the builtin
        ``sim``; the launch shuts down when gz sim exits."""
        import shlex

        from launch.actions import EmitEvent, ExecuteProcess, RegisterEventHandler
        from launch.event_handlers import OnProcessExit
        from launch.events import Shutdown
        from launch.substitutions import LaunchConfiguration
        from launch_ros.actions import Node

        world, bridge = write_files(cfg, specs, cfg.output_dir)
        gz_args = shlex.split(LaunchConfiguration("gz_args").perform(context))
        gz = ExecuteProcess(cmd=["gz", "sim", *gz_args, str(world)], name="gz_sim", output="screen")
        return [gz, RegisterEventHandler(OnProcessExit(target_action=gz, on_exit=[EmitEvent(event=Shutdown(
                    reason="gz sim exited"))])),
                Node(package="ros_gz_bridge", executable="parameter_bridge", name="gz_bridge", output="screen",
                     parameters=[{"config_file": str(bridge)}]),
                *node_actions([s for s in specs if s.executable != "sim"], params_file)]


GAZEBO = GazeboLaunch()
