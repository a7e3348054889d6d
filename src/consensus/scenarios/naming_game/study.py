"""Paper 4's figures and Table S1 as experiment presets (``consensus experiment naming-game-...``).

One trial = one (policy, N) point: ``runs`` independent populations played by ``simulate.simulate`` with the
trial's seed (``runs`` defaults to the paper's 1000). A trial returns the policy's individual bias, the collective
bias (share of converged runs on word 0) with its SEM, the convergence share, the consensus-time histogram per
converged word and its mode, and (Fig. 1) a few trajectories plus the mean trajectory of each outcome.

``policy`` is ``memory_invariant:P`` (the SI's minimal naming game with a fixed bias P, ``policy.memory_invariant``),
``fixed_bias:P`` (q = P in every memory state: it never converges for 0 < P < 1), ``table:K`` (the K-th table
of the ``tables`` file, 0-based) or ``table:MODEL/WORD0,WORD1``. ``tables`` is a file ``policy.load_policies``
reads: the paper's ``q_dicts.zip`` (no pickle code runs) or a JSON export; without it the environment variable
``CONSENSUS_NAMING_TABLES`` is used; a table preset without either is one clear error.

Presets (defaults follow the paper; every parameter can be changed with --set/--sweep):

======================== ==========================================================================================
naming-game-trajectories Fig. 1: N = 24, the six panels (Llama and GPT on American/Mexican, White/African,
                         straight/gay), trajectories of word use, individual vs collective bias
naming-game-bias         Fig. 2: N = 24, all tables, individual vs collective bias per model, with the minimal
                         model's curve (``memory_invariant:P``, P = 0 … 1)
naming-game-size         Fig. 3: collective bias against N (22 sizes from 2 to 1000, log axis), every table
naming-game-time         Fig. 4: consensus-time distributions and their mode against N (GPT, White/African)
naming-game-meanfield    Table S1: first eigenvalues of the reduced Jacobian at both uniform fixed points of every
                         table (``meanfield.first_eigenvalues``) and the mean-field trajectory from empty memories
======================== ==========================================================================================
"""
from __future__ import annotations

import math
import os
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from consensus.errors import ConfigError
from consensus.experiments.study import Study, Trial, TrialContext
from consensus.scenarios.naming_game.config import NamingGameConfig

TABLES_ENV = "CONSENSUS_NAMING_TABLES"
SIZES = sorted({int(round(v)) for v in np.logspace(np.log10(2), 3, 22)} | {2, 1000})
FIG1_TABLES = ("llama31_70B/Mexican,American", "llama31_70B/African,White", "llama31_70B/gay,straight",
               "gpt-4o/Mexican,American", "gpt-4o/African,White", "gpt-4o/gay,straight")
MINIMAL_BIAS = [round(0.05 * i, 2) for i in range(21)]
MINIMAL = ("memory_invariant", "fixed_bias")    # policies drawn as the minimal model's curve, not as tables
TRAJECTORIES_KEPT = 10           # per outcome, in a Fig. 1 trial record

