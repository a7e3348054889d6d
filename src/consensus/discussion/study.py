"""The experiment studies of paper-2 discussion scenarios (disaster, info-spread, public-goods): one trial through the
scenario's headless run, and the ``Study`` of a scenario built from its config class (``discussion_study``)."""
from __future__ import annotations

from consensus.discussion.baselines import CONDITIONS, trial_config


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
                 uses_llm=lambda params: config_for(params).uses_llm(), validate=config_for,
                 renamed=cls.renamed_fields())
