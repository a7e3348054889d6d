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

import numpy as np

from consensus.llm.base import ChatRequest, LLMError
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


def fmt(p: tuple[float, float]) -> str:
    return f"({p[0]:.2f}, {p[1]:.2f})"


def make_request(rng: random.Random, args: argparse.Namespace, i: int) -> ChatRequest:
    n = rng.randint(3, 6)
    pts = [(rng.uniform(-10, 10), rng.uniform(-10, 10)) for _ in range(n)]
    user = USER.format(own=fmt(pts[0]), others=", ".join(fmt(p) for p in pts[1:]))
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
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--model", default="", help="a .gguf file instead of the default model")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", action="store_true", help="print every reply")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    rng = random.Random(args.seed)
    t0 = time.monotonic()
    client, close = make_client("embedded", model=args.model, timeout_s=300.0, max_retries=0, concurrency=1,
                                transcripts_path=None, replay_path=None, n_ctx=args.n_ctx, n_threads=args.threads)
    startup = time.monotonic() - t0
    lat: list[float] = []
    toks: list[int] = []
    ok = 0
    errors = 0
    try:
        warm = client.complete(make_request(rng, args, -1))
        for i in range(args.k):
            req = make_request(rng, args, i)
            t = time.monotonic()
            try:
                r = client.complete(req)
            except LLMError as exc:
                errors += 1
                print(f"request {i}: {exc}", file=sys.stderr)
                continue
            lat.append(time.monotonic() - t)
            toks.append(r.completion_tokens or 0)
            ok += parses(r.text)
            if args.show:
                print(f"[{i}] {lat[-1]:.2f}s {r.completion_tokens} tok: {r.text}")
    finally:
        close()
    if not lat:
        print("no successful requests")
        return 1
    print(f"model startup (assemble/verify + load): {startup:.1f} s; warm-up call {warm.latency_s:.2f} s")
    print(f"threads={args.threads or 'all'} max_tokens={args.max_tokens} "
          f"reasoning_max_chars={args.reasoning_max_chars} temperature={args.temperature} k={args.k}")
    print(f"seconds/call: median {statistics.median(lat):.2f}  p90 {float(np.percentile(lat, 90)):.2f}  "
          f"min {min(lat):.2f}  max {max(lat):.2f}")
    print(f"completion tokens/call: mean {statistics.mean(toks):.1f}; "
          f"throughput {sum(toks) / sum(lat):.1f} tok/s (incl. prompt processing)")
    print(f"parse rate: {ok}/{args.k} = {ok / args.k:.0%}; errors {errors}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
