"""The disaster drones in turtlesim (``consensus run disaster --sim turtlesim``): the simulator comes from the same
``sim`` key as the aggregation's (``consensus.control.motion``, ``consensus.sims``).

The process list is checked always; the real turtlesim (../shared/turtlesim or a ROS 2 install) flies three heuristic
drones for two rounds under Xvfb, and every drone must end each round on the cell it chose, as in the built-in sim,
with turtlesim's own /turtle<i>/pose there too. Without turtlesim, Xvfb or the Qt libraries it skips with the reason
(tests/support/needs.py), like tests/unit/sims/test_turtlesim.py.
"""
from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from consensus import cli
from consensus.scenarios.disaster.config import load_disaster_config
from consensus.scenarios.disaster.processes import disaster_processes, sim_params
from consensus.sims.turtlesim import core as ts
from support.cli_run import run_cli
from unit.sims.test_turtlesim import _turtlesim_env, xvfb  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[3]
#: 6 x 6 cells, one static disaster (tests/ros/test_disaster_ros.py's small world)
WORLD = dict(planner="heuristic", rounds=2, width=6, height=6, initial_disasters=1, p_new=0.0, volatility="low",
             v_max=2.0, kp=2.0, seed=1)


def test_disaster_sim_key_picks_turtlesim_and_its_bridge_with_the_sims_parameters():
    cfg = load_disaster_config(None, sim="turtlesim", num_robots=3, **WORLD)
    specs = disaster_processes(cfg)
    by_exe = {s.executable: s for s in specs}
    assert "sim" not in by_exe
    assert by_exe["turtlesim_node"].package == "turtlesim"
    assert by_exe["turtlesim_node"].params == {"use_sim_time": False, "holonomic": True}   # drones move sideways
    # the bridge starts the drones where the built-in sim would: their start cells, the grid as workspace
    assert by_exe["turtlesim_bridge"].params == sim_params(cfg)
    assert by_exe["turtlesim_bridge"].params["workspace"] == [0.0, 6.0, 0.0, 6.0]
    assert [s.executable for s in disaster_processes(cfg.replace(sim="builtin"))].count("sim") == 1
    assert not {"sim", "turtlesim_node"} & {s.executable for s in disaster_processes(cfg.replace(sim="none"))}


def test_turtlesim_drones_cannot_run_headless_and_gazebo_needs_its_launch_file(capsys):
    assert cli.main(["run", "disaster", "--sim", "turtlesim", "--headless"]) == 2
    assert "drop --headless" in capsys.readouterr().err
    assert cli.main(["run", "disaster", "--sim", "gazebo"]) == 2
    assert "gazebo.launch.py" in capsys.readouterr().err


@pytest.mark.ros
@pytest.mark.needs("turtlesim", "xvfb")
def test_real_turtlesim_flies_the_drones_to_their_chosen_cells(xvfb, tmp_path):  # noqa: F811
    env = {**_turtlesim_env(), "DISPLAY": xvfb}
    n, out = 3, tmp_path / "run"
    sets = [arg for k, v in WORLD.items() if k not in ("planner", "rounds") for arg in ("--set", f"{k}={v}")]
    watch = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "turtlesim_watch.py"), str(n), "0.5"],
                             env=env, stdout=subprocess.PIPE, text=True)
    try:
        run = run_cli(["run", "disaster", "--sim", "turtlesim", "--planner", "heuristic", "--robots", str(n),
                        "--rounds", "2", *sets, "--out", str(out), "-q"],
                       env=env, timeout=300)
    finally:
        watch.send_signal(signal.SIGINT)
        lines, _ = watch.communicate(timeout=20)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds"] == 2 and summary["flight_timeouts"] == 0 and summary["phase_timeouts"] == 0
    assert summary["callback_errors"] == 0
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert len(rounds) == 2
    for r in rounds:                         # every drone reached the cell it chose
        assert [tuple(c) for c in r["cells_end"]] == [tuple(c) for c in r["decision"]["actions"]]
    assert any(r["decision"]["actions"] != r["cells_start"] for r in rounds), "no drone had to fly"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["sim"] == "turtlesim" and manifest["config"]["kinematics"] == "single_integrator"
    assert (out / "logs" / "turtlesim_bridge.log").is_file() and not (out / "logs" / "sim.log").exists()
    # turtlesim's own poses end on the last round's cells (the window map back to the grid, 1 m cells)
    records = [r for r in map(json.loads, lines.splitlines()) if len(r) == n]
    assert records, lines
    m = ts.WindowMap.for_workspace([0.0, 6.0, 0.0, 6.0])
    for i, cell in enumerate(rounds[-1]["cells_end"]):
        x, y = m.to_workspace(*records[-1][str(i + 1)])
        assert (math.floor(x), math.floor(y)) == tuple(cell), (i, x, y, cell)