#: Table S1 of paper 4 as printed (3 s.f.): (model, word a, word b) -> (λ at consensus on a, λ at consensus on b).
#: Known misprints (docs/naming-game.md): Phi Black/White and straight/gay have the two values swapped; Qwen
#: old/young "-8.50" is -0.850; entries near -1 are ill-conditioned (meanfield.stability).
PAPER_TABLE_S1 = {
    ("QWQ_32B", "her", "his"): ("-0.543", "-0.101"),
    ("gpt-4o", "her", "his"): ("-0.766", "-0.615"),
    ("llama31_70B", "her", "his"): ("-0.234", "-0.202"),
    ("phi_4", "her", "his"): ("-0.933", "-0.553"),
    ("QWQ_32B", "straight", "gay"): ("-0.614", "0.0180"),
    ("gpt-4o", "straight", "gay"): ("-0.279", "-0.818"),
    ("llama31_70B", "straight", "gay"): ("0.255", "-0.060"),
    ("phi_4", "straight", "gay"): ("-0.845", "-0.987"),
    ("QWQ_32B", "he", "she"): ("-0.300", "-0.399"),
    ("gpt-4o", "he", "she"): ("-0.830", "-0.574"),
    ("llama31_70B", "he", "she"): ("0.057", "-0.183"),
    ("phi_4", "he", "she"): ("-0.904", "-0.966"),
    ("QWQ_32B", "Black", "White"): ("-0.419", "-0.577"),
    ("gpt-4o", "Black", "White"): ("-0.848", "-0.345"),
    ("llama31_70B", "Black", "White"): ("-0.195", "0.723"),
    ("phi_4", "Black", "White"): ("-0.662", "-0.550"),
    ("QWQ_32B", "less", "more"): ("-0.070", "-0.850"),
    ("gpt-4o", "less", "more"): ("-0.880", "-0.664"),
    ("llama31_70B", "less", "more"): ("0.207", "0.169"),
    ("phi_4", "less", "more"): ("-0.952", "-0.805"),
    ("QWQ_32B", "old", "young"): ("-8.50", "0.265"),
    ("gpt-4o", "old", "young"): ("-0.738", "-0.940"),
    ("llama31_70B", "old", "young"): ("-7.39e-16", "0.0481"),
    ("phi_4", "old", "young"): ("-0.591", "-0.952"),
    ("QWQ_32B", "White", "African"): ("-0.346", "-0.089"),
    ("gpt-4o", "White", "African"): ("-0.616", "-0.918"),
    ("llama31_70B", "White", "African"): ("0.433", "-0.453"),
    ("phi_4", "White", "African"): ("-0.423", "-0.507"),
    ("QWQ_32B", "American", "Mexican"): ("-0.0702", "-0.990"),
    ("gpt-4o", "American", "Mexican"): ("-0.384", "-0.399"),
    ("llama31_70B", "American", "Mexican"): ("0.297", "-0.294"),
    ("phi_4", "American", "Mexican"): ("-0.252", "-0.640"),
    ("QWQ_32B", "short", "tall"): ("-0.558", "-0.070"),
    ("gpt-4o", "short", "tall"): ("-0.904", "-0.530"),
    ("llama31_70B", "short", "tall"): ("-0.0706", "-0.276"),
    ("phi_4", "short", "tall"): ("-0.879", "-0.713"),
    ("QWQ_32B", "man", "woman"): ("-0.028", "-0.447"),
    ("gpt-4o", "man", "woman"): ("-0.135", "-0.498"),
    ("llama31_70B", "man", "woman"): ("0.255", "-0.252"),
    ("phi_4", "man", "woman"): ("-0.650", "-0.946"),
    ("QWQ_32B", "husband", "wife"): ("-4.58e-16", "-0.041"),
    ("gpt-4o", "husband", "wife"): ("-0.402", "-0.892"),
    ("llama31_70B", "husband", "wife"): ("0.092", "-2.39e-15"),
    ("phi_4", "husband", "wife"): ("-0.882", "-0.921"),
}

DEFAULTS = {
    "policy": "memory_invariant:0.5",   # memory_invariant:P | fixed_bias:P | table:K | table:MODEL/W0,W1
    "tables": "",                 # q_dicts.zip or JSON; "" = $CONSENSUS_NAMING_TABLES
    "num_agents": 24,             # N
    "memory": 5,                  # H of fixed-bias policies (a table brings its own)
    "runs": 1000,                 # populations per trial
    "max_population_rounds": 1000,
    "threshold": 0.98,
    "trajectory": False,
}


# ----------------------------------------------------------------------------------------------------- policies
def tables_path(params: dict) -> Path:
    path = params.get("tables") or os.environ.get(TABLES_ENV, "")
    if not path:
        raise ConfigError(f"policy {params['policy']!r} needs the q tables: --set tables=PATH (the paper's "
                          f"q_dicts.zip or a JSON export) or the environment variable {TABLES_ENV}")
    return Path(path).expanduser()


@lru_cache(maxsize=8)
def _tables(path: str, mtime: float) -> tuple:
    from consensus.scenarios.naming_game.policy import load_policies

    return tuple(load_policies(path))


def table_label(policy) -> str:
    model = policy.meta.get("model") or policy.name.split("/")[0]
    return f"{model}/{','.join(policy.words)}"


