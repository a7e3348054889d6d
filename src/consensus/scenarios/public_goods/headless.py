"""The loop of scenario 3 (no ROS): ``run_public_goods(cfg)``.

Each round: ``obs = game.observe()`` (θ shift, B draw, reports), ``consensus.discussion.rounds.run_round`` (implicit:
own contributions; explicit: a group total x_group, clipped to [0, N·C_max], of which everybody pays x_group/N),
``game.play(contributions)`` (funding and payoffs). With ``out_dir``: ``manifest.json``, ``rounds.jsonl``,
``summary.json``, ``transcripts.jsonl`` (LLM runs whose client this function created) and ``contributions.png``.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from consensus.discussion.headless import start_run, team_client
from consensus.discussion.rounds import add_round_counters, run_round
from consensus.runs.rundir import write_json
from consensus.scenarios.public_goods import metrics
from consensus.scenarios.public_goods.agents import MedianCoordinator, make_contributors
from consensus.scenarios.public_goods.config import PublicGoodsConfig
from consensus.scenarios.public_goods.game import PublicGoodsGame


def run_public_goods(cfg: PublicGoodsConfig, client=None, out_dir: str | Path | None = None) -> dict:
    run, out = start_run(cfg, "public-goods", out_dir)
    with ExitStack() as stack:
        summary = _simulate(run, team_client(run, client, out, stack), out, stack)
    summary.update(baseline=cfg.baseline, condition=cfg.condition())
    if out is not None:
        from consensus.discussion.plots import plot_rounds_band

        plot_rounds_band({"total contribution X(t)": [summary["series"]["total"]],
                          "threshold θ(t)": [summary["series"]["threshold"]]}, out / "contributions.png",
                         ylabel="amount", title=f"Public goods: {summary['condition']}, N={run.num_agents}")
        write_json(out / "summary.json", summary)
    return summary


def _simulate(run: PublicGoodsConfig, client, out: Path | None, stack: ExitStack) -> dict:
    game = PublicGoodsGame(run, run.seed)
    team = make_contributors(run, client)
    coordinator = MedianCoordinator() if run.strategy.startswith("spoke_wheel") else None
    workers = min(run.llm_concurrency, run.num_agents) if run.planner == "llm" else 1
    map_fn = stack.enter_context(ThreadPoolExecutor(workers, thread_name_prefix="contributor")).map \
        if workers > 1 else map
    log = stack.enter_context((out / "rounds.jsonl").open("w")) if out is not None else None
    n, upper = run.num_agents, run.num_agents * run.max_contribution
    results, proposals, counters, previous = [], [], {}, []
    for _ in range(run.rounds):
        obs = game.observe()
        decision = run_round(team, obs, [0.0] * n, mode=run.mode, strategy=run.strategy,
                             discussion_turns=run.discussion_turns, coordinator=coordinator,
                             max_agreement_turns=run.max_agreement_turns, previous=previous, map_fn=map_fn,
                             kind="numeric", normalize=lambda d: min(max(float(d), 0.0), upper),
                             adopt=lambda total, i: total / n)
        previous = decision.final_messages
        result = game.play(decision.actions)
        results.append(result)
        if run.mode == "explicit":
            proposals.append(decision.proposals)
        add_round_counters(counters, decision.counters)
        if log is not None:
            log.write(json.dumps({"observation": obs.to_dict(), "decision": decision.to_dict(),
                                  "result": result.to_dict()}, ensure_ascii=False) + "\n")
    summary = metrics.summarize(results, run.max_contribution, proposals)
    summary.update(counters)
    summary.update(planner=run.planner, mode=run.mode, strategy=run.strategy if run.mode == "explicit" else "",
                   roles=run.roles, volatility=run.volatility, num_agents=n, discussion_turns=run.discussion_turns,
                   seed=run.seed)
    return summary
