"""A fleet survives a lost robot: with one process per robot, `kill -9` of one robot's process leaves the others
planning and converging (the topology node drops the lost robot's state after robot_timeout_s), the recorder notes
the loss in summary.json, and `consensus run` finishes the run instead of ending it with an error."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros


def _pids(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_the_fleet_goes_on_and_converges_without_a_killed_robot(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "consensus.cli", "run", "aggregation", "--robots", "4", "--planner", "average",
           "--duration", "20", "--seed", "4", "--out", str(out),
           "--set", "fleet=false", "--set", "robot_timeout_s=1.5", "--set", "init_radius=6",
           "--set", "collision_avoidance=none"]
    log = open(tmp_path / "run.log", "w")
    run = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "progress t=  2" not in (tmp_path / "run.log").read_text():
            time.sleep(0.2)                               # the fleet is on its way (second planning round)
        pids = _pids(f"__ns:=/robot_3 .*{out}")
        assert pids, "robot_3's process not found:\n" + (tmp_path / "run.log").read_text()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        run.wait(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        log.close()
    output = (tmp_path / "run.log").read_text()
    assert run.returncode == 0, output[-3000:]
    assert "robot process '/robot_3/agent' died" in output, output[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["lost_robots"] == [3]
    assert summary["losses"][0]["robot"] == 3 and summary["losses"][0]["event"] == "lost"
    assert summary["converged"] is True and summary["final_spread_m"] < summary["converge_tol_m"], summary
    assert summary["callback_errors"] == 0
    topology_log = (out / "logs" / "topology.log").read_text()
    assert "robot_3 lost" in topology_log
    # the three survivors met where they planned without robot 3; robot 3 stayed where it died
    rows = np.genfromtxt(out / "trajectories.csv", delimiter=",", names=True)
    last_t = rows["t"].max()
    final = rows[rows["t"] == last_t]
    survivors = final[final["robot"] != 3]
    assert np.isfinite(survivors["x"]).all() and len(survivors) == 3
