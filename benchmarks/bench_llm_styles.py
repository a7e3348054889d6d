"""The model card of an LLM for paper 1's aggregation: each prompt style asked the same seeded situations.

Every situation is 3 or 4 robots in the plane (seeded, positions uniform in [-10, 10]^2, one decimal); robot 0 is
asked for its next target by ``LLMPlanner`` in each style (``paper``, ``json``, ``tools``), at each temperature. Per
style and temperature it prints: parse rate (plans that gave a target), the share of answers within ``--tol`` m of
the all-robot mean and of the others' mean, the stubborn share (within ``--tol`` of its own position) and the
suggestible share (within ``--tol`` of another robot), the mean distance to the all-robot mean, median / p90 seconds
per plan and median completion tokens per plan (all requests of the plan). ``--speed`` then prints the speed
targets of the embedded server (issue 10): an aggregation call against llama.cpp's own time for it, a 4-robot round
against one call, and one disaster call through the shared client.

    PYTHONPATH=src python benchmarks/bench_llm_styles.py                  # embedded model, 15 x 2 x 3 plans
    PYTHONPATH=src python benchmarks/bench_llm_styles.py --speed --situations 0
    PYTHONPATH=src python benchmarks/bench_llm_styles.py --backend openai --base-url http://host:8000/v1 --model m
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from consensus.control.planner import PlanRequest
from consensus.llm.base import ChatRequest, ChatResponse
from consensus.llm.factory import make_client
from consensus.llm.styles import PROMPT_STYLES
from consensus.scenarios.aggregation.planners.llm import LLMPlanner

MAX_TOKENS = {"paper": 400, "json": 160, "tools": 160}


class Meter:
    """Wraps a client and keeps every response (latency, tokens, llama.cpp timings) per tag prefix."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.model = inner.model
        self.log: list[tuple[str, ChatResponse]] = []
        self._lock = threading.Lock()

    def complete(self, req: ChatRequest) -> ChatResponse:
        resp = self.inner.complete(req)
        with self._lock:
            self.log.append((req.tag, resp))
        return resp

    def since(self, start: int) -> list[ChatResponse]:
        with self._lock:
            return [r for _, r in self.log[start:]]

    def status(self) -> dict:
        return self.inner.status()

    def close(self) -> None:
        self.inner.close()


def situations(count: int, seed: int = 1000) -> list[np.ndarray]:
    """``count`` seeded situations: (n, 2) positions, n = 3 or 4."""
    out = []
    for i in range(count):
        rng = np.random.default_rng(seed + i)
        out.append(np.round(rng.uniform(-10, 10, size=(3 + i % 2, 2)), 1))
    return out


