"""Gazebo (gz sim): the generated world and bridge (consensus.sims.gazebo) and launch/gazebo.launch.py under the real
`launch`. gz sim and ros_gz are not installed here: what runs is generation, parsing and the launch description up to
the processes it would start (docs/gazebo.md)."""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml

from consensus.control.kinematics import initial_positions
from consensus.errors import ConfigError
from consensus.scenarios.aggregation.config import load_config
from consensus.scenarios.aggregation.processes import aggregation_processes
from consensus.scenarios.disaster.config import load_disaster_config
from consensus.scenarios.disaster.processes import disaster_processes
from consensus.sims.gazebo import world as gazebo
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.settings import params_file_fields

ROOT = Path(__file__).resolve().parents[3]
REQUIRE_ALL = os.environ.get("CONSENSUS_REQUIRE_ALL") == "1"
COMMAND_PLUGINS = {"gz::sim::systems::DiffDrive", "gz::sim::systems::VelocityControl"}
ODOM_PLUGIN = "gz::sim::systems::OdometryPublisher"


def generate(tmp_path, cfg, specs):
    world, bridge = gazebo.write_files(cfg, specs, tmp_path)
    return ET.parse(world).getroot(), yaml.safe_load(bridge.read_text())


def robot_models(root):
    return [m for m in root.find("world").findall("model") if m.get("name") != "ground_plane"]


def plugins(model, name):
    return [p for p in model.findall("plugin") if p.get("name") == name]


@pytest.mark.parametrize("kinematics, drive", [("unicycle", "gz::sim::systems::DiffDrive"),
                                               ("single_integrator", "gz::sim::systems::VelocityControl")])
def test_world_has_one_model_per_robot_at_the_runs_initial_positions(tmp_path, kinematics, drive):
    cfg = load_config(None, num_robots=5, seed=7, kinematics=kinematics)
    root, _ = generate(tmp_path, cfg, aggregation_processes(cfg))
    assert root.tag == "sdf" and root.get("version") == "1.10"
    world = root.find("world")
    systems = {p.get("name") for p in world.findall("plugin")}
    assert {"gz::sim::systems::Physics", "gz::sim::systems::SceneBroadcaster"} <= systems
    models = robot_models(root)
    assert [m.get("name") for m in models] == [f"robot_{i}" for i in range(5)]
    poses = np.array([[float(v) for v in m.findtext("pose").split()[:3]] for m in models])
    np.testing.assert_allclose(poses[:, :2], initial_positions(cfg), rtol=0, atol=1e-12)
    for m in models:
        assert len(plugins(m, drive)) == 1 and len(plugins(m, ODOM_PLUGIN)) == 1
        assert len([p for p in m.findall("plugin") if p.get("name") in COMMAND_PLUGINS]) == 1
    if drive.endswith("DiffDrive"):
        joints = {j.get("name") for j in models[0].findall("joint")}
        dd = plugins(models[0], drive)[0]
        assert {dd.findtext("left_joint"), dd.findtext("right_joint")} <= joints
        assert np.all(poses[:, 2] == gazebo.WHEEL_RADIUS)
    else:
        assert np.all(poses[:, 2] == gazebo.FLY_HEIGHT_M)
        assert all(m.find("link").findtext("gravity") == "false" for m in models)


def test_every_plugin_topic_is_bridged_and_every_bridge_entry_has_a_plugin(tmp_path):
    cfg = load_config(None, num_robots=3, kinematics="unicycle")
    root, bridge = generate(tmp_path, cfg, aggregation_processes(cfg))
    by_gz = {e["gz_topic_name"]: e for e in bridge}
    assert len(by_gz) == len(bridge), "two bridge entries share a gz topic"
    produced = set()
    for m in robot_models(root):
        ns = m.get("name")
        for p in m.findall("plugin"):
            if p.get("name") in COMMAND_PLUGINS:
                e = by_gz[p.findtext("topic")]
                assert (e["ros_topic_name"], e["direction"], e["ros_type_name"], e["gz_type_name"]) == \
                    (f"/{ns}/cmd_vel", "ROS_TO_GZ", "geometry_msgs/msg/Twist", "gz.msgs.Twist")
                produced.add(p.findtext("topic"))
            if p.get("name") == ODOM_PLUGIN:
                e = by_gz[p.findtext("odom_topic")]
                assert (e["ros_topic_name"], e["direction"], e["ros_type_name"], e["gz_type_name"]) == \
                    (f"/{ns}/odom", "GZ_TO_ROS", "nav_msgs/msg/Odometry", "gz.msgs.Odometry")
                assert p.findtext("odom_frame") == "world"
                produced.add(p.findtext("odom_topic"))
            if p.get("name") == "gz::sim::systems::DiffDrive":    # its dead-reckoning odometry must not collide
                assert p.findtext("odom_topic") not in by_gz
    clock = by_gz.pop("/clock")
    assert (clock["ros_topic_name"], clock["direction"], clock["ros_type_name"]) == \
        ("/clock", "GZ_TO_ROS", "rosgraph_msgs/msg/Clock")
    assert set(by_gz) == produced