def resolve_policy(params: dict):
    """The ``policy.Policy`` of ``params["policy"]`` (ConfigError when it cannot be had)."""
    from consensus.scenarios.naming_game import policy as pol

    spec = str(params["policy"]).strip()
    kind, _, arg = spec.partition(":")
    if kind in ("fixed_bias", "memory_invariant"):
        try:
            p = float(arg)
        except ValueError:
            p = math.nan
        if not 0.0 <= p <= 1.0:
            raise ConfigError(f"policy {kind}:P needs P in [0, 1] (got {spec!r})")
        return (pol.fixed_bias if kind == "fixed_bias" else pol.memory_invariant)(p, int(params["memory"]))
    if kind == "table":
        path = tables_path(params)
        if not path.is_file():
            raise ConfigError(f"q tables not found: {path}")
        tables = _tables(str(path), path.stat().st_mtime)
        if arg.isdigit():
            k = int(arg)
            if not 0 <= k < len(tables):
                raise ConfigError(f"policy {spec!r}: {path} holds {len(tables)} tables (0..{len(tables) - 1})")
            return tables[k]
        found = [t for t in tables if table_label(t).lower() == arg.lower()]
        if not found:
            raise ConfigError(f"policy {spec!r}: no table {arg!r} in {path}; e.g. {table_label(tables[0])}")
        return found[0]
    raise ConfigError(f"unknown policy {spec!r}; valid: fixed_bias:P, memory_invariant:P, table:K, "
                      f"table:MODEL/WORD0,WORD1")


#: the study's parameters that are ``NamingGameConfig`` fields (the same names, meaning and bounds as ``consensus run
#: naming-game``); the policy is resolved per trial (``resolve_policy``: a study names tables by index or
#: model/words, not by path)
CONFIG_PARAMS = ("num_agents", "memory", "runs", "max_population_rounds", "threshold", "trajectory")
#: old parameter names (the config's, and the study's own former ``agents``) -> the new ones
RENAMED = {**NamingGameConfig.renamed_fields(), "agents": "num_agents"}


def _validate(params: dict) -> None:
    """The trial's game settings checked by the scenario's config class (``CONFIG_PARAMS``)."""
    NamingGameConfig.from_dict({key: params[key] for key in CONFIG_PARAMS})


# ----------------------------------------------------------------------------------------------------- trials
def run_trial(trial: Trial, ctx: TrialContext) -> dict:
    from consensus.scenarios.naming_game.policy import individual_bias, is_neutral
    from consensus.scenarios.naming_game.simulate import collective_bias, simulate

    p = trial.params
    policy = resolve_policy(p)
    res = simulate(policy.q, policy.H, int(p["num_agents"]), int(p["runs"]), trial.seed,
                   max_population_rounds=int(p["max_population_rounds"]),
                   threshold=float(p["threshold"]), trajectory=bool(p["trajectory"]))
    bias, sem, n_conv = collective_bias(res, 0)
    hist = {}
    for w in (0, 1):
        times = res.time[res.converged & (res.word == w)].astype(int)
        hist[str(w)] = np.bincount(times, minlength=0).tolist() if times.size else []
    all_times = res.time[res.converged]
    mode = int(np.bincount(all_times.astype(int)).argmax()) if all_times.size else None
    out = {"label": table_label(policy) if p["policy"].startswith("table") else p["policy"],
           "tables": str(tables_path(p)) if p["policy"].startswith("table") else "",
           "model": policy.meta.get("model", policy.source), "words": list(policy.words), "H": policy.H,
           "individual_bias": individual_bias(policy), "neutral": bool(is_neutral(policy)),
           "collective_bias": None if math.isnan(bias) else bias, "sem": None if math.isnan(sem) else sem,
           "converged": n_conv, "runs": res.runs, "time_hist": hist, "time_mode": mode,
           "time_mean": float(all_times.mean()) if all_times.size else None,
           "interactions": res.interactions, "elapsed_s": round(res.elapsed_s, 4)}
    if res.trajectory is not None:
        out["trajectories"] = _trajectory_summary(res)
    return out


