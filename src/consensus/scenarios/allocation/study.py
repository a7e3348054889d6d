"""Study "allocation-reliability": paper 3's resource-allocation experiment (Fig. 2, Figs. 5-10, Table 2).

One trial = one run of one architecture on one problem: ``agents`` agents propose allocation plans
(``consensus.scenarios.allocation.agents``), ``consensus.decision.decide`` turns them into one decision
(failed agents' plans are replaced by the all-zero plan, as in the paper; ``max_turns`` = the paper's 5),
and the decision is scored with the overall satisfaction S (``consensus.scenarios.allocation.model``: mean over
regions of eq. (1), after scaling an over-allocated resource down to its total).

Parameters (``DEFAULTS``): ``scale`` small|medium|large, ``setting`` equal|lack|excess, ``architecture`` (one of
``ARCHITECTURES``), ``num_agents`` (the paper does not say how many; 3 is the smallest group in which a majority
means something), ``planner``: "llm" (the runner's shared client ``ctx.llm``; spoke & wheel use the LLM
coordinator), "noisy" or "proportional" (classical agents, spoke & wheel use the element-wise median
coordinator; no LLM at all), ``max_turns``, ``noise`` and ``fail_prob`` (noisy agents), ``parse_retries``
(0 = the paper: an unusable reply is a failed agent), ``llm_temperature`` (1.0 = the OpenAI default; the paper
used GPT-4o-mini "with default hyperparameters") and ``llm_max_tokens`` (the longest reply, tokens). The former
names ``agents``, ``temperature`` and ``max_tokens`` are refused naming the new ones (``RENAMED``).
Default sweep: 3 scales x 3 settings x 7 architectures, 30 trials each (the paper's 30 independent trials).

Seeds: the trial seed feeds a ``numpy.random.SeedSequence``; its children seed agent i (noisy agents' rng,
or the LLM request seed, reduced to 31 bits, plus the turn), the coordinator, and the aggregation's rng.

Record of a trial: ``score`` (S of the decision), ``region_satisfaction`` (S(R) per region), ``decision``
(resources x regions), ``turns``, ``agreed``, ``failures`` (failed agent proposals, all turns),
``coordinator_failures``, ``fallback``, ``over_allocated`` (resources scaled down in the decision),
``llm_calls``, ``parse_failures`` and ``agent_fallbacks`` (LLM replies that made an agent or the coordinator
fail, by reason). They are deliberately NOT reported under the runner's ``llm_fallbacks`` key, which would
mark the whole trial failed: in paper 3 an agent's unusable reply is part of the experiment (its plan becomes
all zeros, "to emulate the scenario of one agent's failure"), not a failure of the trial. An endpoint error
still fails the trial through the runner's own client accounting.

Report: for every (scale, setting) one figure ``reliability_<scale>_<setting>.png/.svg`` with kappa(tau) of the
seven architectures (as the paper's Fig. 2), and markdown with the AURC table in the layout of Table 2 (rows
scale x setting, columns the seven architectures; best of a row in bold), the paper's own values for the same
rows, and the architectures' behaviour (turns, agreement, failures, LLM calls). A trial recorded as failed
(``run_trial`` raised, or the runner saw an LLM endpoint error during it, even if a score was computed)
counts as S = 0 in kappa and AURC: a run that did not produce a trustworthy decision met no threshold;
cells say how many failed (``--resume --retry-failed`` runs them again). Trials without any record (an
interrupted sweep) are not counted; the trial counts are in the table and the figure legends. Any other parameter that
varies in the sweep (e.g. ``num_agents``) splits the report into
one section per value, with the value in the figure names.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from consensus.decision import ARCHITECTURE_LABELS, ARCHITECTURES, decide
from consensus.errors import ConfigError
from consensus.experiments.study import Study, Trial, TrialContext
from consensus.metrics.reliability import aurc, reliability_curve
from consensus.scenarios.allocation.agents import (LLMAllocationAgent, LLMAllocationCoordinator, MedianCoordinator,
                                           NoisyAgent, ProportionalAgent)
from consensus.llm.counters import add_counters, new_counters
from consensus.scenarios.allocation.model import (SCALES, SETTINGS, best_allocation, fit_to_totals, problem,
                                            region_satisfaction, satisfaction)

if TYPE_CHECKING:                    # matplotlib is imported when a figure is drawn, not with the study
    from matplotlib.figure import Figure

PLANNERS = ("llm", "noisy", "proportional")
DEFAULTS: dict[str, Any] = {
    "scale": "medium", "setting": "equal", "architecture": "majority", "num_agents": 3, "planner": "llm",
    "max_turns": 5, "noise": 0.2, "fail_prob": 0.1, "parse_retries": 0, "llm_temperature": 1.0, "llm_max_tokens": 400,
    "prompt_style": "paper",     # paper: the paper's prompt as written (Python dict); json: JSON schema adaptation
}
DEFAULT_SWEEP = {"scale": list(SCALES), "setting": list(SETTINGS), "architecture": list(ARCHITECTURES)}
DEFAULT_TRIALS = 30

#: paper 3, Table 2 (resource allocation, GPT-4o-mini): AURC per (scale, setting), columns in ARCHITECTURES order
PAPER_AURC: dict[tuple[str, str], tuple[float, ...]] = {
    ("small", "equal"): (0.999, 1.000, 0.999, 1.000, 0.999, 1.000, 0.988),
    ("small", "lack"): (0.680, 0.688, 0.654, 0.699, 0.688, 0.702, 0.706),
    ("small", "excess"): (0.709, 0.669, 0.705, 0.665, 0.702, 0.669, 0.666),
    ("medium", "equal"): (0.897, 0.915, 0.890, 0.961, 0.695, 0.835, 0.627),
    ("medium", "lack"): (0.689, 0.691, 0.668, 0.673, 0.534, 0.623, 0.532),
    ("medium", "excess"): (0.802, 0.826, 0.801, 0.816, 0.729, 0.805, 0.722),
    ("large", "equal"): (0.640, 0.711, 0.626, 0.623, 0.531, 0.567, 0.447),
    ("large", "lack"): (0.564, 0.671, 0.593, 0.574, 0.532, 0.559, 0.424),
    ("large", "excess"): (0.672, 0.816, 0.682, 0.648, 0.582, 0.579, 0.450),
}

_CHOICES = {"scale": SCALES, "setting": SETTINGS, "architecture": ARCHITECTURES, "planner": PLANNERS,
            "prompt_style": ("paper", "json")}
_INT_RANGES = {"num_agents": (1, 64), "max_turns": (1, 20), "parse_retries": (0, 10), "llm_max_tokens": (16, 4096)}
_NUM_RANGES = {"noise": (0.0, 1.0), "fail_prob": (0.0, 1.0), "llm_temperature": (0.0, 2.0)}
#: the study's former parameter names -> the new ones (refused, naming the new): a team of agents counts with
#: ``num_agents`` and the LLM's sampling temperature and reply cap are ``llm_temperature``/``llm_max_tokens`` in
#: every scenario (``consensus.settings.AgentsParams``, ``LLMParams``)
RENAMED = {"agents": "num_agents", "temperature": "llm_temperature", "max_tokens": "llm_max_tokens"}


def validate(params: dict) -> None:
    """ConfigError naming the first bad parameter."""
    missing = sorted(set(DEFAULTS) - set(params))
    if missing:
        raise ConfigError(f"allocation-reliability: missing parameter(s): {', '.join(missing)}")
    for key, choices in _CHOICES.items():
        if params[key] not in choices:
            raise ConfigError(f"allocation-reliability: {key} must be one of {', '.join(choices)}; "
                              f"got {params[key]!r}")
    for key, (lo, hi) in _INT_RANGES.items():
        value = params[key]
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ConfigError(f"allocation-reliability: {key} must be an integer in [{lo}, {hi}]; got {value!r}")
    for key, (lo, hi) in _NUM_RANGES.items():
        value = params[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
            raise ConfigError(f"allocation-reliability: {key} must be a number in [{lo}, {hi}]; got {value!r}")


def _uses_llm(params: dict) -> bool:
    return params.get("planner") == "llm"


def _llm_calls(params: dict) -> int:
    """Most LLM requests of one trial, parse retries aside (every feedback turn used, no early agreement)."""
    if params["planner"] != "llm":
        return 0
    n, turns = params["num_agents"], params["max_turns"]
    return {"single": 1, "majority": n, "averaging": n, "decentralized": n * turns,
            "decentralized_feedback": n * turns, "spoke_wheel": n + 1,
            "spoke_wheel_feedback": (n + 1) * turns}[params["architecture"]]


# ---------------------------------------------------------------------------------------------- one trial
def _build(p: dict, prob, seed: int, ctx: TrialContext) -> tuple[list, Any]:
    """(agents, coordinator or None) for the trial's planner."""
    children = np.random.SeedSequence(seed).spawn(p["num_agents"] + 1)
    spoke = p["architecture"].startswith("spoke_wheel")
    if p["planner"] != "llm":
        if p["planner"] == "proportional":
            agents = [ProportionalAgent(prob) for _ in range(p["num_agents"])]
        else:
            agents = [NoisyAgent(prob, np.random.default_rng(c), noise=p["noise"], fail_prob=p["fail_prob"])
                      for c in children[:-1]]
        return agents, MedianCoordinator() if spoke else None
    if ctx.llm is None:
        raise ConfigError("allocation-reliability: planner 'llm' needs an LLM client (an llm block in the spec)")
    settings = dict(temperature=float(p["llm_temperature"]), max_tokens=p["llm_max_tokens"],
                    parse_retries=p["parse_retries"], style=p["prompt_style"])
    request_seeds = [int(c.generate_state(1)[0] % 2**31) for c in children]
    agents = [LLMAllocationAgent(ctx.llm, prob, agent_id=i, seed=request_seeds[i], **settings)
              for i in range(p["num_agents"])]
    coordinator = LLMAllocationCoordinator(ctx.llm, prob, seed=request_seeds[-1], **settings) if spoke else None
    return agents, coordinator


