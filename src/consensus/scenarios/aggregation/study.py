"""Paper 1 (Chen et al., "Multi-Agent Consensus Seeking via Large Language Models"), sections 2-3, as studies.

Presets (``STUDIES``): ``consensus-1d`` (Fig. 4), ``consensus-2d`` (Fig. 4 for positions in the plane),
``personalities`` (Figs. 6-7) and ``topologies`` (Figs. 8-9). Every trial is the paper's Algorithm 1 through
``consensus.scenarios.aggregation.headless.run_negotiation`` with planners from
``consensus.scenarios.aggregation.planners.factory.make_planner``
and a graph from ``consensus.graphs.topology.make_graph``:

* initial states: ``agents`` x ``dim`` draws from ``numpy.random.default_rng(trial.seed)``, uniform integers in
  ``[init_low, init_high]`` (both included; section 2: "randomly assigned a number between 0 to 100", and the
  paper's examples are integers: 39, 65, 87) or uniform reals with ``init_integer: false``. 2-D draws each axis
  the same way;
* ``rounds`` negotiation rounds (the paper plots 10); the LLM planner keeps its chat history with ``keep_history``
  (the paper's 1-D setting; its 2-D code kept none, so ``consensus-2d`` defaults to false);
* ``personalities``: comma-separated ``name`` or ``name*count`` (``stubborn*7,suggestible*3``); one entry is
  given to every agent, several must add up to ``agents`` (``agents: null`` = as many as listed). With a
  classical ``planner`` a stubborn/suggestible personality selects ``StubbornPlanner``/``SuggestiblePlanner``
  (the factory's rule), so the presets run offline as classical baselines; with ``llm`` it is the prompt text;
* ``topology``: ``TOPOLOGIES`` below. The paper's Fig. 8b ("agents 2 and 3 cannot exchange information") is the
  3-agent ``star`` around agent 0; Fig. 9a is ``leader_follower`` (leader 0); Fig. 9b's chain 1 -> 3 -> 2 is
  ``chain`` relabelled (agent i hears only agent i-1, agent 0 is the leader).

The LLM (``planner: llm``) is the runner's shared client ``ctx.llm``; each agent's planner is
``make_planner("llm", ..., client=ctx.llm, seed=trial.seed)`` (the runner derives per-call seeds), asked at the
trial's ``temperature`` parameter (the sweep axis of Fig. 4; the spec's ``llm.temperature`` is not used) with
the client's model and the spec's ``llm.max_tokens``; the agents of one round are asked concurrently. A reply
that could not be used is a fallback (the agent keeps its state): the trial's result is complete and carries
the counts in ``result["llm_fallbacks"]`` (``{reason: count}``), which makes the runner record it as failed
with its result kept; a trial in which *no* reply was usable raises ``TrialFailed``. For the classical
planners ``temperature`` has no effect (they are deterministic baselines).

A trial record (``run_trial``): ``states`` per round (rounded to 4 decimals; ``(R+1, n)`` in 1-D, ``(R+1, n, 2)`` in
2-D), ``spread`` per round (group diameter), ``initial_average``, ``final_value`` (centroid of the final states),
``bias`` = final_value - initial_average, ``final_spread``, ``converged``/``rounds_to_converge`` (spread
``< converge_tol`` to the end), ``root``/``root_initial``/``bias_to_root`` (graphs with a single leader),
``labels`` (one string per round, ``consensus.scenarios.aggregation.strategies.LABEL_CODES``), ``label_counts``,
``oscillation``/``reversals``, ``clustering``/``n_clusters``/``cluster_sizes`` (groups ``converge_tol`` apart),
``llm_calls``, ``parse_failures``, ``llm_fallbacks``. Rules of the labels, oscillation and
clustering: ``consensus.scenarios.aggregation.strategies``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from numbers import Integral, Real
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from consensus.scenarios.aggregation.config import PERSONALITIES
from consensus.errors import ConfigError
from consensus.experiments.study import LLM_FALLBACKS_KEY, Study, Trial, TrialContext, TrialFailed
from consensus.graphs.topology import Graph, make_graph
from consensus.scenarios.aggregation import strategies as st
from consensus.metrics.convergence import spread_series
from consensus.scenarios.aggregation.planners.factory import PLANNER_KINDS, make_planner
from consensus.llm.counters import add_counters, new_counters
from consensus.llm.styles import PROMPT_STYLES
from consensus.scenarios.aggregation.headless import run_negotiation

#: topology name -> (make_graph name, directed)
TOPOLOGIES = {"complete": ("complete", False), "star": ("star", False), "ring": ("ring", False),
              "line": ("line", False), "chain": ("line", True), "directed_ring": ("ring", True),
              "leader_follower": ("leader_follower", True)}
MAX_AGENTS = 100
MAX_ROUNDS = 1000
DECIMALS = 4           # states and spreads in trial records

COMMON_DEFAULTS: dict[str, Any] = {
    "planner": "average",         # llm | average | average_no_self | stubborn | suggestible
    "temperature": 0.7,           # LLM sampling temperature (no effect on classical planners)
    "agents": 4,                  # N; null = the number of listed personalities
    "rounds": 10,                 # negotiation rounds (Algorithm 1's n_r)
    "dim": 1,                     # 1 = numbers (sections 2-3), 2 = positions in the plane
    "init_low": 0.0,              # initial states: uniform in [init_low, init_high] per axis
    "init_high": 100.0,
    "init_integer": True,         # integers (the paper's examples) or reals
    "topology": "complete",       # see TOPOLOGIES
    "personalities": "none",      # "none" | "stubborn,suggestible" | "stubborn*7,suggestible*3" ...
    "keep_history": True,         # LLM keeps its chat history (paper 1-D); false = self-contained prompts
    "history_rounds": 0,          # remembered exchanges sent (0 = all of them, the paper's; bounded by the context)
    "prompt_style": "paper",      # paper | json | tools (consensus.llm.styles; docs/model-card.md)
    "parse_retries": 2,           # LLM re-asks after an unreadable reply
    "converge_tol": 1.0,          # converged: spread < this (state units); also the clustering gap
    "label_tol": 0.5,             # strategy labels and oscillation: |state - candidate| <= this
    "min_reversals": 2,           # an agent oscillates with at least this many direction reversals
}


# ---------------------------------------------------------------------------------------------
# parameters
@dataclass(frozen=True)
class Setup:
    """Validated parameters of one trial."""
    planner: str
    dim: int
    n: int
    rounds: int
    temperature: float
    personalities: tuple[str, ...]
    graph: Graph
    init_low: float
    init_high: float
    init_integer: bool
    memory: bool
    history_rounds: int
    prompt_style: str
    parse_retries: int
    converge_tol: float
    label_tol: float
    min_reversals: int


def _int(params: dict, key: str, lo: int, hi: int) -> int:
    v = params[key]
    if isinstance(v, bool) or not isinstance(v, Integral) or not lo <= v <= hi:
        raise ConfigError(f"{key} must be an integer in [{lo}, {hi}] (got {v!r})")
    return int(v)


def _num(params: dict, key: str, lo: float, hi: float, *, open_low: bool = False) -> float:
    v = params[key]
    ok = not isinstance(v, bool) and isinstance(v, Real) and np.isfinite(v)
    if not ok or not (lo < v if open_low else lo <= v) or v > hi:
        raise ConfigError(f"{key} must be a number in {'(' if open_low else '['}{lo}, {hi}] (got {v!r})")
    return float(v)


def _bool(params: dict, key: str) -> bool:
    v = params[key]
    if not isinstance(v, (bool, np.bool_)):
        raise ConfigError(f"{key} must be true or false (got {v!r})")
    return bool(v)


def parse_personalities(text: Any, agents: Any) -> tuple[str, ...]:
    """``"stubborn*7,suggestible*3"`` -> 10 names; one entry is repeated for all ``agents`` (module docstring)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"personalities must be a string like 'stubborn,suggestible' (got {text!r})")
    names: list[str] = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*([a-z_]+)\s*(?:\*\s*(\d+)\s*)?", item)
        if m is None or m.group(1) not in PERSONALITIES or (m.group(2) is not None and int(m.group(2)) < 1):
            raise ConfigError(f"personalities: bad entry {item.strip()!r}; use NAME or NAME*COUNT with NAME one of "
                              f"{', '.join(PERSONALITIES)}")
        names += [m.group(1)] * int(m.group(2) or 1)
    if agents is None:
        if len(names) < 2:
            raise ConfigError(f"agents is null, so personalities must list >= 2 agents (got {text!r})")
        return tuple(names)
    n = _int({"agents": agents}, "agents", 2, MAX_AGENTS)
    if len(names) == 1:
        return tuple(names * n)
    if len(names) != n:
        raise ConfigError(f"personalities {text!r} lists {len(names)} agents but agents = {n}")
    return tuple(names)


