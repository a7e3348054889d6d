"""The baselines of paper 2, section 4.4, and the study *conditions* (the columns of its tables).

``baseline_changes(baseline)`` gives the plain settings a baseline means; a scenario config applies them in its
``resolved()``:

============== ===========================================================================================
baseline       what runs
============== ===========================================================================================
none           the configured mode (implicit or explicit consensus)
single_llm     "A single LLM agent performs the task alone": ONE agent, no discussion
no_interaction implicit consensus without the discussion phase (discussion_turns = 0)
random         every agent picks a uniformly random action (seeded), no discussion
no_diversity   implicit consensus with the low-diversity roles (one shared role prompt)
============== ===========================================================================================

A baseline always runs in implicit mode. A study's ``condition`` parameter names a table column and sets mode and
baseline together: ``implicit`` / ``explicit`` (baseline none) or one of the baselines (implicit mode).
"""
from __future__ import annotations

from typing import Any

from consensus.errors import ConfigError

BASELINES = ("none", "single_llm", "no_interaction", "random", "no_diversity")
CONDITIONS = ("implicit", "explicit", "no_diversity", "no_interaction", "random", "single_llm")
CONDITION_LABELS = {"implicit": "Implicit Consensus", "explicit": "Explicit Consensus",
                    "no_diversity": "No Diversity", "no_interaction": "No Interaction",
                    "random": "Random Strategy", "single_llm": "Single LLM"}


def baseline_changes(baseline: str, size_field: str = "num_robots") -> dict[str, Any]:
    """Settings that ``baseline`` overrides (table in the module docstring); ``size_field`` is the team size N."""
    try:
        return {
            "none": {},
            "single_llm": {size_field: 1, "discussion_turns": 0, "mode": "implicit"},
            "no_interaction": {"discussion_turns": 0, "mode": "implicit"},
            "random": {"planner": "random", "discussion_turns": 0, "mode": "implicit"},
            "no_diversity": {"roles": "low", "mode": "implicit"},
        }[baseline]
    except KeyError:
        raise ConfigError(f"unknown baseline '{baseline}'; valid: {', '.join(BASELINES)}") from None


def apply_condition(data: dict, condition: str) -> dict:
    """``data`` with mode and baseline set from a study ``condition`` ("" keeps them)."""
    if not condition:
        return data
    if condition not in CONDITIONS:
        raise ConfigError(f"unknown condition '{condition}'; valid: {', '.join(CONDITIONS)} (or \"\")")
    return {**data, "mode": "explicit" if condition == "explicit" else "implicit",
            "baseline": condition if condition not in ("implicit", "explicit") else "none"}


def trial_config(cls, params: dict, seed: int = 0, llm_settings: dict | None = None, *, source: str):
    """The validated config ``cls`` of one study trial: the sweep's ``params`` with their ``condition`` applied
    (``strict_llm`` is the study's, not the config's), the spec's LLM temperature and max_tokens, and ``seed``."""
    data = apply_condition({k: v for k, v in params.items() if k not in ("condition", "strict_llm")},
                           params.get("condition", ""))
    llm = llm_settings or {}
    for key, name in (("temperature", "llm_temperature"), ("max_tokens", "llm_max_tokens")):
        if llm.get(key) is not None:
            data[name] = llm[key]
    return cls.from_dict({**data, "seed": seed}, source=source)


def condition_of(baseline: str, mode: str) -> str:
    return baseline if baseline != "none" else mode


def run_discussion_trial(cls, params: dict, seed: int, ctx, *, source: str, run, keys: tuple[str, ...],
                         team: str, series=None) -> dict:
    """One study trial of a discussion scenario (paper 2's disaster, info-spread and public-goods studies): the
    trial's config (``trial_config``), the headless ``run(cfg, client)``, a trial whose LLM team never answered
    usably failed, the summary's ``keys``, condition/roles/planner, ``series(summary)`` and the fallbacks (under
    ``<team>_fallbacks`` when the trial is not ``strict_llm``: the study contract fails a trial whose LLM fell back).
    ``ctx`` is the runner's ``TrialContext``."""
    from consensus.experiments.study import LLM_FALLBACKS_KEY, TrialFailed

    cfg = trial_config(cls, params, seed, ctx.llm_settings, source=source)
    if cfg.uses_llm() and ctx.llm is None:
        raise TrialFailed("planner 'llm' needs the sweep's LLM client (an llm: block in the spec)")
    summary = run(cfg, ctx.llm if cfg.uses_llm() else None)
    if cfg.uses_llm() and summary["replies"] and summary["llm_fallbacks"] >= summary["replies"]:
        raise TrialFailed(f"no usable LLM reply in {summary['replies']} replies "
                          f"(fallbacks: {summary['llm_fallbacks_by_reason']})")
    result = {k: summary.get(k) for k in keys}
    result.update(condition=cfg.condition(), roles=cfg.roles, planner=cfg.planner,    # as configured (table rows)
                  model=(ctx.llm_settings or {}).get("model") or "" if cfg.uses_llm() else cfg.resolved().planner)
    result["series"] = series(summary) if series else summary["series"]
    fallbacks = dict(summary["llm_fallbacks_by_reason"])
    result[LLM_FALLBACKS_KEY if params.get("strict_llm", True) else f"{team}_fallbacks"] = fallbacks
    return result


def discussion_study(name: str, description: str, cls, *, run, keys: tuple[str, ...], team: str,
                     report_kw: dict, series=None):
    """The ``Study`` of a paper-2 discussion scenario (the info-spread and public-goods presets): defaults from
    ``cls`` (``experiments.study.config_params`` plus ``condition`` and ``strict_llm``), trials through
    ``run_discussion_trial`` (``run(cfg, client)`` is the scenario's headless run), the report of
    ``discussion.report.study_report`` (``report_kw``), and the default sweep: condition x roles x volatility, 5
    trials each."""
    from consensus.discussion.report import study_report
    from consensus.experiments.study import Study, config_params

    def config_for(params: dict):
        return trial_config(cls, params, 0, None, source=f"{name} study")

    return Study(name=name, description=description,
                 defaults=config_params(cls, condition="", strict_llm=True),
                 default_sweep={"condition": list(CONDITIONS), "roles": ["low", "medium", "high"],
                                "volatility": ["low", "moderate", "high"]},
                 default_trials=5,
                 run_trial=lambda trial, ctx: run_discussion_trial(cls, trial.params, trial.seed, ctx,
                                                                   source=f"{name} study", run=run, keys=keys,
                                                                   team=team, series=series),
                 report=lambda records, out_dir: study_report(records, out_dir, **report_kw),
                 uses_llm=lambda params: config_for(params).uses_llm(), validate=config_for)