def run_trial(trial: Trial, ctx: TrialContext) -> dict:
    """Run one architecture once and score its decision (record layout in the module docstring)."""
    p = trial.params
    validate(p)
    prob = problem(p["scale"], p["setting"])
    agents, coordinator = _build(p, prob, trial.seed, ctx)
    rng = np.random.default_rng(np.random.SeedSequence([trial.seed, 1]))
    if p["planner"] == "llm" and len(agents) > 1:
        with ThreadPoolExecutor(len(agents), thread_name_prefix="alloc-agent") as pool:
            out = decide(p["architecture"], agents, kind="allocation", coordinator=coordinator,
                            max_turns=p["max_turns"], failed_value=prob.zeros(), map_fn=pool.map, rng=rng)
    else:
        out = decide(p["architecture"], agents, kind="allocation", coordinator=coordinator,
                        max_turns=p["max_turns"], failed_value=prob.zeros(), rng=rng)
    counters = new_counters()
    for member in [*agents, coordinator]:
        if hasattr(member, "counters"):
            add_counters(counters, member.counters())
    _, over = fit_to_totals(prob, out.decision)
    regions = region_satisfaction(prob, out.decision)
    return {"score": float(regions.mean()), "region_satisfaction": regions.tolist(),
            "decision": np.asarray(out.decision, dtype=float).tolist(), "turns": out.turns, "agreed": out.agreed,
            "failures": out.failures, "coordinator_failures": out.coordinator_failures, "fallback": out.fallback,
            "over_allocated": over, "llm_calls": counters["calls"], "parse_failures": counters["parse_failures"],
            "agent_fallbacks": counters["fallbacks"]}


