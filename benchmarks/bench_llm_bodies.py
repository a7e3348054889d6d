"""Which prompt makes LLM robots *with bodies* agree: 4 robots of the embedded model, headless with the collision
filter on (the same robot core as the ROS nodes), for each prompt style and ``meeting_points`` setting.

    python benchmarks/bench_llm_bodies.py [--rounds 15] [--seeds 0 1] [--variants tools:on tools:off paper:on]

Prints one row per variant and seed: converged (the meeting points within converge_tol_m and every robot packed),
the round and time it agreed, the meeting points' final spread, LLM calls, fallbacks by reason, wall seconds.
One embedded server (4 slots) serves every run. The demo's prompt is chosen from this table (docs/model-card.md).
"""
from __future__ import annotations

import argparse
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--variants", nargs="+", default=["tools:on", "tools:off", "paper:on"],
                    help="STYLE:MEETING_POINTS (meeting_points on | off)")
    ap.add_argument("--temperature", type=float, default=0.7)
    args = ap.parse_args()
    from consensus.llm.factory import make_client
    from consensus.scenarios.aggregation.config import load_config
    from consensus.scenarios.aggregation.headless import run_headless

    client, close = make_client("embedded", n_parallel=4, concurrency=4, timeout_s=300.0, n_ctx=16384,
                                max_retries=0)
    print(f"{'style':6} {'mp':3} {'seed':>4} {'agreed':>6} {'round':>5} {'t [s]':>6} {'tgt spread':>10} "
          f"{'calls':>5}  fallbacks  wall")
    try:
        for variant in args.variants:
            style, mp = variant.split(":")
            for seed in args.seeds:
                cfg = load_config(None, num_robots=4, planner="llm", prompt_style=style, meeting_points=mp,
                                  collision_avoidance="cbf", llm_temperature=args.temperature,
                                  llm_max_tokens=400 if style == "paper" else 160, llm_concurrency=4,
                                  max_rounds=args.rounds, settle_s=4.0, seed=seed)
                t0 = time.monotonic()
                res = run_headless(cfg, client)
                s = res.summary
                ttc = s["time_to_converge_s"]
                rnd = "-" if ttc is None else str(int(ttc // cfg.planner_period_s))
                fb = {k: v for k, v in res.counters["fallbacks"].items() if v}
                print(f"{style:6} {mp:3} {seed:>4} {str(s['converged']):>6} {rnd:>5} "
                      f"{'-' if ttc is None else f'{ttc:.1f}':>6} {s['target_spread_m']:>10.3f} "
                      f"{s['llm_calls']:>5}  {fb or '-'}  {time.monotonic() - t0:.0f}", flush=True)
    finally:
        close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