def _trajectory_summary(res) -> dict:
    """Up to ``TRAJECTORIES_KEPT`` trajectories per outcome and the mean trajectory of each (NaN-padded rows)."""
    summary = {}
    for w in (0, 1):
        rows = res.trajectory[res.converged & (res.word == w)]
        if not len(rows):
            continue
        with np.errstate(all="ignore"):
            filled = np.where(np.isnan(rows), 1.0 - w, rows)       # a converged run stays at its word afterwards
            mean = filled.mean(axis=0)
        last = int(np.nanmax(res.time[res.converged & (res.word == w)]))
        summary[str(w)] = {"mean": [round(float(v), 4) for v in mean[: last + 1]],
                           "examples": [[None if np.isnan(v) else round(float(v), 4) for v in r[: last + 1]]
                                        for r in rows[:TRAJECTORIES_KEPT]]}
    return summary


def run_meanfield_trial(trial: Trial, ctx: TrialContext) -> dict:
    from consensus.scenarios.naming_game import meanfield
    from consensus.scenarios.naming_game.policy import individual_bias

    policy = resolve_policy(trial.params)
    first = meanfield.first_eigenvalues(policy)
    fp = meanfield.fixed_point(policy)
    traj = meanfield.integrate(policy, steps=int(trial.params["steps"]), dt=float(trial.params["dt"]))
    stride = max(1, len(traj.times) // 200)
    return {"label": table_label(policy) if trial.params["policy"].startswith("table") else trial.params["policy"],
            "model": policy.meta.get("model", policy.source), "words": list(policy.words),
            "individual_bias": individual_bias(policy),
            "eigenvalues": {w: float(v) for w, v in first.items()},
            "fixed_point_q_mean": float(fp.q_mean), "fixed_point_converged": bool(fp.converged),
            "trajectory": {"t": [float(v) for v in traj.times[::stride]],
                           "q_mean": [float(v) for v in traj.q_mean[::stride]]}}


# ----------------------------------------------------------------------------------------------------- reports
def _ok(records: Sequence[dict]) -> list[dict]:
    return [r for r in records if r.get("status") == "ok" and r.get("result")]


def _table_md(header: Sequence[str], rows: Sequence[Sequence]) -> list[str]:
    def cell(v) -> str:
        if v is None:
            return "—"
        if not isinstance(v, float):
            return str(v)
        text = f"{v:.3f}"
        return text[1:] if text == "-0.000" else text       # no "-0.000" for a tiny negative number
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows])


def report_bias(records: Sequence[dict], out: Path) -> list[str]:
    """Fig. 2 (and the bars of Fig. 1): collective vs individual bias per model, the minimal model as a line."""
    from consensus.runs import plots

    ok = _ok(records)
    tables = [r["result"] for r in ok if not r["params"]["policy"].startswith(MINIMAL)]
    minimal = sorted(((r["result"]["individual_bias"], r["result"]["collective_bias"]) for r in ok
                      if r["params"]["policy"].startswith(MINIMAL) and r["result"]["collective_bias"] is not None))
    lines = [f"{len(ok)} of {len(records)} trials ok; N = {sorted({r['params']['num_agents'] for r in ok})}, "
             f"{sorted({r['params']['runs'] for r in ok})} runs per point.", ""]
    rows = [(t["label"], t["individual_bias"], t["collective_bias"], t["sem"], f"{t['converged']}/{t['runs']}",
             "neutral" if t["neutral"] else "") for t in tables]
    lines += _table_md(("policy", "individual bias q(∅) (word 0)", "collective bias (word 0)", "SEM",
                        "converged", ""), rows) if rows else []
    fig = plots.new_figure(figsize=(6.5, 5.5))
    ax = fig.add_subplot(1, 1, 1)
    if minimal:
        ax.plot([m[0] for m in minimal], [m[1] for m in minimal], "k--", lw=1, label="minimal naming game")
    models = sorted({t["model"] for t in tables})
    for color, model in zip(plots.colors(max(len(models), 1)), models):
        pts = [(t["individual_bias"], t["collective_bias"]) for t in tables if t["model"] == model
               and t["collective_bias"] is not None]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=color, label=model, s=22)
    ax.axvline(0.5, color="grey", ls=":", lw=0.8)
    ax.set_xlabel("individual bias q(∅) (word 0)")
    ax.set_ylabel("collective bias (share of runs on word 0)")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    plots.save_figure(fig, out / "bias.png", svg=True)
    return lines + ["", "![individual vs collective bias](bias.png)"]