def ask(client: Meter, style: str, pts: np.ndarray, temperature: float, seed: int, robot: int = 0,
        max_tokens: int | None = None):
    planner = LLMPlanner(client, dim=2, robot_id=robot, style=style, temperature=temperature, seed=seed,
                         max_tokens=max_tokens or MAX_TOKENS[style], num_agents=len(pts))
    start = len(client.log)
    t0 = time.monotonic()
    res = planner.plan(PlanRequest(robot_id=robot, own=pts[robot],
                                   neighbors=[p for k, p in enumerate(pts) if k != robot], round=0))
    return res, time.monotonic() - t0, client.since(start)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def card(client: Meter, styles: list[str], temps: list[float], count: int, tol: float) -> None:
    sits = situations(count)
    print(f"\n## Prompt styles, {count} situations (3-4 robots), robot 0 asked; within = closer than {tol} m\n")
    print("| style | T | parsed | near all-robot mean | near others' mean | stubborn | suggestible | "
          "mean dist. to mean [m] | median s/plan | p90 s/plan | median completion tokens | fallbacks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for style in styles:
        for temp in temps:
            rows = []
            for i, pts in enumerate(sits):
                res, wall, resps = ask(client, style, pts, temp, seed=i)
                rows.append((pts, res, wall, sum(r.completion_tokens or 0 for r in resps)))
            n = len(rows)
            ok = [(pts, np.asarray(res.meeting_point)) for pts, res, _, _ in rows if res.meeting_point is not None]
            mean_all = [np.linalg.norm(t - pts.mean(0)) for pts, t in ok]
            near_all = sum(d < tol for d in mean_all)
            near_others = sum(np.linalg.norm(t - pts[1:].mean(0)) < tol for pts, t in ok)
            stubborn = sum(np.linalg.norm(t - pts[0]) < tol for pts, t in ok)
            sugg = sum(min(np.linalg.norm(t - p) for p in pts[1:]) < tol for pts, t in ok)
            walls = [w for _, _, w, _ in rows]
            toks = [k for _, _, _, k in rows]
            reasons: dict[str, int] = {}
            for _, res, _, _ in rows:
                if res.fallback:
                    reasons[res.fallback_reason] = reasons.get(res.fallback_reason, 0) + 1
            print(f"| {style} | {temp:g} | {len(ok)}/{n} | {near_all / n:.0%} | {near_others / n:.0%} | "
                  f"{stubborn / n:.0%} | {sugg / n:.0%} | "
                  f"{(statistics.fmean(mean_all) if mean_all else float('nan')):.2f} | "
                  f"{statistics.median(walls):.1f} | {pct(walls, 90):.1f} | {statistics.median(toks):.0f} | "
                  f"{reasons or '-'} |", flush=True)


def speed(client: Meter, style: str, calls: int, disaster: bool) -> None:
    print(f"\n## Speed of the embedded server ({style} style)\n")
    sits = situations(max(calls, 4), seed=2000)
    ratios, singles = [], []
    for i in range(calls):
        _, wall, resps = ask(client, style, sits[i], 0.0, seed=i)
        for r in resps:
            t = r.meta.get("server_timings") or {}
            server_s = t.get("prompt_s", 0) + t.get("predicted_s", 0)
            if server_s > 0:
                ratios.append(r.latency_s / server_s)
                print(f"call: {r.latency_s:.2f} s; llama.cpp: {server_s:.2f} s for {t.get('prompt_n')} uncached + "
                      f"{t.get('cache_n')} cached prompt tokens and {t.get('predicted_n')} generated", flush=True)
        singles.append(wall)
    if ratios:
        print(f"aggregation call / llama.cpp's time for its uncached tokens: median {statistics.median(ratios):.2f}x "
              f"(target <= 1.3x)")
    one = statistics.median(singles) if singles else float("nan")
    pts = next((s for s in sits if len(s) == 4), sits[0])     # the target is a 4-robot round
    pool = ThreadPoolExecutor(max_workers=len(pts))
    for rnd in range(3):   # round 0 fills each robot's slot; later rounds (the robots moved) are what a run sees
        moved = np.round(pts * 0.7 ** rnd, 1)
        start = len(client.log)
        t0 = time.monotonic()
        list(pool.map(lambda k: ask(client, style, moved, 0.0, seed=k, robot=k), range(len(pts))))
        wall = time.monotonic() - t0
        timings = [r.meta.get("server_timings") or {} for r in client.since(start)]
        evaluated = sum(t.get("prompt_n", 0) for t in timings)
        cached = sum(t.get("cache_n", 0) for t in timings)
        print(f"{len(pts)}-robot planning round {rnd}: {wall:.1f} s = {wall / one:.2f}x one plan ({one:.1f} s; "
              f"target <= 4x); prompt tokens evaluated {evaluated}, from the slots' caches {cached}", flush=True)
    shared = (client.status() or {}).get("shared_prefix")
    if shared is not None:
        print(f"shared prompt prefix (consensus.llm.slots): {shared}")
    pool.shutdown()
    if disaster:
        disaster_call()


def disaster_call() -> None:
    """One round of 3 LLM drones (the disaster prompts as they are) through the shared client: seconds per call."""
    import tempfile

    from consensus.llm.from_config import client_from_config
    try:
        from consensus.scenarios.disaster.config import DisasterConfig
        from consensus.scenarios.disaster.headless import run_disaster_headless
    except ImportError as exc:
        print(f"disaster call: not measured ({exc})")
        return
    cfg = DisasterConfig(planner="llm", llm_backend="embedded", rounds=1, seed=1)
    inner, close = client_from_config(cfg)
    client = Meter(inner)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.monotonic()
            run_disaster_headless(cfg, client=client, out_dir=tmp)
            wall = time.monotonic() - t0
    finally:
        close()
    lat = [r.latency_s for _, r in client.log]
    for _, r in client.log:
        t = r.meta.get("server_timings") or {}
        print(f"disaster call: {r.latency_s:.1f} s; llama.cpp {t.get('prompt_n')} uncached + {t.get('cache_n')} "
              f"cached prompt tokens, {t.get('predicted_n')} generated")
    if lat:
        print(f"disaster call: median {statistics.median(lat):.1f} s over {len(lat)} calls, of which the drones ask "
              f"{cfg.llm_concurrency} at once; the round took {wall:.1f} s = {wall / len(lat):.1f} s a call "
              f"(target <= 15 s)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="embedded", choices=("embedded", "openai"))
    ap.add_argument("--base-url", default="")
    ap.add_argument("--model", default="")
    ap.add_argument("--llama-cpp", action="store_true", help="the --base-url endpoint is a llama.cpp server (grammar, "
                                                              "prompt cache and slots)")
    ap.add_argument("--styles", nargs="+", default=list(PROMPT_STYLES), choices=PROMPT_STYLES)
    ap.add_argument("--temperatures", nargs="+", type=float, default=[0.0, 0.7])
    ap.add_argument("--situations", type=int, default=15)
    ap.add_argument("--tol", type=float, default=0.5)
    ap.add_argument("--speed", action="store_true", help="also print the embedded server's speed targets")
    ap.add_argument("--speed-style", default="tools", choices=PROMPT_STYLES)
    ap.add_argument("--speed-calls", type=int, default=4)
    ap.add_argument("--no-disaster", action="store_true", help="--speed without the disaster call")
    ap.add_argument("--no-shared-prefix", action="store_true",
                    help="cold slots evaluate their whole prompt (the figure before consensus.llm.slots)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    print(f"backend {args.backend} {args.model or args.base_url or '(pinned model)'}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    inner, close = make_client(args.backend, model=args.model, base_url=args.base_url, timeout_s=600,
                               n_parallel=4, concurrency=4, n_ctx=16384, llama_cpp=args.llama_cpp,
                               share_prefix=False if args.no_shared_prefix else None)
    client = Meter(inner)
    try:
        if args.situations:
            card(client, args.styles, args.temperatures, args.situations, args.tol)
        if args.speed:
            speed(client, args.speed_style, args.speed_calls, disaster=not args.no_disaster)
    finally:
        close()
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
