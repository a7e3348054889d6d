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

from pathlib import Path
from typing import Any, Sequence

from consensus.discussion.baselines import CONDITION_LABELS, CONDITIONS, trial_config
from consensus.discussion.report import model_table, paper_table
from consensus.experiments.study import LLM_FALLBACKS_KEY, Study, Trial, TrialContext, TrialFailed
from consensus.scenarios.public_goods.config import PublicGoodsConfig

METRICS = (("PR", "provision_rate"), ("TW", "total_welfare", 1), ("FD", "free_rider_disparity"))
_NOT_PARAMS = ("seed", "output_dir", "llm_backend", "llm_model", "llm_base_url", "llm_api_key_env",
               "llm_temperature", "llm_max_tokens", "llm_timeout_s", "llm_max_retries", "llm_concurrency",
               "replay_path", "llm_port")
_KEYS = ("provision_rate", "total_welfare", "welfare_sum", "welfare_per_agent_round", "free_rider_disparity",
         "proposal_disparity", "mean_deviation", "rounds_run", "llm_calls", "llm_fallbacks",
         "prompt_tokens", "completion_tokens", "num_agents", "mode", "strategy", "volatility")
DEFAULTS: dict[str, Any] = {**{k: v for k, v in PublicGoodsConfig().to_dict().items() if k not in _NOT_PARAMS},
                            "condition": "", "strict_llm": True}


def config_for(params: dict, seed: int = 0, llm_settings: dict | None = None) -> PublicGoodsConfig:
    return trial_config(PublicGoodsConfig, params, seed, llm_settings, source="public-goods study")


def run_trial(trial: Trial, ctx: TrialContext) -> dict:
    from consensus.scenarios.public_goods.headless import run_public_goods

    cfg = config_for(trial.params, trial.seed, ctx.llm_settings)
    if cfg.uses_llm() and ctx.llm is None:
        raise TrialFailed("planner 'llm' needs the sweep's LLM client (an llm: block in the spec)")
    s = run_public_goods(cfg, client=ctx.llm if cfg.uses_llm() else None)
    if cfg.uses_llm() and s["replies"] and s["llm_fallbacks"] >= s["replies"]:
        raise TrialFailed(f"no usable LLM reply in {s['replies']} replies ({s['llm_fallbacks_by_reason']})")
    result = {k: s.get(k) for k in _KEYS}
    result.update(condition=cfg.condition(), roles=cfg.roles, planner=cfg.planner,
                  model=(ctx.llm_settings or {}).get("model") or "" if cfg.uses_llm() else cfg.resolved().planner,
                  series=s["series"])
    fallbacks = dict(s["llm_fallbacks_by_reason"])
    result[LLM_FALLBACKS_KEY if trial.params.get("strict_llm", True) else "contributor_fallbacks"] = fallbacks
    return result


def report(records: Sequence[dict], out_dir: Path) -> list[str]:
    ok = [r["result"] for r in records if r.get("status") == "ok" and r.get("result")]
    lines = ["## Dynamic public-goods provision (paper 2, scenario 3)", ""]
    if not ok:
        return lines + [f"No successful trial ({len(records)} recorded)."]
    planners = sorted({r["planner"] for r in ok})
    lines += [f"{len(ok)} ok trials of {len(records)}; planner: {', '.join(planners)}. PR = provision rate (higher is "
              "better), TW = total welfare per round, Σ_i Π_i averaged over rounds (higher), FD = free-rider "
              "disparity, the Gini of the contributions (lower; 0 by construction under explicit consensus); means "
              "over trials (docs/public-goods.md).", "",
              "Table 5: explicit vs implicit consensus.", "", *paper_table(ok, ("explicit", "implicit"), METRICS), "",
              "Implicit consensus vs the baselines (section 4.4):", "",
              *paper_table(ok, ("implicit", "no_diversity", "no_interaction", "random", "single_llm"), METRICS), "",
              "Table 6, S3 columns (one row per base model; heuristic/random teams are named by their planner):", "",
              *model_table(ok, ("PR", "provision_rate"), "S3"), ""]
    from consensus.discussion.plots import plot_rounds_band

    groups = {CONDITION_LABELS[c]: [r["series"]["funded"] for r in ok if r["condition"] == c] for c in CONDITIONS}
    plot_rounds_band({k: v for k, v in groups.items() if v}, Path(out_dir) / "fig_provision_rounds.png",
                     ylabel="share of runs funded", ylim=(-0.02, 1.02),
                     title="Provision over rounds (mean ± 1 s.d. over runs)")
    return lines + ["![provision per round](fig_provision_rounds.png)"]


STUDIES = [
    Study(name="public-goods",
          description="paper 2 scenario 3: threshold public goods with a shifting threshold, implicit vs explicit "
                      "consensus and baselines over diversity and volatility (Table 5)",
          defaults=DEFAULTS,
          default_sweep={"condition": list(CONDITIONS), "roles": ["low", "medium", "high"],
                         "volatility": ["low", "moderate", "high"]},
          default_trials=5, run_trial=run_trial, report=report,
          uses_llm=lambda params: config_for(params).uses_llm(), validate=lambda params: config_for(params)),
]
