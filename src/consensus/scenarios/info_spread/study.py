"""Paper 2, scenario 2 as a batch study: preset ``info-spread`` (Table 4, Table 6's S2 columns, a per-round figure).

A trial is one ``headless.run_info_spread`` of ``InfoSpreadConfig`` built from the trial's parameters (every field
except the seed, run and LLM transport settings; the LLM model, temperature and max_tokens come from the spec's
``llm:`` block). ``condition`` sets mode and baseline together (``consensus.discussion.baselines``). Default sweep:
condition (implicit, explicit, no_diversity, no_interaction, random, single_llm) x roles x volatility, 5 trials
each, heuristic defenders; ``--planner llm`` with a backend runs the F.3 LLM defenders.

By the study contract a trial whose LLM defenders fell back is failed (``strict_llm: false`` keeps it and reports
``defender_fallbacks``). Report: Table 4 (MS, CT, CD for explicit and implicit consensus over Overall / Diversity /
Volatility), the baselines table, Table 6's S2 columns (MS per model, Exp vs Imp) and ``fig_misinformation_rounds.png``
(misinformed share per round, mean ± 1 s.d., per condition).
"""
from __future__ import annotations

from consensus.discussion.study import discussion_study
from consensus.scenarios.info_spread.config import InfoSpreadConfig

METRICS = (("MS", "misinformation_spread"), ("CT", "containment_time"), ("CD", "coverage_diversity"))
_KEYS = ("misinformation_spread", "containment_time", "coverage_diversity", "mean_deviation", "cohorts",
         "cohorts_censored", "rounds_run", "stopped_early", "injections", "corrected", "llm_calls", "llm_fallbacks",
         "prompt_tokens", "completion_tokens", "num_agents", "mode", "strategy", "volatility")


def _run(cfg, client):
    from consensus.scenarios.info_spread.headless import run_info_spread

    return run_info_spread(cfg, client=client)


STUDIES = [discussion_study(
    "info-spread", "paper 2 scenario 2: defenders against misinformation on a scale-free network, implicit vs "
                   "explicit consensus and baselines over diversity and volatility (Table 4)",
    InfoSpreadConfig, run=_run, keys=_KEYS, team="defender",
    report_kw=dict(heading="## Information spread and manipulation (paper 2, scenario 2)",
                   legend="MS = final misinformation spread (share of nodes, lower is better), CT = containment time "
                          "in rounds (lower), CD = distinct nodes fact-checked per round (higher); means over trials "
                          "(docs/info-spread.md).",
                   table="Table 4", metrics=METRICS, model_metric=("MS", "misinformation_spread"), table6="S2",
                   series="misinformed", figure="fig_misinformation_rounds", ylabel="misinformed share of nodes",
                   fig_title="Misinformation over rounds (mean ± 1 s.d. over runs)"))]
