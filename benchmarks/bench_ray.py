"""The Ray executor against the local one on this machine: CPU trials per second, Ray's overhead per trial, and an
LLM sweep over two endpoints against its ideal time.

A two-node Ray cluster is started here as the tests start it (tests/support/ray_cluster.py: ``ray start --head`` and
``ray start --address``, 1 CPU each, so the Ray run has the same 2 workers as the local fork pool of 2 processes)
and stopped at the end.

1. **CPU, per-trial cost.** A spin study whose trial burns ``work_ms`` of CPU (0 to 100 ms) on both executors with 2
   workers. Each trial stamps its start and end, so the rate is taken over the trial phase (first start -> last
   end) and the start-up (forking the pool; connecting, shipping the code, starting the actors) is printed apart.
   Ray's overhead per trial = the wall time a trial occupies a worker (workers / rate) minus its own time, minus
   the same for the local pool; it "stops mattering" where it is below 10 % of the trial's own time.
2. **CPU, a real preset.** ``theory-model`` (paper 2's model): trials/s local vs Ray the same way.
3. **LLM.** Two fake endpoints (tests/support/fake_openai_server.py, each its own process) with a fixed latency, each
   with ``concurrency`` C: a sweep of trials that each send ``--rounds`` requests one after another, on both executors.
   The ideal is calls x latency / (2 C); printed: the request phase (first request sent -> last reply, from the
   transcript) and end to end, as a share of the ideal (target >= 80 %).
4. **A flaky endpoint** (``--flaky``, only this part): 8 trials of ``consensus-1d`` (3 agents, 3 rounds, LLM planner)
   against one endpoint (tests/support/flaky_openai_server.py, its own process) that rotates through a good reply, an
   HTTP 500, garbage and a slow good reply (``--slow`` s), local executor then Ray; printed: each one's wall time, its
   ok / failed records, and Ray's time as a multiple of the local one (target <= 2).

    python benchmarks/bench_ray.py [--quick]
    python benchmarks/bench_ray.py --flaky [--slow 1.0] [--repeat 1]
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT

from consensus.experiments.runner import read_results, run_experiment
from consensus.experiments.spec import resolve_spec
from consensus.experiments.study import Study, Trial, TrialContext

REPLY = json.dumps({"reasoning": "move to the average", "position": [1.5]})


def _spin(trial: Trial, ctx: TrialContext) -> dict:
    end = time.thread_time() + trial.params["work_ms"] / 1000.0
    n = 0
    while time.thread_time() < end:
        n += 1
    return {"seed": trial.seed % 1000}


def _llm_trial(trial: Trial, ctx: TrialContext) -> dict:
    from consensus.llm.base import ChatRequest

    texts = []
    for r in range(trial.params["rounds"]):
        req = ChatRequest(messages=({"role": "user", "content": f"round {r}: choose a position"},),
                          model="fake", max_tokens=64, tag=f"round_{r}")
        texts.append(len(ctx.llm.complete(req).text))
    return {"replies": texts}


SPIN = Study(name="spin", description="a trial burning work_ms of CPU", defaults={"work_ms": 1.0},
             default_sweep={}, default_trials=10, run_trial=_spin, report=lambda records, out: [])
LLM = Study(name="llm-rounds", description="sequential requests per trial", defaults={"rounds": 4},
            default_sweep={}, default_trials=16, run_trial=_llm_trial, report=lambda records, out: [],
            uses_llm=lambda params: True)


def _stamped(inner, trial: Trial, ctx: TrialContext) -> dict:
    """``inner``'s result with the trial's start and end time (wall clock of the worker: one machine here)."""
    t0 = time.time()
    result = inner(trial, ctx)
    return {**result, "_t0": t0, "_t1": time.time()}


def _phase(study: Study, spec, executor, tmp: Path) -> tuple[float, float, float]:
    """(trials/s over the trial phase, mean own time of a trial [s], seconds before the first trial started).

    The trial phase runs from the first trial's start to the last one's end, so connecting, shipping the code and
    starting the workers (Ray) or forking the pool (local) is left out of the rate and shown as the start-up."""
    stamped = Study(**{**study.__dict__, "run_trial": functools.partial(_stamped, study.run_trial)})
    out = Path(tempfile.mkdtemp(dir=tmp))
    t_call = time.time()
    result = run_experiment(spec, stamped, out, progress=False, executor=executor)
    if result.failed:
        raise RuntimeError(f"{result.failed} trial(s) failed in {out}")
    recs = [r["result"] for r in read_results(out / "results.jsonl").values()]
    t0, t1 = min(r["_t0"] for r in recs), max(r["_t1"] for r in recs)
    own = sum(r["_t1"] - r["_t0"] for r in recs) / len(recs)
    return len(recs) / (t1 - t0), own, t0 - t_call


def _start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "fake_openai_server.py"),
                             "--latency", str(latency), "--reply", REPLY], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "http" not in line:
        proc.kill()
        raise RuntimeError(f"fake server did not start: {line!r}")
    return proc, line.split(" on ")[1].split()[0]


def _llm_sweep(args, executor, urls: list[str], tmp: Path) -> tuple[float, float, int]:
    spec = resolve_spec({"study": LLM.name, "trials": args.llm_trials, "workers": 1,
                         "params": {"rounds": args.rounds},
                         "llm": {"backend": "openai", "model": "fake", "max_retries": 0,
                                 "endpoints": [{"base_url": u, "concurrency": args.concurrency} for u in urls]}},
                        {LLM.name: LLM})
    out = Path(tempfile.mkdtemp(dir=tmp))
    t0 = time.perf_counter()
    result = run_experiment(spec, LLM, out, progress=False, executor=executor)
    wall = time.perf_counter() - t0
    exchanges = [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
    phase = max(x["time"] for x in exchanges) - min(x["time"] - x["latency_s"] for x in exchanges)
    if result.failed:
        raise RuntimeError(f"{result.failed} LLM trial(s) failed in {out}")
    return phase, wall, len(exchanges)


def _start_flaky(slow_s: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "flaky_openai_server.py"),
                             "--slow", str(slow_s)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "http" not in line:
        proc.kill()
        raise RuntimeError(f"flaky server did not start: {line!r}")
    return proc, line.split(" on ")[1].split()[0]


def _flaky(args, cluster, tmp: Path) -> None:
    """Part 4 (module docstring): the same sweep on both executors against one flaky endpoint."""
    from consensus.experiments.ray_executor import RayExecutor
    from consensus.experiments.runner import LocalExecutor
    from consensus.registry import all_studies

    studies = all_studies()
    print(f"8 trials of consensus-1d (3 agents, 3 rounds, LLM planner) against one endpoint rotating good / HTTP 500 / "
          f"garbage / slow ({args.slow:g} s); default llm settings (concurrency 4, max_retries 2, timeout 60 s), "
          f"workers 2; Ray: a two-node cluster of 1 CPU each on this machine ({os.cpu_count()} cores)")
    print("| run | local | Ray | Ray / local |")
    print("|---|---|---|---|")
    for run in range(args.repeat):
        times = {}
        for name, ex in (("local", LocalExecutor()), ("Ray", RayExecutor(cluster.address))):
            proc, url = _start_flaky(args.slow)          # a fresh rotation for each executor
            try:
                spec = resolve_spec({"study": "consensus-1d", "trials": 8, "workers": 2, "sweep": {},
                                     "params": {"num_agents": 3, "rounds": 3, "planner": "llm"},
                                     "llm": {"backend": "openai", "model": "fake", "base_url": url}}, studies)
                t0 = time.perf_counter()
                result = run_experiment(spec, studies["consensus-1d"], Path(tempfile.mkdtemp(dir=tmp)),
                                        progress=False, executor=ex)
                times[name] = (time.perf_counter() - t0, result.ok, result.failed)
            finally:
                proc.terminate()
                proc.wait(timeout=10)
        (lt, lok, lfail), (rt, rok, rfail) = times["local"], times["Ray"]
        print(f"| {run + 1} | {lt:.1f} s ({lok} ok, {lfail} failed) | {rt:.1f} s ({rok} ok, {rfail} failed) | "
              f"{rt / lt:.2f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer trials and sizes")
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=8, help="per endpoint (2 endpoints)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--llm-trials", type=int, default=256)
    ap.add_argument("--flaky", action="store_true", help="only part 4: local vs Ray against a flaky endpoint")
    ap.add_argument("--slow", type=float, default=1.0, help="--flaky: seconds of a slow reply")
    ap.add_argument("--repeat", type=int, default=1, help="--flaky: runs of each")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    from support.ray_cluster import RayCluster

    from consensus.experiments.ray_executor import RayExecutor
    from consensus.experiments.runner import LocalExecutor

    sizes = [0.0, 5.0, 50.0] if args.quick else [0.0, 1.0, 5.0, 20.0, 100.0]
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp_name:
        tmp = Path(tmp_name)
        cluster = RayCluster(nodes=2).start()
        os.environ.update(cluster.auth_env)
        try:
            if args.flaky:
                _flaky(args, cluster, tmp)
                return 0
            ray_ex, local_ex = RayExecutor(cluster.address), LocalExecutor()
            print(f"Ray {__import__('ray').__version__}: 2 nodes x 1 CPU on this machine ({os.cpu_count()} cores); "
                  "local: fork pool of 2 processes")
            print("| trial (CPU) | local: trials/s | Ray: trials/s | Ray overhead per trial | share of the trial | "
                  "start-up local / Ray |")
            print("|---|---|---|---|---|---|")
            workers = 2
            for ms in sizes:
                n = max(8, min(400, int(40_000 / max(ms, 0.1)) // 10)) // (2 if args.quick else 1)
                spec = resolve_spec({"study": "spin", "workers": workers, "trials": n, "params": {"work_ms": ms}},
                                    {SPIN.name: SPIN})
                lr, lown, lup = _phase(SPIN, spec, local_ex, tmp)
                rr, rown, rup = _phase(SPIN, spec, ray_ex, tmp)
                # per worker, a trial occupies workers / rate of wall time: its own time plus the executor's gap
                over = workers / rr - rown - (workers / lr - lown)
                print(f"| {ms:g} ms x {n} | {lr:.0f} | {rr:.0f} | {over * 1000:+.2f} ms | "
                      f"{over / rown:.0%} | {lup:.1f} s / {rup:.1f} s |")
            from consensus.registry import all_studies

            theory = all_studies()["theory-model"]
            n = 10 if args.quick else 40
            spec = resolve_spec({"study": "theory-model", "workers": workers, "trials": n,
                                 "sweep": {"beta": [0.0, 0.5], "num_agents": [10]}}, {theory.name: theory})
            lr, lown, lup = _phase(theory, spec, local_ex, tmp)
            rr, rown, rup = _phase(theory, spec, ray_ex, tmp)
            print(f"theory-model (num_agents 10, 2 beta points x {n} trials; a trial {lown * 1000:.0f} ms): local "
                  f"{lr:.1f} trials/s, Ray {rr:.1f} trials/s; start-up local {lup:.1f} s, Ray {rup:.1f} s")

            servers = [_start_server(args.latency) for _ in range(2)]
            try:
                urls = [u for _, u in servers]
                calls = args.llm_trials * args.rounds
                ideal = calls * args.latency / (2 * args.concurrency)
                for name, ex in (("local", local_ex), ("Ray", ray_ex)):
                    phase, wall, n = _llm_sweep(args, ex, urls, tmp)
                    print(f"LLM {name}: {n} requests to 2 endpoints x concurrency {args.concurrency}, latency "
                          f"{args.latency * 1000:.0f} ms; ideal {ideal:.2f} s; request phase {phase:.2f} s "
                          f"({ideal / phase:.0%} of ideal), end to end {wall:.2f} s ({ideal / wall:.0%})")
            finally:
                for proc, _ in servers:
                    proc.terminate()
                    proc.wait(timeout=10)
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