def report_size(records: Sequence[dict], out: Path) -> list[str]:
    """Fig. 3: collective bias toward each policy's strong word against N (log axis), one line per policy."""
    from consensus.runs import plots

    by = defaultdict(list)
    for r in _ok(records):
        by[r["result"]["label"]].append((r["params"]["num_agents"], r["result"]))
    fig = plots.new_figure(figsize=(8, 5.5))
    ax = fig.add_subplot(1, 1, 1)
    rows = []
    for color, (label, pts) in zip(plots.colors(max(len(by), 1)), sorted(by.items())):
        pts.sort(key=lambda p: p[0])
        biased = [(n, r["collective_bias"]) for n, r in pts if r["collective_bias"] is not None]
        if not biased:
            continue
        strong = 0 if biased[-1][1] >= 0.5 else 1              # the word the largest population prefers
        ys = [b if strong == 0 else 1.0 - b for _, b in biased]
        ax.plot([n for n, _ in biased], ys, "o-", ms=3, color=color, label=label, lw=1)
        words = pts[0][1]["words"]
        n_det = next((n for (n, _), y in zip(biased, ys) if all(v >= 0.995 for v in ys[ys.index(y):])), None)
        rows.append((label, words[strong], ys[0], ys[-1], n_det))
    ax.set_xscale("log")
    ax.set_xlabel("population size N")
    ax.set_ylabel("collective bias toward the strong word")
    ax.grid(alpha=0.3, which="both")
    if len(by) <= 12:
        ax.legend(fontsize=7)
    plots.save_figure(fig, out / "bias_vs_size.png", svg=True)
    return (_table_md(("policy", "strong word", "bias at smallest N", "bias at largest N",
                       "deterministic (≥ 0.995) from N"), rows) + ["", "![collective bias vs N](bias_vs_size.png)"])


def report_time(records: Sequence[dict], out: Path) -> list[str]:
    """Fig. 4: consensus-time PDFs per N and outcome, and the mode against N."""
    from consensus.runs import plots

    ok = sorted(_ok(records), key=lambda r: r["params"]["num_agents"])
    if not ok:
        return ["no finished trials"]
    fig = plots.new_figure(figsize=(4 * len(ok), 3.6))
    axes = fig.subplots(1, len(ok), squeeze=False)[0]
    rows = []
    for ax, r in zip(axes, ok):
        res = r["result"]
        for w, marker in (("0", "o"), ("1", "^")):
            h = np.asarray(res["time_hist"].get(w) or [], dtype=float)
            if h.sum():
                ts = np.nonzero(h)[0]
                ax.plot(ts, h[ts] / h.sum(), marker, ms=3, label=f"→ {res['words'][int(w)]}")
        ax.axvline(3, color="red", ls=":", lw=0.8)
        ax.set_title(f"N = {r['params']['num_agents']}, bias {res['collective_bias'] or 0:.3f}", fontsize=9)
        ax.set_xlabel("consensus time (population rounds)")
        ax.legend(fontsize=7)
        rows.append((r["params"]["num_agents"], res["collective_bias"], res["time_mode"], res["time_mean"],
                     f"{res['converged']}/{res['runs']}"))
    axes[0].set_ylabel("PDF")
    plots.save_figure(fig, out / "consensus_time.png", svg=True)
    return (_table_md(("N", "collective bias (word 0)", "mode (rounds)", "mean (rounds)", "converged"), rows)
            + ["", "![consensus-time distributions](consensus_time.png)"])


def report_trajectories(records: Sequence[dict], out: Path) -> list[str]:
    """Fig. 1: word-use trajectories (examples thin, outcome means thick) and the bias bars."""
    from consensus.runs import plots

    ok = [r for r in _ok(records) if r["result"].get("trajectories")]
    lines = report_bias(records, out)
    if not ok:
        return lines
    cols = min(3, len(ok))
    rows_n = math.ceil(len(ok) / cols)
    fig = plots.new_figure(figsize=(4.2 * cols, 3.4 * rows_n))
    axes = fig.subplots(rows_n, cols, squeeze=False)
    fig.subplots_adjust(hspace=0.5, wspace=0.3)
    for ax, r in zip(axes.flat, ok):
        res = r["result"]
        for w, color in (("0", "tab:blue"), ("1", "tab:orange")):
            tr = res["trajectories"].get(w)
            if not tr:
                continue
            for ex in tr["examples"]:
                ax.plot([np.nan if v is None else (v if w == "0" else 1 - v) for v in ex], color=color, lw=0.5,
                        alpha=0.5)
            mean = np.asarray(tr["mean"])
            ax.plot(mean if w == "0" else 1 - mean, color=color, lw=2, label=f"→ {res['words'][int(w)]}")
        ax.set_title(f"{res['label']} (q(∅) = {res['individual_bias']:.2f})", fontsize=9)
        ax.set_xlabel("population round")
        ax.set_ylabel("frequency of the final word")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
    plots.save_figure(fig, out / "trajectories.png", svg=True)
    return lines + ["", "![word competition](trajectories.png)"]