# ---------------------------------------------------------------------------------------------- report
_FIXED = ("scale", "setting", "architecture")


def _variants(records: Sequence[dict]) -> dict[str, list[dict]]:
    """Records per variant: label "k=v, ..." of the parameters besides scale/setting/architecture that vary."""
    keys = sorted({k for r in records for k in r["params"]} - set(_FIXED))
    varying = [k for k in keys if len({json.dumps(r["params"].get(k), sort_keys=True) for r in records}) > 1]
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        groups[", ".join(f"{k}={r['params'].get(k)}" for k in varying)].append(r)
    return dict(groups)


def _score(record: dict) -> float:
    return float(record["result"]["score"]) if record.get("status") == "ok" and record.get("result") else 0.0


def _cells(records: Sequence[dict]) -> dict[tuple[str, str, str], list[dict]]:
    cells: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for r in records:
        cells[tuple(r["params"][k] for k in _FIXED)].append(r)
    return cells


def reliability_figure(curves: dict[str, Sequence[float]], failed: dict[str, int], *, title: str) -> Figure:
    """kappa(tau) over tau in [0, 1], one line per architecture (scores of failed trials already 0).

    Drawn exactly: kappa only changes at the trial scores, and on (s_(k-1), s_k] it equals kappa(s_k),
    so the curve through tau in {0, the distinct scores in (0, 1), 1} is drawn with ``steps-pre``."""
    from consensus.runs import plots

    colors = plots.colors(len(ARCHITECTURES))
    fig = plots.new_figure(figsize=(8.5, 5.2))
    ax = fig.add_subplot(1, 1, 1)
    for k, arch in enumerate(ARCHITECTURES):
        if arch not in curves:
            continue
        scores = curves[arch]
        extra = f", {failed[arch]} failed" if failed.get(arch) else ""
        taus = np.unique(np.concatenate([[0.0, 1.0], np.clip(scores, 0.0, 1.0)]))
        ax.plot(taus, reliability_curve(scores, taus), color=colors[k], lw=1.8,
                ls="--" if arch.endswith("feedback") else "-", drawstyle="steps-pre",
                label=f"{ARCHITECTURE_LABELS[arch]} (AURC {aurc(scores):.3f}, {len(scores)} trials{extra})")
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("satisfaction threshold τ (overall satisfaction S, 0-1)")
    ax.set_ylabel("reliability κ(τ): share of trials with S ≥ τ")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower left", fontsize="small", framealpha=0.85)
    fig.tight_layout()
    return fig


