"""Headless (no ROS) aggregation run writing the same run directory as a ROS run."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from consensus.config import AggregationConfig
from consensus.llm.from_config import client_from_config
from consensus.runs.rundir import finalize, new_run_dir, write_manifest
from consensus.scenarios.aggregation import run_headless


def run_headless_to_dir(cfg: AggregationConfig, out_dir: str | Path, *,
                        progress: Callable | None = None) -> dict:
    out = new_run_dir(out_dir)
    cfg = cfg.replace(output_dir=str(out))
    write_manifest(out, scenario="aggregation", config=cfg.to_dict(), seed=cfg.seed,
                   backend=cfg.llm_backend if cfg.planner == "llm" else "none", model=cfg.llm_model, mode="headless")
    client, close = client_from_config(cfg, out / "transcripts.jsonl")
    try:
        result = run_headless(cfg, client, progress=progress)
    finally:
        close()
    with (out / "plans.jsonl").open("w") as fh:
        for entry in result.plan_log:
            fh.write(json.dumps(entry, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)) + "\n")
    counters = {"llm_calls": int(result.summary.get("llm_calls", 0)),
                "llm_fallbacks": int(result.summary.get("llm_fallbacks", 0)),
                "clamped": int(result.summary.get("clamped", 0)),
                "rounds_max": int(result.summary.get("rounds", 0))}
    return finalize(out, times=result.times, positions=result.positions, targets=result.targets,
                    tol=cfg.converge_tol_m, counters=counters,
                    title=f"LLM aggregation (headless), planner={cfg.planner}", workspace=cfg.workspace,
                    extra={"planner": cfg.planner, "topology": cfg.topology, "num_robots": cfg.num_robots})
