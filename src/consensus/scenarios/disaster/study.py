"""Paper 2, scenario 1 (dynamic disaster response) as a batch study: Tables 1-2 and Figs. 3 and 5.

Preset ``disaster`` (``STUDIES``). A trial is one headless run (``consensus.scenarios.disaster.headless``, no run
directory) of ``DisasterConfig`` built from the trial's parameters: every scenario field of ``DisasterConfig``
(num_robots, planner, mode, strategy, roles, volatility, rounds, discussion_turns, baseline, motion, environment
fields, ...) is a study parameter with the same default; the seed is the trial's seed; the LLM settings
(temperature, max_tokens) come from the spec's ``llm:`` block and the model from its shared client. One more
parameter, ``condition``, names a column of the paper's tables and sets mode and baseline together (so a sweep has
no redundant mode x baseline points): ``implicit`` / ``explicit`` (baseline none), ``no_diversity``,
``no_interaction``, ``random``, ``single_llm`` (implicit mode, that baseline); ``""`` keeps ``mode`` and
``baseline`` as given.

Default sweep: condition (all six) x roles (low, medium, high) x volatility (low, moderate, high), 5 trials each
(paper: "5 runs for each experimental setting"), with the heuristic planner; set ``params: {planner: llm}`` and an
``llm:`` block for the paper's LLM teams.

LLM fallbacks: by the study contract a trial whose drones fell back is recorded as failed
(``result["llm_fallbacks"]`` = fallbacks by reason). With ``strict_llm: false`` the fallbacks are reported as
``result["drone_fallbacks"]`` instead and such trials count: the drone's fallback action (stay or heuristic) is
then part of the measured team. A trial in which no LLM reply at all was usable fails either way.

A trial record holds coverage_rate, misallocation_penalty, response_delay, net_reward, mean_deviation (and the
other ``consensus.scenarios.disaster.metrics.summarize`` numbers), LLM calls and tokens, ``condition`` and the per-round
``series`` (coverage, deviation, misallocation, net_reward).

Report (``report``): Table 1 (rows Overall, Diversity Low/Medium/High, Volatility Low/Moderate/High; columns CR,
MP, RD for explicit and implicit consensus), Table 2 (Implicit, No Diversity, No Interaction, Random Strategy,
Single LLM: CR, MP, RD each), a per-strategy table when explicit trials used several strategies, a per-condition
table with net reward, mean deviation and disasters cleared / appeared (C.7 "net reward"), Fig. 3
(``fig3_coverage_rounds.png``: CR over rounds, implicit vs explicit, mean +- 1 s.d. over runs) and Fig. 5
(``fig5_deviation_coverage.png``: mean deviation vs coverage per run for the implicit, explicit, no-diversity and
no-interaction trials with the quadratic fit; random and single-drone runs are left out: random deviation is
noise, and one drone has no deviation). Values are means over the ok trials of a cell; "–" = no trial or no value
(e.g. RD when no disaster became high-severity); n = trials per column.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from consensus.discussion.baselines import CONDITION_LABELS, CONDITIONS, trial_config
from consensus.discussion.study import run_discussion_trial
from consensus.discussion.report import LEVELS, mean as _mean, metric_cells, paper_table
from consensus.experiments.study import Study, Trial, TrialContext, config_params
from consensus.scenarios.disaster.config import DisasterConfig
METRICS = (("CR", "coverage_rate"), ("MP", "misallocation_penalty"), ("RD", "response_delay"))
SCATTER_CONDITIONS = ("implicit", "explicit", "no_diversity", "no_interaction")

_SUMMARY_KEYS = ("coverage_rate", "misallocation_penalty", "misallocation_share", "response_delay",
                 "response_delay_disasters", "response_censored", "net_reward", "mean_deviation",
                 "disasters_appeared", "disasters_cleared", "llm_calls", "prompt_tokens", "completion_tokens",
                 "parse_failures", "messages_truncated", "messages_empty", "vote_failures", "coordinator_failures",
                 "no_decision", "num_robots", "mode", "strategy", "roles", "volatility", "baseline", "planner")

#: the DisasterConfig fields minus the run/LLM-transport ones (config_params), the ROS round clock's timeouts and the
#: ROS drones' packing in shared cells (the robot core's: the headless drones do not use it)
DEFAULTS: dict[str, Any] = config_params(DisasterConfig, exclude=("round_timeout_s", "flight_time_factor",
                                                                  "flight_slack_s", "packing_gap_m", "deadlock_s"),
                                         condition="", strict_llm=True)


def config_for(params: dict, seed: int = 0, llm_settings: dict | None = None) -> DisasterConfig:
    """The validated ``DisasterConfig`` of a trial (``condition`` applied; LLM settings from the spec)."""
    return trial_config(DisasterConfig, params, seed, llm_settings, source="disaster study")


def condition_of(cfg: DisasterConfig) -> str:
    return cfg.baseline if cfg.baseline != "none" else cfg.mode


def _validate(params: dict) -> None:
    config_for(params)


def _uses_llm(params: dict) -> bool:
    return config_for(params).uses_llm()


def run_trial(trial: Trial, ctx: TrialContext) -> dict:
    """One headless run; its summary numbers, condition and series (module docstring)."""
    from consensus.scenarios.disaster.headless import run_disaster_headless

    return run_discussion_trial(
        DisasterConfig, trial.params, trial.seed, ctx, source="disaster study",
        run=lambda cfg, client: run_disaster_headless(cfg, client=client), keys=_SUMMARY_KEYS, team="drone",
        series=lambda s: {k: s["series"][k] for k in ("coverage", "deviation", "misallocation", "net_reward")})


# --- report -----------------------------------------------------------------------------------------------------------
def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _cells(results: Sequence[dict]) -> list[str]:
    return metric_cells(results, METRICS)


def _table(ok: Sequence[dict], columns: Sequence[str]) -> list[str]:
    return paper_table(ok, columns, METRICS)


def _strategy_table(ok: Sequence[dict]) -> list[str]:
    explicit = [r for r in ok if r["condition"] == "explicit"]
    strategies = sorted({r["strategy"] for r in explicit})
    if len(strategies) < 2:
        return []
    lines = ["", "Explicit consensus by strategy (paper 3 architectures):", "",
             "| Strategy | n | CR | MP | RD |", "|---|---:|---:|---:|---:|"]
    for s in strategies:
        rows = [r for r in explicit if r["strategy"] == s]
        lines.append(f"| {s} | {len(rows)} | " + " | ".join(_cells(rows)) + " |")
    return lines


def _condition_table(ok: Sequence[dict]) -> list[str]:
    """Per condition: the table metrics plus net reward, mean deviation and disasters cleared of appeared."""
    lines = ["", "Per condition (all levels): net reward (C.1, higher is better), mean deviation d̄ and disasters "
                 "cleared / appeared, summed over the trials:", "",
             "| Condition | n | CR | MP | RD | net reward | d̄ | cleared / appeared |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c in CONDITIONS:
        rows = [r for r in ok if r["condition"] == c]
        if rows:
            cleared = sum(r["disasters_cleared"] for r in rows)
            appeared = sum(r["disasters_appeared"] for r in rows)
            lines.append(f"| {CONDITION_LABELS[c]} | {len(rows)} | " + " | ".join(_cells(rows)) + " | "
                         f"{_mean([r['net_reward'] for r in rows]):.1f} | "
                         f"{_fmt(_mean([r['mean_deviation'] for r in rows]))} | {cleared} / {appeared} |")
    return lines


def report(records: Sequence[dict], out_dir: Path) -> list[str]:
    """Tables 1-2, Fig. 3 and Fig. 5 (module docstring) from the ok trials; returns markdown lines."""
    out_dir = Path(out_dir)
    ok = [r["result"] for r in records if r.get("status") == "ok" and r.get("result")]
    lines = ["## Disaster response (paper 2, scenario 1)", ""]
    if not ok:
        return lines + [f"No successful trial ({len(records)} recorded)."]
    planners = sorted({r["planner"] for r in ok})
    drones = sorted({r["num_robots"] for r in ok if r["condition"] != "single_llm"})
    lines += [f"{len(ok)} ok trials of {len(records)} recorded; planner: {', '.join(planners)}; drones: "
              f"{', '.join(map(str, drones)) or '–'}. CR = coverage rate (higher is better), MP = misallocation "
              "penalty (lower), RD = response delay in rounds (lower); means over trials.", "",
              "Table 1: explicit vs implicit consensus.", "", *_table(ok, ("explicit", "implicit")), "",
              "Table 2: implicit consensus vs the baselines (section 4.4).", "",
              *_table(ok, ("implicit", "no_diversity", "no_interaction", "random", "single_llm")),
              *_strategy_table(ok), *_condition_table(ok)]
    if "heuristic" in planners:
        lines += ["", "Heuristic drones are classical stand-ins for the paper's LLM agents (docs/disaster.md, "
                      "\"What the heuristic batch shows\"): they measure what forced alignment and the baselines "
                      "cost mechanically, not in-context adaptation or the effect of role prompts on an LLM."]
    # matplotlib: only here
    from consensus.scenarios.disaster.plots import plot_coverage_rounds, plot_deviation_coverage

    groups = {CONDITION_LABELS[c]: [r["series"]["coverage"] for r in ok if r["condition"] == c]
              for c in ("implicit", "explicit")}
    plot_coverage_rounds({k: v for k, v in groups.items() if v}, out_dir / "fig3_coverage_rounds.png",
                         title=f"Fig. 3: coverage over rounds, implicit vs explicit (planner {', '.join(planners)})")
    points = {CONDITION_LABELS[c]: [(r["mean_deviation"], r["coverage_rate"]) for r in ok if r["condition"] == c]
              for c in SCATTER_CONDITIONS}
    _, fit = plot_deviation_coverage({k: v for k, v in points.items() if v}, out_dir / "fig5_deviation_coverage.png",
                                     title="Fig. 5: mean deviation vs coverage (one point per run)")
    lines += ["", "![Fig. 3](fig3_coverage_rounds.png)", "", "![Fig. 5](fig5_deviation_coverage.png)", ""]
    if fit is None:
        lines.append("Fig. 5 fit: fewer than 3 distinct deviations, no quadratic fit.")
    else:
        verdict = (f"an inverted U with its peak at d̄ = {fit['vertex']:.2f}" if fit["inverted_u"]
                   else "no inverted U")
        lines.append(f"Fig. 5 fit over {fit['n']} runs: CR = {fit['a']:.4f} d̄² {fit['b']:+.4f} d̄ {fit['c']:+.4f}, "
                     f"{verdict}.")
    return lines


STUDIES = [
    Study(name="disaster",
          description="paper 2 scenario 1: disaster response drones, implicit vs explicit consensus and baselines "
                      "over diversity and volatility (Tables 1-2, Figs. 3 and 5)",
          defaults=DEFAULTS,
          default_sweep={"condition": list(CONDITIONS), "roles": list(LEVELS["roles"]),
                         "volatility": list(LEVELS["volatility"])},
          default_trials=5, run_trial=run_trial, report=report, uses_llm=_uses_llm, validate=_validate,
          renamed=DisasterConfig.renamed_fields()),
]