def _fmt_row(values: list[float | None], notes: list[str]) -> list[str]:
    present = [v for v in values if v is not None]
    best = max(present) if present else None
    out = []
    for v, note in zip(values, notes):
        if v is None:
            out.append("–")
            continue
        text = f"{v:.3f}"
        out.append((f"**{text}**" if v == best else text) + note)
    return out


def _table_header() -> list[str]:
    names = [ARCHITECTURE_LABELS[a] for a in ARCHITECTURES]
    return ["| Scale | Setting | " + " | ".join(names) + " | best possible S |",
            "|---|---|" + "---|" * len(names) + "---|"]


def _section(records: Sequence[dict], out_dir: Path, label: str) -> list[str]:
    from consensus.runs import plots

    cells = _cells(records)
    rows = [(sc, se) for sc in SCALES for se in SETTINGS if any((sc, se, a) in cells for a in ARCHITECTURES)]
    suffix = "" if not label else "_" + re.sub(r"[^A-Za-z0-9.=-]+", "_", label)
    ours, paper, figures = _table_header(), _table_header(), []
    sizes = sorted({len(v) for v in cells.values()})
    params = records[0]["params"]
    for scale, setting in rows:
        curves, failed, values, notes = {}, {}, [], []
        for arch in ARCHITECTURES:
            group = cells.get((scale, setting, arch), [])
            if not group:
                values.append(None)
                notes.append("")
                continue
            curves[arch] = [_score(r) for r in group]
            failed[arch] = sum(r.get("status") != "ok" for r in group)
            values.append(aurc(curves[arch]))
            notes.append(f" ({failed[arch]}/{len(group)} failed)" if failed[arch] else "")
        best = satisfaction(problem(scale, setting), best_allocation(problem(scale, setting)))
        head = f"| {scale.capitalize()} | {setting.capitalize()} | "
        ours.append(head + " | ".join(_fmt_row(values, notes)) + f" | {best:.3f} |")
        ref = PAPER_AURC[(scale, setting)]
        paper.append(head + " | ".join(_fmt_row(list(ref), [""] * len(ref))) + f" | {best:.3f} |")
        n_agents = params["num_agents"]
        title = (f"[Allocation] {scale} scale, {setting} resources: reliability\n"
                 f"N = {n_agents} agents, planner {params['planner']}{', ' + label if label else ''}")
        name = f"reliability_{scale}_{setting}{suffix}.png"
        plots.save_figure(reliability_figure(curves, failed, title=title), out_dir / name, svg=True)
        figures.append(f"![{scale} {setting}]({name})")
    trials = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    head = [f"### {label}", ""] if label else []
    return [*head,
            f"AURC (exact area under κ(τ) over τ in [0, 1] = mean of S clipped to [0, 1]; failed trials count as "
            f"S = 0), N = {params['num_agents']} agents, planner {params['planner']}, {trials} trials per cell; "
            "last column: the highest S any plan can reach.", "", *ours, "",
            "Paper 3, Table 2 (GPT-4o-mini) for the same rows:", "", *paper, "",
            *_behaviour(records), "", *figures, ""]


