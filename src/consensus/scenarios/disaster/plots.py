"""Figures of the disaster scenario (paper 2): one run's coverage and deviation over rounds, Fig. 3 (coverage over
rounds, implicit vs explicit, bands over seeds) and Fig. 5 (mean deviation vs coverage with a quadratic fit: the
inverted-U check).

Built on the Agg canvas like ``consensus.runs.plots`` (no pyplot; safe in worker threads). Every ``plot_*`` writes a
PNG and an SVG beside it and returns the PNG path. Rounds without an active disaster have no coverage (None): they
are gaps in the lines and left out of means.

Fig. 3 bands: the mean over runs per round and the band mean +- one standard deviation (clipped to [0, 1]); the
legend gives each group's run count. Fig. 5 fit: ordinary least squares ``cr = a d² + b d + c`` over all points
(``numpy.polyfit``, degree 2, needs at least 3 distinct deviations); the vertex is at ``d* = -b / (2a)``; the data
show an inverted U when ``a < 0`` and ``d*`` lies strictly inside the observed deviation range.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from consensus.runs.plots import new_figure, save_figure


def _series(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


# --- one run ---------------------------------------------------------------------------------------------------------
def run_figure(series: Mapping[str, Sequence], *, title: str = "") -> Figure:
    """Coverage CR_t (top) and mean deviation d̄(t) (bottom) over the rounds of one run."""
    cov = _series(series.get("coverage", []))
    dev = _series(series.get("deviation", []))
    rounds = np.arange(len(cov))
    fig = new_figure(figsize=(7, 5.5))
    ax1, ax2 = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
    ax1.plot(rounds, cov, "-o", ms=4, color="tab:blue")
    ax1.set_ylim(-0.05, 1.05)
    ax1.set_ylabel("coverage CR(t)")
    ax1.set_title(title or "Disaster response run")
    ax2.plot(np.arange(len(dev)), dev, "-o", ms=4, color="tab:orange")
    ax2.set_ylabel("mean deviation d̄(t) [cells]")
    ax2.set_xlabel("round")
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    return fig


def plot_run(series: Mapping[str, Sequence], out_png: str | Path, *, title: str = "", svg: bool = True) -> Path:
    return save_figure(run_figure(series, title=title), out_png, svg)


# --- Fig. 3 -----------------------------------------------------------------------------------------------------------
def coverage_rounds_figure(groups: Mapping[str, Sequence[Sequence[float | None]]], *, title: str = "") -> Figure:
    """Mean CR_t per round of each group (e.g. "implicit", "explicit") with a +-1 s.d. band over its runs."""
    fig = new_figure(figsize=(7.5, 4.5))
    ax = fig.add_subplot(1, 1, 1)
    colors = colormaps["tab10"]
    for k, (label, runs) in enumerate(groups.items()):
        if not runs:
            continue
        length = max(len(r) for r in runs)
        mat = np.full((len(runs), length), np.nan)
        for i, r in enumerate(runs):
            mat[i, :len(r)] = _series(r)
        with warnings.catch_warnings():          # a round without coverage in every run: NaN, not a warning
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, sd = np.nanmean(mat, axis=0), np.nanstd(mat, axis=0)
        x = np.arange(length)
        ax.plot(x, mean, "-o", ms=3, color=colors(k), label=f"{label} (n={len(runs)} runs)")
        ax.fill_between(x, np.clip(mean - sd, 0, 1), np.clip(mean + sd, 0, 1), color=colors(k), alpha=0.2,
                        linewidth=0)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("round")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("coverage rate CR(t)")
    ax.set_title(title or "Coverage over rounds (mean ± 1 s.d. over runs)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize="small", framealpha=0.8)
    fig.tight_layout()
    return fig


def plot_coverage_rounds(groups: Mapping[str, Sequence[Sequence[float | None]]], out_png: str | Path, *,
                         title: str = "", svg: bool = True) -> Path:
    return save_figure(coverage_rounds_figure(groups, title=title), out_png, svg)


# --- Fig. 5 -----------------------------------------------------------------------------------------------------------
def quadratic_fit(x: Sequence[float], y: Sequence[float]) -> dict | None:
    """Least-squares ``y = a x² + b x + c`` with its vertex and the inverted-U verdict (None: too few points)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(np.unique(x)) < 3:
        return None
    a, b, c = (float(v) for v in np.polyfit(x, y, 2))
    vertex = -b / (2 * a) if a != 0 else None
    inside = vertex is not None and float(x.min()) < vertex < float(x.max())
    return {"a": a, "b": b, "c": c, "vertex": vertex, "inverted_u": bool(a < 0 and inside), "n": int(len(x))}


def deviation_coverage_figure(points: Mapping[str, Sequence[tuple[float | None, float | None]]], *,
                              title: str = "") -> tuple[Figure, dict | None]:
    """Scatter of (mean deviation, coverage rate) per run, coloured by group, with the quadratic fit over all."""
    fig = new_figure(figsize=(7, 5))
    ax = fig.add_subplot(1, 1, 1)
    colors = colormaps["tab10"]
    xs, ys = [], []
    for k, (label, pts) in enumerate(points.items()):
        pts = [(float(d), float(c)) for d, c in pts if d is not None and c is not None]
        if not pts:
            continue
        x, y = zip(*pts)
        xs += x
        ys += y
        ax.scatter(x, y, s=18, alpha=0.7, color=colors(k), label=f"{label} (n={len(pts)})")
    fit = quadratic_fit(xs, ys)
    if fit is not None:
        grid = np.linspace(min(xs), max(xs), 200)
        verdict = "inverted U" if fit["inverted_u"] else "no inverted U"
        peak = f", peak at d̄={fit['vertex']:.2f}" if fit["inverted_u"] else ""
        ax.plot(grid, np.polyval([fit["a"], fit["b"], fit["c"]], grid), "k--",
                label=f"quadratic fit: {fit['a']:.3f}d̄² {fit['b']:+.3f}d̄ {fit['c']:+.3f} ({verdict}{peak})")
    ax.set_xlabel("mean action deviation d̄ [cells]")
    ax.set_ylabel("coverage rate CR")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(title or f"Deviation vs coverage (N={len(xs)} runs)")
    ax.grid(True, alpha=0.3)
    if xs:
        ax.legend(loc="lower center", fontsize="small", framealpha=0.8)
    fig.tight_layout()
    return fig, fit


def plot_deviation_coverage(points: Mapping[str, Sequence[tuple[float | None, float | None]]], out_png: str | Path,
                            *, title: str = "", svg: bool = True) -> tuple[Path, dict | None]:
    fig, fit = deviation_coverage_figure(points, title=title)
    return save_figure(fig, out_png, svg), fit
