"""Robot nodes are named for what they are: ``/robot_<i>/agent`` in one fleet process (``/fleet``) and in one process
per robot, for the aggregation robots and the disaster drones alike (the process's ``__node`` remap names only the
fleet node)."""
from __future__ import annotations

import subprocess
import time

import pytest

from consensus.runs.processes import ProcessSpec
from consensus.runs.ros_runner import executable_command, ros_args

pytestmark = pytest.mark.ros


def _node_names(expected: set[str], timeout: float = 20.0) -> set[str]:
    import rclpy
    from rclpy.node import Node

    rclpy.init()
    try:
        probe = Node("probe_names")
        deadline = time.monotonic() + timeout
        names: set[str] = set()
        while time.monotonic() < deadline and not expected <= names:
            rclpy.spin_once(probe, timeout_sec=0.2)
            names = {(ns.rstrip("/") + "/" + n) for n, ns in probe.get_node_names_and_namespaces()}
        probe.destroy_node()
        return names
    finally:
        rclpy.try_shutdown()


@pytest.mark.parametrize("exe, config, specs, expected", [
    ("robot", "aggregation", [ProcessSpec("robot", "fleet")], {"/fleet", "/robot_0/agent", "/robot_1/agent"}),
    ("robot", "aggregation", [ProcessSpec("robot", "agent", namespace="robot_1", params={"robot_id": 1})],
     {"/robot_1/agent"}),
    ("drone", "disaster", [ProcessSpec("drone", "fleet")], {"/fleet", "/robot_0/agent", "/robot_1/agent"}),
])
def test_robot_nodes_are_agents_under_their_namespace(exe, config, specs, expected, tmp_path):
    from consensus.scenarios.aggregation.config import AggregationConfig
    from consensus.scenarios.disaster.config import DisasterConfig

    cfg = (AggregationConfig(num_robots=2, planner="average") if config == "aggregation"
           else DisasterConfig(num_robots=2, planner="heuristic"))
    params = tmp_path / "params.yaml"
    params.write_text(cfg.replace(output_dir=str(tmp_path)).to_ros_params_yaml())
    procs = [subprocess.Popen(executable_command(s.executable) + ros_args(s, params), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True) for s in specs]
    try:
        names = _node_names(expected)
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    assert expected <= names, names
    assert not any(n.endswith("/fleet") and n != "/fleet" for n in names), names    # no /robot_i/fleet
