"""Real robots: the driver presets (message types and topic names), the robots: map and its validation, the
safety layer with a preset's limits, the CLI's refusal of a bad map; ROS: the fleet e-stop and the dry run against
the builtin sim, and every preset's topics and types against fake drivers (docs/real-robots.md)."""
from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from consensus import cli
from consensus.control.controller import make_controller
from consensus.control.safety import Geofence
from consensus.errors import ConfigError
from consensus.robots.map import apply_robots_file, load_robots, parse_robots, robot_entry
from consensus.robots.presets import ODOMETRY, POSE_STAMPED, PRESETS, TWIST, TWIST_STAMPED
from consensus.scenarios.aggregation.config import load_config
from consensus.scenarios.aggregation.processes import aggregation_processes

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "robots_example.yaml"

# preset -> (command topic, command type, pose topic, pose type) in namespace "ns1"
EXPECTED = {
    "turtlebot3": ("/ns1/cmd_vel", TWIST, "/ns1/odom", ODOMETRY),
    "turtlebot4": ("/ns1/cmd_vel", TWIST_STAMPED, "/ns1/odom", ODOMETRY),
    "crazyflie": ("/ns1/cmd_vel", TWIST, "/ns1/pose", POSE_STAMPED),
    "generic": ("/ns1/cmd_vel", TWIST, "/ns1/odom", ODOMETRY),
    "sim": ("/ns1/cmd_vel", TWIST, "/ns1/odom", ODOMETRY),
}


def _map(robots: dict, **top) -> dict:
    return {"robots": robots, **top}


def _one(preset: str, ns: str = "ns1", pose=(0.0, 0.0), **extra):
    return parse_robots(_map({"r": {"preset": preset, "namespace": ns, "initial_pose": list(pose), **extra}})).robots[0]


