"""The loop of scenario 2 (no ROS): ``run_info_spread(cfg)``.

Each round: ``obs = net.observe()`` (counts, report with rumour snippets), ``consensus.discussion.rounds.run_round``
(discussion, then implicit own node sets or an explicit collective set adopted by all), ``net.step(union of the
sets)`` (fact-checks, spread, injection). The run ends after ``rounds`` rounds or when more than ``stop_share`` of the
nodes are misinformed. With an LLM team the defenders of one phase are asked in parallel on ``llm_concurrency``
threads; results are used in defender order.

With ``out_dir``: ``manifest.json``, ``rounds.jsonl`` (observation, decision with every reply, outcome per round),
``summary.json``, ``transcripts.jsonl`` (LLM runs whose client this function created) and ``misinformation.png``.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from consensus.discussion.headless import start_run, team_client
from consensus.discussion.rounds import add_round_counters, run_round
from consensus.runs.rundir import write_json
from consensus.scenarios.info_spread import metrics
from consensus.scenarios.info_spread.agents import TallyCoordinator, make_defenders
from consensus.scenarios.info_spread.config import InfoSpreadConfig
from consensus.scenarios.info_spread.network import InfoNetwork


def run_info_spread(cfg: InfoSpreadConfig, client=None, out_dir: str | Path | None = None) -> dict:
    run, out = start_run(cfg, "info-spread", out_dir)
    with ExitStack() as stack:
        summary = _simulate(run, team_client(run, client, out, stack), out, stack)
    summary.update(baseline=cfg.baseline, condition=cfg.condition())
    if out is not None:
        from consensus.discussion.plots import plot_rounds_band

        plot_rounds_band({summary["condition"]: [summary["series"]["misinformed"]]}, out / "misinformation.png",
                         ylabel="misinformed share", ylim=(-0.02, 1.02),
                         title=f"Information spread: {summary['condition']}, N={run.num_agents}, seed={run.seed}")
        write_json(out / "summary.json", summary)
    return summary


def _simulate(run: InfoSpreadConfig, client, out: Path | None, stack: ExitStack) -> dict:
    net = InfoNetwork(run, run.seed)
    team = make_defenders(run, client)
    coordinator = TallyCoordinator(run.checks_per_agent) if run.strategy.startswith("spoke_wheel") else None
    workers = min(run.llm_concurrency, run.num_agents) if run.planner == "llm" else 1
    map_fn = stack.enter_context(ThreadPoolExecutor(workers, thread_name_prefix="defender")).map if workers > 1 else map
    log = stack.enter_context((out / "rounds.jsonl").open("w")) if out is not None else None
    outcomes, actions, counters, previous = [], [], {}, []
    owns = [frozenset()] * run.num_agents
    for _ in range(run.rounds):
        obs = net.observe()
        decision = run_round(team, obs, owns, mode=run.mode, strategy=run.strategy,
                             discussion_turns=run.discussion_turns, coordinator=coordinator,
                             max_agreement_turns=run.max_agreement_turns, previous=previous, map_fn=map_fn,
                             kind="categorical", normalize=lambda d: frozenset(int(n) for n in d))
        previous = decision.final_messages
        sets = [frozenset(a) for a in decision.actions]
        outcome = net.step(frozenset().union(*sets))
        outcomes.append(outcome)
        actions.append(sets)
        add_round_counters(counters, decision.counters)
        if log is not None:
            log.write(json.dumps({"observation": obs.to_dict(), "decision": decision.to_dict(),
                                  "outcome": outcome.to_dict()}, ensure_ascii=False) + "\n")
        if net.over():
            break
    summary = metrics.summarize(net, outcomes, actions)
    summary.update(counters)
    summary.update(planner=run.planner, mode=run.mode, strategy=run.strategy if run.mode == "explicit" else "",
                   roles=run.roles, volatility=run.volatility, num_agents=run.num_agents,
                   discussion_turns=run.discussion_turns, seed=run.seed, nodes=run.nodes)
    return summary
