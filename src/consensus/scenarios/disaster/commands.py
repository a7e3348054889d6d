"""``consensus run disaster``: the scenario's own flags, its runner and its result line.

    consensus run disaster --headless --robots 3 --planner heuristic --mode implicit --rounds 20
    consensus run disaster --headless --planner llm --backend embedded --mode explicit --strategy majority
    consensus run disaster --planner llm --backend openai --base-url http://localhost:8000/v1 --model qwen2.5:7b
    consensus run disaster --headless --baseline no_interaction --roles high --volatility high --seed 3

The common flags (``--config``, ``--robots``, ``--seed``, ``--backend``, ``--set``, ``--headless``, ``--out``, ...)
are ``consensus.cli``'s. Without ``--config`` the packaged ``config/disaster.yaml`` applies (the same values as
``DisasterConfig``'s defaults). ``--headless`` runs ``headless.run_disaster_headless``; otherwise the ROS 2
processes are started through ``runner.run_disaster_ros``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from consensus.discussion.baselines import BASELINES
from consensus.discussion.config import PLANNERS, explicit_strategies
from consensus.discussion.roles import ROLE_LEVELS
from consensus.discussion.rounds import MODES
from consensus.scenarios.disaster.config import MOTIONS
from consensus.scenarios.disaster.environment import VOLATILITY


def cli_flags() -> tuple:
    return (
        ("--planner", "planner", dict(choices=PLANNERS)),
        ("--mode", "mode", dict(choices=MODES, help="implicit (own choices) or explicit (one collective cell)")),
        ("--strategy", "strategy", dict(choices=explicit_strategies(), help="explicit consensus strategy")),
        ("--roles", "roles", dict(choices=ROLE_LEVELS, help="diversity of the role prompts")),
        ("--volatility", "volatility", dict(choices=tuple(VOLATILITY))),
        ("--rounds", "rounds", dict(type=int, help="rounds T (paper: 20 or 30)")),
        ("--discussion-turns", "discussion_turns", dict(type=int, choices=(0, 1, 2),
                                                        help="discussion turns K per round")),
        ("--baseline", "baseline", dict(choices=BASELINES, help="paper 2 section 4.4 baselines (implicit mode)")),
        ("--motion", "motion", dict(choices=MOTIONS, help="teleport (paper) or kinematic (P controller)")),
    )


def run(cfg, out: str | Path, *, headless: bool = False, use_sim_time: bool = False,
        echo: Callable[[str], None] = print) -> dict:
    """The registered runner of ``consensus run disaster``."""
    from consensus.runs.rundir import new_run_dir

    what = f"explicit ({cfg.strategy})" if cfg.mode == "explicit" else cfg.mode
    echo(f"disaster: {cfg.num_robots} drones, planner={cfg.planner}, {what}, roles={cfg.roles}, "
         f"volatility={cfg.volatility}, baseline={cfg.baseline}, motion={cfg.motion}"
         + (f", backend={cfg.llm_backend}" if cfg.uses_llm() else "")
         + (" (headless)" if headless else " (ROS 2 nodes)") + f" -> {out}")
    if headless:
        from consensus.scenarios.disaster.headless import run_disaster_headless

        out = new_run_dir(out)
        summary = run_disaster_headless(cfg, out_dir=out, progress=lambda r, total: echo(f"  round {r}/{total}"))
    else:
        from consensus.scenarios.disaster.runner import run_disaster_ros

        summary = run_disaster_ros(cfg, out, use_sim_time=use_sim_time, echo=echo)
    return summary


def result_line(summary: dict) -> str:
    def num(key: str) -> str:
        value = summary.get(key)
        return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    return (f"coverage rate: {num('coverage_rate')}  misallocation penalty: {num('misallocation_penalty')}  "
            f"response delay: {num('response_delay')}  net reward: {num('net_reward')}  "
            f"mean deviation: {num('mean_deviation')}  llm calls: {num('llm_calls')}  "
            f"fallbacks: {num('llm_fallbacks')} {summary.get('llm_fallbacks_by_reason') or ''}".rstrip())
