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
from consensus.control.dynamics import dynamics_of
from consensus.control.safety import Geofence
from consensus.errors import ConfigError
from consensus.robots.map import apply_robots_file, load_robots, parse_robots, robot_entry
from consensus.robots.presets import ODOMETRY, POSE_STAMPED, PRESETS, TWIST, TWIST_STAMPED
from consensus.scenarios.aggregation.config import load_config
from consensus.scenarios.aggregation.processes import aggregation_processes

EXAMPLE = Path(__file__).resolve().parents[3] / "config" / "robots_example.yaml"

# preset -> (command topic, command type, pose topic, pose type) in namespace "ns1"
EXPECTED = {
    "turtlebot3": ("/ns1/cmd_vel", TWIST, "/ns1/odom", ODOMETRY),
    "turtlebot4": ("/ns1/cmd_vel", TWIST_STAMPED, "/ns1/odom", ODOMETRY),
    "crazyflie": ("/ns1/cmd_vel", TWIST, "/ns1/link/pose", POSE_STAMPED),
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
    ctrl = dynamics_of(kin).controller(kp=5.0, v_max=v_max, w_max=w_max, deadband=0.02)
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


# --------------------------------------------------------------------------- ROS: against our sim and fake drivers
def _ros_cfg(**kw):
    base = dict(num_robots=3, planner="average", planner_period_s=1.0, state_rate_hz=5.0, llm_backend="openai",
                seed=3, v_max=0.2, duration_s=20.0, bag=False)
    base.update(kw)
    return load_config(None, **base)


def _start(cfg, out, result):
    from consensus.scenarios.aggregation.runner import run_ros

    t = threading.Thread(target=lambda: result.update(run_ros(cfg, out, echo=None)))
    t.start()
    return t


def _spin(ex, seconds: float, every=None, until=None) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (until is not None and until()):
        if every is not None:
            every()
        ex.spin_once(timeout_sec=0.02)


@pytest.mark.ros
def test_estop_stops_every_robot_within_a_control_period_and_holds_until_released(tmp_path):
    import rclpy
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import Bool

    from consensus.ros.qos import LATCHED, STREAM

    cfg = _ros_cfg()
    n, tol = cfg.num_robots, 0.3                  # tolerance for delivery on a loaded 2-core machine
    result: dict = {}
    runner = _start(cfg, tmp_path / "run", result)
    rclpy.init()
    node = Node("estop_probe")
    cmds: dict[int, list] = {i: [] for i in range(n)}
    pos: dict[int, np.ndarray] = {}
    for i in range(n):
        node.create_subscription(Twist, f"/robot_{i}/cmd_vel", lambda m, i=i: cmds[i].append(
            (time.monotonic(), m.linear.x, m.linear.y, m.angular.z)), STREAM)
        node.create_subscription(Odometry, f"/robot_{i}/odom", lambda m, i=i: pos.__setitem__(
            i, np.array([m.pose.pose.position.x, m.pose.pose.position.y])), STREAM)
    estop = node.create_publisher(Bool, cfg.estop_topic, LATCHED)
    ex = SingleThreadedExecutor()
    ex.add_node(node)

    def moving(since: float) -> bool:
        return all(any(c[0] > since and abs(c[1]) + abs(c[2]) > 1e-3 for c in cmds[i]) for i in range(n))

    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (moving(0.0) and len(pos) == n):
            ex.spin_once(timeout_sec=0.05)
        assert moving(0.0), "the robots never moved before the e-stop"
        t0 = time.monotonic()
        estop.publish(Bool(data=True))
        _spin(ex, cfg.control_period_s + tol)
        held = {i: pos[i].copy() for i in range(n)}
        _spin(ex, 2.0)
        for i in range(n):
            after = [c for c in cmds[i] if c[0] > t0]
            assert after and after[0][0] <= t0 + cfg.control_period_s + tol, f"robot {i}: no command after e-stop"
            late = [c for c in after if c[0] > t0 + cfg.control_period_s + tol]
            assert late and all(c[1:] == (0.0, 0.0, 0.0) for c in late), f"robot {i} moved during the e-stop"
            assert np.linalg.norm(pos[i] - held[i]) < 0.01, f"robot {i} drifted {pos[i] - held[i]} while stopped"
        t1 = time.monotonic()
        estop.publish(Bool(data=False))
        _spin(ex, 2.0)
        assert moving(t1), "released robots must move again"
        assert all(np.linalg.norm(pos[i] - held[i]) > 0.05 for i in range(n))
    finally:
        node.destroy_node()
        rclpy.shutdown()
        runner.join(timeout=60)
    assert [st.get("estops") for st in result["per_robot"]] == [1] * n
    assert all(st.get("estopped") is False for st in result["per_robot"])
    assert result["callback_errors"] == 0


@pytest.mark.ros
def test_dry_run_publishes_nothing_and_records_what_it_would_send(tmp_path):
    import rclpy
    from rclpy.node import Node

    cfg = _ros_cfg(dry_run=True, duration_s=8.0)
    result: dict = {}
    runner = _start(cfg, tmp_path / "run", result)
    rclpy.init()
    node = Node("dry_probe")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and node.count_publishers("/robot_0/state") == 0:
            time.sleep(0.2)
        assert node.count_publishers("/robot_0/state") == 1, "the robots never came up"
        time.sleep(2.0)
        assert [node.count_publishers(f"/robot_{i}/cmd_vel") for i in range(3)] == [0, 0, 0]
        # graph discovery, under load; a killed process of an earlier test on this worker's domain can stay in the
        # graph until its DDS lease ends (20 s), so wait for exactly the sim's subscriber
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and node.count_subscribers("/robot_0/cmd_vel") != 1:
            time.sleep(0.2)
        assert node.count_subscribers("/robot_0/cmd_vel") == 1                 # the sim listens; nobody talks
        assert [node.count_publishers(f"/robot_{i}/cmd_vel") for i in range(3)] == [0, 0, 0]
    finally:
        node.destroy_node()
        rclpy.shutdown()
        runner.join(timeout=60)
    records = [json.loads(line) for line in (tmp_path / "run" / "dry_run.jsonl").read_text().splitlines()]
    assert {r["robot"] for r in records} == {0, 1, 2}
    assert {(r["robot"], r["topic"], r["type"]) for r in records} == {
        (i, f"/robot_{i}/cmd_vel", TWIST) for i in range(3)}
    assert any(abs(r["linear"][0]) > 0.01 for r in records)                   # commands that would move them
    assert result["final_spread_m"] == pytest.approx(result["initial_spread_m"], abs=1e-3)   # nobody moved


class _FakeDriver:
    """One robot's driver: takes the preset's command type on its topic, integrates the body-frame velocity and
    publishes the preset's pose type (odometry from its own start, or a world-frame PoseStamped)."""

    def __init__(self, node, entry):
        from geometry_msgs.msg import PoseStamped, Twist, TwistStamped
        from nav_msgs.msg import Odometry

        self.node, self.entry, self.got = node, entry, []
        self.world = entry.pose_source != "odom"
        self.state = np.array(entry.initial_pose if self.world else (0.0, 0.0, 0.0), dtype=float)
        self.cmd = np.zeros(3)
        cmd_type = TwistStamped if entry.stamped else Twist
        node.create_subscription(cmd_type, entry.cmd_topic, self.on_cmd, 10)
        self.pose_msg = PoseStamped if entry.pose_type == POSE_STAMPED else Odometry
        self.pub = node.create_publisher(self.pose_msg, entry.pose_topic_name, 10)

    def on_cmd(self, msg):
        self.got.append(msg)
        t = msg.twist if hasattr(msg, "twist") else msg
        self.cmd = np.array([t.linear.x, t.linear.y, t.angular.z])

    def step(self, dt: float) -> None:
        x, y, yaw = self.state
        vx, vy, wz = self.cmd
        self.state = np.array([x + dt * (math.cos(yaw) * vx - math.sin(yaw) * vy),
                               y + dt * (math.sin(yaw) * vx + math.cos(yaw) * vy), yaw + dt * wz])
        msg = self.pose_msg()
        msg.header.frame_id = self.entry.frame if self.world else "odom"
        # stamped when the pose is taken, as a real driver does: a loaded machine may deliver two poses together,
        # and the robot judges how far a pose may have moved by its stamp (consensus.control.plausibility)
        msg.header.stamp = self.node.get_clock().now().to_msg()
        pose = msg.pose if self.world else msg.pose.pose
        pose.position.x, pose.position.y = float(self.state[0]), float(self.state[1])
        pose.orientation.z, pose.orientation.w = math.sin(self.state[2] / 2), math.cos(self.state[2] / 2)
        self.pub.publish(msg)


@pytest.mark.ros
def test_every_preset_drives_its_fake_driver_in_one_shared_frame(tmp_path):
    """TurtleBot 3 and 4, a generic robot and a motion-captured one (PoseStamped) with no simulator: each robot
    publishes its preset's type on its driver topic, reads its preset's pose and the fleet gathers."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    robots = {"tb3_a": {"preset": "turtlebot3", "initial_pose": [-1.5, -1.5, 0.0]},
              "tb4_1": {"preset": "turtlebot4", "initial_pose": [1.5, -1.5, 1.5708]},
              "rover": {"preset": "generic", "initial_pose": [1.5, 1.5, 3.1416]},
              # a motion-captured robot (PoseStamped in the shared frame); a Crazyflie needs crazyswarm2 and its
              # link (tests/ros/test_driver_sims.py)
              "mocap": {"preset": "generic", "initial_pose": [-1.5, 1.5], "pose_source": "world_pose",
                        "pose_topic": "pose"},
              "cf2": {"preset": "crazyflie", "initial_pose": [0.0, 0.0], "enabled": False}}
    path = tmp_path / "robots.yaml"
    path.write_text(json.dumps({"frame": "world", "robots": robots}))
    cfg = _ros_cfg(robots_file=str(path), duration_s=14.0, v_max=1.0)
    entries = load_robots(path).enabled
    result: dict = {}
    runner = _start(cfg, tmp_path / "run", result)
    rclpy.init()
    node = Node("fake_drivers")
    drivers = [_FakeDriver(node, e) for e in entries]
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    last = [time.monotonic()]

    def step() -> None:
        now = time.monotonic()
        if now - last[0] >= 0.05:
            for d in drivers:
                d.step(now - last[0])
            last[0] = now

    try:
        _spin(ex, 90.0, step, until=lambda: not runner.is_alive())   # drivers as long as the run (recorded to its end)
    finally:
        node.destroy_node()
        rclpy.shutdown()
        runner.join(timeout=60)
    assert result["num_robots"] == 4 and result["bad_messages"] == 0 and result["callback_errors"] == 0
    for d in drivers:
        assert d.got, f"{d.entry.name}: no command on {d.entry.cmd_topic}"
    tb4 = drivers[1].got
    assert all(m.header.frame_id == "base_link" and m.header.stamp.sec > 0 for m in tb4)
    tb = [m.twist if hasattr(m, "twist") else m for d in drivers[:2] for m in d.got]
    assert max(abs(t.linear.y) for t in tb) == 0.0                           # diff-drive: never sideways
    assert max(t.linear.x for t in tb) <= 0.306 + 1e-9                      # the robots' own speed caps
    assert max(abs(m.linear.x) for m in drivers[0].got) <= 0.22 + 1e-9
    assert result["final_spread_m"] < 0.6 * result["initial_spread_m"]      # one frame: they gather
