"""turtlesim as the aggregation's simulator (consensus.sims.turtlesim: core, ros).

The coordinate map, the Pose -> odometry conversion, the checks before a run and the process lists are tested
always. The real turtlesim (../shared/turtlesim, built for the pinned wheels) runs an aggregation under Xvfb and
the turtles must meet in turtlesim's own /turtle<i>/pose; without turtlesim (that folder or a ROS 2 install), Xvfb,
the Qt libraries or the std_srvs wheel the test skips with the reason (tests/support/needs.py; in CI,
CONSENSUS_REQUIRE_ALL=1 with ../shared present, it must run).
"""
from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from consensus import cli
from consensus.errors import ConfigError
from consensus.scenarios.aggregation.config import load_config
from consensus.scenarios.aggregation.processes import aggregation_processes
from consensus.sims.turtlesim import core as ts
from support.cli_run import run_cli
from support.needs import need

ROOT = Path(__file__).resolve().parents[3]
SHARED_TURTLESIM = ROOT.parent / "shared" / "turtlesim"


# ----------------------------------------------------------------------------------------------- the map
@pytest.mark.parametrize("workspace", [[-10, 10, -10, 10], [0, 40, -5, 5], [-1, 1, 3, 9]])
def test_workspace_maps_into_the_window_with_its_aspect_ratio_and_back(workspace):
    m = ts.WindowMap.for_workspace(workspace)
    xmin, xmax, ymin, ymax = workspace
    rng = np.random.default_rng(0)
    pts = np.column_stack([rng.uniform(xmin, xmax, 200), rng.uniform(ymin, ymax, 200)])
    turtle = np.array([m.to_turtle(x, y) for x, y in pts])
    back = np.array([m.to_workspace(tx, ty) for tx, ty in turtle])
    assert np.allclose(back, pts, atol=1e-9)
    # the whole workspace lies inside the window, the margin kept on the longer axis, centred on the other
    corners = np.array([m.to_turtle(x, y) for x in (xmin, xmax) for y in (ymin, ymax)])
    assert corners.min() >= ts.MARGIN_M - 1e-9 and corners.max() <= ts.WINDOW_M - ts.MARGIN_M + 1e-9
    span = corners.max(axis=0) - corners.min(axis=0)
    assert max(span) == pytest.approx(ts.WINDOW_M - 2 * ts.MARGIN_M)
    assert corners.mean(axis=0) == pytest.approx([ts.WINDOW_M / 2] * 2)
    # one scale for both axes: distances (and so angles) are kept up to that factor
    d_ws = np.linalg.norm(pts[1:] - pts[:-1], axis=1)
    d_turtle = np.linalg.norm(turtle[1:] - turtle[:-1], axis=1)
    assert np.allclose(d_turtle, m.scale * d_ws)


def test_default_workspace_origin_is_the_window_centre_where_turtle1_starts():
    m = ts.WindowMap.for_workspace([-10, 10, -10, 10])
    assert m.to_turtle(0, 0) == pytest.approx((5.5444, 5.5444), abs=1e-4)    # turtlesim spawns turtle1 there
    assert m.scale == pytest.approx((ts.WINDOW_M - 1.0) / 20)


def test_pose_becomes_workspace_odometry_and_commands_go_back_in_turtle_units():
    m = ts.WindowMap.for_workspace([0, 40, -5, 5])           # scale = (11.09 - 1) / 40
    tx, ty = m.to_turtle(30.0, 2.0)
    x, y, yaw, v, w = ts.odom_from_pose(m, tx, ty, 3 * math.pi / 2, 0.25, -0.7)
    assert (x, y) == pytest.approx((30.0, 2.0))
    assert yaw == pytest.approx(-math.pi / 2)                 # wrapped into (-pi, pi]
    assert v == pytest.approx(0.25 / m.scale) and w == -0.7   # speeds scale, yaw rates do not
    # a workspace command of 1 m/s is scale m/s for the turtle, which then reports it as 1 m/s again
    vx, vy, wz = m.cmd_to_turtle(1.0, 0.0, 0.5)
    assert (vx, vy, wz) == pytest.approx((m.scale, 0.0, 0.5))
    assert ts.odom_from_pose(m, tx, ty, 0.0, vx, wz)[3:] == pytest.approx((1.0, 0.5))
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            ts.odom_from_pose(m, bad, ty, 0.0, 0.0, 0.0)


