"""``consensus run aggregation``: one aggregation run into a run directory, headless or through ROS 2 processes.

Both write the same run directory (manifest, params, trajectories, plans, transcripts, summary, plots); the ROS
run starts the processes of ``processes.aggregation_processes`` with the run's params file
(``consensus.runs.ros_runner``), the headless one runs ``headless.run_headless`` in this process.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Callable

from consensus.control.motion import sim_spec
from consensus.errors import ConfigError
from consensus.llm.backends import backend_spec
from consensus.llm.from_config import client_from_config
from consensus.robots.map import apply_robots_file, fleet_footprint
from consensus.runs.processes import prepare_run
from consensus.runs.rundir import finalize, new_run_dir, write_manifest
from consensus.runs.ros_runner import run_processes
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.scenarios.aggregation.headless import run_headless
from consensus.scenarios.aggregation.processes import aggregation_processes
from consensus.sims import check_run, prepare_sim


def run_headless_to_dir(cfg: AggregationConfig, out_dir: str | Path, *,
                        progress: Callable | None = None) -> dict:
    out = new_run_dir(out_dir)
    requested = cfg.collision_avoidance
    cfg = cfg.replace(output_dir=str(out), collision_avoidance=cfg.resolved_collision_avoidance(ros=False))
    write_manifest(out, scenario="aggregation", config=cfg.to_dict(), seed=cfg.seed,
                   **cfg.manifest_llm(),
                   mode="headless", extra={"collision_avoidance": {"requested": requested,
                                                                   "resolved": cfg.collision_avoidance}})
    client, close = client_from_config(cfg, out / "transcripts.jsonl")
    try:
        result = run_headless(cfg, client, progress=progress)
    finally:
        close()
    result.world.save_xml(out)           # what the bodies moved in (MuJoCo's world.xml; nothing for kinematics)
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
                    d_min=result.summary.get("d_min_m"),
                    footprint_radius=fleet_footprint(cfg) if cfg.collision_avoidance == "cbf" else None,
                    extra={"planner": cfg.planner, "topology": cfg.topology, "num_robots": cfg.num_robots,
                           "end_reason": result.summary["end_reason"], "settle_s": cfg.settle_s,
                           **{k: result.summary[k] for k in ("collision_avoidance", "clearance_m", "collision",
                                                             "contacts", "contact_list", "robot_contacts",
                                                             "wall_contacts", "max_penetration_m",
                                                             "true_outside_geofence_m")
                              if k in result.summary},
                           **({"prompt_style": cfg.prompt_style} if cfg.uses_llm() else {})})


def prepare_aggregation_run(cfg: AggregationConfig, out_dir: str | Path) -> tuple[AggregationConfig, Path]:
    """``consensus.runs.processes.prepare_run`` after the simulator's checks and settings
    (``consensus.sims.prepare_sim``, e.g. turtlesim's; what it changed is recorded in the manifest as
    ``sim_changes``) and the
    robots of a ``robots_file`` (``consensus.robots.map.apply_robots_file``). Both ``consensus run`` and
    ``ros2 launch`` come through here."""
    cfg = apply_robots_file(cfg)
    extra = {}
    cfg, changes = prepare_sim(cfg)
    if sim_spec(cfg.sim).prepare:         # a simulator with checks and settings of its own records what it changed
        extra["sim_changes"] = changes
    return prepare_run(cfg, out_dir, scenario="aggregation", extra=extra)


def run_ros(cfg: AggregationConfig, out_dir: str | Path, *, use_sim_time: bool = False,
            echo: Callable[[str], None] | None = print) -> dict:
    """Run an aggregation through real ROS 2 processes; return summary.json's content."""
    if use_sim_time:
        cfg = cfg.replace(publish_clock=True)
    cfg, params_file = prepare_aggregation_run(cfg, out_dir)
    return run_processes(aggregation_processes(cfg, use_sim_time=use_sim_time), params_file, Path(cfg.output_dir),
                         llm_base_url=cfg.llm_base_url, echo=echo)


def run(cfg: AggregationConfig, out: str | Path, *, headless: bool = False, use_sim_time: bool = False,
        echo: Callable[[str], None] = print) -> dict:
    """The registered runner of ``consensus run aggregation``."""
    if headless and cfg.foxglove:
        raise ConfigError("--foxglove serves the live view from a ROS run's recorder: drop --headless")
    check_run(cfg, headless=headless)     # the simulator: turtlesim needs ROS, gazebo its launch file
    cfg = apply_robots_file(cfg)          # real robots: refused here, before anything starts, when the map is bad
    ok, msg = cfg.graph().consensus_check()
    if not ok:
        logging.warning(msg)
    echo(f"aggregation: {cfg.num_robots} robots, topology={cfg.topology}, planner={cfg.planner}"
         + (f", backend={cfg.llm_backend}, prompt_style={cfg.prompt_style}" if cfg.uses_llm() else "")
         + (" (headless)" if headless else " (ROS 2 nodes)") + f" -> {out}")
    if cfg.uses_llm() and backend_spec(cfg.llm_backend).local_server:
        echo(f"  planner llm: the embedded {cfg.manifest_llm()['model']} (llama.cpp on this machine), prompt style "
             f"{cfg.prompt_style}: its first answers take ~10-30 s per round on 2 cores (docs/model-card.md)")
    if headless:
        cfg, _ = prepare_sim(cfg)         # a headless world's own checks (sim: mujoco: installed, its kinematics)
        return run_headless_to_dir(cfg, out, progress=lambda r, total, *_: echo(f"  round {r}/{total}"))
    return run_ros(cfg, out, use_sim_time=use_sim_time, echo=echo)


def result_line(summary: dict) -> str:
    def num(x, fmt=".3f"):
        return "n/a" if x is None else format(x, fmt)

    point = summary.get("consensus_point") or []
    ttc = summary.get("time_to_converge_s")
    if summary.get("converged_on") == "targets":     # bodies: the meeting points agree, the robots pack around
        spread = (f"  meeting points within {num(summary.get('target_spread_m'))} m"
                  f"  farthest robot {num(summary.get('farthest_from_consensus_m'), '.2f')} m of "
                  f"{num(summary.get('packing_radius_m'), '.2f')}"
                  f"  closest pair {num(summary.get('min_pair_distance_m'))} m"
                  f" (clearance {num(summary.get('clearance_m'), '.2f')})")
    else:
        spread = f"  final spread: {num(summary.get('final_spread_m'))} m"
    line = (f"converged: {summary.get('converged')}"
            + (f" at t={num(ttc, '.1f')} s" if summary.get("converged") and ttc is not None else "")
            + spread + f"  consensus point: ({', '.join(num(v, '.2f') for v in point)})"
            + f"  llm calls: {summary.get('llm_calls')}  fallbacks: {summary.get('llm_fallbacks')}")
    if summary.get("end_reason"):
        line += f"  ended: {summary['end_reason']}"
    return line