def test_every_preset_is_tested():
    assert set(EXPECTED) == set(PRESETS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_topics_and_types_in_a_namespace(name):
    e = _one(name)
    assert (e.cmd_topic, e.cmd_type, e.pose_topic_name, e.pose_type) == EXPECTED[name]
    assert _one(name, ns="/fleet/a/").cmd_topic == "/fleet/a/cmd_vel"      # slashes normalised
    assert _one(name, ns="").cmd_topic == "/cmd_vel"                       # not namespaced


def test_entry_overrides_and_defaults():
    assert _one("turtlebot3", cmd_stamped=True).cmd_type == TWIST_STAMPED
    assert _one("turtlebot4", cmd_stamped=False).cmd_type == TWIST
    e = _one("generic", pose_source="world_pose", pose_topic="/vrpn_mocap/rover/pose")
    assert (e.pose_topic_name, e.pose_type) == ("/vrpn_mocap/rover/pose", POSE_STAMPED)
    m = parse_robots(_map({"tb": {"preset": "turtlebot3", "initial_pose": [1, 2]}}, frame="map"))
    tb = m.robots[0]
    assert tb.namespace == "tb" and tb.enabled and tb.initial_pose == (1.0, 2.0, 0.0) and tb.frame == "map"
    assert tb.kinematics("single_integrator") == "unicycle"                 # a diff-drive robot stays one
    assert _one("generic").kinematics("single_integrator") == "single_integrator"


def test_odometry_is_composed_with_the_initial_pose_and_world_sources_are_not():
    tb = _one("turtlebot3", pose=(1.0, 1.0, math.pi / 2))
    x, y, yaw = tb.to_shared(1.0, 0.0, 0.0)                  # 1 m forward from a start facing +y
    assert np.allclose([x, y, yaw], [1.0, 2.0, math.pi / 2])
    cf = _one("crazyflie", pose=(1.0, 1.0, math.pi / 2))
    assert cf.to_shared(0.3, 0.4, 0.1) == (0.3, 0.4, 0.1)


BAD_MAPS = [
    ({"robots": {"a": {"preset": "turtlebot3", "namespace": "x", "initial_pose": [0, 0]},
                 "b": {"preset": "generic", "namespace": "/x", "initial_pose": [1, 0]}}},
     "share the namespace '/x'"),
    ({"robots": {"a": {"preset": "roomba", "initial_pose": [0, 0]}}}, "unknown preset 'roomba'"),
    ({"robots": {"a": {"initial_pose": [0, 0]}}}, "missing field 'preset'"),
    ({"robots": {"a": {"preset": "generic"}}}, "missing field 'initial_pose'"),
    ({"robots": {"a": {"preset": "generic", "initial_pose": [0, "x"]}}}, "initial_pose must be"),
    ({"robots": {"a": {"preset": "generic", "initial_pose": [0, float("nan")]}}}, "initial_pose must be"),
    ({"robots": {"a": {"preset": "generic", "initial_pose": [0, 0], "colour": "red"}}}, "unknown field 'colour'"),
    ({"robots": {"a": {"preset": "generic", "initial_pose": [0, 0], "namespace": "bad ns"}}}, "not a valid ROS"),
    ({"robots": {"a": {"preset": "generic", "initial_pose": [0, 0], "enabled": "yes"}}}, "enabled must be"),
    ({"robots": {"a": {"preset": "generic", "initial_pose": [0, 0], "pose_source": "gps"}}}, "unknown pose_source"),
    ({"robots": {"a": {"preset": "generic", "initial_pose": [0, 0], "cmd_stamped": 1}}}, "cmd_stamped must be"),
    ({"robots": {"a": "turtlebot3"}}, "expected a mapping"),
    ({"robots": {}}, "non-empty"),
    ({"robot": {}}, "'robots:' map"),
    ({"robots": {"a": {"preset": "generic", "initial_pose": [0, 0]}}, "extra": 1}, "unknown top-level key"),
    ([1, 2], "'robots:' map"),
]


@pytest.mark.parametrize("data,message", BAD_MAPS)
def test_bad_maps_are_one_clear_config_error(data, message):
    with pytest.raises(ConfigError, match="robots map") as err:
        parse_robots(data)
    assert message in str(err.value)


def test_a_disabled_robot_may_reuse_a_namespace():
    m = parse_robots(_map({"a": {"preset": "generic", "namespace": "x", "initial_pose": [0, 0]},
                           "b": {"preset": "generic", "namespace": "x", "initial_pose": [0, 0], "enabled": False}}))
    assert [e.name for e in m.enabled] == ["a"]


def _cfg(tmp_path, robots: dict | str, **kw):
    path = tmp_path / "robots.yaml"
    path.write_text(robots if isinstance(robots, str) else json.dumps({"robots": robots}))
    return load_config(None, planner="average", llm_backend="openai", robots_file=str(path), **kw)


def test_bad_yaml_missing_file_and_poses_outside_the_geofence_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        apply_robots_file(_cfg(tmp_path, "robots: [unclosed\n"))
    with pytest.raises(ConfigError, match="robots_file not found"):
        load_robots(tmp_path / "nope.yaml")
    far = {"a": {"preset": "generic", "initial_pose": [0, 0]}, "b": {"preset": "generic", "initial_pose": [11, 0]}}
    with pytest.raises(ConfigError, match=r"robot 'b' starts at \[11.0, 0.0\], outside the workspace geofence"):
        apply_robots_file(_cfg(tmp_path, far))
    inside = apply_robots_file(_cfg(tmp_path, far, workspace=[-12.0, 12.0, -1.0, 1.0]))
    assert inside.num_robots == 2
    mixed = {"a": {"preset": "sim", "namespace": "robot_0", "initial_pose": [0, 0]},
             "b": {"preset": "generic", "initial_pose": [1, 0]}}
    with pytest.raises(ConfigError, match="simulated"):
        apply_robots_file(_cfg(tmp_path, mixed))
    sims = {"a": {"preset": "sim", "namespace": "robot_1", "initial_pose": [0, 0]},
            "b": {"preset": "sim", "namespace": "robot_0", "initial_pose": [1, 0]}}
    with pytest.raises(ConfigError, match="needs namespace robot_0"):
        apply_robots_file(_cfg(tmp_path, sims))
    one = {"a": {"preset": "generic", "initial_pose": [0, 0]}, "b": {"preset": "generic", "initial_pose": [1, 0],
                                                                      "enabled": False}}
    with pytest.raises(ConfigError, match="at least 2"):                  # an aggregation needs two robots
        apply_robots_file(_cfg(tmp_path, one))
    with pytest.raises(ConfigError, match="2-D run"):
        apply_robots_file(_cfg(tmp_path, far, dim=1, workspace=[-12.0, 12.0], initial_positions=[]))


def test_the_example_map_makes_a_real_robot_run_without_the_sim(tmp_path):
    cfg = load_config(None, planner="average", llm_backend="openai", robots_file=str(EXAMPLE))
    run = apply_robots_file(cfg)
    assert run.num_robots == 4 and run.sim == "none"                       # cf1 is disabled
    assert run.initial_positions == [-1.0, -1.0, 1.0, -1.0, 1.0, 1.0, -1.0, 1.0]
    assert Path(run.robots_file).is_absolute()
    assert "sim" not in [p.executable for p in aggregation_processes(run)]
    assert "sim" in [p.executable for p in aggregation_processes(cfg)]
    assert [robot_entry(run, i).cmd_topic for i in range(4)] == [
        "/tb3_a/cmd_vel", "/tb3_b/cmd_vel", "/tb4_1/cmd_vel", "/rover/cmd_vel"]
    assert robot_entry(run, 2).cmd_type == TWIST_STAMPED
    with pytest.raises(ConfigError, match="4 enabled robot"):               # a node started with another count
        robot_entry(run.replace(num_robots=3, initial_positions=[0.0] * 6), 0)
    assert apply_robots_file(run) == run                                     # idempotent


def test_sim_robots_keep_the_builtin_sim(tmp_path):
    sims = {f"r{i}": {"preset": "sim", "namespace": f"robot_{i}", "initial_pose": [i, 0]} for i in range(3)}
    run = apply_robots_file(_cfg(tmp_path, sims))
    assert run.sim == "builtin" and run.num_robots == 3 and run.initial_positions == [0, 0, 1, 0, 2, 0]


@pytest.mark.parametrize("preset", ["turtlebot3", "turtlebot4", "crazyflie", "generic"])
def test_geofence_and_speed_limit_still_hold_with_a_preset(preset):
    """The controller a robot gets from a preset never exceeds min(run limit, robot limit), and targets outside
    the workspace are clamped into it before the controller sees them."""
    entry = _one(preset)
    kin = entry.kinematics("single_integrator")
    v_max, w_max = entry.limits(1.0, 2.0)
    assert v_max <= PRESETS[preset].v_max and v_max <= 1.0 and w_max <= 2.0
    ctrl = make_controller(kin, kp=5.0, v_max=v_max, w_max=w_max, deadband=0.02)
    fence = Geofence.from_bounds([-2.0, 2.0, -2.0, 2.0])
    rng = np.random.default_rng(0)
    for _ in range(200):
        target, clamped = fence.clamp(rng.uniform(-50, 50, 2))
        assert fence.contains(target)
        pos = rng.uniform(-2, 2, 2)
        if kin == "unicycle":
            v, w = ctrl.compute(np.array([*pos, rng.uniform(-math.pi, math.pi)]), target)
            assert 0.0 <= v <= v_max + 1e-12 and abs(w) <= w_max + 1e-12
        else:
            assert np.linalg.norm(ctrl.compute(pos, target)) <= v_max + 1e-12


def test_cli_refuses_a_bad_robots_file_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("robots:\n  a: {preset: turtlebot3, namespace: x, initial_pose: [0, 0]}\n"
                   "  b: {preset: turtlebot3, namespace: x, initial_pose: [1, 0]}\n")
    assert cli.main(["run", "aggregation", "--planner", "average", "--robots-file", str(bad),
                     "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "share the namespace '/x'" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()                                  # nothing started


def test_dry_run_flag_sets_the_config(tmp_path):
    from consensus.registry import scenario

    parser = cli.build_parser()
    args = parser.parse_args(["run", "aggregation", "--dry-run", "--robots-file", str(EXAMPLE)])
    cfg = cli.config_from_args(scenario("aggregation"), args)
    assert cfg.dry_run is True and cfg.robots_file == str(EXAMPLE)