@lru_cache(maxsize=256)
def _graph(topology: str, n: int) -> Graph:
    name, directed = TOPOLOGIES[topology]
    return make_graph(name, n, directed=directed)


def setup(params: dict) -> Setup:
    """Validate a trial's parameters (``ConfigError`` with one clear message) and build its graph."""
    missing = sorted(set(COMMON_DEFAULTS) - set(params))
    if missing:
        raise ConfigError(f"missing parameter(s): {', '.join(missing)}")
    planner = params["planner"]
    if planner not in PLANNER_KINDS:
        raise ConfigError(f"unknown planner {planner!r}; valid: {', '.join(PLANNER_KINDS)}")
    topology = params["topology"]
    if topology not in TOPOLOGIES:
        raise ConfigError(f"unknown topology {topology!r}; valid: {', '.join(TOPOLOGIES)}")
    personalities = parse_personalities(params["personalities"], params["agents"])
    lo, hi = _num(params, "init_low", -1e6, 1e6), _num(params, "init_high", -1e6, 1e6)
    if not lo < hi:
        raise ConfigError(f"init_low must be below init_high (got {lo} and {hi})")
    if _bool(params, "init_integer") and np.ceil(lo) > np.floor(hi):
        raise ConfigError(f"init_integer is true but there is no integer in [init_low, init_high] = [{lo}, {hi}]")
    return Setup(planner=planner, dim=_int(params, "dim", 1, 2), n=len(personalities),
                 rounds=_int(params, "rounds", 1, MAX_ROUNDS), temperature=_num(params, "temperature", 0.0, 2.0),
                 personalities=personalities, graph=_graph(topology, len(personalities)),
                 init_low=lo, init_high=hi, init_integer=_bool(params, "init_integer"),
                 memory=_bool(params, "keep_history"), history_rounds=_int(params, "history_rounds", 0, MAX_ROUNDS),
                 prompt_style=_style(params["prompt_style"]),
                 parse_retries=_int(params, "parse_retries", 0, 10),
                 converge_tol=_num(params, "converge_tol", 0.0, 1e6, open_low=True),
                 label_tol=_num(params, "label_tol", 0.0, 1e6, open_low=True),
                 min_reversals=_int(params, "min_reversals", 1, MAX_ROUNDS))


