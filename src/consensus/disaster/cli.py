"""``consensus run disaster``: the dynamic disaster response scenario (paper 2, scenario 1).

    consensus run disaster --headless --drones 3 --planner heuristic --mode implicit --rounds 20
    consensus run disaster --headless --planner llm --backend embedded --mode explicit --strategy majority
    consensus run disaster --planner llm --backend openai --base-url http://localhost:8000/v1 --model qwen2.5:7b
    consensus run disaster --headless --baseline no_interaction --roles high --volatility high --seed 3

``register(run_subparsers)`` adds the sub-command to ``consensus run``; ``run(args)`` executes it and returns the
exit status. Without ``--config`` the defaults of ``DisasterConfig`` apply (the same values as
``config/disaster.yaml``). Flags override the file, ``--set KEY=VALUE`` any other parameter. ``--headless`` runs
``consensus.scenarios.disaster.run_disaster_headless``; otherwise the ROS 2 processes are started through
``consensus.runs.disaster_ros.run_disaster_ros``. Bad flags or config raise ``ConfigError`` (the ``consensus``
command prints it and exits with status 2).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from consensus.config import BACKENDS, parse_set_args
from consensus.disaster.config import (BASELINES, MODES, MOTIONS, PLANNERS, ROLE_LEVELS, explicit_strategies,
                                       load_disaster_config)
from consensus.disaster.environment import VOLATILITY
from consensus.errors import ConfigError


def register(run_subparsers) -> argparse.ArgumentParser:
    """Add ``disaster`` to the ``consensus run`` sub-commands; returns its parser."""
    p = run_subparsers.add_parser(
        "disaster", help="dynamic disaster response drones (paper 2, scenario 1)",
        description="LLM-piloted (or heuristic/random) drones respond to evolving disasters on a grid, with "
                    "implicit or explicit consensus; writes a run directory.")
    p.add_argument("--config", type=Path, help="a /**: params file (default: the built-in defaults = "
                                                "config/disaster.yaml)")
    p.add_argument("--drones", type=int, help="number of drones N (paper: 3 to 100)")
    p.add_argument("--planner", choices=PLANNERS)
    p.add_argument("--mode", choices=MODES, help="implicit (own choices) or explicit (one collective cell)")
    p.add_argument("--strategy", choices=explicit_strategies(), help="explicit consensus strategy")
    p.add_argument("--roles", choices=ROLE_LEVELS, help="diversity of the role prompts")
    p.add_argument("--volatility", choices=tuple(VOLATILITY))
    p.add_argument("--rounds", type=int, help="rounds T (paper: 20 or 30)")
    p.add_argument("--seed", type=int)
    p.add_argument("--discussion-turns", type=int, choices=(0, 1, 2), help="discussion turns K per round")
    p.add_argument("--baseline", choices=BASELINES, help="paper 2 section 4.4 baselines (implicit mode)")
    p.add_argument("--motion", choices=MOTIONS, help="teleport (paper) or kinematic (P controller)")
    p.add_argument("--backend", choices=BACKENDS, help="LLM backend")
    p.add_argument("--model", help="model name (openai) or .gguf path (embedded)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp server, ...)")
    p.add_argument("--replay", help="transcripts.jsonl to replay (implies --backend replay)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any other parameter, e.g. --set report_noise=0.1 (repeatable)")
    p.add_argument("--headless", action="store_true", help="no ROS: the same core in one synchronous loop")
    p.add_argument("--out", type=Path, help="run directory (default: runs/disaster-<time>)")
    p.add_argument("-q", "--quiet", action="store_true")
    return p


def disaster_config(args: argparse.Namespace):
    """The validated ``DisasterConfig`` of the parsed flags."""
    sets = parse_set_args(args.set)
    flags = dict(num_drones=args.drones, planner=args.planner, mode=args.mode, strategy=args.strategy,
                 roles=args.roles, volatility=args.volatility, rounds=args.rounds, seed=args.seed,
                 discussion_turns=args.discussion_turns, baseline=args.baseline, motion=args.motion,
                 llm_backend="replay" if args.replay else args.backend, llm_model=args.model,
                 llm_base_url=args.base_url, replay_path=args.replay)
    sets.update({k: v for k, v in flags.items() if v is not None})
    return load_disaster_config(args.config, **sets)


def run(args: argparse.Namespace) -> int:
    from consensus.runs.rundir import default_run_dir, new_run_dir

    cfg = disaster_config(args)
    out = new_run_dir(args.out or default_run_dir("disaster"))
    say = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    what = f"explicit ({cfg.strategy})" if cfg.mode == "explicit" else cfg.mode
    say(f"disaster: {cfg.num_drones} drones, planner={cfg.planner}, {what}, roles={cfg.roles}, "
        f"volatility={cfg.volatility}, baseline={cfg.baseline}, motion={cfg.motion}"
        + (f", backend={cfg.llm_backend}" if cfg.uses_llm() else "")
        + (" (headless)" if args.headless else " (ROS 2 nodes)") + f" -> {out}")
    if args.headless:
        from consensus.scenarios.disaster import run_disaster_headless

        summary = run_disaster_headless(cfg, out_dir=out, progress=lambda r, total: say(f"  round {r}/{total}"))
    else:
        from consensus.runs.disaster_ros import run_disaster_ros

        summary = run_disaster_ros(cfg, out, echo=say)
    print(_result_line(summary))
    out = out.resolve()
    print(f"results: {out}")
    for plot in summary.get("plots", []):
        print(f"  plot: {out / plot}")
    return 0


def _result_line(summary: dict) -> str:
    def num(key: str) -> str:
        value = summary.get(key)
        return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    return (f"coverage rate: {num('coverage_rate')}  misallocation penalty: {num('misallocation_penalty')}  "
            f"response delay: {num('response_delay')}  net reward: {num('net_reward')}  "
            f"mean deviation: {num('mean_deviation')}  llm calls: {num('llm_calls')}  "
            f"fallbacks: {num('llm_fallbacks')} {summary.get('llm_fallbacks_by_reason') or ''}".rstrip())
