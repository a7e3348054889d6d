"""A real aggregation run with the live Foxglove view: `consensus run aggregation --foxglove PORT` (3 robots,
average planner) while a client speaking the Foxglove WebSocket protocol subscribes to every advertised channel and
decodes what arrives, as the Foxglove app would over ws://localhost:PORT."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from support.foxglove_client import free_port, listen, need_client_and_sdk

need_client_and_sdk()
pytestmark = pytest.mark.ros

DURATION_S = 14


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """(run directory, exit status, run log, channels, decoded messages) of one run watched live to its end."""
    from consensus.runs import foxglove_live

    tmp = tmp_path_factory.mktemp("foxglove")
    out, port = tmp / "run", free_port()
    cmd = [sys.executable, "-m", "consensus.cli", "run", "aggregation", "--robots", "3", "--planner", "average",
           "--duration", str(DURATION_S), "--seed", "5", "--set", "planner_period_s=1.0", "--foxglove", str(port),
           "--set", "collision_avoidance=none", "--out", str(out)]
    log = open(tmp / "run.log", "w")
    run = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        # from the recorder's start to the end of the run (the server stops with it and closes the connection)
        _, channels, heard = listen(port, DURATION_S + 60, connect_timeout=60)
        run.wait(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGINT)
            try:
                run.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
        log.close()
    assert set(channels) == set(foxglove_live.CHANNELS), channels
    return out, run.returncode, (tmp / "run.log").read_text(), channels, heard


def test_the_run_ends_normally_and_records_the_port(live):
    out, code, output, _, _ = live
    assert code == 0, output[-3000:]
    assert "Foxglove live view: ws://127.0.0.1:" in (out / "logs" / "recorder.log").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["foxglove"] > 0 and manifest["config"]["foxglove_host"] == "127.0.0.1"


def test_the_live_fleet_shows_the_robots_gathering(live):
    out, _, output, _, heard = live
    fleets = heard["/fleet"]
    assert len(fleets) >= 2 * (DURATION_S - 4), len(fleets)             # 2 Hz for most of the run
    seen = [np.array([[r["x"], r["y"]] for r in f["robots"]], dtype=float) for f in fleets]
    # the first message that knows every robot (the view may start before a robot's first state arrives)
    first = next((xy for xy in seen if xy.shape == (3, 2) and np.isfinite(xy).all()), seen[0])
    last = seen[-1]
    assert first.shape == last.shape == (3, 2) and np.isfinite(first).all() and np.isfinite(last).all()
    assert np.ptp(last, axis=0).max() < 0.5 < np.ptp(first, axis=0).max()     # they met
    summary = json.loads((out / "summary.json").read_text())
    assert np.allclose(last.mean(axis=0), summary["consensus_point"], atol=0.3), (last, summary)
    assert fleets[-1]["edges"] == [[0, 1], [0, 2], [1, 2]]              # the complete graph of /topology/graph
    assert all(r["reasoning"] for r in fleets[-1]["robots"])            # each robot's last planning record


def test_the_scene_and_frames_carry_every_robot(live):
    _, _, _, channels, heard = live
    assert channels["/markers"]["encoding"] == "protobuf"
    scene = {e["id"]: e for e in heard["/markers"][-1]["entities"]}
    assert set(scene) == {"robot_0", "robot_1", "robot_2", "edges"}
    assert all(e["frame_id"] == "world" and e["spheres"] and e["texts"] for k, e in scene.items() if k != "edges")
    assert len(scene["edges"]["lines"][0]["points"]) == 6                # 3 links, 2 ends each
    frames = {t["child_frame_id"] for t in heard["/tf"][-1]["transforms"]}
    assert frames == {f"robot_{i}/base_link" for i in range(3)}


def test_progress_and_reasoning_follow_the_run(live):
    _, _, _, _, heard = live
    progress = [p for p in heard["/progress"] if p["t_s"] is not None]
    t = [p["t_s"] for p in progress]
    assert t == sorted(t) and t[-1] > DURATION_S - 2
    assert progress[-1]["duration_s"] == DURATION_S and progress[-1]["round"] >= DURATION_S // 2
    assert progress[-1]["spread_m"] < 0.5 < progress[0]["spread_m"]
    assert progress[-1]["llm_calls"] == 0 and progress[-1]["llm_fallbacks"] == 0    # the average planner
    assert progress[-1]["bad_messages"] == 0 and progress[-1]["callback_errors"] == 0
    logs = heard["/reasoning"]
    assert {entry["name"] for entry in logs} == {"robot_0", "robot_1", "robot_2"}
    assert all(entry["message"].startswith("round ") for entry in logs)
