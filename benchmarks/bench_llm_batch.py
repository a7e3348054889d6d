"""Batch throughput of the embedded llama.cpp server, and how much of it an LLM sweep gets.

1. **Concurrent requests.** One embedded server with ``max(--levels)`` slots; for each level L, L agents (each
   pinned to its own slot) send ``--requests`` paper-1 negotiation requests each, one after the other (1-D,
   ``json`` style, the study's schema; seeded numbers, so every request differs after its system prompt, as in a
   sweep). Printed per level: generated tokens/s and prompt tokens/s (evaluated, not cached) over the wall time,
   and the mean seconds per request.
2. **A sweep.** ``consensus experiment consensus-1d`` (planner ``llm``, ``--trials`` trials of ``--rounds`` rounds,
   4 agents) through the experiment runner with the embedded server at ``--sweep-slots`` slots and
   ``concurrency`` = slots; its generated tokens/s over the request phase (first request sent -> last reply, from
   the transcript) against the best level of part 1 (target >= 80 %).

    PYTHONPATH=src python benchmarks/bench_llm_batch.py [--levels 1 2 4 8] [--requests 3] [--trials 4 --rounds 2]
    PYTHONPATH=src python benchmarks/bench_llm_batch.py --no-sweep        # part 1 only

Needs the embedded model (``make model``). Prints the load average before and after (the figures are only
comparable on an otherwise idle machine).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from consensus.llm.base import ChatRequest
from consensus.llm.factory import make_client
from consensus.llm.from_config import embedded_context
from consensus.scenarios.aggregation.prompts import build_messages, response_schema

MAX_TOKENS = 160                   # the sweep's llm.max_tokens default (LLMParams.llm_max_tokens)


def request(agent: int, k: int) -> ChatRequest:
    rng = np.random.default_rng(1000 * agent + k)
    own, *others = rng.integers(0, 101, size=4).astype(float)
    messages = build_messages(dim=1, own=[own], neighbors=[[o] for o in others], round=k, num_agents=4,
                              style="json")
    return ChatRequest(messages=tuple(messages), temperature=0.7, max_tokens=MAX_TOKENS,
                       response_format=response_schema(1), seed=k, tag=f"agent_{agent}/request_{k}")


def level(client, agents: int, requests: int) -> dict:
    def run(agent: int) -> list:
        return [client.complete(request(agent, k)) for k in range(requests)]

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=agents) as pool:
        replies = [r for rs in pool.map(run, range(agents)) for r in rs]
    wall = time.monotonic() - t0
    timings = [r.meta.get("server_timings") or {} for r in replies]
    generated = sum(r.completion_tokens or 0 for r in replies)
    evaluated = sum(t.get("prompt_n", 0) for t in timings)
    return {"agents": agents, "requests": len(replies), "wall_s": wall, "generated": generated,
            "gen_tok_s": generated / wall, "prompt_tok_s": evaluated / wall,
            "s_per_request": statistics.mean(r.latency_s for r in replies)}


def sweep(slots: int, trials: int, rounds: int) -> dict:
    from consensus.registry import all_studies
    from consensus.experiments.runner import run_experiment
    from consensus.experiments.spec import resolve_spec

    studies = all_studies()
    spec = resolve_spec({"study": "consensus-1d", "trials": trials, "workers": 1,
                         "params": {"planner": "llm", "rounds": rounds, "num_agents": 4}, "sweep": {},
                         "llm": {"backend": "embedded", "n_parallel": slots, "concurrency": slots,
                                 "n_ctx": embedded_context(slots), "timeout_s": 600}}, studies)
    with tempfile.TemporaryDirectory(prefix="bench-llm-batch-") as tmp:
        out = Path(tmp) / "run"
        result = run_experiment(spec, studies[spec.study], out, progress=False)
        exchanges = [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
    ok = [x for x in exchanges if x.get("completion_tokens")]
    t_first = min(x["time"] - x["latency_s"] for x in exchanges)
    t_last = max(x["time"] for x in exchanges)
    generated = sum(x["completion_tokens"] for x in ok)
    return {"trials_ok": result.ok, "trials": result.total, "requests": len(exchanges), "generated": generated,
            "phase_s": t_last - t_first, "gen_tok_s": generated / (t_last - t_first)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--requests", type=int, default=3, help="requests per agent and level (sequential)")
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sweep-slots", type=int, default=0, help="slots of the sweep's server (0 = the best level)")
    ap.add_argument("--no-sweep", action="store_true")
    args = ap.parse_args(argv)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    slots = max(args.levels)
    client, close = make_client("embedded", timeout_s=600, max_retries=0, concurrency=slots, n_parallel=slots,
                                n_ctx=embedded_context(slots))
    rows = []
    try:
        client.complete(request(0, 99))              # load the weights into the page cache (a request no level sends)
        for n in args.levels:
            row = level(client, n, args.requests)
            rows.append(row)
            print(f"{n} concurrent: {row['gen_tok_s']:5.1f} generated tok/s, {row['prompt_tok_s']:6.1f} prompt tok/s"
                  f" (evaluated), {row['s_per_request']:.1f} s a request, {row['requests']} requests in "
                  f"{row['wall_s']:.0f} s", flush=True)
    finally:
        close()
    best = max(rows, key=lambda r: r["gen_tok_s"])
    print(f"best: {best['agents']} concurrent requests, {best['gen_tok_s']:.1f} generated tok/s "
          f"({best['gen_tok_s'] / rows[0]['gen_tok_s']:.2f}x one request's)")
    if not args.no_sweep:
        s = args.sweep_slots or best["agents"]
        res = sweep(s, args.trials, args.rounds)
        print(f"sweep consensus-1d (llm, {args.trials} trials x {args.rounds} rounds x 4 agents, {s} slots, "
              f"concurrency {s}): {res['requests']} requests, {res['generated']} generated tokens in "
              f"{res['phase_s']:.0f} s -> {res['gen_tok_s']:.1f} tok/s = {res['gen_tok_s'] / best['gen_tok_s']:.0%} "
              f"of the best concurrent figure (target >= 80 %); {res['trials_ok']}/{res['trials']} trials ok")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