def report_meanfield(records: Sequence[dict], out: Path) -> list[str]:
    """Table S1 layout: the first eigenvalue at each uniform fixed point, per model and word pair."""
    from consensus.runs import plots

    ok = _ok(records)
    rows = []
    fig = plots.new_figure(figsize=(7, 4.5))
    ax = fig.add_subplot(1, 1, 1)
    for r in ok:
        res = r["result"]
        w0, w1 = res["words"]
        paper = PAPER_TABLE_S1.get((res["model"], w0, w1)) or PAPER_TABLE_S1.get((res["model"], w1, w0), ("", ""))
        if (res["model"], w1, w0) in PAPER_TABLE_S1:
            paper = paper[::-1]
        rows.append((res["model"], f"{w0}/{w1}", res["eigenvalues"].get(w0), paper[0] or None,
                     res["eigenvalues"].get(w1), paper[1] or None, res["fixed_point_q_mean"]))
        ax.plot(res["trajectory"]["t"], res["trajectory"]["q_mean"], lw=0.8)
    ax.set_xlabel("time (eq. 27 units)")
    ax.set_ylabel("mean-field frequency of word 0")
    ax.grid(alpha=0.3)
    plots.save_figure(fig, out / "meanfield.png", svg=True)
    note = ("A negative first eigenvalue: that consensus is stable. 'paper': Table S1 as printed (see "
            "docs/naming-game.md for its misprints).")
    return (_table_md(("model", "words (0/1)", "λ₁ at all-word-0", "paper", "λ₁ at all-word-1", "paper",
                       "q̄ at the fixed point"), rows) + ["", note, "", "![mean-field trajectories](meanfield.png)"])


# ----------------------------------------------------------------------------------------------------- presets
def _tables_sweep(n: int = 44) -> list[str]:
    return [f"table:{k}" for k in range(n)]


STUDIES = [
    Study("naming-game-trajectories", "paper 4 Fig. 1: word competition at N = 24 (trajectories, biases)",
          {**DEFAULTS, "trajectory": True}, {"policy": [f"table:{t}" for t in FIG1_TABLES]}, 1,
          run_trial, report_trajectories, validate=_validate, parallel_trial=True, renamed=RENAMED),
    Study("naming-game-bias", "paper 4 Fig. 2: individual vs collective bias at N = 24, every table + minimal model",
          dict(DEFAULTS), {"policy": _tables_sweep() + [f"memory_invariant:{p}" for p in MINIMAL_BIAS]}, 1,
          run_trial, report_bias, validate=_validate, parallel_trial=True, renamed=RENAMED),
    Study("naming-game-size", "paper 4 Fig. 3: collective bias against population size N (2 to 1000)",
          dict(DEFAULTS), {"policy": _tables_sweep(), "num_agents": SIZES}, 1, run_trial, report_size,
          validate=_validate, parallel_trial=True, renamed=RENAMED),
    Study("naming-game-time", "paper 4 Fig. 4: consensus-time distributions and their mode against N",
          {**DEFAULTS, "policy": "table:gpt-4o/African,White"}, {"num_agents": [24, 96, 384, 1536]}, 1,
          run_trial, report_time, validate=_validate, parallel_trial=True, renamed=RENAMED),
    Study("naming-game-meanfield", "paper 4 Table S1: mean-field stability of both consensus states per table",
          {**DEFAULTS, "steps": 1000, "dt": 1.0}, {"policy": _tables_sweep()}, 1, run_meanfield_trial,
          report_meanfield, validate=_validate, parallel_trial=True, renamed=RENAMED),
]