def _style(value: Any) -> str:
    if value not in PROMPT_STYLES:
        raise ConfigError(f"prompt_style must be one of {', '.join(PROMPT_STYLES)} (got {value!r})")
    return value


def _validate(params: dict) -> None:
    setup(params)


def _uses_llm(params: dict) -> bool:
    return params.get("planner") == "llm"


def _llm_calls(params: dict) -> int:
    """LLM requests of one trial, parse retries aside: one per agent and round."""
    s = setup(params)
    return s.n * s.rounds if s.planner == "llm" else 0


# ---------------------------------------------------------------------------------------------
# one trial
def initial_states(s: Setup, seed: int) -> np.ndarray:
    """``(n, dim)`` initial states: seeded uniform integers (or reals) in ``[init_low, init_high]``."""
    rng = np.random.default_rng(seed)
    if s.init_integer:
        lo, hi = int(np.ceil(s.init_low)), int(np.floor(s.init_high))
        return rng.integers(lo, hi, size=(s.n, s.dim), endpoint=True).astype(float)
    return rng.uniform(s.init_low, s.init_high, size=(s.n, s.dim))


def _planners(s: Setup, ctx: TrialContext, seed: int) -> list:
    if s.planner != "llm":
        return [make_planner(s.planner, dim=s.dim, robot_id=i, personality=p, seed=seed)
                for i, p in enumerate(s.personalities)]
    return [make_planner("llm", dim=s.dim, robot_id=i, personality=p, client=ctx.llm, seed=seed, memory=s.memory,
                         temperature=s.temperature, max_tokens=int(ctx.llm_settings.get("max_tokens", 160)),
                         parse_retries=s.parse_retries, num_agents=s.n, style=s.prompt_style,
                         history_rounds=s.history_rounds)
            for i, p in enumerate(s.personalities)]


