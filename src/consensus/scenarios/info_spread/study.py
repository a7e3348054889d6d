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

from pathlib import Path
from typing import Any, Sequence

from consensus.discussion.baselines import CONDITION_LABELS, CONDITIONS, trial_config
from consensus.discussion.report import model_table, paper_table
from consensus.experiments.study import LLM_FALLBACKS_KEY, Study, Trial, TrialContext, TrialFailed
from consensus.scenarios.info_spread.config import InfoSpreadConfig

METRICS = (("MS", "misinformation_spread"), ("CT", "containment_time"), ("CD", "coverage_diversity"))
_NOT_PARAMS = ("seed", "output_dir", "llm_backend", "llm_model", "llm_base_url", "llm_api_key_env",
               "llm_temperature", "llm_max_tokens", "llm_timeout_s", "llm_max_retries", "llm_concurrency",
               "replay_path", "llm_port")
_KEYS = ("misinformation_spread", "containment_time", "coverage_diversity", "mean_deviation", "cohorts",
         "cohorts_censored", "rounds_run", "stopped_early", "injections", "corrected", "llm_calls", "llm_fallbacks",
         "prompt_tokens", "completion_tokens", "num_agents", "mode", "strategy", "volatility")
DEFAULTS: dict[str, Any] = {**{k: v for k, v in InfoSpreadConfig().to_dict().items() if k not in _NOT_PARAMS},
                            "condition": "", "strict_llm": True}


def config_for(params: dict, seed: int = 0, llm_settings: dict | None = None) -> InfoSpreadConfig:
    return trial_config(InfoSpreadConfig, params, seed, llm_settings, source="info-spread study")


def run_trial(trial: Trial, ctx: TrialContext) -> dict:
    from consensus.scenarios.info_spread.headless import run_info_spread

    cfg = config_for(trial.params, trial.seed, ctx.llm_settings)
    if cfg.uses_llm() and ctx.llm is None:
        raise TrialFailed("planner 'llm' needs the sweep's LLM client (an llm: block in the spec)")
    s = run_info_spread(cfg, client=ctx.llm if cfg.uses_llm() else None)
    if cfg.uses_llm() and s["replies"] and s["llm_fallbacks"] >= s["replies"]:
        raise TrialFailed(f"no usable LLM reply in {s['replies']} replies ({s['llm_fallbacks_by_reason']})")
    result = {k: s.get(k) for k in _KEYS}
    result.update(condition=cfg.condition(), roles=cfg.roles, planner=cfg.planner,
                  model=(ctx.llm_settings or {}).get("model") or "" if cfg.uses_llm() else cfg.resolved().planner,
                  series=s["series"])
    fallbacks = dict(s["llm_fallbacks_by_reason"])
    result[LLM_FALLBACKS_KEY if trial.params.get("strict_llm", True) else "defender_fallbacks"] = fallbacks
    return result


def report(records: Sequence[dict], out_dir: Path) -> list[str]:
    ok = [r["result"] for r in records if r.get("status") == "ok" and r.get("result")]
    lines = ["## Information spread and manipulation (paper 2, scenario 2)", ""]
    if not ok:
        return lines + [f"No successful trial ({len(records)} recorded)."]
    planners = sorted({r["planner"] for r in ok})
    lines += [f"{len(ok)} ok trials of {len(records)}; planner: {', '.join(planners)}. MS = final misinformation "
              "spread (share of nodes, lower is better), CT = containment time in rounds (lower), CD = distinct "
              "nodes fact-checked per round (higher); means over trials (docs/info-spread.md).", "",
              "Table 4: explicit vs implicit consensus.", "", *paper_table(ok, ("explicit", "implicit"), METRICS), "",
              "Implicit consensus vs the baselines (section 4.4):", "",
              *paper_table(ok, ("implicit", "no_diversity", "no_interaction", "random", "single_llm"), METRICS), "",
              "Table 6, S2 columns (one row per base model; heuristic/random teams are named by their planner):", "",
              *model_table(ok, ("MS", "misinformation_spread"), "S2"), ""]
    from consensus.discussion.plots import plot_rounds_band

    groups = {CONDITION_LABELS[c]: [r["series"]["misinformed"] for r in ok if r["condition"] == c]
              for c in CONDITIONS}
    plot_rounds_band({k: v for k, v in groups.items() if v}, Path(out_dir) / "fig_misinformation_rounds.png",
                     ylabel="misinformed share of nodes", ylim=(-0.02, 1.02),
                     title="Misinformation over rounds (mean ± 1 s.d. over runs)")
    return lines + ["![misinformation per round](fig_misinformation_rounds.png)"]


STUDIES = [
    Study(name="info-spread",
          description="paper 2 scenario 2: defenders against misinformation on a scale-free network, implicit vs "
                      "explicit consensus and baselines over diversity and volatility (Table 4)",
          defaults=DEFAULTS,
          default_sweep={"condition": list(CONDITIONS), "roles": ["low", "medium", "high"],
                         "volatility": ["low", "moderate", "high"]},
          default_trials=5, run_trial=run_trial, report=report,
          uses_llm=lambda params: config_for(params).uses_llm(), validate=lambda params: config_for(params)),
]
