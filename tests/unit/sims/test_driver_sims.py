"""The vendors' driver-level simulators as a run's ``sim`` (issue 43): ``turtlebot3_fake`` (one TurtleBot 3 fake node
per robot) and ``crazyswarm2`` (crazyswarm2's server, plus our per-drone link) - their processes, parameters and
checks, pure (no ROS, nothing installed needed). The runs against the real simulators are in
tests/ros/test_driver_sims.py."""
from __future__ import annotations

import json
import sys
import time

import pytest
import yaml

from consensus.control.motion import sim_spec
from consensus.errors import ConfigError
from consensus.robots.map import apply_robots_file
from consensus.runs import processes as P
from consensus.scenarios.aggregation.config import load_config
from consensus.scenarios.aggregation.processes import aggregation_processes
from consensus.sims.crazyswarm2 import core as cf
from consensus.sims.turtlebot3_fake import core as tb3

TB3 = {"tb3_0": {"preset": "turtlebot3", "initial_pose": [-1.5, -1.0, 0.3]},
       "tb3_1": {"preset": "turtlebot3", "initial_pose": [1.5, -1.0, 2.0]},
       "tb3_x": {"preset": "turtlebot3", "initial_pose": [0.0, 0.0], "enabled": False}}
CF = {"cf1": {"preset": "crazyflie", "initial_pose": [-1.0, 0.5]},
      "cf2": {"preset": "crazyflie", "initial_pose": [1.0, -0.5]}}


def _cfg(tmp_path, robots: dict, frame: str = "world", **kw):
    path = tmp_path / "robots.yaml"
    path.write_text(json.dumps({"frame": frame, "robots": robots}))
    return apply_robots_file(load_config(None, planner="average", llm_backend="openai", robots_file=str(path),
                                         output_dir=str(tmp_path / "run"), **kw))


def test_a_robots_file_of_turtlebots_keeps_the_fake_node_sim_and_real_robots_get_none(tmp_path):
    assert _cfg(tmp_path, TB3, sim="turtlebot3_fake").sim == "turtlebot3_fake"
    assert _cfg(tmp_path, TB3).sim == "none"                       # no simulator named: real robots
    assert _cfg(tmp_path, CF, sim="crazyswarm2").sim == "crazyswarm2"
    with pytest.raises(ConfigError, match="simulates turtlebot3 robots only, not crazyflie"):
        _cfg(tmp_path, {**TB3, **CF}, sim="turtlebot3_fake")


def test_one_fake_node_per_turtlebot_with_its_five_parameters_on_the_wall_clock(tmp_path):
    cfg = _cfg(tmp_path, TB3, sim="turtlebot3_fake", single_process=False)
    specs = aggregation_processes(cfg)
    fakes = [s for s in specs if s.package == tb3.PACKAGE]
    assert [s.namespace for s in fakes] == ["tb3_0", "tb3_1"]          # the enabled ones, each in its namespace
    for s in fakes:
        assert s.executable == "turtlebot3_fake_node" and not s.ours
        # the five parameters without defaults (a namespaced fake node without them aborts)
        assert {"wheels.separation", "wheels.radius", "joint_states_frame", "odom_frame",
                "base_frame"} <= set(s.ros_params)
        assert s.ros_params["use_sim_time"] is False
        assert s.stop_stage == P.STOP_LAST and s.death_rule == P.NEEDED
    assert not any(s.executable == "sim" for s in specs)                # the fake nodes move the bodies
    assert not any(s.executable == "crazyflie_link" for s in specs)
    with pytest.raises(ConfigError, match="wall clock"):
        aggregation_processes(cfg, use_sim_time=True)


def test_crazyswarm2s_server_gets_the_drones_of_the_map_and_each_drone_a_link(tmp_path):
    cfg = _cfg(tmp_path, CF, sim="crazyswarm2", frame="world", single_process=False)
    with pytest.raises(ConfigError, match="--use-sim-time"):
        aggregation_processes(cfg)
    specs = aggregation_processes(cfg, use_sim_time=True)
    server = next(s for s in specs if s.executable == "crazyflie_server")
    tree = server.params_tree
    assert tree["robots"]["cf1"]["initial_position"] == [-1.0, 0.5, 0.0]
    assert tree["robots"]["cf2"]["initial_position"] == [1.0, -0.5, 0.0]
    assert tree["all"]["reference_frame"] == "world"
    assert tree["sim"]["backend"] == "none" and tree["sim"]["max_dt"] == 0.1
    assert tree["sim"]["visualizations"]["rviz"]["enabled"] is True     # what publishes /tf
    assert tree["sim"]["visualizations"]["record_states"]["output_dir"] == f"{cfg.output_dir}/crazyswarm2_states"
    assert tree["use_sim_time"] is False and server.stop_stage == P.STOP_LAST
    written = yaml.safe_load(server.own_params_file(tmp_path / "run").read_text())
    assert written["/**"]["ros__parameters"]["robots"]["cf1"]["type"] == "cf21"
    links = [s for s in specs if s.executable == "crazyflie_link"]
    assert [(s.namespace, s.name) for s in links] == [("cf1", "link"), ("cf2", "link")]
    assert all(s.ros_params["robot_name"] == s.namespace and s.ros_params["world_frame"] == "world"
               and s.ros_params["use_sim_time"] is True for s in links)
    assert all(s.stop_stage == P.STOP_FIRST and s.grace_s > 0 for s in links)
    robots = [s for s in specs if s.name == "agent"]
    assert len(robots) == 2
    # the links land the drones at the end of the run under real robots too (sim none: crazyswarm2's hardware server)
    real = _cfg(tmp_path, CF, single_process=False)
    assert real.sim == "none"
    assert [s.namespace for s in aggregation_processes(real) if s.executable == "crazyflie_link"] == ["cf1", "cf2"]