def test_disaster_drones_fly_at_their_start_cells(tmp_path):
    cfg = load_disaster_config(None, num_robots=4, seed=3)
    specs = disaster_processes(cfg)
    root, bridge = generate(tmp_path, cfg, specs)
    sim = next(s for s in specs if s.executable == "sim")
    centres = np.array(sim.params["initial_positions"]).reshape(-1, 2)
    models = robot_models(root)
    poses = np.array([[float(v) for v in m.findtext("pose").split()[:3]] for m in models])
    np.testing.assert_allclose(poses[:, :2], centres)
    assert np.all(poses[:, 2] == gazebo.FLY_HEIGHT_M)
    assert all(plugins(m, "gz::sim::systems::VelocityControl") for m in models)
    assert len(bridge) == 1 + 2 * len(centres)


def test_command_writes_world_and_bridge_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    from consensus.cli import main

    assert main(["gazebo-world", "--robots", "3", "--kinematics", "unicycle", "--out", str(tmp_path / "w")]) == 0
    assert len(robot_models(ET.parse(tmp_path / "w" / "world.sdf").getroot())) == 3
    capsys.readouterr()
    assert main(["gazebo-world", "--robots", "1", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "num_robots must be at least 2" in err
    assert not (tmp_path / "bad").exists()


def test_missing_gz_is_one_clear_message_naming_what_to_install(monkeypatch):
    monkeypatch.setattr(gazebo.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match=r"`gz` command .*sudo apt install ros-kilted-ros-gz"):
        gazebo.require()


# --- launch/gazebo.launch.py under the real `launch` (a ROS 2 install; here the PyPI wheels of launch/launch_ros)

def _visit(monkeypatch, **args):
    """(context, actions) launch/gazebo.launch.py produces for ``args`` under the real launch, nothing started."""
    from support.ros2_tools import launch_run

    return launch_run("gazebo.launch.py", monkeypatch, **args)


@pytest.mark.needs("ros2_launch")
def test_launch_without_gz_stops_with_one_message_before_making_the_run(monkeypatch, tmp_path):
    monkeypatch.setattr(gazebo.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="sudo apt install ros-kilted-ros-gz"):
        _visit(monkeypatch, output_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.needs("ros2_launch")
def test_launch_starts_gz_the_bridge_and_the_run_without_the_builtin_sim(monkeypatch, tmp_path):
    from launch.actions import ExecuteProcess
    from launch.utilities import perform_substitutions
    from launch_ros.actions import Node

    monkeypatch.setattr(gazebo, "require", lambda: None)
    context, actions = _visit(monkeypatch, output_dir=tmp_path / "run", num_robots=3, planner="average",
                              single_process="false", gz_args="-r -s")
    assert context.launch_configurations["use_sim_time"] == "true"
    processes = [a for a in actions if isinstance(a, ExecuteProcess)]
    gz = processes[0]
    world = str(tmp_path / "run" / "world.sdf")
    assert [perform_substitutions(context, c) for c in gz.cmd] == ["gz", "sim", "-r", "-s", world]
    nodes = [a for a in processes if isinstance(a, Node)]
    assert [(n.node_package, n.node_executable) for n in nodes] == \
        [("ros_gz_bridge", "parameter_bridge"), ("consensus", "topology")] + [("consensus", "robot")] * 3 + \
        [("consensus", "recorder"), ("consensus", "bag_recorder")]
    run = tmp_path / "run"
    bridge = yaml.safe_load((run / "bridge.yaml").read_text())
    assert {e["ros_topic_name"] for e in bridge} == {"/clock"} | {f"/robot_{i}/{t}" for i in range(3)
                                                                  for t in ("cmd_vel", "odom")}
    params = params_file_fields(run / "params.yaml", AggregationConfig)
    assert params["sim"] == "gazebo" and params["kinematics"] == "unicycle" and params["num_robots"] == 3
    assert len(robot_models(ET.parse(run / "world.sdf").getroot())) == 3
    assert (run / "manifest.json").is_file()
