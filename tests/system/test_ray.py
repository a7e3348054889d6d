"""The Ray executor on a real two-node Ray cluster on this machine (tests/support/ray_cluster.py: `ray start --head`
and a second node with `ray start --address`, so trials really run in other processes and objects really move).

A Ray run and a local run of the same spec give the same records (``elapsed_s`` aside) for a CPU study (the toy
and the real ``theory-model`` preset) and an LLM study against fake endpoints; a worker killed mid-sweep costs the
trial it was running a failed record with the reason, which ``--retry-failed`` runs again; Ctrl-C keeps every
finished record and the resume (on Ray) completes the sweep; an endpoint pool survives one endpoint dying.

Flaky endpoints and dying helpers (tests/support/flaky_openai_server.py): a sweep against an endpoint that rotates good
replies, 500s, garbage and slow replies records every trial; a trial worker killed while it holds the endpoint's
only slot costs its own trials only (the slot goes back to the pool); the broker actor killed while asks wait at it
is restarted and the sweep, then ``--retry-failed``, completes. The kills land while a request is held at the
endpoint (a gate the test opens), never racing the clock.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support import experiment_fixtures as fx
from support.fake_openai_server import FakeOpenAIServer, Reply
from support.flaky_openai_server import flaky_server

from consensus.experiments.runner import RESULTS_FILE, TRANSCRIPTS_FILE, read_results, replay_spec, run_experiment
from consensus.experiments.spec import load_spec_file, resolve_spec

pytestmark = pytest.mark.needs("ray")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster():
    from support.needs import need

    need("ray")
    from support.ray_cluster import RayCluster

    c = RayCluster(nodes=2).start()
    saved = {k: os.environ.get(k) for k in c.auth_env}
    os.environ.update(c.auth_env)                    # this process's ray.init (the executor) uses the token
    try:
        yield c
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        c.stop()
        assert c.alive() == [], "processes of the test's Ray cluster are still running"


def ray_executor(cluster):
    from consensus.experiments.ray_executor import RayExecutor

    return RayExecutor(cluster.address)


def without_time(records: dict) -> dict:
    return {k: {f: v for f, v in r.items() if f != "elapsed_s"} for k, r in records.items()}


def records(out: Path) -> dict:
    return read_results(out / RESULTS_FILE)


def run(spec, out, studies=fx.STUDIES, **kw):
    return run_experiment(spec, studies[spec.study], out, progress=False, **kw)


def seeded_reply(body: dict) -> Reply:
    """A reply that depends only on the request (its per-call seed): any endpoint, any order, the same answer."""
    digest = hashlib.sha256(str(body.get("seed")).encode()).digest()
    return Reply(json.dumps({"reasoning": "r", "position": [float(digest[0] % 23)]}), delay_s=0.02)


# ---------------------------------------------------------------------------------------------
def test_cpu_sweep_on_ray_gives_the_local_records_and_ships_the_code(cluster, tmp_path):
    spec = resolve_spec({"study": "toy", "trials": 4, "params": {"sleep_s": 0.3},
                         "sweep": {"x": [0, 1], "mode": ["ok", "crash"]}}, fx.STUDIES)    # 16 x 0.3 s: both workers
    result = run(spec, tmp_path / "ray", executor=ray_executor(cluster))
    assert (result.mode, result.ok, result.failed) == ("ray", 12, 4)
    local = run(spec, tmp_path / "local")
    assert without_time(records(tmp_path / "ray")) == without_time(records(local.out_dir))
    log = (tmp_path / "ray" / "experiment.log").read_text()
    # the workers import consensus (and the fixtures) from Ray's runtime environment, on both nodes
    placed = [line for line in log.splitlines() if "Ray worker" in line]
    assert len(placed) == 2 and all("runtime_resources/py_modules_files" in line for line in placed)
    assert len({line.split(" on node ")[1].split(",")[0] for line in placed}) == 2
    assert "experiment_fixtures.py" in log and "runtime_resources" in log          # the crash tracebacks


def test_theory_model_preset_on_ray_equals_local(cluster, tmp_path):
    from consensus.registry import all_studies

    studies = all_studies()
    raw = {"study": "theory-model", "trials": 2, "params": {"rounds": 20},
           "sweep": {"beta": [0.0, 0.5], "num_agents": [4]}}
    spec = resolve_spec(raw, studies)
    ray_run = run(spec, tmp_path / "ray", studies, executor=ray_executor(cluster))
    local = run(spec, tmp_path / "local", studies)
    assert ray_run.ok == local.ok == 4
    assert without_time(records(tmp_path / "ray")) == without_time(records(tmp_path / "local"))


def test_llm_sweep_on_ray_equals_local_and_replays_on_ray(cluster, tmp_path):
    with FakeOpenAIServer(seeded_reply) as a, FakeOpenAIServer(seeded_reply) as b:
        raw = {"study": "toy-llm", "trials": 3, "workers": 1,
               "llm": {"backend": "openai", "model": "fake", "max_retries": 0,
                       "endpoints": [{"base_url": a.base_url, "concurrency": 2},
                                     {"base_url": b.base_url, "concurrency": 2}]}}
        spec = resolve_spec(raw, fx.STUDIES)
        ray_run = run(spec, tmp_path / "ray", executor=ray_executor(cluster))
        local = run(spec, tmp_path / "local")
        assert a.max_in_flight <= 2 and b.max_in_flight <= 2
        urls = {a.base_url, b.base_url}
    assert ray_run.ok == local.ok == 6
    assert without_time(records(tmp_path / "ray")) == without_time(records(tmp_path / "local"))
    exchanges = [json.loads(x) for x in (tmp_path / "ray" / TRANSCRIPTS_FILE).read_text().splitlines()]
    assert len(exchanges) == 3 * (2 * 2 + 3 * 2) and {x["endpoint"] for x in exchanges} == urls
    replayed = run(replay_spec(tmp_path / "ray", fx.STUDIES), tmp_path / "replay", executor=ray_executor(cluster))
    assert replayed.ok == 6
    assert without_time(records(tmp_path / "replay")) == without_time(records(tmp_path / "ray"))


def test_an_endpoint_dying_mid_sweep_on_ray_loses_nothing(cluster, tmp_path):
    with FakeOpenAIServer(seeded_reply) as a:
        b = FakeOpenAIServer(seeded_reply).start()
        try:
            spec = resolve_spec({"study": "toy-llm", "trials": 6, "workers": 1,
                                 "llm": {"backend": "openai", "model": "fake", "max_retries": 0,
                                         "endpoints": [{"base_url": a.base_url, "concurrency": 2},
                                                       {"base_url": b.base_url, "concurrency": 2}]}}, fx.STUDIES)
            killer = threading.Thread(target=lambda: (_wait_lines(tmp_path / "ray" / TRANSCRIPTS_FILE, 8), b.stop()))
            killer.start()
            result = run(spec, tmp_path / "ray", executor=ray_executor(cluster))
            killer.join()
        finally:
            b.stop()
        local = run(spec, tmp_path / "local")         # endpoint b is gone: a alone
        url_a = a.base_url
    assert result.ok == local.ok == 12
    assert without_time(records(tmp_path / "ray")) == without_time(records(tmp_path / "local"))
    answered = [json.loads(x).get("endpoint") for x in (tmp_path / "ray" / TRANSCRIPTS_FILE).read_text().splitlines()]
    url_b = next(u for u in answered if u != url_a)
    assert answered.count(url_b) >= 1 and answered.count(url_a) > answered.count(url_b)


def _wait_lines(path: Path, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.02)


def test_a_killed_worker_fails_its_trial_with_the_reason_and_retry_failed_reruns_it(cluster, tmp_path):
    # the x = 1 trials are held until the gate file exists (experiment_fixtures, mode "gated"), each announcing the
    # process that holds it: the kill lands on a worker inside a trial, at a point the test controls
    gate = tmp_path / "gate"
    spec = resolve_spec({"study": "toy", "trials": 8, "params": {"sleep_s": 0.4, "mode": "gated", "note": str(gate)},
                         "sweep": {"x": [0, 1]}}, fx.STUDIES)
    out = tmp_path / "ray"
    killed: list[int] = []

    def kill_one_worker():
        try:
            _wait_lines(out / RESULTS_FILE, 3, timeout=600)
            deadline = time.monotonic() + 600        # a bound for a broken runner only: nothing races it
            while time.monotonic() < deadline and not killed:
                pids = set(cluster.worker_pids())
                for held in tmp_path.glob("gate.held.*"):
                    pid = int(held.name.rsplit(".", 1)[1])
                    if pid in pids:                   # a process of the test's own cluster, by its id
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                        break
                time.sleep(0.02)
        finally:
            gate.touch()                              # the other held trials go on

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    first = run(spec, out, executor=ray_executor(cluster))
    killer.join()
    assert killed, "no TrialWorker process found to kill"
    got = records(out)
    assert len(got) == 16                                              # nothing lost
    lost = [r for r in got.values() if r["status"] == "failed"]
    assert first.failed == len(lost) == 1 and lost[0]["result"] is None
    assert lost[0]["reason"].startswith("Ray worker lost (") and "died" in lost[0]["reason"]
    again = run(spec, out, retry_failed=True, executor=ray_executor(cluster))
    assert (again.skipped, again.ok, again.failed) == (15, 1, 0)
    local = run(spec, tmp_path / "local")
    assert without_time(records(out)) == without_time(records(local.out_dir))


#: the flaky endpoint's rotation for a sweep that must complete trials: a 500, a slow reply and a garbage one in every
#: 24 requests. A trial (4 agents x 2 rounds: 8 asks, about 50 requests for 6 trials) fails for a garbage reply (a
#: fallback) or for a 500 whose one retry got a 500 too, so at most 2 + 3 // 2 of the 6 fail: 3 or more complete
SWEEP_CYCLE = ("good", "500", "good", "slow", *("good",) * 8, "garbage", *("good",) * 11)


def test_a_flaky_endpoint_sweep_on_ray_records_every_trial(cluster, tmp_path):
    # 4 trials at a time x 4 agents asking at once for 2 slots of an endpoint that backs off: many asks wait at
    # the broker while the slots' holders give them back
    server, script = flaky_server(slow_s=0.3, cycle=SWEEP_CYCLE)
    with server:
        spec = resolve_spec({"study": "toy-llm", "trials": 6, "workers": 2, "sweep": {"agents": [4]},
                             "llm": {"backend": "openai", "model": "fake", "base_url": server.base_url,
                                     "concurrency": 2, "max_retries": 1}}, fx.STUDIES)
        thread, box = _run_in_thread(spec, tmp_path / "ray", cluster)
        thread.join(300)                              # a bound for a broken runner (a stalled broker) only
        assert not thread.is_alive(), "the sweep against the flaky endpoint stalled"
    got = records(tmp_path / "ray")
    result = box[0]
    assert len(got) == 6 and result.ok + result.failed == 6
    assert all(script.counts[k] > 0 for k in ("good", "500", "garbage", "slow")) and server.max_in_flight <= 2
    # trials complete through the 500s (retried), the slow replies and the waits at the broker ...
    assert result.ok >= 3 and sum(r["status"] == "ok" for r in got.values()) == result.ok, (result, script.counts)
    # ... and one fails only for its LLM, one bad reply at most a trial, never for a lost or stalled worker
    assert result.failed <= script.counts["garbage"] + script.counts["500"] // 2, (result, script.counts)
    assert all(r["reason"].startswith(("LLM fallback", "LLM request failed")) for r in got.values()
               if r["status"] == "failed")


def _held_spec(url: str):
    """8 toy-llm trials on one endpoint with ONE slot: a slot that never came back would stall every other trial (a
    worker runs at most 4 of them at once: some are always left for the others)."""
    return resolve_spec({"study": "toy-llm", "trials": 8, "workers": 2, "sweep": {"agents": [2]},
                         "llm": {"backend": "openai", "model": "fake", "base_url": url, "concurrency": 1,
                                 "max_retries": 0, "timeout_s": 600}}, fx.STUDIES)   # its leases outlive the test


def _run_in_thread(spec, out, cluster, **kw) -> tuple[threading.Thread, list]:
    box: list = []
    thread = threading.Thread(target=lambda: box.append(run(spec, out, executor=ray_executor(cluster), **kw)),
                              daemon=True)                    # a stalled one must not hold pytest at exit
    thread.start()
    return thread, box


def _holder(cluster, port: int) -> int:
    """The TrialWorker process connected to the endpoint (the one whose request is held there)."""
    import psutil

    pids = [pid for pid in cluster.worker_pids()
            if any(c.raddr and c.raddr.port == port for c in psutil.Process(pid).net_connections("tcp"))]
    assert len(pids) == 1, f"expected one TrialWorker connected to the endpoint, found {pids}"
    return pids[0]


def test_a_worker_killed_holding_the_only_endpoint_slot_loses_only_its_own_trials(cluster, tmp_path):
    server, script = flaky_server(cycle=("good",))
    script.hold("")                                   # every request waits at the endpoint until the gate opens
    out = tmp_path / "ray"
    with server:
        spec = _held_spec(server.base_url)
        thread, box = _run_in_thread(spec, out, cluster)
        try:
            assert script.held.wait(120), "no request reached the endpoint"   # a bound for a broken runner only
            holder = _holder(cluster, server.port)
            os.kill(holder, signal.SIGKILL)           # a process of the test's own cluster, by its id
        finally:
            script.open_gate()
            thread.join(180)                          # a bound for a broken runner (a slot never given back)
        assert not thread.is_alive(), "the sweep stalled after a worker holding the endpoint slot was killed"
        got = records(out)
        lost = [r for r in got.values() if r["status"] == "failed"]
        assert len(got) == 8 and 1 <= box[0].failed == len(lost) <= 4                 # the others completed
        assert all(r["reason"].startswith("Ray worker lost (") for r in lost)
        again = run(spec, out, retry_failed=True, executor=ray_executor(cluster))
        assert (again.ok, again.failed) == (len(lost), 0)
        local = run(spec, tmp_path / "local")
    assert without_time(records(out)) == without_time(records(local.out_dir))


def test_a_killed_broker_is_replaced_and_retry_failed_completes(cluster, tmp_path):
    server, script = flaky_server(cycle=("good",))
    script.hold("")
    out = tmp_path / "ray"
    with server:
        spec = _held_spec(server.base_url)
        thread, box = _run_in_thread(spec, out, cluster)
        killed: list[int] = []
        try:
            assert script.held.wait(120), "no request reached the endpoint"   # one slot held, other asks waiting
            for pid in cluster.worker_pids("ray::SlotBrokerActor"):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        finally:
            script.open_gate()
            thread.join(180)
        assert killed and not thread.is_alive(), "the sweep stalled after its broker was killed"
        first = records(out)
        # every trial recorded: ok (its asks went to the restarted broker), or failed with the one broker error
        assert len(first) == 8
        assert all(r["status"] == "ok" or "endpoint broker" in r["reason"] for r in first.values())
        again = run(spec, out, retry_failed=True, executor=ray_executor(cluster))
        assert again.failed == 0 and again.ok == box[0].failed
        local = run(spec, tmp_path / "local")
    assert without_time(records(out)) == without_time(records(local.out_dir))


def _cli(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
           "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "experiment_fixtures.py"), "experiment",
                             *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=fx.default_signals)


def test_ctrl_c_keeps_finished_records_and_the_resume_on_ray_completes_the_sweep(cluster, tmp_path):
    # the x = 1 trials are held until the gate file exists (experiment_fixtures, mode "gated"): Ctrl-C comes when the
    # 12 x = 0 records are in and before any of the x = 1 ones, however fast the cluster is
    gate = tmp_path / "gate"
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(f"study: toy\ntrials: 12\nparams: {{sleep_s: 0.25, mode: gated, note: '{gate}'}}\n"
                         "sweep: {x: [0, 1]}\n")
    out = tmp_path / "run"
    ray_flags = ["--executor", "ray", "--ray-address", cluster.address]
    proc = _cli([str(spec_file), "--out", str(out), "-q", "--no-report", *ray_flags])
    try:
        _wait_lines(out / RESULTS_FILE, 12, timeout=600)    # every x = 0 record: the actors wait at the gate
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=180)   # a bound for a stuck runner: Ray stops slowly under load
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    gate.touch()                                   # the resume and the local run go through
    done = records(out)
    assert proc.returncode == 130 and f"--resume {out}" in err
    assert len(done) == 12 and all(r["status"] == "ok" for r in done.values())
    finish = _cli(["--resume", str(out), "-q", "--no-report", *ray_flags])
    stdout, err = finish.communicate(timeout=300)
    assert finish.returncode == 0, err
    assert f"{len(done)} already recorded" in stdout and "(ray)" in stdout
    local = run(resolve_spec(load_spec_file(spec_file), fx.STUDIES), tmp_path / "local")
    assert without_time(records(out)) == without_time(records(local.out_dir))


def test_broker_leases_come_back_from_a_dead_holder_and_when_they_expire():
    from consensus.llm.pool import SlotBroker

    now = [0.0]
    broker = SlotBroker([1, 1], lease_s=10.0, clock=lambda: now[0])
    (a, lease_a), (b, lease_b) = broker.try_acquire(owner="w0"), broker.try_acquire(owner="w1")
    assert {a, b} == {0, 1} and broker.try_acquire(owner="w2") is None          # full: refused at once
    assert broker.release_owner("w0") == 1 and broker.in_flight[a] == 0          # w0 died: its slot is back
    assert broker.try_acquire(owner="w0") is None                                # and it gets no new one
    broker.release(a, ok=True, lease=lease_a)                                    # its late release: no change
    assert broker.in_flight[a] == 0
    now[0] = 10.0                                                                # w1 never gave its lease back
    assert broker.status()[b]["in_flight"] == 0 and broker.expired == 1
    broker.release(b, ok=False, error="HTTP 500", lease=lease_b)                 # too late: the failure counts
    assert broker.in_flight == [0, 0] and broker.status()[b]["failed"] == 1


def test_the_broker_actor_serves_releases_while_many_asks_wait():
    import asyncio

    from consensus.experiments.ray_executor import SlotBrokerActor

    async def scenario():
        actor = SlotBrokerActor([1], lease_s=600.0, backoff_s=0.0)
        held = await actor.acquire([], "w0", 60.0)
        waiting = [asyncio.ensure_future(actor.acquire([], f"w{k % 3}", 60.0)) for k in range(30)]
        await asyncio.sleep(0)
        granted, most = 0, 0
        while waiting:
            await actor.release(held[0], True, "", held[1])       # never queued behind the 30 waiting asks
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            assert len(done) == 1
            waiting = [w for w in waiting if w not in done]
            held = done.pop().result()
            granted += held is not None
            most = max(most, actor.core.in_flight[0])
        dead = asyncio.ensure_future(actor.acquire([], "w1", 60.0))
        await asyncio.sleep(0)
        await actor.release_owner("w1")                           # its worker died: its waiting ask gives up
        return granted, most, await dead

    assert asyncio.run(scenario()) == (30, 1, None)


def test_the_embedded_model_of_the_driver_is_refused_before_anything_is_written(tmp_path):
    from consensus.errors import ConfigError
    from consensus.experiments.ray_executor import RayExecutor

    spec = resolve_spec({"study": "toy-llm", "llm": {"backend": "embedded"}}, fx.STUDIES)
    with pytest.raises(ConfigError, match="cannot use the embedded model"):
        run(spec, tmp_path / "run", executor=RayExecutor("127.0.0.1:1"))
    assert not (tmp_path / "run").exists()