def test_a_silent_robots_turtle_is_stopped_once_before_turtlesims_own_timeout():
    hold = ts.CommandHold(2)
    hold.sent(0, (0.3, 0.0, 0.1), now=10.0)
    hold.sent(1, (0.0, 0.0, 0.0), now=10.0)           # already standing: nothing to stop
    assert hold.due(10.0 + 0.9 * ts.CMD_HOLD_S) == []
    assert hold.due(10.0 + 1.1 * ts.CMD_HOLD_S) == [0]
    assert hold.due(10.0 + 2 * ts.CMD_HOLD_S) == []   # one zero command, not a stream of them
    hold.sent(0, (0.3, 0.0, 0.0), now=20.0)            # commanding again: held again
    assert hold.due(20.1) == [] and hold.due(20.0 + 1.1 * ts.CMD_HOLD_S) == [0]
    # every held command is still live in turtlesim (it drops a command 1 s old)
    assert ts.CMD_HOLD_S < ts.TURTLESIM_CMD_TIMEOUT_S


def test_turtles_and_pens():
    assert [ts.turtle_name(i) for i in range(3)] == ["turtle1", "turtle2", "turtle3"]
    pens = [ts.pen(i) for i in range(len(ts.PEN_COLOURS))]
    assert len({p[:3] for p in pens}) == len(pens)            # one colour per robot
    assert all(0 <= c <= 255 for p in pens for c in p) and (69, 86, 255) not in {p[:3] for p in pens}


def test_a_non_2d_workspace_is_refused():
    with pytest.raises(ConfigError, match="2-D workspace"):
        ts.WindowMap.for_workspace([-10, 10])


# ----------------------------------------------------------------------------------------------- before a run
@pytest.fixture
def fake_turtlesim(tmp_path, monkeypatch):
    """An ament prefix holding a 'turtlesim' package with an executable turtlesim_node, and an importable
    (empty) turtlesim Python package; a display."""
    prefix = tmp_path / "prefix"
    (prefix / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (prefix / "share" / "ament_index" / "resource_index" / "packages" / "turtlesim").write_text("")
    exe = prefix / "lib" / "turtlesim" / "turtlesim_node"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (tmp_path / "py" / "turtlesim").mkdir(parents=True)
    (tmp_path / "py" / "turtlesim" / "__init__.py").write_text("")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    monkeypatch.syspath_prepend(str(tmp_path / "py"))
    monkeypatch.delitem(sys.modules, "turtlesim", raising=False)
    monkeypatch.setenv("DISPLAY", ":99")
    pytest.importorskip("ament_index_python")
    return exe


def test_missing_turtlesim_is_one_clear_error_naming_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path))          # an ament index without turtlesim
    monkeypatch.setenv("DISPLAY", ":99")
    code = cli.main(["run", "aggregation", "--sim", "turtlesim", "--planner", "average", "--robots", "3",
                     "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("consensus")]
    assert len(lines) == 1 and "sim 'turtlesim'" in lines[0]
    assert "ros-$ROS_DISTRO-turtlesim" in lines[0] and "setup-env.sh" in lines[0]     # what to install
    assert not (tmp_path / "run").exists()                           # nothing was started or written


def test_prepare_checks_display_and_dim_and_makes_the_robots_unicycles(fake_turtlesim, monkeypatch):
    cfg = load_config(None, sim="turtlesim", planner="average")
    assert cfg.kinematics == "single_integrator"
    out, changes = ts.prepare(cfg)
    assert out.kinematics == "unicycle" and changes == {"kinematics": ["single_integrator", "unicycle"]}
    assert ts.prepare(out)[1] == {}
    assert ts.find_turtlesim() == fake_turtlesim
    with pytest.raises(ConfigError, match="needs dim 2"):
        ts.prepare(load_config(None, sim="turtlesim", planner="average", dim=1, workspace=[-10, 10]))
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError, match="no display"):
        ts.prepare(cfg)


def test_headless_turtlesim_is_refused(capsys):
    assert cli.main(["run", "aggregation", "--sim", "turtlesim", "--headless"]) == 2
    assert "drop --headless" in capsys.readouterr().err


def test_turtlesim_run_starts_turtlesim_and_the_bridge_instead_of_the_sim():
    specs = aggregation_processes(load_config(None, sim="turtlesim", planner="average", num_robots=3),
                                  use_sim_time=True)
    assert [(s.package, s.executable) for s in specs[:2]] == [("turtlesim", "turtlesim_node"),
                                                              ("consensus", "turtlesim_bridge")]
    assert specs[1].params["publish_clock"] is True
    assert "sim" not in {s.executable for s in specs}
    assert "turtlesim_node" not in {s.executable for s in aggregation_processes(load_config(None))}


def test_another_packages_node_gets_its_own_parameters_only(fake_turtlesim, tmp_path):
    from consensus.runs.ros_runner import executable_command, ros_args

    spec = ts.processes(load_config(None))[0]
    assert executable_command(spec.executable, spec.package) == [str(fake_turtlesim)]
    args = ros_args(spec, tmp_path / "params.yaml")
    assert "--params-file" not in args and "use_sim_time:=false" in args
    bridge = ts.processes(load_config(None))[1]
    assert "--params-file" in ros_args(bridge, tmp_path / "params.yaml")


@pytest.mark.needs("ros2_launch")
def test_turtlesim_launch_file_is_the_aggregation_on_turtlesim(fake_turtlesim, monkeypatch, tmp_path):
    from launch.actions import DeclareLaunchArgument
    from launch_ros.actions import Node

    from consensus.runs.launch_file import NAMESPACE_ARG, SECURITY_ARGS, launch_arguments
    from support.ros2_tools import launch_actions, node_info, tool_env

    monkeypatch.setenv("AMENT_PREFIX_PATH", tool_env()["AMENT_PREFIX_PATH"])   # the package and the fake turtlesim
    spec = importlib.util.spec_from_file_location("turtlesim_launch", ROOT / "launch" / "turtlesim.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    declared = {e.name: e for e in module.generate_launch_description().entities
                if isinstance(e, DeclareLaunchArgument)}
    assert set(declared) == {"config", "use_sim_time", NAMESPACE_ARG[0], *launch_arguments("aggregation"),
                             *SECURITY_ARGS}
    assert declared["sim"].default_value[0].text == "turtlesim"
    actions = launch_actions("turtlesim.launch.py", monkeypatch, num_robots=3, planner="average",
                             output_dir=tmp_path / "run")
    nodes = [node_info(a) for a in actions if isinstance(a, Node)]
    assert [(n["package"], n["executable"]) for n in nodes[:2]] == \
        [("turtlesim", "turtlesim_node"), ("consensus", "turtlesim_bridge")]
    assert nodes[0]["params_file"] != str(tmp_path / "run" / "params.yaml")   # not our params file
    assert nodes[1]["params_file"] == str(tmp_path / "run" / "params.yaml")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["kinematics"] == "unicycle" and manifest["sim_changes"]["kinematics"]


# ----------------------------------------------------------------------------------------------- the real one
def _turtlesim_env() -> dict:
    """os.environ, plus what ../shared/turtlesim/setup-env.sh sets for this interpreter's venv (sourced by bash) when
    the turtlesim comes from there rather than from a ROS 2 install."""
    if not (SHARED_TURTLESIM / "setup-env.sh").is_file():
        return dict(os.environ)
    need("qt5", "std_srvs")                     # what the ../shared build links and a ROS 2 install would bring
    script = SHARED_TURTLESIM / "setup-env.sh"
    out = subprocess.run(["bash", "-c", 'source "$0" "$1" >/dev/null && env -0', str(script), sys.prefix],
                         capture_output=True, check=True)
    return dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)