def run_trial(trial: Trial, ctx: TrialContext) -> dict:
    """One negotiation (Algorithm 1) and its outcome record (module docstring)."""
    s = setup(trial.params)
    planners = _planners(s, ctx, trial.seed)
    states, plan_log = run_negotiation(planners, initial_states(s, trial.seed), s.graph, s.rounds,
                                       max_workers=s.n if s.planner == "llm" else 1)
    held = np.zeros((s.rounds, s.n), bool)
    reasonings = [[""] * s.n for _ in range(s.rounds)]
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
    if s.planner == "llm" and held.all():
        raise TrialFailed(f"the LLM gave no usable reply in any of the {held.size} plans "
                          f"({counters['calls']} calls; fallbacks: {reasons})")
    result = outcome(s, states, reasonings, held)
    result.update(llm_calls=counters["calls"], parse_failures=counters["parse_failures"],
                  tool_errors=counters["tool_errors"], history_truncated=counters["history_truncated"])
    result[LLM_FALLBACKS_KEY] = reasons
    return result


def _rounded(a: np.ndarray) -> list:
    return np.round(a, DECIMALS).tolist()


def outcome(s: Setup, states: np.ndarray, reasonings: Sequence[Sequence[str]], held: np.ndarray) -> dict:
    """The JSON-able outcome of a finished negotiation ``states (R+1, n, d)``."""
    init_avg, final = states[0].mean(axis=0), states[-1].mean(axis=0)
    spreads = spread_series(states)
    labels = st.label_rounds(states, s.graph.adj, reasonings=reasonings, fallbacks=held, tol=s.label_tol)
    rev = st.reversals(states, s.label_tol)
    groups = st.clusters(states[-1], s.converge_tol)
    roots = s.graph.roots()
    root = roots[0] if len(roots) == 1 else None
    return {
        "n": s.n, "dim": s.dim, "personalities": list(s.personalities),
        "states": _rounded(states[:, :, 0] if s.dim == 1 else states),
        "spread": _rounded(spreads),
        "initial_average": init_avg.tolist(), "final_value": final.tolist(), "bias": (final - init_avg).tolist(),
        "bias_norm": float(np.linalg.norm(final - init_avg)),
        "final_spread": float(spreads[-1]),
        "converged": bool(spreads[-1] < s.converge_tol),
        "rounds_to_converge": st.rounds_to_converge(spreads, s.converge_tol),
        "root": root,
        "root_initial": None if root is None else states[0, root].tolist(),
        "bias_to_root": None if root is None else (final - states[0, root]).tolist(),
        "labels": st.encode_labels(labels), "label_counts": st.label_counts(labels),
        "oscillation": max(rev) >= s.min_reversals, "reversals": rev,
        "clustering": len(groups) >= 2, "n_clusters": len(groups), "cluster_sizes": [len(g) for g in groups],
    }


