"""The package under the real ROS 2 tools, as a user drives it: `ros2 launch consensus <file>` to completion with
launch arguments, and `ros2 node|topic|param` against the running nodes (see tests/support/ros2_tools.py for where the
tools come from and when these tests skip)."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from support.ros2_tools import param_list, ros2, ros2_daemon, ros2_param, start_ros2, stop_group, wait_until  # noqa: F401 - fixture

pytestmark = pytest.mark.ros

#: one ros2 CLI call against a running launch (a parameter service call): under the suite's load one took more than
#: 20 s in a CI run (killed, exit 2, no output)
CLI_TIMEOUT_S = 60.0

LAUNCH_RUNS = {
    "aggregation": dict(planner="average", num_robots=3, topology="ring", duration_s=6, single_process="false", seed=3),
    "disaster": dict(planner="heuristic", num_robots=3, rounds=3, volatility="high", seed=2),
    "naming_game_robots": dict(num_robots=4, max_population_rounds=3, policy="fixed_bias:0.9",
                               interaction_period_s=0.2, seed=1),
}


def launch_args(**args) -> list[str]:
    return [f"{k}:={str(v).lower() if isinstance(v, bool) else v}" for k, v in args.items()]


@pytest.mark.parametrize("name", sorted(LAUNCH_RUNS))
def test_ros2_launch_runs_each_launch_file_to_completion(name, tmp_path):
    out = tmp_path / "run"
    result = ros2("launch", "consensus", f"{name}.launch.py",
                  *launch_args(output_dir=out, **LAUNCH_RUNS[name]), timeout=150)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "Traceback" not in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    from consensus import registry
    from consensus.settings import params_file_fields

    params = params_file_fields(out / "params.yaml", registry.scenarios()[name.replace("_", "-")].config_cls)
    for key, value in LAUNCH_RUNS[name].items():           # every launch argument reached the one params file
        expected = {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value
        assert params[key] == expected, key
    assert json.loads((out / "manifest.json").read_text())["seed"] == LAUNCH_RUNS[name]["seed"]
    assert summary.get("callback_errors", 0) == 0


@pytest.mark.usefixtures("ros2_daemon")
def test_two_fleets_in_their_own_namespaces_share_a_domain_and_each_converges(tmp_path):
    """namespace:= (issue 30): every node and relative topic of a run under /<ns>; two runs at once, one per process
    layout, each on its own robots."""
    runs = {"fleet_a": dict(single_process="true", seed=3), "fleet_b": dict(single_process="false", seed=4)}
    launches = {ns: start_ros2("launch", "consensus", "aggregation.launch.py",
                               *launch_args(namespace=ns, planner="average", num_robots=3, duration_s=25,
                                            output_dir=tmp_path / ns, **extra), log=tmp_path / f"{ns}.log")
                for ns, extra in runs.items()}
    try:
        expected = {"/fleet_a/recorder", "/fleet_a/robot_0/agent", "/fleet_b/recorder", "/fleet_b/robot_2/agent",
                    "/fleet_a/sim", "/fleet_b/sim"}
        nodes = wait_until(lambda: expected <= set(ros2("node", "list", timeout=20).stdout.split()) or None, 60)
        assert nodes, ros2("node", "list").stdout
        topics = set(ros2("topic", "list", timeout=20).stdout.split())
        assert {"/fleet_a/robot_0/cmd_vel", "/fleet_b/robot_0/cmd_vel", "/fleet_a/topology/graph"} <= topics, topics
        assert "/robot_0/cmd_vel" not in topics
        codes = {ns: launch.wait(timeout=120) for ns, launch in launches.items()}
    finally:
        for launch in launches.values():
            stop_group(launch)                 # also what a finished launch left behind
    for ns in runs:
        log = (tmp_path / f"{ns}.log").read_text()
        assert codes[ns] == 0 and "Traceback" not in log, log[-3000:]
        summary = json.loads((tmp_path / ns / "summary.json").read_text())
        assert summary["converged"] is True and summary.get("bad_messages", 0) == 0, summary


def test_two_disaster_runs_in_their_own_namespaces_keep_their_protocols_apart(tmp_path):
    """The disaster protocol's shared channels (/disaster/state, votes, ...) go under the run's namespace too: two
    runs at once on one domain each play their own rounds (a drone hearing the other grid would break its rounds)."""
    runs = {"team_a": dict(single_process="true", seed=2), "team_b": dict(single_process="false", seed=5)}
    launches = {ns: start_ros2("launch", "consensus", "disaster.launch.py",
                               *launch_args(namespace=ns, **{**LAUNCH_RUNS["disaster"], **extra},
                                            output_dir=tmp_path / ns), log=tmp_path / f"{ns}.log")
                for ns, extra in runs.items()}
    try:
        codes = {ns: launch.wait(timeout=150) for ns, launch in launches.items()}
    finally:
        for launch in launches.values():
            stop_group(launch)
    for ns in runs:
        log = (tmp_path / f"{ns}.log").read_text()
        assert codes[ns] == 0 and "Traceback" not in log, log[-3000:]
        summary = json.loads((tmp_path / ns / "summary.json").read_text())
        assert summary["rounds"] == LAUNCH_RUNS["disaster"]["rounds"], summary
        assert summary.get("bad_messages", 0) == 0 and summary.get("callback_errors", 0) == 0, summary


def test_a_namespace_that_is_not_a_ros_name_is_refused_with_one_line(tmp_path):
    out = tmp_path / "run"
    result = ros2("launch", "consensus", "aggregation.launch.py", *launch_args(namespace="9lives", output_dir=out),
                  timeout=60)
    assert result.returncode != 0
    errors = [ln for ln in result.stdout.splitlines() if "[ERROR]" in ln]
    assert len(errors) == 1 and "not a ROS namespace" in errors[0], result.stdout
    assert not out.exists()


@pytest.mark.parametrize("name, args, message", [
    ("aggregation", dict(num_robots=1), "num_robots must be at least 2"),
    ("aggregation", dict(out="elsewhere"), "unknown launch argument(s) out"),   # ros2 launch alone ignores it
    ("aggregation", dict(topology="hexagon"), "unknown topology 'hexagon'"),
    ("disaster", dict(mode="explicit", strategy="single"), "unknown strategy 'single'"),
    ("disaster", dict(volatility="extreme"), "unknown volatility 'extreme'"),
    ("naming_game_robots", dict(policy="table:/nonexistent.json"), "nonexistent.json"),
    ("naming_game_robots", dict(max_rounds=3), "launch argument max_rounds is now called max_population_rounds"),
])
def test_ros2_launch_refuses_bad_arguments_with_one_line_before_starting_anything(name, args, message, tmp_path):
    out = tmp_path / "run"
    result = ros2("launch", "consensus", f"{name}.launch.py", *launch_args(output_dir=out, **args), timeout=60)
    assert result.returncode != 0
    errors = [ln for ln in result.stdout.splitlines() if "[ERROR]" in ln]
    assert len(errors) == 1 and message in errors[0], result.stdout
    assert "Traceback" not in result.stdout
    assert not out.exists()                                    # nothing started, no run directory


@pytest.mark.usefixtures("ros2_daemon")
def test_ros2_cli_sees_and_drives_a_running_aggregation(tmp_path):
    out = tmp_path / "run"
    launch = start_ros2("launch", "consensus", "aggregation.launch.py",
                        *launch_args(planner="average", num_robots=3, duration_s=60, output_dir=out),
                        log=tmp_path / "launch.log")
    try:
        expected = {"/sim", "/topology", "/recorder", "/fleet", "/robot_0/agent", "/robot_1/agent", "/robot_2/agent"}
        nodes = wait_until(lambda: expected <= set(ros2("node", "list", timeout=20).stdout.split()) or None, 40)
        assert nodes, ros2("node", "list").stdout + (tmp_path / "launch.log").read_text()[-2000:]

        echo = ros2("topic", "echo", "--once", "/robot_0/cmd_vel", timeout=20)
        twist = yaml.safe_load(echo.stdout.split("---")[0])
        assert set(twist) == {"linear", "angular"} and abs(twist["linear"]["x"]) <= 1.0 + 1e-9   # v_max

        hz = ros2("topic", "hz", "/robot_0/cmd_vel", "--window", "20", timeout=8)
        rates = [float(r) for r in re.findall(r"average rate: ([0-9.]+)", hz.stdout)]
        assert rates and 8.0 <= rates[-1] <= 12.0, hz.stdout        # the controller's ΔTc = 0.1 s

        ok = ros2_param("set", "/topology", "aggregation.topology", "ring", timeout=20)
        assert "Set parameter successful" in ok.stdout, ok.stdout
        assert "ring" in ros2_param("get", "/topology", "aggregation.topology", timeout=20).stdout
        graph = ros2("topic", "echo", "--once", "--qos-durability", "transient_local", "--qos-reliability",
                     "reliable", "--field", "data", "/topology/graph", timeout=30).stdout
        assert json.loads(graph.split("\n---")[0])["name"] == "ring", graph        # the latched graph follows

        bad = ros2_param("set", "/topology", "aggregation.topology", "hexagon", timeout=20)
        assert "Setting parameter failed" in bad.stdout and "unknown topology 'hexagon'" in bad.stdout, bad.stdout
        assert "ring" in ros2_param("get", "/topology", "aggregation.topology", timeout=20).stdout   # unchanged

        # honest parameters (issue 30): each node lists only the fields it reads, nested by group (issue 42)
        listed = {name: param_list(name) for name in ("/recorder", "/sim")}
        assert 10 <= len(listed["/recorder"]) <= 30 and "aggregation.converge_tol_m" in listed["/recorder"], listed
        assert not {"bag.exclude", "llm.model", "control.kp"} & listed["/recorder"], listed
        assert "sim.rate_hz" in listed["/sim"] and "aggregation.converge_tol_m" not in listed["/sim"], listed
    finally:
        code = stop_group(launch)
    log = (tmp_path / "launch.log").read_text()
    assert "Traceback" not in log, log[-3000:]
    assert code == 0, log[-3000:]
    assert (out / "summary.json").is_file(), log[-3000:]      # Ctrl-C still leaves the run's results
    assert json.loads((out / "summary.json").read_text())["end_reason"] == "interrupted"


@pytest.mark.parametrize("exe, message", [("recorder", "recorder ended the run with exit code -9"),
                                          ("sim", "process 'sim' exited with code -9; the run ended")])
def test_ros2_launch_fails_when_a_process_the_run_needs_dies(exe, message, tmp_path):
    """As under `consensus run` (issue 30: one launch behaviour): the recorder, or another process the run needs."""
    import os
    import signal
    import subprocess

    out = tmp_path / "run"
    launch = start_ros2("launch", "consensus", "aggregation.launch.py",
                        *launch_args(planner="average", num_robots=2, duration_s=60, output_dir=out),
                        log=tmp_path / "launch.log")
    try:
        def pid():
            ps = subprocess.run(["pgrep", "-f", f"lib/consensus/{exe} .*{out}"], capture_output=True, text=True)
            return [int(p) for p in ps.stdout.split()]

        pids = wait_until(pid, 40)
        assert pids, (tmp_path / "launch.log").read_text()[-2000:]
        os.kill(pids[0], signal.SIGKILL)
        code = launch.wait(timeout=40)
    finally:
        stop_group(launch)
    log = (tmp_path / "launch.log").read_text()
    assert code != 0, log[-2000:]
    assert message in log, log[-2000:]


@pytest.mark.usefixtures("ros2_daemon")
def test_ros2_param_set_changes_the_speed_limit_live_and_refuses_read_only_parameters(tmp_path):
    out = tmp_path / "run"
    launch = start_ros2("launch", "consensus", "aggregation.launch.py",
                        *launch_args(planner="average", num_robots=2, single_process="false", duration_s=120,
                                    output_dir=out),
                        log=tmp_path / "launch.log")
    try:
        up = wait_until(lambda: "/robot_0/agent" in ros2("node", "list", timeout=20).stdout.split() or None, 40)
        assert up, (tmp_path / "launch.log").read_text()[-2000:]
        # one process per robot: the robot node lists the groups it reads, nested (issue 42)
        from consensus.scenarios.aggregation.ros import robot

        listed = param_list("/robot_0/agent", timeout=CLI_TIMEOUT_S)
        config = listed - {"use_sim_time", "start_type_description_service", "robot_id"}
        assert config and all("." in name for name in config), sorted(listed)
        assert {name.split(".")[0] for name in config} == {*robot.GROUPS, "aggregation"}, sorted(listed)
        assert {"control.kp", "llm.backend", "planner.period_s"} <= config and "sim.rate_hz" not in config
        ok = ros2_param("set", "/robot_0/agent", "control.v_max", "0.3", timeout=CLI_TIMEOUT_S)
        assert "Set parameter successful" in ok.stdout, ok.stdout
        assert "0.3" in ros2_param("get", "/robot_0/agent", "control.v_max", timeout=CLI_TIMEOUT_S).stdout
        ro = ros2_param("set", "/robot_0/agent", "fleet.num_robots", "5", timeout=CLI_TIMEOUT_S)
        assert "Setting parameter failed" in ro.stdout and "read-only" in ro.stdout, ro.stdout
        bad = ros2_param("set", "/robot_0/agent", "control.v_max", "-1.0", timeout=CLI_TIMEOUT_S)
        assert "Setting parameter failed" in bad.stdout, bad.stdout
        described = ros2_param("describe", "/robot_0/agent", "control.v_max", timeout=CLI_TIMEOUT_S).stdout
        assert "speed limit" in described and "changeable at run time" in described, described
        log = wait_until(lambda: "controller settings changed: v_max=0.3" in (tmp_path / "launch.log").read_text()
                         or None, 20)
        assert log, (tmp_path / "launch.log").read_text()[-2000:]
    finally:
        code = stop_group(launch)
    assert code == 0, (tmp_path / "launch.log").read_text()[-3000:]
