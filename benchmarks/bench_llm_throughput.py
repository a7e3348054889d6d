"""LLM throughput of the experiment runner: requests/s through one shared, concurrency-bounded client.

A local OpenAI-protocol server (tests/support/fake_openai_server.py run as its own process: a thread per connection,
so concurrent requests are served concurrently) answers every chat request after ``--latency`` seconds (default
0.2 s). An LLM sweep runs through the runner (``consensus.experiments.runner.run_experiment``) with
``llm.concurrency = --concurrency`` (default 16), so at best ``concurrency / latency`` requests complete per second
(80 req/s by default). The study stands in for an LLM study: each trial sends ``--rounds`` requests one after the
other (json_schema response format, one tag per round) and parses every reply.

Printed: requests; the rate over the request phase (first request sent -> last reply, from the transcript's
times and latencies) against the ideal, and the ratio (target >= 80 %); the end-to-end rate including the
runner's set-up (importing the OpenAI client, manifest); the mean request latency the client saw; and a replay
of the same sweep from its transcripts (no server) as a check that every record is reproduced.

    python benchmarks/bench_llm_throughput.py [--trials 128] [--rounds 5] [--latency 0.2] [--concurrency 16]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT

from consensus.experiments.runner import read_results, replay_spec, run_experiment
from consensus.experiments.spec import resolve_spec
from consensus.experiments.study import Study, Trial, TrialContext
from consensus.llm.base import ChatRequest
from consensus.scenarios.aggregation.prompts import response_schema
from consensus.llm.parsing import parse_position

REPLY = json.dumps({"reasoning": "move to the average", "position": [1.5]})


def _trial(trial: Trial, ctx: TrialContext) -> dict:
    positions = []
    for r in range(trial.params["rounds"]):
        req = ChatRequest(messages=({"role": "user", "content": f"round {r}: choose a position"},),
                          model=ctx.llm_settings.get("model", ""), max_tokens=64, response_format=response_schema(1),
                          tag=f"round_{r}")
        positions.append(parse_position(ctx.llm.complete(req).text, 1).position.tolist())
    return {"positions": positions}


STUDY = Study(name="llm-throughput", description="sequential LLM requests per trial (runner benchmark)",
              defaults={"rounds": 5}, default_sweep={}, default_trials=64, run_trial=_trial,
              report=lambda records, out: [], uses_llm=lambda params: True)


def _without_time(run_dir: Path) -> dict:
    """The run's records without ``elapsed_s`` (the only field a replay may change)."""
    return {k: {f: v for f, v in r.items() if f != "elapsed_s"}
            for k, r in read_results(run_dir / "results.jsonl").items()}


def _start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "fake_openai_server.py"),
                             "--latency", str(latency), "--reply", REPLY], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()          # "fake OpenAI server on http://127.0.0.1:PORT/v1 (latency ...)"
    if "http" not in line:
        proc.kill()
        raise RuntimeError(f"fake server did not start: {line!r}")
    return proc, line.split(" on ")[1].split()[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5, help="sequential requests per trial")
    ap.add_argument("--latency", type=float, default=0.2, help="server delay per request [s]")
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args(argv)
    studies = {STUDY.name: STUDY}
    with tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp:
        out = Path(tmp) / "run"
        server, base_url = _start_server(args.latency)
        try:
            spec = resolve_spec({"study": STUDY.name, "trials": args.trials, "workers": 1,
                                 "params": {"rounds": args.rounds},
                                 "llm": {"backend": "openai", "base_url": base_url, "model": "fake",
                                         "concurrency": args.concurrency, "max_retries": 0}}, studies)
            t0 = time.perf_counter()
            result = run_experiment(spec, STUDY, out, progress=False)
            wall = time.perf_counter() - t0
        finally:
            server.terminate()
            server.wait(timeout=10)
        exchanges = [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
        t_first = min(x["time"] - x["latency_s"] for x in exchanges)
        t_last = max(x["time"] for x in exchanges)
        mean_latency = sum(x["latency_s"] for x in exchanges) / len(exchanges)
        t0 = time.perf_counter()
        run_experiment(replay_spec(out, studies), STUDY, Path(tmp) / "replay", progress=False)
        replay_s = time.perf_counter() - t0
        same = _without_time(out) == _without_time(Path(tmp) / "replay")
    n = len(exchanges)
    ideal = args.concurrency / args.latency
    rate = n / (t_last - t_first)
    print(f"trials {args.trials} x {args.rounds} sequential requests, latency {args.latency * 1000:.0f} ms, "
          f"concurrency {args.concurrency}; {result.ok}/{result.total} trials ok")
    print(f"request phase: {n} requests in {t_last - t_first:.2f} s -> {rate:.1f} req/s (ideal {ideal:.1f}); "
          f"ratio {rate / ideal:.1%} (target >= 80%); mean latency seen by the client {mean_latency * 1000:.0f} ms")
    print(f"end to end (with set-up: OpenAI client import, manifest): {wall:.2f} s -> {n / wall:.1f} req/s "
          f"({n / wall / ideal:.1%})")
    print(f"replay from transcripts (no server): {replay_s:.2f} s, records identical: {same}")
    return 0 if same and result.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
