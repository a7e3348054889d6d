"""``sim: mujoco`` (issue 31): the robots as bodies in a MuJoCo physics world, which judges every contact itself.

The world alone (bodies, drives, knobs, MuJoCo's contact list), the headless gathering of 6 robots in it for every
topology (0 contacts with the filter, contacts without it: the engine judges, not our filter's bookkeeping), the ROS
node (real time and as fast as possible under sim time), and `consensus run` with ROS (aggregation and the disaster
drones). Skipped with the reason where MuJoCo is not installed (the `mujoco` extra)."""
from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco", reason="MuJoCo is not installed: pip install 'consensus[mujoco]'")

from consensus import cli                                            # noqa: E402
from consensus.errors import ConfigError                             # noqa: E402
from consensus.settings import RobotBaseConfig                       # noqa: E402
from consensus.sims.mujoco.world import MujocoWorld, world_xml        # noqa: E402


def world(n=2, start=None, **settings) -> MujocoWorld:
    cfg = RobotBaseConfig.from_dict({"num_robots": n, **settings})
    start = np.zeros((n, 3)) if start is None else np.asarray(start, dtype=float)
    return MujocoWorld(cfg, start, seed=cfg.seed)


def test_two_bodies_driven_into_each_other_touch_once_and_the_engine_says_when_who_and_how_deep():
    w = world(2, [[-1.0, 0, 0], [1.0, 0, 0]])
    w.set_commands([[0.5, 0, 0], [-0.5, 0, 0]])
    for _ in range(60):
        w.advance(0.05)
    judged = w.judgement()
    assert judged["contacts"] == 1 and judged["robot_contacts"] == 1 and judged["wall_contacts"] == 0
    (contact,) = judged["contact_list"]
    assert contact["pair"] == ["robot_0", "robot_1"] and contact["depth_m"] > 0
    assert 1.0 < contact["t_s"] < 2.5                   # 1.6 m gap at 1 m/s closing speed, after the drives' start
    gap = np.linalg.norm(w.poses()[0, :2] - w.poses()[1, :2])
    assert 0.35 < gap < 0.41                            # the bodies (radius 0.2 each) stop each other: no overlap
    # the same bodies side by side never touch: the judge counts touches, not closeness
    calm = world(2, [[-1.0, 0, 0], [1.0, 0, 0]])
    calm.set_commands([[0, 0.5, 0], [0, 0.5, 0]])
    calm.advance(2.0)
    assert calm.judgement()["contacts"] == 0


def test_a_robot_leaving_the_geofence_hits_a_wall_and_the_walls_stand_just_outside_it():
    w = world(1, [[9.0, 0, 0]], workspace=[-10.0, 10.0, -10.0, 10.0])
    w.set_commands([[1.0, 0, 0]])
    w.advance(1.0)                                      # inside the geofence (x <= 10): no wall yet
    assert w.judgement()["contacts"] == 0 and w.poses()[0, 0] > 9.7
    w.advance(2.0)
    judged = w.judgement()
    assert judged["wall_contacts"] == 1 and judged["contact_list"][0]["pair"] == ["wall", "robot_0"]
    assert w.poses()[0, 0] < 10.3                       # the wall holds it


def test_the_world_has_the_run_s_physics_rate_bodies_and_drone_altitude():
    cfg = RobotBaseConfig.from_dict({"num_robots": 3, "physics_rate_hz": 250.0, "footprint_radius_m": 0.3,
                                     "flight_altitude_m": 1.5})
    w = MujocoWorld(cfg, np.zeros((3, 3)))
    assert math.isclose(w.model.opt.timestep, 1 / 250)
    assert w.advance(0.1) == 25
    body = w.model.geom("body_1")
    assert math.isclose(body.size[0], 0.3) and math.isclose(w.model.body("robot_1").mass[0], 5.0)
    assert math.isclose(w.data.geom("body_1").xpos[2], 1.5)          # held at the flight altitude
    assert "<camera name=\"top\"" in world_xml(cfg, np.zeros((3, 3)))


def test_a_unicycle_drives_along_its_heading_and_cannot_be_commanded_sideways():
    w = world(1, [[0.0, 0.0, math.pi / 2]], kinematics="unicycle")
    w.set_commands([[0.5, 0.3, 0.0]])                   # vy is not a unicycle's: ignored
    w.advance(2.0)
    x, y, yaw = w.poses()[0]
    assert abs(x) < 0.01 and 0.8 < y < 1.05 and abs(yaw - math.pi / 2) < 0.01
    w.set_commands([[0.0, 0.0, 1.0]])
    w.advance(1.0)
    assert w.poses()[0, 2] > math.pi / 2 + 0.7            # turned in place


