"""The `consensus` command: bad input gives one clear message and exit 2 with nothing started; a headless run
writes a complete run directory."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest


def consensus(*args: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "consensus.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (["--robots", "1"], "num_robots must be at least 2"),
    (["--topology", "hypercube"], "invalid choice"),
    (["--set", "topology=custom", "--set", "adjacency=[[0,1],[1,0],[1,1]]", "--robots", "2"], "adjacency"),
    (["--set", "planner_period_s=0"], "planner_period_s must be in [0.001, 3600] (got 0.0)"),
    (["--set", "control_period_s=-0.1"], "control_period_s must be in [0.001, 10] (got -0.1)"),
    (["--set", "no_such_key=1"], "unknown parameter 'no_such_key'"),
    (["--set", "num_robots=three"], "invalid value 'three'"),
    (["--set", "nonsense"], "--set expects KEY=VALUE"),
    (["--robots", "x"], "expected an integer"),
    (["--backend", "replay", "--planner", "llm"], "replay_path"),
])
def test_invalid_input_is_one_clear_error_and_nothing_starts(tmp_path, args, message):
    out = tmp_path / "run"
    proc = consensus("run", "aggregation", *args, "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_invalid_config_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("/**:\n  ros__parameters:\n    num_robots: [1, 2\n")
    proc = consensus("run", "aggregation", "--config", str(bad), "--out", str(tmp_path / "run"))
    assert proc.returncode == 2 and "not valid YAML" in proc.stderr and "Traceback" not in proc.stderr
    missing = consensus("run", "aggregation", "--config", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "config file not found" in missing.stderr


def test_headless_run_writes_the_run_directory(tmp_path):
    out = tmp_path / "run"
    proc = consensus("run", "aggregation", "--headless", "--robots", "4", "--planner", "average", "--topology",
                     "ring", "--duration", "30", "--seed", "5", "--out", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["converged"] is True and summary["final_spread_m"] < 0.1
    for key in ("converged", "final_spread_m", "consensus_point", "time_to_converge_s", "llm_calls",
                "llm_fallbacks"):
        assert key in summary
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["mode"] == "headless" and manifest["seed"] == 5 and manifest["config"]["topology"] == "ring"
    assert (out / "paths.png").stat().st_size > 1000 and (out / "planned_vs_actual.png").stat().st_size > 1000
