"""Disaster response scenario (paper 2, scenario 1): simulation speed, LLM cost per round, embedded-LLM latency.

1. Headless rounds per second with the heuristic drones (implicit, one discussion turn; and explicit majority)
   for N = 3, 10, 100 drones (``--drones``), ``--rounds`` rounds each, no run directory.
2. LLM calls and tokens per round by mode for N = 3 LLM drones against the local fake OpenAI server
   (tests/support/fake_openai_server.py; it answers every drone with one valid reply and counts *words* as tokens),
   so the numbers are the protocol's cost, not a model's: calls/round, prompt/completion words per round, prompt
   characters per call.
3. With ``--embedded`` (only this part runs then, alone on the machine): the wall time of ONE round of 3 LLM
   drones (implicit, one discussion turn: 6 calls) on the embedded model (Qwen2.5-Coder-1.5B via llama.cpp), with
   its replies and fallbacks.

    PYTHONPATH=src python benchmarks/bench_disaster.py
    PYTHONPATH=src python benchmarks/bench_disaster.py --embedded      # ~1-2 minutes, ~2 GB RAM
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts tests/ on sys.path for tests/support, the fake server)
from support.fake_openai_server import FakeOpenAIServer

from consensus.scenarios.disaster.config import DisasterConfig
from consensus.scenarios.disaster.headless import run_disaster_headless

MODES = {
    "implicit K=1": dict(mode="implicit", discussion_turns=1),
    "implicit K=2": dict(mode="implicit", discussion_turns=2),
    "no interaction": dict(baseline="no_interaction"),
    "explicit majority": dict(mode="explicit", strategy="majority"),
    "explicit averaging": dict(mode="explicit", strategy="averaging"),
    "explicit decentralized": dict(mode="explicit", strategy="decentralized"),
    "explicit decentralized_feedback": dict(mode="explicit", strategy="decentralized_feedback"),
    "explicit spoke_wheel": dict(mode="explicit", strategy="spoke_wheel"),
    "explicit spoke_wheel_feedback": dict(mode="explicit", strategy="spoke_wheel_feedback"),
}


def heuristic_speed(drones: list[int], rounds: int) -> None:
    print(f"\n## Headless rounds/s, heuristic drones ({rounds} rounds, best of 3)")
    print("| drones | implicit K=1 | explicit majority |\n|---:|---:|---:|")
    for n in drones:
        speeds = []
        for kw in (dict(mode="implicit"), dict(mode="explicit", strategy="majority")):
            cfg = DisasterConfig(num_robots=n, rounds=rounds, **kw)
            speeds.append(max(run_disaster_headless(cfg)["rounds_per_s"] for _ in range(3)))
        print(f"| {n} | {speeds[0]:.0f} | {speeds[1]:.0f} |")


def llm_cost(rounds: int) -> None:
    reply = json.dumps({"analysis": "Fire at [3, 4] is the most severe; heading there.", "action": [3, 4],
                        "message": "Drone here: I take the fire at [3, 4]."})
    print(f"\n## LLM cost per round, 3 LLM drones, fake server ({rounds} rounds; tokens = words)")
    print("| mode | calls/round | prompt words/round | completion words/round | prompt chars/call | s/round |")
    print("|---|---:|---:|---:|---:|---:|")
    with FakeOpenAIServer(default=reply) as srv:
        for name, kw in MODES.items():
            cfg = DisasterConfig(planner="llm", llm_backend="openai", llm_base_url=srv.base_url, llm_model="fake",
                                 rounds=rounds, **kw)
            start = len(srv.requests)
            t0 = time.monotonic()
            s = run_disaster_headless(cfg)
            wall = time.monotonic() - t0
            bodies = srv.requests[start:]
            chars = sum(len(m["content"]) for b in bodies for m in b["messages"]) / max(len(bodies), 1)
            print(f"| {name} | {s['llm_calls'] / rounds:.1f} | {s['prompt_tokens'] / rounds:.0f} | "
                  f"{s['completion_tokens'] / rounds:.0f} | {chars:.0f} | {wall / rounds:.3f} |")


def embedded_round() -> None:
    print("\n## One embedded-LLM round, 3 drones, implicit, K=1 (6 calls)")
    from consensus.llm.from_config import client_from_config

    cfg = DisasterConfig(planner="llm", llm_backend="embedded", rounds=1, seed=1)
    t0 = time.monotonic()
    client, close = client_from_config(cfg)
    print(f"server start: {time.monotonic() - t0:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            t0 = time.monotonic()
            s = run_disaster_headless(cfg, client=client, out_dir=tmp)
            wall = time.monotonic() - t0
        finally:
            close()
        record = json.loads((Path(tmp) / "rounds.jsonl").read_text().splitlines()[0])
    print(f"round wall time: {wall:.1f} s for {s['llm_calls']} calls ({wall / max(s['llm_calls'], 1):.1f} s/call on "
          f"a 1-slot server); completion tokens {s['completion_tokens']}; fallbacks {s['llm_fallbacks']} "
          f"{s['llm_fallbacks_by_reason']}; coverage {s['coverage_rate']}")
    print("disasters:", [(d["cell"], d["kind"], d["severity"]) for d in record["observation"]["disasters"]])
    phases = [("discuss", r) for r in record["decision"]["discussion"][0]] + \
        [("act", r) for r in record["decision"]["action_replies"]]
    for k, (phase, r) in enumerate(phases):
        print(f"  drone {k % 3} {phase:7s} action={r['action']} fallback={r['fallback_reason'] or '-'} "
              f"message={r['message'][:90]!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drones", type=int, nargs="+", default=[3, 10, 100])
    ap.add_argument("--rounds", type=int, default=50, help="rounds of the heuristic speed runs")
    ap.add_argument("--llm-rounds", type=int, default=5, help="rounds of the fake-server cost runs")
    ap.add_argument("--embedded", action="store_true", help="only time one round on the embedded model")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.embedded:
        embedded_round()
        return 0
    heuristic_speed(args.drones, args.rounds)
    llm_cost(args.llm_rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
