"""Paper 3's NLP tasks as batch studies: presets ``qa-reliability``, ``classification-reliability`` and
``summarization-reliability`` (Table 2's rows for these tasks, Figs. 3-4's reliability curves).

A trial is one architecture answering the whole item set once (the paper's 30 questions / 100 articles / 50
documents, ``items``), so a trial's score per metric is the mean over the items (F1, instruction following, accuracy,
ROUGE-1/2/L F1), and κ(τ) over the T trials is the share of trials whose mean reaches τ (paper 3, eq. (2)). The items
are drawn with ``item_seed`` and are the same in every trial and architecture; what differs between trials is the
agents' sampling (the trial seed: the heuristic agents' noise, the LLM requests' seeds). AURC =
``consensus.metrics.reliability.aurc`` (the exact area, the mean of the clipped trial scores).

Parameters: ``NLPTaskConfig``'s fields except the seed, the run directory and the LLM transport (the spec's
``llm:`` block gives the model, temperature and max_tokens, as in every study). Default sweep: the architectures the
paper runs on the task, 30 trials each (the paper's T), heuristic agents; ``--planner llm`` with a backend asks the
appendix prompts. ``dataset`` has no default: ``--set dataset=PATH``.

Each item's agents are built afresh (the heuristic agents' generators and the LLM request seeds come from
``SeedSequence([trial seed, item index])``), so an item's outcome does not depend on the items before it. Agent
failures (unusable replies) are part of what is measured (the paper's failure rule): they are counted in
``agent_fallbacks`` and do not fail the trial; a trial fails only when its LLM client is missing or raises.

Record (``result``): ``scores`` {metric: mean over items}, ``items`` (per item: id, the decision as shown to a reader
(cut to 300 characters), its metrics, turns, agreed, failures, coordinator failures, fallback), ``turns`` (mean),
``agreed`` (share), ``failures``, ``coordinator_failures``, ``no_decision`` (items whose decision was None: every
agent failed), ``llm_calls``, ``parse_failures``, ``agent_fallbacks`` {kind: n}, ``llm_seconds``, ``truncated``,
``near_miss``, ``model``.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from consensus.decision import ARCHITECTURE_LABELS, ARCHITECTURES, decide
from consensus.discussion.baselines import trial_config
from consensus.experiments.study import Study, Trial, TrialContext, TrialFailed, config_params
from consensus.llm.backends import DEFAULT as DEFAULT_BACKEND, backend_spec
from consensus.metrics.reliability import aurc, reliability_curve
from consensus.scenarios.nlp_tasks.agents import (HeuristicAgent, HeuristicCoordinator, LLMTextAgent,
                                                  LLMTextCoordinator, add_text_counters, text_counters)
from consensus.scenarios.nlp_tasks.config import PAPER_ITEMS, TASK_ARCHITECTURES, NLPTaskConfig
from consensus.scenarios.nlp_tasks.data import sample_items
from consensus.scenarios.nlp_tasks.prompts import shown
from consensus.scenarios.nlp_tasks.tasks import METRIC_LABELS, TASKS

#: every NLPTaskConfig field but the run group's, the LLM transport's (``config_params``) and the task (the preset's)
DEFAULTS: dict[str, Any] = config_params(NLPTaskConfig, exclude=("task",))
DEFAULT_TRIALS = 30
TASK_TITLES = {"qa": "Question Answering (SQuAD 2.0)", "classification": "Topic Classification (AG News)",
               "summarization": "Text Summarization (XSum)"}

#: paper 3, Table 2 (GPT-4o-mini), columns in consensus.decision.ARCHITECTURES order; None = not run ("–")
PAPER_AURC: dict[str, dict[str, tuple]] = {
    "qa": {"f1": (0.722, None, None, 0.732, 0.725, 0.729, 0.670),
           "instruction": (0.824, None, None, 0.838, 0.811, 0.801, 0.744)},
    "classification": {"accuracy": (0.831, 0.833, None, 0.833, 0.826, 0.704, 0.686)},
    "summarization": {"rouge1": (0.290, None, None, 0.289, 0.289, 0.284, 0.287),
                      "rouge2": (0.089, None, None, 0.087, 0.089, 0.087, 0.090),
                      "rougeL": (0.219, None, None, 0.217, 0.218, 0.213, 0.218)},
}
PAPER_MODEL = "GPT-4o-mini"


def config_for(params: dict, task: str, seed: int = 0, llm_settings: dict | None = None) -> NLPTaskConfig:
    """The validated config of one trial (the spec's llm block gives temperature and max_tokens)."""
    cfg = trial_config(NLPTaskConfig, {**params, "task": task}, seed, llm_settings, source=f"{task} study")
    model = (llm_settings or {}).get("model")
    return cfg.replace(llm_model=model) if model else cfg


def _agree(task, proposals: Sequence[Any]) -> bool:
    return bool(proposals) and all(p is not None for p in proposals) and len({task.key(p) for p in proposals}) == 1


def _model_name(cfg: NLPTaskConfig, ctx: TrialContext, reported: Sequence[str]) -> str:
    """The heuristic's settings, the model names the endpoint reported (kept in transcripts, so a replay names the
    same model), else the spec's model, else the embedded model's name or the backend."""
    if not cfg.uses_llm():
        return f"heuristic (noise {cfg.noise:g}, fail_prob {cfg.fail_prob:g})"
    if reported:
        return ", ".join(reported)
    llm = ctx.llm_settings or {}
    if llm.get("model"):
        return str(llm["model"])
    if backend_spec(llm.get("backend", DEFAULT_BACKEND)).local_server:
        from consensus.llm.embedded import DEFAULT_MODEL_NAME
        return DEFAULT_MODEL_NAME
    return str(llm.get("backend", "llm"))


def run_trial(trial: Trial, ctx: TrialContext, *, task_name: str) -> dict:
    cfg = config_for(trial.params, task_name, trial.seed, ctx.llm_settings)
    task = TASKS[task_name]
    if cfg.uses_llm() and ctx.llm is None:
        raise TrialFailed("planner 'llm' needs the sweep's LLM client (an llm: block in the spec)")
    items = sample_items(task_name, cfg.dataset, cfg.item_count, cfg.item_seed)
    spoke = cfg.architecture.startswith("spoke_wheel")
    agree = partial(_agree, task)
    counters = text_counters()
    per_item, sums = [], defaultdict(float)
    totals = {"turns": 0, "agreed": 0, "failures": 0, "coordinator_failures": 0, "no_decision": 0}
    pool = (ThreadPoolExecutor(cfg.num_agents, thread_name_prefix="nlp-agent")
            if cfg.uses_llm() and cfg.num_agents > 1 else None)
    try:
        for k, item in enumerate(items):
            children = np.random.SeedSequence([trial.seed, k]).spawn(cfg.num_agents + 2)
            if cfg.uses_llm():
                seeds = [int(c.generate_state(1)[0] % 2**31) for c in children]
                agents = [LLMTextAgent(ctx.llm, task, item, cfg, agent_id=i, item_index=k, seed=seeds[i])
                          for i in range(cfg.num_agents)]
                coordinator = (LLMTextCoordinator(ctx.llm, task, item, cfg, item_index=k, seed=seeds[-2])
                               if spoke else None)
            else:
                agents = [HeuristicAgent(task, item, np.random.default_rng(c), noise=cfg.noise,
                                         fail_prob=cfg.fail_prob) for c in children[:cfg.num_agents]]
                coordinator = HeuristicCoordinator(task) if spoke else None
            out = decide(cfg.architecture, agents, kind="categorical", coordinator=coordinator,
                         max_turns=cfg.max_turns, agree=agree, vote_key=task.key,
                         map_fn=pool.map if pool is not None else map, rng=np.random.default_rng(children[-1]))
            for member in [*agents, coordinator]:
                if hasattr(member, "counters"):
                    add_text_counters(counters, member.counters())
            scores = task.score(item, out.decision)
            for m, v in scores.items():
                sums[m] += v
            totals["turns"] += out.turns
            totals["agreed"] += out.agreed
            totals["failures"] += out.failures
            totals["coordinator_failures"] += out.coordinator_failures
            totals["no_decision"] += out.decision is None
            per_item.append({"id": item.id, "answer": None if out.decision is None else shown(out.decision, 300),
                             **{m: round(v, 6) for m, v in scores.items()}, "turns": out.turns, "agreed": out.agreed,
                             "failures": out.failures, "coordinator_failures": out.coordinator_failures,
                             "fallback": out.fallback})
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    n = len(items)
    return {"scores": {m: sums[m] / n for m in task.metrics}, "items": per_item, "turns": totals["turns"] / n,
            "agreed": totals["agreed"] / n, "failures": totals["failures"],
            "coordinator_failures": totals["coordinator_failures"], "no_decision": totals["no_decision"],
            "llm_calls": counters["calls"], "parse_failures": counters["parse_failures"],
            "agent_fallbacks": counters["fallbacks"], "llm_seconds": round(counters["llm_seconds"], 6),
            "truncated": counters["truncated"], "near_miss": counters["near_miss"],
            "model": _model_name(cfg, ctx, counters["models"])}


def llm_calls(params: dict, task_name: str) -> int:
    """Most LLM requests of one trial, retries aside (every feedback turn used, no early agreement)."""
    cfg = config_for(params, task_name)
    if not cfg.uses_llm():
        return 0
    n, turns = cfg.num_agents, cfg.max_turns
    per_item = {"single": 1, "majority": n, "averaging": n, "decentralized": n * turns,
                "decentralized_feedback": n * turns, "spoke_wheel": n + 1,
                "spoke_wheel_feedback": n + 1 + (turns - 1) * (n + 1)}[cfg.architecture]
    return per_item * cfg.item_count


# ---------------------------------------------------------------------------------------------- report
def _ok(r: dict) -> bool:
    return r.get("status") == "ok" and bool(r.get("result"))


def _trial_score(r: dict, metric: str) -> float:
    return float(r["result"]["scores"][metric]) if _ok(r) else 0.0


def _variants(records: Sequence[dict]) -> dict[str, list[dict]]:
    keys = sorted({k for r in records for k in r["params"]} - {"architecture"})
    varying = [k for k in keys if len({json.dumps(r["params"].get(k), sort_keys=True) for r in records}) > 1]
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        groups[", ".join(f"{k}={r['params'].get(k)}" for k in varying)].append(r)
    return dict(groups)


def _row(label: str, values: Sequence[float | None], notes: Sequence[str] = ()) -> str:
    present = [v for v in values if v is not None]
    best = max(present) if present else None
    cells = []
    for i, v in enumerate(values):
        if v is None:
            cells.append("–")
            continue
        text = f"{v:.3f}"
        cells.append((f"**{text}**" if v == best and len(present) > 1 else text) + (notes[i] if notes else ""))
    return f"| {label} | " + " | ".join(cells) + " |"


def _header(task_name: str) -> list[str]:
    return [f"| {TASK_TITLES[task_name]} | " + " | ".join(ARCHITECTURE_LABELS[a] for a in ARCHITECTURES) + " |",
            "|---|" + "---|" * len(ARCHITECTURES)]


def reliability_figure(task_name: str, curves: dict[str, dict[str, list[float]]], *, title: str):
    """κ(τ) over τ in [0, 1] per metric (one panel each, Figs. 3-4 layout), one line per architecture; drawn exactly
    (κ is a step function that changes at the trial scores)."""
    from consensus.runs import plots

    metrics = list(curves)
    colors = plots.colors(len(ARCHITECTURES))
    fig = plots.new_figure(figsize=(max(6.5, 5.2 * len(metrics)), 5.0))
    for j, metric in enumerate(metrics):
        ax = fig.add_subplot(1, len(metrics), j + 1)
        for k, arch in enumerate(ARCHITECTURES):
            scores = curves[metric].get(arch)
            if not scores:
                continue
            taus = np.unique(np.concatenate([[0.0, 1.0], np.clip(scores, 0.0, 1.0)]))
            ax.plot(taus, reliability_curve(scores, taus), color=colors[k], lw=1.8, drawstyle="steps-pre",
                    ls="--" if arch.endswith("feedback") else "-",
                    label=f"{ARCHITECTURE_LABELS[arch]} ({aurc(scores):.3f})")
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(f"threshold τ ({METRIC_LABELS[metric]})")
        ax.set_ylabel("reliability κ(τ)")
        ax.set_title(f"({chr(97 + j)}) {METRIC_LABELS[metric]}")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize="small", framealpha=0.85, title="AURC")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _behaviour(records: Sequence[dict]) -> list[str]:
    lines = ["| Architecture | trials ok | mean turns / item | agreed | agent failures / item | coordinator failures "
             "/ item | no decision | LLM calls / trial | parse rate | s / call | fallbacks by kind |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for arch in ARCHITECTURES:
        group = [r for r in records if r["params"]["architecture"] == arch]
        if not group:
            continue
        ok = [r["result"] for r in group if _ok(r)]
        if not ok:
            lines.append(f"| {ARCHITECTURE_LABELS[arch]} | 0/{len(group)} |" + " – |" * 9)
            continue
        items = sum(len(r["items"]) for r in ok)
        calls = sum(r["llm_calls"] for r in ok)
        kinds: dict[str, int] = defaultdict(int)
        for r in ok:
            for kind, n in r["agent_fallbacks"].items():
                kinds[kind] += n
        parse = f"{1 - sum(r['parse_failures'] for r in ok) / calls:.1%}" if calls else "–"
        per_call = f"{sum(r['llm_seconds'] for r in ok) / calls:.2f}" if calls else "–"
        lines.append(
            f"| {ARCHITECTURE_LABELS[arch]} | {len(ok)}/{len(group)} | "
            f"{np.mean([r['turns'] for r in ok]):.2f} | {np.mean([r['agreed'] for r in ok]):.0%} | "
            f"{sum(r['failures'] for r in ok) / items:.2f} | "
            f"{sum(r['coordinator_failures'] for r in ok) / items:.2f} | "
            f"{sum(r['no_decision'] for r in ok)} | {calls / len(ok):.1f} | {parse} | {per_call} | "
            f"{', '.join(f'{k} {v}' for k, v in sorted(kinds.items())) or '–'} |")
    return lines


def _section(task_name: str, records: Sequence[dict], out_dir: Path, label: str) -> list[str]:
    from consensus.runs import plots

    metrics = TASKS[task_name].metrics
    params = records[0]["params"]
    curves: dict[str, dict[str, list[float]]] = {m: {} for m in metrics}
    ours = _header(task_name)
    sizes = set()
    for metric in metrics:
        values, notes = [], []
        for arch in ARCHITECTURES:
            group = [r for r in records if r["params"]["architecture"] == arch]
            if not group:
                values.append(None)
                notes.append("")
                continue
            sizes.add(len(group))
            curves[metric][arch] = [_trial_score(r, metric) for r in group]
            failed = sum(not _ok(r) for r in group)
            values.append(aurc(curves[metric][arch]))
            notes.append(f" ({failed}/{len(group)} failed)" if failed else "")
        ours.append(_row(METRIC_LABELS[metric], values, notes))
    paper = _header(task_name) + [_row(METRIC_LABELS[m], PAPER_AURC[task_name][m]) for m in metrics]
    models = sorted({r["result"]["model"] for r in records if _ok(r)}) or ["(no successful trial)"]
    n_items = {len(r["result"]["items"]) for r in records if _ok(r)}
    suffix = "" if not label else "_" + re.sub(r"[^A-Za-z0-9.=-]+", "_", label)
    name = f"reliability_{task_name}{suffix}.png"
    title = (f"[{task_name}] reliability κ(τ), N = {params['num_agents']} agents\n{', '.join(models)}"
             + (f"\n{label}" if label else ""))
    plots.save_figure(reliability_figure(task_name, curves, title=title), out_dir / name, svg=True)
    trials = "-".join(str(s) for s in sorted({min(sizes), max(sizes)})) if sizes else "0"
    head = [f"### {label}", ""] if label else []
    return [*head,
            f"AURC (exact area under κ(τ) over τ in [0, 1] = the mean of the trial scores; a failed trial scores 0) "
            f"per architecture; model: **{', '.join(models)}**; N = {params['num_agents']} agents, at most "
            f"{params['max_feedback_turns']} feedback turns, {'/'.join(str(n) for n in sorted(n_items)) or '?'} "
            f"items per trial (paper: {PAPER_ITEMS[task_name]}), {trials} trials per architecture "
            f"(paper: 30).", "", *ours, "",
            f"Paper 3, Table 2 ({PAPER_MODEL}, N not given, 30 trials):", "", *paper, "",
            *_behaviour(records), "", f"![{task_name} reliability]({name})", ""]


def report(records: Sequence[dict], out_dir: Path, *, task_name: str) -> list[str]:
    out_dir = Path(out_dir)
    records = [r for r in records if r.get("params")]
    lines = [f"## {TASK_TITLES[task_name]}: reliability κ(τ) and AURC per architecture (paper 3, Table 2 layout)", ""]
    if not records:
        return lines + ["No trials."]
    for label, group in sorted(_variants(records).items()):
        lines += _section(task_name, group, out_dir, label)
    return lines


def _study(task_name: str, description: str) -> Study:
    def validate(params: dict) -> None:
        """The parameters, and the dataset file read and sampled (cached), so a bad file is one error up front."""
        cfg = config_for(params, task_name)
        sample_items(task_name, cfg.dataset, cfg.item_count, cfg.item_seed)

    return Study(name=f"{task_name}-reliability", description=description,
                 defaults=dict(DEFAULTS, architecture=TASK_ARCHITECTURES[task_name][0]),
                 default_sweep={"architecture": list(TASK_ARCHITECTURES[task_name])},
                 default_trials=DEFAULT_TRIALS, run_trial=partial(run_trial, task_name=task_name),
                 report=partial(report, task_name=task_name),
                 uses_llm=lambda params: params.get("planner") == "llm", validate=validate,
                 llm_calls=partial(llm_calls, task_name=task_name), renamed=NLPTaskConfig.renamed_fields())


STUDIES = [
    _study("qa", "Paper 3: κ(τ) and AURC of the architectures on SQuAD 2.0 questions with formatting instructions "
                 "(F1, instruction following; --set dataset=SQuAD JSON)"),
    _study("classification", "Paper 3: κ(τ) and AURC of the architectures on AG News topic classification "
                             "(accuracy; --set dataset=AG News CSV)"),
    _study("summarization", "Paper 3: κ(τ) and AURC of the architectures on XSum one-sentence summaries "
                            "(ROUGE-1/2/L F1; --set dataset=XSum JSONL)"),
]
