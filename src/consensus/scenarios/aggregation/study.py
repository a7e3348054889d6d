"""Paper 1 (Chen et al., "Multi-Agent Consensus Seeking via Large Language Models"), sections 2-3, as studies.

Presets (``STUDIES``): ``consensus-1d`` (Fig. 4), ``consensus-2d`` (Fig. 4 for positions in the plane),
``personalities`` (Figs. 6-7) and ``topologies`` (Figs. 8-9). A trial's parameters are the fields of
``consensus.scenarios.aggregation.config.NegotiationConfig`` (``DEFAULTS``; the same names and checks as the other
scenarios': ``num_agents``, ``llm_temperature``, ``converge_tol_m``, ...; an old name, ``RENAMED``, is refused
naming the new). Every trial is the paper's Algorithm 1 through
``consensus.scenarios.aggregation.headless.run_negotiation`` with planners from
``consensus.scenarios.aggregation.planners.factory.make_planner`` and a graph from
``consensus.graphs.topology.make_graph``:

* initial states: ``num_agents`` x ``dim`` draws from ``numpy.random.default_rng(trial.seed)``, uniform integers in
  ``[init_low, init_high]`` (both included; section 2: "randomly assigned a number between 0 to 100", and the
  paper's examples are integers: 39, 65, 87) or uniform reals with ``init_integer: false``. 2-D draws each axis
  the same way;
* ``rounds`` negotiation rounds (the paper plots 10); the LLM planner keeps its chat history with ``keep_history``
  (the paper's 1-D setting; its 2-D code kept none, so ``consensus-2d`` defaults to false);
* ``personalities``: comma-separated ``name`` or ``name*count`` (``stubborn*7,suggestible*3``); one entry is
  given to every agent, several must add up to ``num_agents`` (``num_agents: null`` = as many as listed). With a
  classical ``planner`` a stubborn/suggestible personality selects ``StubbornPlanner``/``SuggestiblePlanner``
  (the factory's rule), so the presets run offline as classical baselines; with ``llm`` it is the prompt text;
* ``topology``: ``config.NEGOTIATION_TOPOLOGIES``. The paper's Fig. 8b ("agents 2 and 3 cannot exchange
  information") is the 3-agent ``star`` around agent 0; Fig. 9a is ``leader_follower`` (leader 0); Fig. 9b's
  chain 1 -> 3 -> 2 is ``chain`` relabelled (agent i hears only agent i-1, agent 0 is the leader).

The LLM (``planner: llm``) is the runner's shared client ``ctx.llm``; each agent's planner is
``make_planner("llm", ..., client=ctx.llm, seed=trial.seed)`` (the runner derives per-call seeds), asked at the
trial's ``llm_temperature`` parameter (the sweep axis of Fig. 4; the spec's ``llm.temperature`` is not used) with
the client's model and the spec's ``llm.max_tokens``; the agents of one round are asked concurrently. A reply
that could not be used is a fallback (the agent keeps its state): the trial's result is complete and carries
the counts in ``result["llm_fallbacks"]`` (``{reason: count}``), which makes the runner record it as failed
with its result kept; a trial in which *no* reply was usable raises ``TrialFailed``. For the classical
planners ``llm_temperature`` has no effect (they are deterministic baselines).

A trial record (``run_trial``): ``states`` per round (rounded to 4 decimals; ``(R+1, n)`` in 1-D, ``(R+1, n, 2)`` in
2-D), ``spread`` per round (group diameter), ``initial_average``, ``final_value`` (centroid of the final states),
``bias`` = final_value - initial_average, ``final_spread``, ``converged``/``rounds_to_converge`` (spread
``< converge_tol_m`` to the end), ``root``/``root_initial``/``bias_to_root`` (graphs with a single leader),
``labels`` (one string per round, ``consensus.scenarios.aggregation.strategies.LABEL_CODES``), ``label_counts``,
``oscillation``/``reversals``, ``clustering``/``n_clusters``/``cluster_sizes`` (groups ``converge_tol_m`` apart),
``llm_calls``, ``parse_failures``, ``llm_fallbacks``. Rules of the labels, oscillation and
clustering: ``consensus.scenarios.aggregation.strategies``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from consensus.experiments.study import LLM_FALLBACKS_KEY, Study, Trial, TrialContext, TrialFailed, config_params
from consensus.scenarios.aggregation import strategies as st
from consensus.scenarios.aggregation.config import NegotiationConfig, parse_personalities  # noqa: F401 (re-export)
from consensus.metrics.convergence import spread_series
from consensus.scenarios.aggregation.planners.factory import make_planner
from consensus.llm.counters import add_counters, new_counters
from consensus.scenarios.aggregation.headless import run_negotiation

DECIMALS = 4           # states and spreads in trial records

#: every NegotiationConfig field with its default, but the trial's seed and run directory and the LLM transport
#: (the spec's llm: block): ``consensus.experiments.study.config_params``; the LLM's temperature stays a trial
#: parameter (the sweep axis of Fig. 4)
DEFAULTS: dict[str, Any] = config_params(NegotiationConfig, keep=("llm_temperature",))


# ---------------------------------------------------------------------------------------------
# parameters
def negotiation_config(params: dict, seed: int = 0, llm_settings: dict | None = None) -> NegotiationConfig:
    """The validated, resolved ``NegotiationConfig`` of one trial (``ConfigError`` with one clear message; an old
    parameter name is refused naming the new one): the trial's ``params`` and ``seed``, and the spec's
    ``llm.max_tokens``. The LLM temperature is the trial's ``llm_temperature``, not the spec's ``llm.temperature``."""
    data = {**params, "seed": seed}
    max_tokens = (llm_settings or {}).get("max_tokens")
    if max_tokens is not None:
        data["llm_max_tokens"] = max_tokens
    return NegotiationConfig.from_dict(data, source="negotiation").resolved()


def _validate(params: dict) -> None:
    negotiation_config(params)


def _uses_llm(params: dict) -> bool:
    return params.get("planner") == "llm"


def _llm_calls(params: dict) -> int:
    """LLM requests of one trial, parse retries aside: one per agent and round."""
    cfg = negotiation_config(params)
    return cfg.num_agents * cfg.rounds if cfg.uses_llm() else 0


# ---------------------------------------------------------------------------------------------
# one trial
def initial_states(cfg: NegotiationConfig, seed: int) -> np.ndarray:
    """``(n, dim)`` initial states of a resolved config: seeded uniform integers (or reals) in
    ``[init_low, init_high]``."""
    rng = np.random.default_rng(seed)
    if cfg.init_integer:
        lo, hi = int(np.ceil(cfg.init_low)), int(np.floor(cfg.init_high))
        return rng.integers(lo, hi, size=(cfg.num_agents, cfg.dim), endpoint=True).astype(float)
    return rng.uniform(cfg.init_low, cfg.init_high, size=(cfg.num_agents, cfg.dim))


def _planners(cfg: NegotiationConfig, ctx: TrialContext, seed: int) -> list:
    personalities = cfg.agent_personalities()
    if not cfg.uses_llm():
        return [make_planner(cfg.planner, dim=cfg.dim, robot_id=i, personality=p, seed=seed)
                for i, p in enumerate(personalities)]
    return [make_planner("llm", dim=cfg.dim, robot_id=i, personality=p, client=ctx.llm, seed=seed,
                         memory=cfg.keep_history, temperature=cfg.llm_temperature, max_tokens=cfg.llm_max_tokens,
                         parse_retries=cfg.parse_retries, num_agents=cfg.num_agents, style=cfg.prompt_style,
                         history_rounds=cfg.history_rounds)
            for i, p in enumerate(personalities)]


def run_trial(trial: Trial, ctx: TrialContext) -> dict:
    """One negotiation (Algorithm 1) and its outcome record (module docstring)."""
    cfg = negotiation_config(trial.params, trial.seed, ctx.llm_settings)
    n, rounds = cfg.num_agents, cfg.rounds
    planners = _planners(cfg, ctx, trial.seed)
    states, plan_log = run_negotiation(planners, initial_states(cfg, trial.seed), cfg.graph(), rounds,
                                       max_workers=n if cfg.uses_llm() else 1)
    held = np.zeros((rounds, n), bool)
    reasonings = [[""] * n for _ in range(rounds)]
    reasons: dict[str, int] = {}
    for e in plan_log:
        reasonings[e["round"]][e["robot"]] = e["reasoning"]
        if e["fallback"]:
            held[e["round"], e["robot"]] = True
            reasons[e["fallback_reason"]] = reasons.get(e["fallback_reason"], 0) + 1
    counters = new_counters()
    for p in planners:
        if hasattr(p, "counters"):
            add_counters(counters, p.counters())
    if cfg.uses_llm() and held.all():
        raise TrialFailed(f"the LLM gave no usable reply in any of the {held.size} plans "
                          f"({counters['calls']} calls; fallbacks: {reasons})")
    result = outcome(cfg, states, reasonings, held)
    result.update(llm_calls=counters["calls"], parse_failures=counters["parse_failures"],
                  tool_errors=counters["tool_errors"], history_truncated=counters["history_truncated"])
    result[LLM_FALLBACKS_KEY] = reasons
    return result


def _rounded(a: np.ndarray) -> list:
    return np.round(a, DECIMALS).tolist()


def outcome(cfg: NegotiationConfig, states: np.ndarray, reasonings: Sequence[Sequence[str]], held: np.ndarray) -> dict:
    """The JSON-able outcome of a finished negotiation ``states (R+1, n, d)`` of a resolved config."""
    init_avg, final = states[0].mean(axis=0), states[-1].mean(axis=0)
    spreads = spread_series(states)
    graph = cfg.graph()
    labels = st.label_rounds(states, graph.adj, reasonings=reasonings, fallbacks=held, tol=cfg.label_tol)
    rev = st.reversals(states, cfg.label_tol)
    groups = st.clusters(states[-1], cfg.converge_tol_m)
    roots = graph.roots()
    root = roots[0] if len(roots) == 1 else None
    return {
        "n": cfg.num_agents, "dim": cfg.dim, "personalities": list(cfg.agent_personalities()),
        "states": _rounded(states[:, :, 0] if cfg.dim == 1 else states),
        "spread": _rounded(spreads),
        "initial_average": init_avg.tolist(), "final_value": final.tolist(), "bias": (final - init_avg).tolist(),
        "bias_norm": float(np.linalg.norm(final - init_avg)),
        "final_spread": float(spreads[-1]),
        "converged": bool(spreads[-1] < cfg.converge_tol_m),
        "rounds_to_converge": st.rounds_to_converge(spreads, cfg.converge_tol_m),
        "root": root,
        "root_initial": None if root is None else states[0, root].tolist(),
        "bias_to_root": None if root is None else (final - states[0, root]).tolist(),
        "labels": st.encode_labels(labels), "label_counts": st.label_counts(labels),
        "oscillation": max(rev) >= cfg.min_reversals, "reversals": rev,
        "clustering": len(groups) >= 2, "n_clusters": len(groups), "cluster_sizes": [len(g) for g in groups],
    }


# ---------------------------------------------------------------------------------------------
# reports (figures are written lazily: matplotlib is imported only here)
_ORDER = ("num_agents", "llm_temperature", "personalities", "topology", "planner", "dim", "rounds")


@dataclass
class Group:
    label: str                 # "num_agents=4, llm_temperature=0.7" (the varying parameters), "all trials" if none vary
    params: dict               # the parameters of the first record
    results: list[dict]        # results of the ok trials, in trial-index order (what the statistics use)
    failed: int                # failed trials
    failed_results: list[dict]  # results kept in failed records (LLM fallbacks): counted, not in statistics


def group_records(records: Sequence[dict]) -> tuple[list[str], list[Group]]:
    """Group trial records by the parameters that vary between them; returns (varying keys, groups)."""
    values: dict[str, set] = {}
    for rec in records:
        for k, v in rec["params"].items():
            values.setdefault(k, set()).add(repr(v))
    varying = sorted((k for k, v in values.items() if len(v) > 1),
                     key=lambda k: (_ORDER.index(k) if k in _ORDER else len(_ORDER), k))
    by_key: dict[tuple, list[dict]] = {}
    for rec in sorted(records, key=lambda r: r.get("index", 0)):
        by_key.setdefault(tuple(repr(rec["params"][k]) for k in varying), []).append(rec)
    first_seen = {key: pos for pos, key in enumerate(by_key)}
    groups = []
    for key in sorted(by_key, key=lambda key: tuple(_sort_key(v, first_seen[key]) for v in key)):
        recs = by_key[key]
        p = recs[0]["params"]
        label = ", ".join(f"{k}={p[k]}" for k in varying) or "all trials"
        groups.append(Group(label, p, [r["result"] for r in recs if r["status"] == "ok" and r["result"]],
                            sum(r["status"] != "ok" for r in recs),
                            [r["result"] for r in recs if r["status"] != "ok" and r["result"]]))
    return varying, groups


def _sort_key(text: str, seen: int) -> tuple:
    """Numbers in numeric order, anything else in order of first appearance (the sweep's order)."""
    try:
        return (0, float(text))
    except ValueError:
        return (1, float(seen))


def _q(values: Sequence[float]) -> str:
    """'median (IQR lo to hi)' or an em dash."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if len(v) == 0:
        return "—"
    lo, med, hi = np.percentile(v, [25, 50, 75])
    return f"{med:.3g} ({lo:.3g} to {hi:.3g})"


def _pct(flags: Sequence[bool]) -> str:
    return f"{100.0 * np.mean(flags):.0f} %" if len(flags) else "—"


def _bias(r: dict) -> float:
    """Signed bias in 1-D, its norm in 2-D."""
    return r["bias"][0] if r["dim"] == 1 else r["bias_norm"]


def _root_bias(r: dict) -> float:
    """Final value minus the leader's initial state: signed in 1-D, its norm in 2-D."""
    return r["bias_to_root"][0] if r["dim"] == 1 else float(np.linalg.norm(r["bias_to_root"]))


def outcome_table(groups: Sequence[Group]) -> list[str]:
    """Markdown table: trials, convergence, rounds to converge, bias, spread, oscillation, clustering, LLM use."""
    lines = ["| group | trials ok / failed | converged | rounds to converge, median (IQR) | final − initial "
             "average, median (IQR) | final − leader's initial, median (IQR) | final spread, median (IQR) | "
             "oscillation | clustering | clusters, median | LLM calls | fallbacks |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for g in groups:
        rs, every = g.results, g.results + g.failed_results
        lines.append(
            f"| {g.label} | {len(rs)} / {g.failed} | {_pct([r['converged'] for r in rs])} | "
            f"{_q([r['rounds_to_converge'] for r in rs])} | {_q([_bias(r) for r in rs])} | "
            f"{_q([_root_bias(r) for r in rs if r['bias_to_root'] is not None])} | "
            f"{_q([r['final_spread'] for r in rs])} | {_pct([r['oscillation'] for r in rs])} | "
            f"{_pct([r['clustering'] for r in rs])} | {_q([r['n_clusters'] for r in rs])} | "
            f"{sum(r['llm_calls'] for r in every)} | "
            f"{sum(sum(r[LLM_FALLBACKS_KEY].values()) for r in every)} |")
    return lines


def label_shares(results: Sequence[dict]) -> tuple[dict[str, float], int, dict[str, int]]:
    """(share of each paper strategy among strategy-labelled rounds, that count, all label counts)."""
    total = dict.fromkeys(st.LABELS, 0)
    for r in results:
        for k, v in r["label_counts"].items():
            total[k] += v
    n = sum(total[k] for k in st.STRATEGIES)
    return {k: (total[k] / n if n else 0.0) for k in st.STRATEGIES}, n, total


def label_table(groups: Sequence[Group]) -> list[str]:
    head = " | ".join(k.replace("_", " ") for k in st.STRATEGIES)
    lines = [f"| group | {head} | strategy rounds | agreed rounds | fallback rounds |",
             "|---|" + "---|" * (len(st.STRATEGIES) + 3)]
    for g in groups:
        shares, n, total = label_shares(g.results)
        cells = " | ".join(f"{100 * shares[k]:.1f} %" for k in st.STRATEGIES)
        lines.append(f"| {g.label} | {cells} | {n} | {total['agreed']} | {total['fallback']} |")
    return lines


def _subtitle(groups: Sequence[Group], varying: Sequence[str]) -> str:
    """The fixed parameters worth naming on a figure."""
    p = groups[0].params
    keys = [k for k in ("planner", "rounds", "topology", "num_agents", "llm_temperature", "dim")
            if k not in varying and p.get(k) is not None]
    return ", ".join(f"{k}={p[k]}" for k in keys)


def _hue_split(groups: Sequence[Group], varying: Sequence[str], x_key: str) -> dict[str, list[Group]]:
    """Groups by every varying parameter except ``x_key`` (the hue)."""
    hues: dict[str, list[Group]] = {}
    for g in groups:
        hue = ", ".join(f"{k}={g.params[k]}" for k in varying if k != x_key) or "all trials"
        hues.setdefault(hue, []).append(g)
    return hues


def _bias_name(groups: Sequence[Group]) -> str:
    two_d = any(r["dim"] == 2 for g in groups for r in g.results[:1])
    return "|final consensus point − initial centroid|" if two_d else "final consensus value − initial average"


def bias_box_figure(groups: Sequence[Group], varying: Sequence[str], title: str):
    """Paper 1 Fig. 4: box plot of final − initial average per N, one colour per hue (e.g. temperature)."""
    from consensus.runs import plots

    hues = _hue_split(groups, varying, "num_agents")
    colors = plots.colors(max(len(hues), 1))
    xs = sorted({g.params["num_agents"] for g in groups if g.params["num_agents"] is not None}) or [None]
    width = 0.8 / max(len(hues), 1)
    fig = plots.new_figure(figsize=(9, 5.5))
    ax = fig.add_subplot(1, 1, 1)
    rng = np.random.default_rng(0)          # jitter of the data dots only
    for h, (hue, gs) in enumerate(hues.items()):
        for g in gs:
            vals = np.asarray([_bias(r) for r in g.results], dtype=float)
            if len(vals) == 0:
                continue
            pos = xs.index(g.params["num_agents"]) + (h - (len(hues) - 1) / 2) * width
            ax.boxplot(vals, positions=[pos], widths=width * 0.8, patch_artist=True, showfliers=False,
                       boxprops={"facecolor": colors[h], "alpha": 0.35}, medianprops={"color": "k"})
            ax.plot(pos + rng.uniform(-width / 4, width / 4, len(vals)), vals, ".", color=colors[h], ms=2.5,
                    alpha=0.6)
            ax.annotate(f"n={len(vals)}", (pos, 1.0), xycoords=("data", "axes fraction"), ha="center",
                        va="bottom", fontsize=7)
        ax.plot([], [], "s", color=colors[h], alpha=0.5, label=hue)
    ax.axhline(0.0, color="0.5", lw=0.8, ls="--")
    ax.set_xticks(range(len(xs)), [str(x) for x in xs])
    ax.set_xlabel("number of agents N")
    ax.set_ylabel(f"{_bias_name(groups)} [state units]")
    ax.set_title(f"{title}\n({_subtitle(groups, varying)}; n = trials per box, dots = trials)", fontsize=10,
                 pad=14)
    ax.legend(loc="best", fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def bias_spread_figure(groups: Sequence[Group], varying: Sequence[str], title: str):
    """How widely the final consensus value scatters over trials vs N: std and IQR of the bias, per hue."""
    from consensus.runs import plots

    hues = _hue_split(groups, varying, "num_agents")
    colors = plots.colors(max(len(hues), 1))
    fig = plots.new_figure(figsize=(8, 5))
    ax = fig.add_subplot(1, 1, 1)
    for h, (hue, gs) in enumerate(hues.items()):
        pts = [(g.params["num_agents"], np.asarray([_bias(r) for r in g.results], dtype=float), len(g.results))
               for g in gs if g.results and g.params["num_agents"] is not None]
        if not pts:
            continue
        x = [p[0] for p in pts]
        ax.plot(x, [float(np.std(p[1])) for p in pts], "-o", color=colors[h],
                label=f"{hue}: standard deviation (trials per N: {', '.join(str(p[2]) for p in pts)})")
        ax.plot(x, [float(np.subtract(*np.percentile(p[1], [75, 25]))) for p in pts], "--s", color=colors[h],
                label=f"{hue}: interquartile range")
    ax.set_xlabel("number of agents N")
    ax.set_ylabel(f"spread over trials of {_bias_name(groups)} [state units]", fontsize="small")
    ax.set_title(f"{title}\n({_subtitle(groups, varying)})", fontsize=10)
    ax.legend(loc="best", fontsize="small")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0.0)
    fig.tight_layout()
    return fig


def label_share_figure(groups: Sequence[Group], varying: Sequence[str], title: str):
    """Stacked bars: share of each paper strategy among the strategy-labelled rounds of every group."""
    from consensus.runs import plots

    fig = plots.new_figure(figsize=(9, 1.2 + 0.45 * len(groups)))
    ax = fig.add_subplot(1, 1, 1)
    colors = plots.colors(len(st.STRATEGIES))
    left = np.zeros(len(groups))
    stats = [label_shares(g.results) for g in groups]
    for k, name in enumerate(st.STRATEGIES):
        share = np.array([100 * s[0][name] for s in stats])
        ax.barh(range(len(groups)), share, left=left, color=colors[k], label=name.replace("_", " "))
        left += share
    ax.set_yticks(range(len(groups)), [f"{g.label} ({s[1]} agent-rounds)" for g, s in zip(groups, stats)],
                  fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of strategy-labelled agent-rounds [%] (agreed and fallback rounds excluded)")
    ax.set_title(f"{title}\n({_subtitle(groups, varying)})", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    return fig


def spread_curve_figure(groups: Sequence[Group], varying: Sequence[str], title: str, floor: float = 1e-3):
    """Paper 1 Figs. 8-9 as curves: median group diameter per round with its IQR band, one line per group."""
    from consensus.runs import plots

    colors = plots.colors(max(len(groups), 1))
    fig = plots.new_figure(figsize=(8.5, 5))
    ax = fig.add_subplot(1, 1, 1)
    for k, g in enumerate(groups):
        if not g.results:
            continue
        s = np.maximum(np.asarray([r["spread"] for r in g.results], dtype=float), floor)
        lo, med, hi = np.percentile(s, [25, 50, 75], axis=0)
        rounds = np.arange(s.shape[1])
        ax.plot(rounds, med, "-o", ms=3, color=colors[k], label=f"{g.label} ({len(g.results)} trials)")
        ax.fill_between(rounds, lo, hi, color=colors[k], alpha=0.15)
    ax.axhline(groups[0].params["converge_tol_m"], color="0.4", ls=":", lw=1, label="convergence tolerance")
    ax.set_yscale("log")
    ax.set_xlabel("negotiation round")
    ax.set_ylabel(f"spread (max |state_i − state_j|) [state units, floor {floor:g}]")
    ax.set_title(f"{title}\n(median and interquartile band over trials; {_subtitle(groups, varying)})",
                 fontsize=10)
    ax.legend(loc="best", fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def outcome_rate_figure(groups: Sequence[Group], varying: Sequence[str], title: str):
    """Grouped bars: share of trials that converged, oscillated, clustered."""
    from consensus.runs import plots

    kinds = (("converged", "converged"), ("oscillation", "oscillation"), ("clustering", "clustering (≥ 2 groups)"))
    colors = plots.colors(len(kinds))
    fig = plots.new_figure(figsize=(9, 5))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / len(kinds)
    for k, (key, name) in enumerate(kinds):
        rates = [100 * np.mean([r[key] for r in g.results]) if g.results else 0.0 for g in groups]
        bars = ax.bar(np.arange(len(groups)) + (k - 1) * width, rates, width, color=colors[k], label=name)
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(range(len(groups)), [f"{g.label}\n({len(g.results)} trials)" for g in groups], fontsize="small",
                  rotation=15)
    ax.set_ylim(0, 108)
    ax.set_ylabel("share of trials [%]")
    ax.set_title(f"{title}\n({_subtitle(groups, varying)})", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def trajectory_figures(groups: Sequence[Group], out_dir: Path, prefix: str, title: str) -> list[str]:
    """One states-per-round figure (paper Figs. 6-9 style) of the first ok trial of every group."""
    from consensus.runs import plots

    names = []
    for g in groups:
        if not g.results:
            continue
        r = g.results[0]
        values = np.asarray(r["states"], dtype=float)
        values = values if r["dim"] == 1 else values[:, :, 0]
        notes = [[] if p == "none" else [p] for p in r["personalities"]]
        if r["root"] is not None:
            notes[r["root"]].append("leader")
        labels = [f"agent {i}" + (f" ({', '.join(note)})" if note else "") for i, note in enumerate(notes)]
        point = re.sub(r"\w+=", "", g.label)
        slug = re.sub(r"[^A-Za-z0-9]+", "_", point).strip("_") or "all"
        name = f"{prefix}_{slug}.png"
        fig = plots.rounds_figure(range(len(values)), values, labels=labels,
                                  title=f"{title}: {point}, {g.params['planner']} planner, first trial",
                                  ylabel="state" if r["dim"] == 1 else "x (first coordinate)")
        plots.save_figure(fig, out_dir / name, svg=True)
        names.append(name)
    return names


def _write(fig, out_dir: Path, name: str) -> str:
    from consensus.runs import plots

    plots.save_figure(fig, out_dir / name, svg=True)
    return name


def _figure_lines(names: Sequence[str]) -> list[str]:
    return [f"![{n}]({n})" for n in names]


#: how each prompt style departs from paper 1 (the report says it for the styles its LLM trials used)
STYLE_DEVIATIONS = {
    "paper": "the paper's prompts and free 'Reasoning:..., Position:...' format (a GBNF grammar forces the answer "
             "line on llama.cpp servers; the paper's model had none); with memory the whole chat history, as in "
             "the paper's 1-D code (exchanges left out to fit the context window are counted: history_truncated)",
    "json": "not the paper's format: a JSON schema ({reasoning <= 120 characters, position}) replaces the "
            "'Reasoning:..., Position:...' line",
    "tools": "not the paper's format: the robots are named in the prompt and the model answers by calling a tool "
             "(move_to_centroid, move_toward, move_to; distance_to), whose result the planner computes",
}


def style_lines(groups: Sequence[Group]) -> list[str]:
    """One line per prompt style the LLM trials used, saying how it departs from the paper."""
    styles = sorted({g.params.get("prompt_style", "paper") for g in groups if g.params.get("planner") == "llm"})
    return [f"Prompt style `{st_}`: {STYLE_DEVIATIONS.get(st_, 'unknown style')}." for st_ in styles]


def _header(study: str, groups: Sequence[Group]) -> list[str]:
    ok = sum(len(g.results) for g in groups)
    failed = sum(g.failed for g in groups)
    styles = style_lines(groups)
    return [f"Study `{study}`: {ok} trials ok, {failed} failed, {len(groups)} groups. Strategy labels, oscillation "
            "and clustering rules: `consensus.scenarios.aggregation.strategies` (docs/studies-consensus.md).", "",
            *([*styles, ""] if styles else [])]


def _tables(groups: Sequence[Group]) -> list[str]:
    return ["", "Outcomes per group (statistics over the ok trials; rounds to converge over the converged ones; "
            "failed trials only add to the LLM calls and fallbacks):", "", *outcome_table(groups), "",
            "Strategy-label shares per group (paper 1, section 3.1):", "", *label_table(groups)]


def report_consensus(records: Sequence[dict], out_dir: Path, study: str) -> list[str]:
    out_dir = Path(out_dir)
    varying, groups = group_records(records)
    if not groups:
        return [f"Study `{study}`: no trials."]
    names = [_write(bias_box_figure(groups, varying, "Final consensus value vs initial average (paper 1 Fig. 4)"),
                    out_dir, "fig4_bias_vs_agents.png"),
             _write(bias_spread_figure(groups, varying, "Scatter of the final consensus value over trials vs N"),
                    out_dir, "bias_spread_vs_agents.png"),
             _write(label_share_figure(groups, varying, "Strategy labels"), out_dir, "strategy_shares.png")]
    return [*_header(study, groups), *_figure_lines(names), *_tables(groups)]


def report_personalities(records: Sequence[dict], out_dir: Path) -> list[str]:
    out_dir = Path(out_dir)
    varying, groups = group_records(records)
    if not groups:
        return ["Study `personalities`: no trials."]
    names = trajectory_figures(groups, out_dir, "personalities", "Fig. 6-7")
    names += [_write(outcome_rate_figure(groups, varying, "Personalities: convergence, oscillation, clustering"),
                     out_dir, "personalities_outcomes.png"),
              _write(label_share_figure(groups, varying, "Strategy labels by personality mix"), out_dir,
                     "strategy_shares.png")]
    return [*_header("personalities", groups), *_figure_lines(names), *_tables(groups)]


def report_topologies(records: Sequence[dict], out_dir: Path) -> list[str]:
    out_dir = Path(out_dir)
    varying, groups = group_records(records)
    if not groups:
        return ["Study `topologies`: no trials."]
    names = [_write(spread_curve_figure(groups, varying, "Convergence by topology (paper 1 Figs. 8-9)"), out_dir,
                    "topologies_spread.png")]
    names += trajectory_figures(groups, out_dir, "topology", "Fig. 8-9")
    names.append(_write(label_share_figure(groups, varying, "Strategy labels by topology"), out_dir,
                        "strategy_shares.png"))
    return [*_header("topologies", groups), *_figure_lines(names), *_tables(groups)]


# ---------------------------------------------------------------------------------------------
def _defaults(**over: Any) -> dict[str, Any]:
    return {**DEFAULTS, **over}


#: the paper's Fig. 4 grid: N x the LLM's sampling temperature
FIG4_SWEEP = {"num_agents": [2, 4, 6, 8], "llm_temperature": [0.0, 0.7]}
_COMMON = dict(run_trial=run_trial, uses_llm=_uses_llm, validate=_validate, llm_calls=_llm_calls,
               renamed=NegotiationConfig.RENAMED)


STUDIES = [
    Study(name="consensus-1d",
          description="paper 1 Fig. 4: final consensus value vs initial average and its spread vs N (1-D)",
          defaults=_defaults(),
          default_sweep=dict(FIG4_SWEEP), default_trials=300,
          report=lambda records, out: report_consensus(records, out, "consensus-1d"), **_COMMON),
    Study(name="consensus-2d",
          description="paper 1 Fig. 4 for positions in the plane: consensus point vs initial centroid vs N",
          defaults=_defaults(dim=2, keep_history=False),
          default_sweep=dict(FIG4_SWEEP), default_trials=100,
          report=lambda records, out: report_consensus(records, out, "consensus-2d"), **_COMMON),
    Study(name="personalities",
          description="paper 1 Figs. 6-7: stubborn/suggestible pairs; 10 suggestible; 7 stubborn + 3 suggestible",
          defaults=_defaults(num_agents=None),
          default_sweep={"personalities": ["stubborn,suggestible", "suggestible,suggestible", "stubborn,stubborn",
                                           "suggestible*10", "stubborn*7,suggestible*3"]},
          default_trials=30, report=report_personalities, **_COMMON),
    Study(name="topologies",
          description="paper 1 Figs. 8-9: complete vs incomplete (star), leader-follower and chain, 3 agents",
          defaults=_defaults(num_agents=3),
          default_sweep={"topology": ["complete", "star", "leader_follower", "chain"]},
          default_trials=30, report=report_topologies, **_COMMON),
]
