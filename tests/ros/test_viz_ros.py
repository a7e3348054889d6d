"""A real aggregation run (3 robots, average planner, ~8 s) seen from outside: the recorder's markers on /markers,
the run's MCAP bag (decoded with mcap_ros2, rosbag2's metadata.yaml, `ros2 bag info` where rosbag2 is installed)
and `consensus plot RUN/bag`."""
from __future__ import annotations

import math
import subprocess
import threading
import time

import numpy as np
import pytest
import yaml

from consensus.scenarios.aggregation.config import load_config

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Run the aggregation once while listening to /markers; returns (run directory, markers heard)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from visualization_msgs.msg import MarkerArray

    from consensus.scenarios.aggregation.runner import run_ros

    out = tmp_path_factory.mktemp("viz") / "run"
    cfg = load_config(None, num_robots=3, planner="average", planner_period_s=1.0, duration_s=8.0,
                      llm_backend="openai", seed=5, collision_avoidance="none")     # point robots: they meet
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(run_ros(cfg, out, echo=None)))
    runner.start()
    heard: list = []
    rclpy.init()
    node = Node("marker_probe")
    node.create_subscription(MarkerArray, "/markers", heard.append, 10)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    try:
        deadline = time.monotonic() + 90
        while runner.is_alive() and time.monotonic() < deadline:
            ex.spin_once(timeout_sec=0.1)
    finally:
        node.destroy_node()
        rclpy.shutdown()
        runner.join(timeout=60)
    assert result.get("converged") is True, result
    return out, heard


def test_markers_are_published_in_the_world_frame(run):
    _, heard = run
    assert len(heard) >= 5                                  # 2 Hz over the run
    last = {(m.ns, m.id): m for m in heard[-1].markers}
    assert {m.header.frame_id for arr in heard for m in arr.markers} == {"world"}
    assert {("robots", i) for i in range(3)} <= set(last) and ("edges", 0) in last
    assert len(last["edges", 0].points) == 2 * 3            # complete graph on 3 robots: 3 segments
    texts = [last["reasoning", i].text for i in range(3)]
    assert all(t.startswith(f"robot_{i}: ") and len(t) > len(f"robot_{i}: ") for i, t in enumerate(texts))
    robots = np.array([[last["robots", i].pose.position.x, last["robots", i].pose.position.y] for i in range(3)])
    assert np.ptp(robots, axis=0).max() < 0.5               # they gathered


def test_bag_holds_the_run_and_rosbag2_metadata(run):
    from consensus.runs.bag import read_messages

    out, _ = run
    bag = out / "bag"
    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["storage_identifier"] == "mcap" and info["relative_file_paths"] == ["bag_0.mcap"]
    counts = {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}
    assert counts["/topology/graph"] == 1                   # latched: heard although published before
    for i in range(3):
        assert counts[f"/robot_{i}/odom"] > 50 and counts[f"/robot_{i}/state"] > 10 and counts[f"/robot_{i}/cmd_vel"]
    assert counts["/markers"] >= 5
    assert info["message_count"] == sum(counts.values()) and 6e9 < info["duration"]["nanoseconds"] < 60e9
    by_topic: dict[str, list] = {}
    for topic, _type, t_ns, msg in read_messages(bag):
        by_topic.setdefault(topic, []).append((t_ns, msg))
    assert {t: len(v) for t, v in by_topic.items()} == counts
    odom = [m for _, m in by_topic["/robot_1/odom"]]
    assert odom[-1].header.frame_id and np.isfinite(odom[-1].pose.pose.position.x)
    # the fleet moved (whichever robot: under load the bag may start after a robot's first steps toward the others)
    assert max(math.hypot(m.twist.twist.linear.x, m.twist.twist.linear.y) for i in range(3)
               for _, m in by_topic[f"/robot_{i}/odom"]) > 0.05
    state = by_topic["/robot_1/state"][-1][1]
    assert state.header.frame_id == "world" and abs(state.point.x - odom[-1].pose.pose.position.x) < 0.5
    cmd = [m for _, m in by_topic["/robot_2/cmd_vel"]]
    assert all(np.isfinite([c.linear.x, c.linear.y, c.angular.z]).all() for c in cmd)
    assert any(abs(c.linear.x) > 0.01 for c in cmd) and abs(cmd[-1].linear.x) < 0.2     # moved, then settled


def test_plot_redraws_the_figures_from_the_bag(run):
    from consensus.cli import main

    out, _ = run
    assert main(["plot", str(out / "bag")]) == 0
    for name in ("paths.png", "planned_vs_actual.png", "spread.png"):
        assert (out / "bag" / "plots" / name).stat().st_size > 1000


@pytest.mark.needs("rosbag2")
def test_ros2_bag_info_reads_the_bag(run):
    from support.needs import ros2_executable

    out, _ = run
    res = subprocess.run([ros2_executable(), "bag", "info", str(out / "bag")], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stderr
    assert "mcap" in res.stdout and "/robot_0/odom" in res.stdout