def test_a_crazyflie_needs_its_crazyswarm2_name_as_namespace(tmp_path):
    cfg = _cfg(tmp_path, {"cf1": {"preset": "crazyflie", "initial_pose": [0.0, 0.0], "namespace": ""},
                          "cf2": {"preset": "crazyflie", "initial_pose": [1.0, 0.0]}}, sim="crazyswarm2")
    with pytest.raises(ConfigError, match="needs a namespace"):
        cf.prepare(cfg)


def test_the_driver_sims_need_a_robots_file_and_the_np_backend_is_named(tmp_path):
    plain = load_config(None, planner="average", llm_backend="openai", sim="turtlebot3_fake")
    with pytest.raises(ConfigError, match="--robots-file"):
        tb3.prepare(plain)
    with pytest.raises(ConfigError, match="--robots-file"):
        cf.prepare(plain.replace(sim="crazyswarm2"))
    with pytest.raises(ConfigError, match="backend 'gpu'"):
        cf.server_parameters(_cfg(tmp_path, CF, sim="crazyswarm2"), "/tmp/x", backend="gpu")
    assert sim_spec("turtlebot3_fake").sim_time == "forbidden" and sim_spec("crazyswarm2").sim_time == "required"


STAGE_CHILD = r'''
import signal, sys, time
out, delay = sys.argv[1], float(sys.argv[2])
def stop(*_):
    with open(out, "a") as f:
        f.write(f"{time.monotonic()} int\n")
    time.sleep(delay)            # what a link does on SIGINT: land, then exit
    with open(out, "a") as f:
        f.write(f"{time.monotonic()} exit\n")
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
open(out, "a").write("ready\n")
while True:
    time.sleep(0.05)
'''


def test_the_runner_stops_the_links_first_and_the_vendors_simulators_last(tmp_path, monkeypatch):
    """``stop_all``: each stage gets SIGINT only once the stage before has exited (a drone lands while the rest still
    runs; the simulator still moves it)."""
    from consensus.runs import ros_runner

    script = tmp_path / "child.py"
    script.write_text(STAGE_CHILD)
    monkeypatch.setattr(ros_runner, "executable_command", lambda exe, package="consensus": [sys.executable,
                                                                                           str(script)])
    monkeypatch.setattr(ros_runner, "ros_args", lambda spec, params_file: [str(tmp_path / f"{spec.name}.txt"),
                                                                           spec.params["delay"]])
    specs = [P.ProcessSpec("x", "sim", params={"delay": "0.0"}, stop_stage=P.STOP_LAST),
             P.ProcessSpec("x", "robot", params={"delay": "0.0"}),
             P.ProcessSpec("x", "link", params={"delay": "1.0"}, stop_stage=P.STOP_FIRST, grace_s=5.0)]
    (tmp_path / "logs").mkdir()
    procs = [ros_runner._Proc(s, tmp_path / "params.yaml", tmp_path / "logs", None) for s in specs]
    deadline = time.monotonic() + 20
    while not all((tmp_path / f"{s.name}.txt").exists() for s in specs) and time.monotonic() < deadline:
        time.sleep(0.05)
    ros_runner.stop_all(procs)
    for p in procs:
        p.thread.join(timeout=2)
        p.log.close()
    times = {s.name: [float(line.split()[0]) for line in (tmp_path / f"{s.name}.txt").read_text().splitlines()
                      if line != "ready"] for s in specs}
    assert times["link"][1] - times["link"][0] >= 1.0                    # it had the time to land
    assert times["robot"][0] >= times["link"][1]                         # ours only after the link exited
    assert times["sim"][0] >= times["robot"][1]                          # the simulator last
    assert all(p.popen.returncode == 0 for p in procs)


@pytest.mark.parametrize("name, sim", [("robots_turtlebot3_fake.yaml", "turtlebot3_fake"),
                                       ("robots_crazyswarm2.yaml", "crazyswarm2")])
def test_the_shipped_driver_maps_are_valid_and_keep_their_simulator(name, sim):
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "config" / name
    cfg = apply_robots_file(load_config(None, planner="average", llm_backend="openai", robots_file=str(path),
                                        sim=sim))
    assert cfg.sim == sim and cfg.num_robots == 4
    assert apply_robots_file(load_config(None, planner="average", llm_backend="openai",
                                         robots_file=str(path))).sim == "none"       # the same map, real robots
