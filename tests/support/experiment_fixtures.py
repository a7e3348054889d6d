"""Tiny studies for the experiment-runner tests (and a CLI entry point that runs them in a subprocess).

* ``toy``: ``value = x + scale * U(0, 1)`` from ``numpy.random.default_rng(trial.seed)``; ``mode: fail`` raises
  ``TrialFailed`` on odd indices, ``mode: crash`` raises ``ValueError`` on odd indices, ``mode: badjson``
  returns a set, ``mode: interrupt`` raises KeyboardInterrupt at index 2 while the file named by ``note`` does not
  exist (and creates it: the next run passes); ``sleep_s`` waits before returning; ``mode: gated`` holds every trial
  with ``x > 0`` until the file named by ``note`` exists: a test interrupts the sweep while those trials are held,
  at a point it controls (never racing the work), then creates the file for the resume. A held trial first creates
  ``<note>.held.<pid>`` (the process that holds it).
* ``toy-llm``: paper 1's negotiation (``run_negotiation``) with ``LLMPlanner``s on ``ctx.llm`` when
  ``planner: llm``, averaging planners otherwise. Initial states are the same in every trial, so trials ask
  identical prompts: only the per-call seeds keep their transcript keys apart.

    python tests/support/experiment_fixtures.py experiment SPEC.yaml --out DIR     # the real CLI, these studies
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from consensus.errors import ConfigError
from consensus.experiments.study import LLM_FALLBACKS_KEY, Study, Trial, TrialContext, TrialFailed


def _toy_trial(trial: Trial, ctx: TrialContext) -> dict:
    p = trial.params
    if p["sleep_s"]:
        time.sleep(p["sleep_s"])
    if p["mode"] == "gated" and p["x"] > 0 and not Path(p["note"]).exists():
        held = Path(f"{p['note']}.held.{os.getpid()}")
        held.touch()                                 # this process now holds a trial (a test may kill it)
        while not Path(p["note"]).exists():          # held until the test opens the gate (an interrupt test)
            time.sleep(0.01)
    if p["mode"] == "fail" and trial.index % 2:
        raise TrialFailed(f"odd index {trial.index}")
    if p["mode"] == "crash" and trial.index % 2:
        raise ValueError("boom")
    if p["mode"] == "badjson":
        return {"value": {1, 2}}
    if p["mode"] == "interrupt" and trial.index == 2 and not Path(p["note"]).exists():
        Path(p["note"]).touch()
        raise KeyboardInterrupt
    rng = np.random.default_rng(trial.seed)
    return {"value": p["x"] + p["scale"] * float(rng.uniform())}


def _toy_report(records, out_dir: Path) -> list[str]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    values = [r["result"]["value"] for r in records if r["status"] == "ok"]
    fig = Figure(figsize=(3, 2))
    FigureCanvasAgg(fig)
    fig.add_subplot().hist(values or [0.0])
    fig.savefig(Path(out_dir) / "toy_values.png")
    return ["## Toy", f"ok values: {len(values)}, mean {np.mean(values) if values else float('nan'):.4f}",
            "![values](toy_values.png)"]


def _toy_validate(params: dict) -> None:
    if params["scale"] < 0:
        raise ConfigError(f"toy: scale must be >= 0 (got {params['scale']})")
    if params["mode"] not in ("ok", "fail", "crash", "badjson", "interrupt", "gated"):
        raise ConfigError(f"toy: unknown mode {params['mode']!r}")


TOY = Study(name="toy", description="a uniform draw per trial", defaults={"x": 0, "scale": 1.0, "mode": "ok",
                                                                       "sleep_s": 0.0, "note": None},
            default_sweep={"x": [0, 10]}, default_trials=3, run_trial=_toy_trial, report=_toy_report,
            validate=_toy_validate)


def _llm_trial(trial: Trial, ctx: TrialContext) -> dict:
    from consensus.graphs.topology import make_graph
    from consensus.scenarios.aggregation.planners.factory import make_planner
    from consensus.llm.counters import add_counters, new_counters
    from consensus.scenarios.aggregation.headless import run_negotiation

    p = trial.params
    n = p["agents"]
    planners = [make_planner(p["planner"], dim=1, robot_id=i, client=ctx.llm, seed=7, model="fake",
                             temperature=0.7, parse_retries=0) if p["planner"] == "llm"
                else make_planner(p["planner"], dim=1, robot_id=i) for i in range(n)]
    start = np.arange(n, dtype=float).reshape(n, 1) * 10.0     # identical in every trial
    states, _ = run_negotiation(planners, start, make_graph("complete", n), p["rounds"], max_workers=n)
    counters = new_counters()
    for pl in planners:
        if hasattr(pl, "counters"):
            add_counters(counters, pl.counters())
    return {"states": states[:, :, 0].tolist(), "calls": counters["calls"],
            LLM_FALLBACKS_KEY: counters["fallbacks"]}


TOY_LLM = Study(name="toy-llm", description="negotiation with LLM planners", defaults={"agents": 2, "rounds": 2,
                                                                                       "planner": "llm"},
                default_sweep={"agents": [2, 3]}, default_trials=2, run_trial=_llm_trial,
                report=lambda records, out: [f"toy-llm: {len(records)} records"],
                uses_llm=lambda params: params["planner"] == "llm",
                llm_calls=lambda params: params["agents"] * params["rounds"] if params["planner"] == "llm" else 0)

STUDIES = {s.name: s for s in (TOY, TOY_LLM)}


def main(argv: list[str] | None = None) -> int:
    import argparse

    from consensus.experiments import cli

    parser = argparse.ArgumentParser(prog="consensus")
    cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return cli.run(args, studies=STUDIES)


if __name__ == "__main__":
    sys.exit(main())


def default_signals() -> None:
    """``preexec_fn`` of a CLI a test interrupts: Ctrl-C and SIGTERM as a shell gives them (default action, not
    blocked). A pytest worker's signal state is inherited by what it starts, and an ignored or blocked SIGINT there
    left an interrupted sweep running until the test's timeout (every loaded fresh-clone suite of 2026-11-29)."""
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL if sig == signal.SIGTERM else signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
