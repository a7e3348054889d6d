"""docs/multi-host.md's check: one fleet whose processes run as if on separate hosts.

The aggregation run's processes (sim, topology, recorder: the "base host"; and one process per robot,
``single_process: false``: one "host" each) are started by this test one by one, each in its own session (process
group), not as children of one launcher, with the environment a host of a multi-host fleet has: the same ROS_DOMAIN_ID
(this test's own), automatic discovery kept to the host (``LOCALHOST``) and the other hosts listed as static peers
(``ROS_STATIC_PEERS=127.0.0.1``: the loopback stands in for their addresses; nothing leaves this machine). The
robots find the sim and each other and converge: nothing in the code assumes one process tree. (On one machine
LOCALHOST alone already connects them, so this checks the process layout, not a network path; ``OFF`` would not
do: it turns static peers off as well.) Every process is stopped by its process group at the end.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

pytestmark = pytest.mark.ros

#: what a host of a multi-host fleet sets (docs/multi-host.md), with the loopback standing in for the peers
HOST_ENV = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_STATIC_PEERS": "127.0.0.1"}


def _stop(procs: list[subprocess.Popen]) -> None:
    for sig, grace in ((signal.SIGINT, 5.0), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        alive = [p for p in procs if p.poll() is None]
        if not alive:
            return
        for p in alive:
            try:
                os.killpg(p.pid, sig)                 # the process group this test created for it
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        for p in alive:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass


def test_a_fleet_split_over_hosts_with_static_peers_converges(tmp_path):
    from consensus.cli import _default_config
    from consensus.registry import scenario
    from consensus.runs.ros_runner import CHILD_ENV, executable_command, ros_args
    from consensus.settings import load_flat

    sc = scenario("aggregation")
    cfg = load_flat(sc.config_cls, _default_config(sc.config_file), num_robots=3, planner="average",
                    single_process=False, seed=4, init_radius=4.0, duration_s=25.0, settle_s=2.0)
    cfg, params = sc.prepare(cfg, tmp_path / "run")
    out = tmp_path / "run"
    specs = sc.processes(cfg, use_sim_time=False)
    robots = [s for s in specs if s.namespace.startswith("robot_")]
    assert len(robots) == 3, [s.name for s in specs]
    env = {**os.environ, **CHILD_ENV, **HOST_ENV}
    assert env["ROS_DOMAIN_ID"] == os.environ["ROS_DOMAIN_ID"]               # the test session's own domain
    procs: list[subprocess.Popen] = []
    logs = tmp_path / "logs"
    logs.mkdir()
    try:
        for spec in specs:
            log = open(logs / f"{spec.namespace or spec.name}.log", "w")
            procs.append(subprocess.Popen([*executable_command(spec.executable, spec.package),
                                           *ros_args(spec, params)], env=env, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))
        assert len({os.getpgid(p.pid) for p in procs}) == len(procs)          # one process group per "host"
        recorder = procs[[s.ends_run for s in specs].index(True)]
        recorder.wait(timeout=120)
    finally:
        _stop(procs)
    text = {p.name: p.read_text(errors="replace")[-1500:] for p in logs.iterdir()}
    assert recorder.returncode == 0, text
    summary = json.loads((out / "summary.json").read_text())
    # the robots' targets agree and their bodies pack around the meeting point (the collision filter is on in
    # ROS runs): no pair closer than the clearance
    assert summary["converged"] is True and summary["target_spread_m"] < summary["converge_tol_m"], (summary, text)
    assert summary["min_pair_distance_m"] >= summary["clearance_m"] - 1e-6, summary
    assert summary.get("lost_robots", []) == [] and summary["callback_errors"] == 0
    assert all(p.poll() is not None for p in procs)