@pytest.fixture
def xvfb():
    """A virtual display on a free display number (Xvfb -displayfd)."""
    read, write = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "800x600x24", "-nolisten", "tcp"],
                            pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as fh:
        number = fh.readline().strip()
    try:
        assert number.isdigit(), "Xvfb did not report its display"
        yield f":{number}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.ros
@pytest.mark.needs("turtlesim", "xvfb")
def test_real_turtlesim_turtles_converge_in_turtlesims_own_pose(xvfb, tmp_path):
    env = {**_turtlesim_env(), "DISPLAY": xvfb}
    n, out = 3, tmp_path / "run"
    watch = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "turtlesim_watch.py"), str(n), "0.5"],
                             env=env, stdout=subprocess.PIPE, text=True)
    try:
        run = run_cli(["run", "aggregation", "--sim", "turtlesim", "--planner", "average", "--robots",
                        str(n), "--seed", "4", "--duration", "25", "--set", "collision_avoidance=none",
                        "--out", str(out), "-q"],
                       env=env, timeout=240)
    finally:
        watch.send_signal(signal.SIGINT)
        lines, _ = watch.communicate(timeout=20)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["converged"] is True and summary["bad_messages"] == 0 and summary["callback_errors"] == 0
    assert "/turtlesim_bridge" in summary["health_by_node"]
    # turtlesim's own poses: apart at first, together at the end
    records = [r for r in map(json.loads, lines.splitlines()) if len(r) == n]
    assert len(records) >= 10, lines
    spread = [max(math.dist(p, q) for p in r.values() for q in r.values()) for r in records]
    m = ts.WindowMap.for_workspace(load_config(None).workspace)
    assert max(spread) > 2.0                                     # turtle metres (4 workspace metres)
    assert spread[-1] < 0.2 * m.scale                            # within 0.2 workspace metres
    # and where turtlesim put them is where the recorder saw the robots (the map, back and forth)
    with (out / "trajectories.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    last_t = rows[-1]["t"]
    final = {int(r["robot"]): (float(r["x"]), float(r["y"])) for r in rows if r["t"] == last_t}
    for robot, (x, y) in final.items():
        assert math.dist(m.to_turtle(x, y), records[-1][str(robot + 1)]) < 0.05
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["sim"] == "turtlesim" and manifest["config"]["kinematics"] == "unicycle"