def test_the_realism_knobs_do_what_they_say():
    def moved(**knobs) -> float:
        w = world(1, [[0.0, 0, 0]], **knobs)
        w.set_commands([[1.0, 0, 0]])
        w.advance(1.0)
        return float(w.poses()[0, 0])

    free = moved()
    assert 0.7 < free < 0.8                            # 1 m/s reached after 0.5 s at accel_max 2 m/s²
    assert moved(wheel_friction=1.0) < 0.01 < moved(wheel_friction=0.5) < free      # friction eats the drive
    assert moved(actuator_lag_s=1.0) < 0.5 * free                                    # a slow set point
    w = world(1, [[0.0, 0, 0]], odom_noise_m=0.05, localization_offset_m=0.3, seed=3)
    reported = np.array([w.reported_poses()[0, :2] for _ in range(200)])
    offset = reported.mean(axis=0) - w.poses()[0, :2]
    assert abs(np.linalg.norm(offset) - 0.3) < 0.02 and 0.03 < reported.std(axis=0).mean() < 0.07
    assert np.allclose(w.poses()[0, :2], 0.0)          # the truth is untouched


@pytest.mark.parametrize("topology", ["complete", "ring", "star", "line", "random", "leader_follower"])
def test_six_robots_gather_without_a_single_contact_in_every_topology(tmp_path, topology):
    """The headless loop moves the bodies in MuJoCo (the same world as the ROS node): the filter keeps every pair
    apart by the engine's own judgement, whatever the graph."""
    out = tmp_path / "run"
    assert cli.main(["run", "aggregation", "--headless", "--sim", "mujoco", "--robots", "6", "--topology", topology,
                     "--duration", "40", "--settle", "3", "--out", str(out), "-q"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["collision_avoidance"] == "cbf"      # auto: bodies in a physics world are filtered
    assert summary["contacts"] == 0 and summary["contact_list"] == [], summary["contact_list"][:3]
    assert summary["min_pair_distance_m"] >= 0.4 - 1e-3


def test_without_the_filter_the_engine_finds_the_contacts(tmp_path):
    out = tmp_path / "run"
    assert cli.main(["run", "aggregation", "--headless", "--sim", "mujoco", "--robots", "6", "--duration", "20",
                     "--set", "collision_avoidance=none", "--out", str(out), "-q"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["collision_avoidance"] == "none" and summary["contacts"] > 0
    first = summary["contact_list"][0]
    assert first["pair"][0].startswith("robot_") and first["depth_m"] > 0 and first["t_s"] > 0
    assert summary["converged"] is False               # bodies cannot all stand on one point: physics, not arithmetic


def test_mujoco_is_refused_with_one_line_where_it_cannot_serve(capsys):
    assert cli.main(["run", "aggregation", "--headless", "--sim", "mujoco", "--set", "kinematics=point_mass_pid",
                     "--out", "/nonexistent/x"]) == 2
    assert "velocity commands" in capsys.readouterr().err
    from consensus.extras import missing

    assert "pip install 'consensus[mujoco]'" in str(missing("mujoco", "sim: mujoco"))
    with pytest.raises(ConfigError, match=r"realtime_factor must be in \[0, 100\]"):
        RobotBaseConfig.from_dict({"realtime_factor": -1.0})


def _twist_bytes(vx: float) -> bytes:
    from geometry_msgs.msg import Twist
    from rclpy.serialization import serialize_message

    msg = Twist()
    msg.linear.x = vx
    return serialize_message(msg)


def test_time_is_not_lost_between_physics_steps_and_counts_survive_a_long_contact_list(monkeypatch):
    import consensus.sims.mujoco.world as mw

    w = world(1, physics_rate_hz=500.0)
    for _ in range(30):                        # a 30 Hz odometry period is 16.67 timesteps
        w.advance(1 / 30)
    assert abs(w.time - 1.0) < w.dt
    monkeypatch.setattr(mw, "MAX_CONTACTS_KEPT", 0)
    w = world(2, [[-1.0, 0, 0], [1.0, 0, 0]])
    w.set_commands([[0.5, 0, 0], [-0.5, 0, 0]])
    w.advance(3.0)
    judged = w.judgement()
    assert judged["contacts"] == judged["robot_contacts"] == 1 and judged["contact_list"] == []
    assert judged["max_penetration_m"] > 0 and judged["true_min_pair_distance_m"] < 0.41


def test_a_world_off_real_time_needs_sim_time_and_a_headless_loop_without_a_world_is_refused(capsys, tmp_path):
    assert cli.main(["run", "aggregation", "--sim", "mujoco", "--set", "realtime_factor=0",
                     "--out", str(tmp_path / "a")]) == 2
    assert "needs sim time" in capsys.readouterr().err and not (tmp_path / "a").exists()
    assert cli.main(["run", "disaster", "--headless", "--sim", "mujoco", "--out", str(tmp_path / "b")]) == 2
    assert "drop --headless" in capsys.readouterr().err


@pytest.mark.ros
@pytest.mark.parametrize("factor, faster", [(1.0, False), (0.0, True)])
def test_the_node_runs_in_real_time_or_as_fast_as_possible_under_sim_time(ros, factor, faster):
    import time

    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rosgraph_msgs.msg import Clock

    from consensus.sims.mujoco.ros import MujocoSimulator

    node = Node("sim", parameter_overrides=[Parameter("num_robots", value=2),
                                            Parameter("publish_clock", value=True),
                                            Parameter("realtime_factor", value=factor)])
    listener = Node("clock_listener")
    seen: list[float] = []
    from consensus import names
    from consensus.ros import qos

    listener.create_subscription(Clock, names.CLOCK.name, lambda m: seen.append(m.clock.sec + m.clock.nanosec * 1e-9),
                                 qos.profile(names.CLOCK))
    sim = MujocoSimulator(node)
    start_x = float(sim.world.poses()[0, 0])
    if faster:                 # one command for robot_0, never repeated (its controller "died")

        sim._on_cmd(0)(_twist_bytes(1.0))
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    ex.add_node(listener)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.0:
            ex.spin_once(timeout_sec=0.01)
        wall = time.monotonic() - t0
    finally:
        node.destroy_node()
        listener.destroy_node()
    assert seen, "no /clock"
    assert math.isclose(sim.world.time, seen[-1], abs_tol=0.2)          # /clock is the physics' own time
    ratio = seen[-1] / wall
    if faster:
        assert ratio > 2, ratio                       # not held to the wall clock
        # robot_0 got one command at the start: it drove 0.5 s of the world's time, not 0.5 s of the wall clock
        assert 0.05 < sim.world.poses()[0, 0] - start_x < 0.8     # (4 m and more without the timeout)
    else:
        assert ratio < 1.2, ratio                     # real time: a loaded machine may fall behind, never ahead


@pytest.mark.ros
def test_consensus_run_gathers_six_robots_in_mujoco_with_zero_contacts_in_the_summary(tmp_path):
    import subprocess

    out = tmp_path / "run"
    run = subprocess.run([sys.executable, "-m", "consensus.cli", "run", "aggregation", "--sim", "mujoco",
                          "--robots", "6", "--duration", "40", "--settle", "3", "--out", str(out), "-q"],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["converged"] is True and summary["contacts"] == 0 and summary["contact_list"] == []
    judged = json.loads((out / "contacts.json").read_text())       # the sim node's own file, merged by the runner
    assert judged["contacts"] == 0 and judged["physics_steps"] > 1000
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["sim"] == "mujoco" and manifest["config"]["physics_rate_hz"] == 500.0


@pytest.mark.ros
def test_the_disaster_drones_fly_to_their_chosen_cells_in_mujoco(tmp_path):
    import subprocess

    out = tmp_path / "run"
    run = subprocess.run([sys.executable, "-m", "consensus.cli", "run", "disaster", "--sim", "mujoco",
                          "--planner", "heuristic", "--robots", "3", "--rounds", "2", "--set", "volatility=high",
                          "--out", str(out), "-q"], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds"] == 2 and summary["flight_timeouts"] == 0 and summary["contacts"] == 0
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    for r in rounds:                         # every drone reached the cell it chose
        assert [tuple(c) for c in r["cells_end"]] == [tuple(c) for c in r["decision"]["actions"]]
    assert any(r["decision"]["actions"] != r["cells_start"] for r in rounds), "no drone had to fly"


def test_mujoco_s_renderer_draws_the_recorded_poses_where_opengl_is_available():
    from consensus.sims.mujoco.world import render_frames

    poses = np.zeros((2, 2, 3))
    poses[0, :, :2] = [[-3.0, 0.0], [3.0, 0.0]]
    poses[1, :, :2] = [[-0.3, 0.0], [0.3, 0.0]]
    try:
        frames = list(render_frames({"footprint_radius_m": 0.3}, [0.0, 1.0], poses, width=160, height=120))
    except RuntimeError as exc:
        pytest.skip(f"no OpenGL for MuJoCo's renderer here: {exc}")
    assert len(frames) == 2 and frames[0].shape == (120, 160, 3) and frames[0].dtype == np.uint8
    assert np.abs(frames[0].astype(int) - frames[1].astype(int)).sum() > 0      # the bodies moved on screen


def test_the_node_s_ground_truth_is_the_world_s_poses_while_its_odometry_carries_the_knobs(ros):
    from geometry_msgs.msg import PoseArray
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.serialization import deserialize_message
    from support.sim_outputs import capture

    from consensus.sims.mujoco.ros import MujocoSimulator

    node = Node("sim", parameter_overrides=[Parameter("num_robots", value=2),
                                            Parameter("localization_offset_m", value=0.3)])
    try:
        sim = MujocoSimulator(node)
        sent = capture(sim)
        truth, odom = sent.truth, sent.odom
        sim.step()
        poses = deserialize_message(truth[-1], PoseArray).poses
        true_xy = sim.world.poses()[:, :2]
        for i in range(2):
            assert (poses[i].position.x, poses[i].position.y) == pytest.approx(tuple(true_xy[i]), abs=1e-9)
            p = deserialize_message(odom[i], Odometry).pose.pose.position
            assert math.hypot(p.x - true_xy[i, 0], p.y - true_xy[i, 1]) == pytest.approx(0.3, abs=0.01)
    finally:
        node.destroy_node()
