"""Paper 2, scenario 3 as a batch study: preset ``public-goods`` (Table 5, Table 6's S3 columns, a per-round figure).

A trial is one ``headless.run_public_goods`` of ``PublicGoodsConfig`` built from the trial's parameters (every field
except the seed, run and LLM transport settings; the LLM model, temperature and max_tokens come from the spec's
``llm:`` block). ``condition`` sets mode and baseline together (``consensus.discussion.baselines``). Default sweep:
condition (implicit, explicit, no_diversity, no_interaction, random, single_llm) x roles x volatility, 5 trials
each, heuristic contributors; ``--planner llm`` with a backend runs the F.4 LLM contributors.

By the study contract a trial whose LLM contributors fell back is failed (``strict_llm: false`` keeps it and
reports ``contributor_fallbacks``). Report: Table 5 (PR, TW, FD for explicit and implicit consensus over Overall /
Diversity / Volatility), the baselines table, Table 6's S3 columns (PR per model, Exp vs Imp) and
``fig_provision_rounds.png`` (share of runs funded per round, mean ± 1 s.d., per condition).
"""
from __future__ import annotations

from consensus.discussion.study import discussion_study
from consensus.scenarios.public_goods.config import PublicGoodsConfig

METRICS = (("PR", "provision_rate"), ("TW", "total_welfare", 1), ("FD", "free_rider_disparity"))
_KEYS = ("provision_rate", "total_welfare", "welfare_sum", "welfare_per_agent_round", "free_rider_disparity",
         "proposal_disparity", "mean_deviation", "rounds_run", "llm_calls", "llm_fallbacks",
         "prompt_tokens", "completion_tokens", "num_agents", "mode", "strategy", "volatility")


def _run(cfg, client):
    from consensus.scenarios.public_goods.headless import run_public_goods

    return run_public_goods(cfg, client=client)


STUDIES = [discussion_study(
    "public-goods", "paper 2 scenario 3: threshold public goods with a shifting threshold, implicit vs explicit "
                    "consensus and baselines over diversity and volatility (Table 5)",
    PublicGoodsConfig, run=_run, keys=_KEYS, team="contributor",
    report_kw=dict(heading="## Dynamic public-goods provision (paper 2, scenario 3)",
                   legend="PR = provision rate (higher is better), TW = total welfare per round, Σ_i Π_i averaged "
                          "over rounds (higher), FD = free-rider disparity, the Gini of the contributions (lower; 0 by "
                          "construction under explicit consensus); means over trials (docs/public-goods.md).",
                   table="Table 5", metrics=METRICS, model_metric=("PR", "provision_rate"), table6="S3",
                   series="funded", figure="fig_provision_rounds", ylabel="share of runs funded",
                   fig_title="Provision over rounds (mean ± 1 s.d. over runs)"))]