# ---------------------------------------------------------------------------------------------
# reports (figures are written lazily: matplotlib is imported only here)
_ORDER = ("agents", "temperature", "personalities", "topology", "planner", "dim", "rounds")


@dataclass
class Group:
    label: str                 # "agents=4, temperature=0.7" (the varying parameters), "all trials" if none vary
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
    keys = [k for k in ("planner", "rounds", "topology", "agents", "temperature", "dim")
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

    hues = _hue_split(groups, varying, "agents")
    colors = plots.colors(max(len(hues), 1))
    xs = sorted({g.params["agents"] for g in groups if g.params["agents"] is not None}) or [None]
    width = 0.8 / max(len(hues), 1)
    fig = plots.new_figure(figsize=(9, 5.5))
    ax = fig.add_subplot(1, 1, 1)
    rng = np.random.default_rng(0)          # jitter of the data dots only
    for h, (hue, gs) in enumerate(hues.items()):
        for g in gs:
            vals = np.asarray([_bias(r) for r in g.results], dtype=float)
            if len(vals) == 0:
                continue
            pos = xs.index(g.params["agents"]) + (h - (len(hues) - 1) / 2) * width
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

    hues = _hue_split(groups, varying, "agents")
    colors = plots.colors(max(len(hues), 1))
    fig = plots.new_figure(figsize=(8, 5))
    ax = fig.add_subplot(1, 1, 1)
    for h, (hue, gs) in enumerate(hues.items()):
        pts = [(g.params["agents"], np.asarray([_bias(r) for r in g.results], dtype=float), len(g.results))
               for g in gs if g.results and g.params["agents"] is not None]
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
    ax.axhline(groups[0].params["converge_tol"], color="0.4", ls=":", lw=1, label="convergence tolerance")
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
    return {**COMMON_DEFAULTS, **over}


STUDIES = [
    Study(name="consensus-1d",
          description="paper 1 Fig. 4: final consensus value vs initial average and its spread vs N (1-D)",
          defaults=_defaults(),
          default_sweep={"agents": [2, 4, 6, 8], "temperature": [0.0, 0.7]},
          default_trials=300, run_trial=run_trial,
          report=lambda records, out: report_consensus(records, out, "consensus-1d"),
          uses_llm=_uses_llm, validate=_validate, llm_calls=_llm_calls),
    Study(name="consensus-2d",
          description="paper 1 Fig. 4 for positions in the plane: consensus point vs initial centroid vs N",
          defaults=_defaults(dim=2, keep_history=False),
          default_sweep={"agents": [2, 4, 6, 8], "temperature": [0.0, 0.7]},
          default_trials=100, run_trial=run_trial,
          report=lambda records, out: report_consensus(records, out, "consensus-2d"),
          uses_llm=_uses_llm, validate=_validate, llm_calls=_llm_calls),
    Study(name="personalities",
          description="paper 1 Figs. 6-7: stubborn/suggestible pairs; 10 suggestible; 7 stubborn + 3 suggestible",
          defaults=_defaults(agents=None),
          default_sweep={"personalities": ["stubborn,suggestible", "suggestible,suggestible", "stubborn,stubborn",
                                           "suggestible*10", "stubborn*7,suggestible*3"]},
          default_trials=30, run_trial=run_trial, report=report_personalities,
          uses_llm=_uses_llm, validate=_validate, llm_calls=_llm_calls),
    Study(name="topologies",
          description="paper 1 Figs. 8-9: complete vs incomplete (star), leader-follower and chain, 3 agents",
          defaults=_defaults(agents=3),
          default_sweep={"topology": ["complete", "star", "leader_follower", "chain"]},
          default_trials=30, run_trial=run_trial, report=report_topologies,
          uses_llm=_uses_llm, validate=_validate, llm_calls=_llm_calls),
]
