"""Fig. 4 sweep speed: paper 1's 2,400 negotiations (N in {2, 4, 6, 8} x temperature {0, 0.7} x 300 trials,
10 rounds, average planner) through the experiment runner, target <= 10 s wall time on this machine.

    python benchmarks/bench_fig4_sweep.py [--trials 300] [--workers 2] [--breakdown 400]

Prints the trials, wall time and trials/s of ``run_experiment`` (results.jsonl written to a temporary run
directory, report not included), then, with ``--breakdown K``, where the CPU time of one trial goes: K trials
timed in this process, split into the shared core's negotiation (``run_negotiation`` with its planners) and
this study's own work (parameters, graph and planners, initial draw, outcome: labels, spread, clusters).
"""
from __future__ import annotations

import argparse
import itertools
import tempfile
import time

import numpy as np
from _common import ChildCPU

TARGET_S = 10.0


def sweep(trials: int, workers: int) -> None:
    from consensus.experiments.runner import run_experiment
    from consensus.experiments.spec import resolve_spec
    from consensus.registry import all_studies

    studies = all_studies()
    spec = resolve_spec({"study": "consensus-1d", "trials": trials, "seed": 0, "workers": workers,
                         "params": {"planner": "average", "rounds": 10},
                         "sweep": {"num_agents": [2, 4, 6, 8], "llm_temperature": [0.0, 0.7]}}, studies)
    with tempfile.TemporaryDirectory() as tmp, ChildCPU() as cpu:
        t0 = time.perf_counter()
        res = run_experiment(spec, studies["consensus-1d"], tmp, progress=False)
        wall = time.perf_counter() - t0
    print(f"trials: {res.total} ({res.ok} ok, {res.failed} failed), mode {res.mode}, workers {workers}")
    print(f"wall time: {wall:.2f} s  ->  {res.total / wall:.0f} trials/s  (target <= {TARGET_S:.0f} s: "
          f"{'met' if wall <= TARGET_S else 'NOT met'}); worker CPU {cpu.cpu_s:.2f} s")


def breakdown(k: int) -> None:
    from consensus.experiments.study import Trial, TrialContext
    from consensus.scenarios.aggregation.headless import run_negotiation
    from consensus.scenarios.aggregation import study as cs

    grid = list(itertools.product([2, 4, 6, 8], [0.0, 0.7]))
    trials = [Trial(key=f"{a},{t}#{i}", index=i, seed=1000 + i,
                    params={**cs.DEFAULTS, "num_agents": a, "llm_temperature": t})
              for i in range(max(1, k // len(grid))) for a, t in grid]
    ctx = TrialContext()
    own = core = 0.0
    c0 = time.process_time()
    for trial in trials:
        t0 = time.process_time()
        cfg = cs.negotiation_config(trial.params, trial.seed)
        planners = cs._planners(cfg, ctx, trial.seed)
        init = cs.initial_states(cfg, trial.seed)
        graph = cfg.graph()
        t1 = time.process_time()
        states, plan_log = run_negotiation(planners, init, graph, cfg.rounds)
        t2 = time.process_time()
        reasonings = [[""] * cfg.num_agents for _ in range(cfg.rounds)]
        for e in plan_log:
            reasonings[e["round"]][e["robot"]] = e["reasoning"]
        cs.outcome(cfg, states, reasonings, np.zeros((cfg.rounds, cfg.num_agents), bool))
        t3 = time.process_time()
        own += (t1 - t0) + (t3 - t2)
        core += t2 - t1
    total = time.process_time() - c0
    n = len(trials)
    plans = sum(t.params["num_agents"] * t.params["rounds"] for t in trials)
    print(f"breakdown over {n} trials (CPU, this process): {1e3 * total / n:.2f} ms/trial = "
          f"core run_negotiation {1e3 * core / n:.2f} ms ({100 * core / total:.0f} %, "
          f"{1e6 * core / plans:.0f} us per agent-round) + study {1e3 * own / n:.2f} ms ({100 * own / total:.0f} %)")
    run_trial = cs.STUDIES[0].run_trial
    c0 = time.process_time()
    for trial in trials:
        run_trial(trial, ctx)
    print(f"run_trial end to end: {1e3 * (time.process_time() - c0) / n:.2f} ms/trial CPU")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300, help="trials per grid point (8 grid points)")
    ap.add_argument("--workers", type=int, default=2, help="runner worker processes")
    ap.add_argument("--breakdown", type=int, default=0, metavar="K", help="also time K trials component-wise")
    args = ap.parse_args()
    sweep(args.trials, args.workers)
    if args.breakdown:
        breakdown(args.breakdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
