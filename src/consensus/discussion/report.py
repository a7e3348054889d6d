"""Pieces of paper 2's result tables, shared by the scenarios' study reports.

Rows (Tables 1, 4, 5): Overall, then Diversity Low/Medium/High (the ``roles`` of a trial), then Volatility
Low/Moderate/High. Columns: per condition (``consensus.discussion.baselines.CONDITION_LABELS``), the scenario's
metrics. A cell is the mean over the ok trials it covers; "–" = no trial or no value. Table 6: one row per base
model, the main metric under explicit and implicit consensus.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from consensus.discussion.baselines import CONDITION_LABELS

LEVELS = {"roles": ("low", "medium", "high"), "volatility": ("low", "moderate", "high")}


def mean(values: Sequence[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def metric_cells(results: Sequence[dict], metrics: Sequence[tuple]) -> list[str]:
    """One formatted mean per metric ``(label, key[, digits])``."""
    return [fmt(mean([r.get(m[1]) for r in results]), m[2] if len(m) > 2 else 3) for m in metrics]


def table_rows() -> list[tuple[str, str, Callable[[dict], bool]]]:
    """(row label, level, which results) of the paper's tables: Overall, Diversity and Volatility levels."""
    rows = [("**Overall**", "–", lambda r: True)]
    for axis, label in (("roles", "**Diversity**"), ("volatility", "**Volatility**")):
        for k, level in enumerate(LEVELS[axis]):
            rows.append((label if k == 0 else "", level.capitalize(),
                         lambda r, axis=axis, level=level: r.get(axis) == level))
    return rows


def paper_table(ok: Sequence[dict], columns: Sequence[str], metrics: Sequence[tuple],
                labels: dict | None = None) -> list[str]:
    """Markdown table: rows of ``table_rows``, for each condition in ``columns`` the ``metrics``."""
    labels = labels or CONDITION_LABELS
    by = {c: [r for r in ok if r["condition"] == c] for c in columns}
    head = "| Condition | Level | " + " | ".join(f"{labels[c]} {m[0]}" for c in columns for m in metrics)
    lines = [head + " |", "|---|---|" + "---:|" * (len(columns) * len(metrics))]
    for name, level, keep in table_rows():
        cells = [v for c in columns for v in metric_cells([r for r in by[c] if keep(r)], metrics)]
        lines.append(f"| {name} | {level} | " + " | ".join(cells) + " |")
    counts = ", ".join(f"{labels[c]} n={len(by[c])}" for c in columns)
    return lines + ["", f"Trials per column: {counts}."]


def model_table(ok: Sequence[dict], metric: tuple, scenario_label: str) -> list[str]:
    """Table 6's columns for one scenario: per model (``r["model"]``) the metric, explicit vs implicit, and the
    average row."""
    models = sorted({r.get("model") or "?" for r in ok if r["condition"] in ("explicit", "implicit")})
    label, key = metric[0], metric[1]
    digits = metric[2] if len(metric) > 2 else 3
    lines = [f"| Base model | {scenario_label}: {label} (Exp) | {scenario_label}: {label} (Imp) |",
             "|---|---:|---:|"]
    per_mode: dict[str, list] = {"explicit": [], "implicit": []}
    for model in models:
        cells = []
        for mode in ("explicit", "implicit"):
            value = mean([r.get(key) for r in ok if (r.get("model") or "?") == model and r["condition"] == mode])
            per_mode[mode].append(value)
            cells.append(fmt(value, digits))
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    if len(models) > 1:
        lines.append("| Average | " + " | ".join(fmt(mean(per_mode[m]), digits) for m in ("explicit", "implicit"))
                     + " |")
    return lines


def study_report(records: Sequence[dict], out_dir, *, heading: str, legend: str, table: str, metrics: Sequence[tuple],
                 model_metric: tuple, table6: str, series: str, figure: str, ylabel: str, fig_title: str) -> list[str]:
    """The report of a paper-2 discussion study (info-spread, public-goods): the ok trials, the paper's table
    (explicit vs implicit), implicit vs the section 4.4 baselines, Table 6's columns ``table6`` for
    ``model_metric``, and the per-round band figure of ``series`` per condition (``figure``.png)."""
    from pathlib import Path

    from consensus.discussion.baselines import CONDITIONS
    from consensus.discussion.plots import plot_rounds_band

    ok = [r["result"] for r in records if r.get("status") == "ok" and r.get("result")]
    lines = [heading, ""]
    if not ok:
        return lines + [f"No successful trial ({len(records)} recorded)."]
    planners = sorted({r["planner"] for r in ok})
    lines += [f"{len(ok)} ok trials of {len(records)}; planner: {', '.join(planners)}. {legend}", "",
              f"{table}: explicit vs implicit consensus.", "", *paper_table(ok, ("explicit", "implicit"), metrics), "",
              "Implicit consensus vs the baselines (section 4.4):", "",
              *paper_table(ok, ("implicit", "no_diversity", "no_interaction", "random", "single_llm"), metrics), "",
              f"Table 6, {table6} columns (one row per base model; heuristic/random teams are named by their "
              "planner):", "", *model_table(ok, model_metric, table6), ""]
    groups = {CONDITION_LABELS[c]: [r["series"][series] for r in ok if r["condition"] == c] for c in CONDITIONS}
    plot_rounds_band({k: v for k, v in groups.items() if v}, Path(out_dir) / f"{figure}.png", ylabel=ylabel,
                     ylim=(-0.02, 1.02), title=fig_title)
    return lines + [f"![{series} per round]({figure}.png)"]
