"""Latency and parse rate of the embedded model on paper-1 style 2D aggregation prompts.

Starts the embedded llama.cpp server (default model assembled from the part packages),
sends one untimed warm-up request and then K requests shaped like the paper-1 prompt with
a ``json_schema`` response format ``{reasoning: string, position: [number, number]}``, and
prints the median / p90 seconds per call, the parse rate and the generation speed.

    PYTHONPATH=src python benchmarks/bench_embedded_llm.py --k 10 --max-tokens 160
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from consensus.llm.base import ChatRequest, ChatResponse, LLMError
from consensus.llm.factory import make_client

SYSTEM = "You are a robot moving in a two-dimensional space."
USER = ("There are many other robots in the space. You all need to gather at the same position. "
        "Your position is: {own}, and the positions of others are: {others}. Choose a position to move to "
        "in order to gather, and briefly explain the reasoning behind your decision.")


def schema(reasoning_max_chars: int) -> dict:
    reasoning: dict = {"type": "string"}
    if reasoning_max_chars > 0:
        reasoning["maxLength"] = reasoning_max_chars
    return {
        "type": "json_schema",
        "json_schema": {"name": "plan", "strict": True, "schema": {
            "type": "object", "additionalProperties": False, "required": ["reasoning", "position"],
            "properties": {"reasoning": reasoning,
                           "position": {"type": "array", "items": {"type": "number"},
                                        "minItems": 2, "maxItems": 2}}}},
    }


def fmt(p: tuple[float, float], decimals: int) -> str:
    return f"({p[0]:.{decimals}f}, {p[1]:.{decimals}f})"


def make_request(rng: random.Random, args: argparse.Namespace, i: int) -> ChatRequest:
    pts = [(rng.uniform(-10, 10), rng.uniform(-10, 10)) for _ in range(args.robots)]
    user = USER.format(own=fmt(pts[0], args.decimals),
                       others=", ".join(fmt(p, args.decimals) for p in pts[1:]))
    return ChatRequest(messages=({"role": "system", "content": SYSTEM}, {"role": "user", "content": user}),
                       temperature=args.temperature, max_tokens=args.max_tokens,
                       response_format=schema(args.reasoning_max_chars), tag=f"bench/{i}")


def parses(text: str) -> bool:
    try:
        obj = json.loads(text)
        pos = obj["position"]
        return (isinstance(obj.get("reasoning"), str) and len(pos) == 2
                and all(isinstance(v, (int, float)) and math.isfinite(v) for v in pos))
    except (ValueError, KeyError, TypeError):
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=10, help="timed requests")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--reasoning-max-chars", type=int, default=120,
                    help="maxLength of the reasoning string in the schema (0 = unlimited)")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--robots", type=int, default=3, help="robots in the prompt (own + others)")
    ap.add_argument("--decimals", type=int, default=2, help="decimals of the coordinates in the prompt")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument("--parallel", type=int, default=1,
                    help="server slots and concurrent requests (like P robots planning in the same round)")
    ap.add_argument("--n-ctx-per-slot", type=int, default=1024)
    ap.add_argument("--model", default="", help="a .gguf file instead of the default model")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", action="store_true", help="print every reply")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    rng = random.Random(args.seed)
    requests = [make_request(rng, args, i) for i in range(args.k)]
    t0 = time.monotonic()
    client, close = make_client("embedded", model=args.model, timeout_s=300.0, max_retries=0,
                                concurrency=args.parallel, transcripts_path=None, replay_path=None,
                                n_ctx=args.n_ctx_per_slot * args.parallel, n_threads=args.threads,
                                n_parallel=args.parallel)
    startup = time.monotonic() - t0
    results: list[tuple[float, ChatResponse] | None] = [None] * args.k

    def one(i: int) -> None:
        t = time.monotonic()
        try:
            r = client.complete(requests[i])
        except LLMError as exc:
            print(f"request {i}: {exc}", file=sys.stderr)
            return
        results[i] = (time.monotonic() - t, r)

    try:
        warm = client.complete(make_request(rng, args, -1))
        t_all = time.monotonic()
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            list(pool.map(one, range(args.k)))
        wall = time.monotonic() - t_all
    finally:
        close()
    done = [x for x in results if x is not None]
    errors = args.k - len(done)
    if not done:
        print("no successful requests")
        return 1
    lat = [t for t, _ in done]
    toks = [r.completion_tokens or 0 for _, r in done]
    ok = sum(parses(r.text) for _, r in done)
    if args.show:
        for i, x in enumerate(results):
            if x is not None:
                print(f"[{i}] {x[0]:.2f}s {x[1].completion_tokens} tok: {x[1].text}")
    tms = [r.meta.get("server_timings") or {} for _, r in done]
    tms = [t for t in tms if t.get("prompt_ms") and t.get("predicted_ms")]
    print(f"model startup (assemble/verify + load): {startup:.1f} s; warm-up call {warm.latency_s:.2f} s")
    print(f"threads={args.threads or 'all'} parallel={args.parallel} robots={args.robots} "
          f"decimals={args.decimals} max_tokens={args.max_tokens} "
          f"reasoning_max_chars={args.reasoning_max_chars} temperature={args.temperature} k={args.k}")
    print(f"seconds/call: median {statistics.median(lat):.2f}  p90 {float(np.percentile(lat, 90)):.2f}  "
          f"min {min(lat):.2f}  max {max(lat):.2f}; wall {wall:.1f} s = {wall / args.k:.2f} s per request")
    print(f"completion tokens/call: mean {statistics.mean(toks):.1f}; "
          f"aggregate {sum(toks) / wall:.1f} tok/s (incl. prompt processing)")
    if tms:
        pr = [1000.0 * t["prompt_n"] / t["prompt_ms"] for t in tms]
        gr = [1000.0 * t["predicted_n"] / t["predicted_ms"] for t in tms]
        print(f"server timings (median per request): prompt {statistics.median(pr):.1f} tok/s over "
              f"{statistics.median(t['prompt_n'] for t in tms):.0f} uncached prompt tokens, "
              f"generation {statistics.median(gr):.1f} tok/s")
    print(f"parse rate: {ok}/{args.k} = {ok / args.k:.0%}; errors {errors}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