def _behaviour(records: Sequence[dict]) -> list[str]:
    """Per architecture: mean turns, agreement, agent/coordinator failures, over-allocation, LLM calls."""
    lines = ["| Architecture | trials ok | mean turns | agreed | agent failures / trial | coordinator failures "
             "/ trial | decisions over-allocated | LLM calls / trial |", "|---|---|---|---|---|---|---|---|"]
    for arch in ARCHITECTURES:
        ok = [r["result"] for r in records
              if r["params"]["architecture"] == arch and r.get("status") == "ok" and r.get("result")]
        total = sum(r["params"]["architecture"] == arch for r in records)
        if not total:
            continue
        if not ok:
            lines.append(f"| {ARCHITECTURE_LABELS[arch]} | 0/{total} | – | – | – | – | – | – |")
            continue
        mean = lambda key: float(np.mean([float(r[key]) for r in ok]))   # noqa: E731
        lines.append(f"| {ARCHITECTURE_LABELS[arch]} | {len(ok)}/{total} | {mean('turns'):.2f} | "
                     f"{mean('agreed'):.0%} | {mean('failures'):.2f} | {mean('coordinator_failures'):.2f} | "
                     f"{float(np.mean([r['over_allocated'] > 0 for r in ok])):.0%} | {mean('llm_calls'):.1f} |")
    return lines


def report(records: Sequence[dict], out_dir: Path) -> list[str]:
    """Write the kappa(tau) figures into ``out_dir``; return the markdown (module docstring)."""
    out_dir = Path(out_dir)
    records = [r for r in records if r.get("params")]
    if not records:
        return ["No trials."]
    groups = _variants(records)
    lines = ["Reliability κ(τ) and its area (AURC) per architecture, paper 3 Table 2 layout.", ""]
    for label in sorted(groups):
        lines += _section(groups[label], out_dir, label)
    return lines


STUDIES = [
    Study(name="allocation-reliability",
          description="Paper 3: reliability κ(τ) and AURC of 7 multi-agent architectures on resource allocation "
                      "(3 scales x equal/lack/excess)",
          defaults=DEFAULTS, default_sweep=DEFAULT_SWEEP, default_trials=DEFAULT_TRIALS, run_trial=run_trial,
          report=report, uses_llm=_uses_llm, validate=validate, llm_calls=_llm_calls, renamed=RENAMED),
]
