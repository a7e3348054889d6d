"""Run plots in the style of paper 1 (Fig. 2 and Fig. 10a/10b).

Figures are built with matplotlib's object-oriented API on the Agg canvas (no pyplot, no windows),
so plotting is safe in headless runs and worker threads. Each ``plot_*`` function writes a PNG
(and optionally an SVG beside it) and returns the PNG path; the matching ``*_figure`` function
returns the ``Figure`` itself (used by the tests and by anyone who wants to compose plots).
NaN samples (robot missing, no target yet) are simply not drawn.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, Rectangle

from consensus.control.safety import Geofence
from consensus.graphs.topology import Graph
from consensus.metrics.convergence import consensus_point, spread_series

#: robots get one legend entry each up to this many; beyond, only the marker meanings are listed
MAX_LEGEND_ROBOTS = 10
#: communication edges are drawn only up to this many (otherwise the plot is unreadable)
MAX_DRAWN_EDGES = 200
_AXIS_NAMES = ("x", "y", "z")


def new_figure(**kw) -> Figure:
    """A matplotlib Figure on the Agg canvas (no pyplot state: safe in threads and worker processes)."""
    fig = Figure(**kw)
    FigureCanvasAgg(fig)
    return fig


def colors(n: int) -> list:
    """``n`` distinguishable colours (tab10 up to 10, else turbo)."""
    cmap = colormaps["tab10"] if n <= 10 else colormaps["turbo"]
    return [cmap(i) if n <= 10 else cmap(i / max(n - 1, 1)) for i in range(n)]


def _labels(n: int, labels: Sequence[str] | None) -> list[str]:
    if labels is None:
        return [f"robot {i}" for i in range(n)]
    if len(labels) != n:
        raise ValueError(f"got {len(labels)} labels for {n} robots")
    return [str(s) for s in labels]


def _check_traj(positions: np.ndarray, name: str = "positions") -> np.ndarray:
    positions = np.asarray(positions, dtype=float)
    if positions.ndim != 3 or positions.shape[0] == 0:
        raise ValueError(f"{name} must have shape (T, n, d) with T >= 1, got {positions.shape}")
    return positions


def _first_last_valid(track: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    ok = np.flatnonzero(np.all(np.isfinite(track), axis=1))
    if len(ok) == 0:
        return None, None
    return track[ok[0]], track[ok[-1]]


def save_figure(fig: Figure, out_png: str | Path, svg: bool) -> Path:
    """Write ``out_png`` (and the same name with .svg when ``svg``); returns the PNG path."""
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=120)
    if svg:
        fig.savefig(out.with_suffix(".svg"), format="svg")
    return out


def paths_figure(times: np.ndarray, positions: np.ndarray, targets: np.ndarray | None = None, *,
                 title: str = "", labels: Sequence[str] | None = None, graph: Graph | None = None,
                 workspace: Geofence | Sequence[float] | None = None,
                 footprint_radius: float | None = None) -> Figure:
    """Paper-1 Fig. 10a: robot paths in the plane.

    One solid line per robot, start ``o`` and end ``x`` markers in the robot's colour, the final
    consensus point (centroid of the last positions) as a black star, planned targets (if given)
    as small faint ``+``, communication edges between start positions (if ``graph`` is given and
    small enough) and the workspace box (dashed) if given. With ``footprint_radius`` (robots kept apart by
    collision avoidance) each robot's footprint, a disc of that radius, is drawn at its last position.
    """
    positions = _check_traj(positions)
    t_len, n, d = positions.shape
    if d != 2:
        raise ValueError(f"paths_figure needs 2-D positions, got d={d}")
    if len(np.asarray(times)) != t_len:
        raise ValueError(f"times has {len(np.asarray(times))} entries but positions has T={t_len}")
    names = _labels(n, labels)
    palette = colors(n)
    fig = new_figure(figsize=(8.5, 6.5))
    ax = fig.add_subplot(1, 1, 1)

    starts = [_first_last_valid(positions[:, i])[0] for i in range(n)]
    if graph is not None and graph.n_edges <= MAX_DRAWN_EDGES:
        for i, j in graph.edges():
            a, b = starts[j], starts[i]  # information flows from j to i
            if a is None or b is None:
                continue
            if graph.directed:
                ax.annotate("", xy=b, xytext=a, arrowprops={"arrowstyle": "->", "color": "0.7", "lw": 0.8})
            else:
                ax.plot([a[0], b[0]], [a[1], b[1]], color="0.8", lw=0.8, zorder=0)

    if targets is not None:
        targets = _check_traj(targets, "targets")
        if targets.shape != positions.shape:
            raise ValueError(f"targets {targets.shape} must have the shape of positions {positions.shape}")
        for i in range(n):
            pts = targets[:, i][np.all(np.isfinite(targets[:, i]), axis=1)]
            if len(pts):
                pts = np.unique(pts, axis=0)
                ax.plot(pts[:, 0], pts[:, 1], "+", color=palette[i], alpha=0.5, ms=7, ls="none")

    for i in range(n):
        track = positions[:, i]
        first, last = _first_last_valid(track)
        if first is None:
            continue
        ax.plot(track[:, 0], track[:, 1], "-", color=palette[i], lw=1.6,
                label=names[i] if n <= MAX_LEGEND_ROBOTS else None)
        ax.plot(*first, "o", color=palette[i], ms=8, mfc="none", mew=1.8)
        ax.plot(*last, "x", color=palette[i], ms=9, mew=2.0)
        if footprint_radius:
            ax.add_patch(Circle(last, footprint_radius, facecolor=palette[i], edgecolor=palette[i], alpha=0.25,
                                lw=1.2, zorder=4))

    final = consensus_point(positions[-1])
    if np.all(np.isfinite(final)):
        ax.plot(*final, "*", color="k", ms=16, mfc="gold", zorder=5)

    if workspace is not None:
        fence = workspace if isinstance(workspace, Geofence) else Geofence.from_bounds(workspace)
        if fence.dim != 2:
            raise ValueError(f"workspace must be 2-D, got {fence.dim}-D bounds")
        (x0, y0), (x1, y1) = fence.lo, fence.hi
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, ls="--", ec="0.5", lw=1.0))
        pad_x, pad_y = 0.03 * (x1 - x0), 0.03 * (y1 - y0)
        ax.set_xlim(x0 - pad_x, x1 + pad_x)
        ax.set_ylim(y0 - pad_y, y1 + pad_y)

    marker_handles = [
        Line2D([], [], marker="o", ls="none", color="0.3", mfc="none", label="start"),
        Line2D([], [], marker="x", ls="none", color="0.3", label="end"),
        Line2D([], [], marker="*", ls="none", color="k", mfc="gold", ms=12, label="final consensus point"),
    ]
    if targets is not None:
        marker_handles.append(Line2D([], [], marker="+", ls="none", color="0.3", label="planned targets"))
    if workspace is not None:
        marker_handles.append(Line2D([], [], ls="--", color="0.5", label="workspace"))
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=handles + marker_handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              fontsize="small")

    head = title or "Robot paths"
    topo = f", topology: {graph.name}" if graph is not None else ""
    ax.set_title(f"{head} (N={n}{topo})")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_aspect("equal", adjustable="datalim" if workspace is None else "box")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def plot_paths(times: np.ndarray, positions: np.ndarray, targets: np.ndarray | None, out_png: str | Path, *,
               title: str = "", labels: Sequence[str] | None = None, graph: Graph | None = None,
               workspace: Geofence | Sequence[float] | None = None, svg: bool = True,
               footprint_radius: float | None = None) -> Path:
    """Write ``paths_figure`` to ``out_png`` (and an SVG beside it); returns the PNG path."""
    fig = paths_figure(times, positions, targets, title=title, labels=labels, graph=graph, workspace=workspace,
                       footprint_radius=footprint_radius)
    return save_figure(fig, out_png, svg)


def planned_vs_actual_figure(times: np.ndarray, positions: np.ndarray, targets: np.ndarray | None, *,
                             title: str = "", labels: Sequence[str] | None = None) -> Figure:
    """Paper-1 Fig. 10b: one stacked subplot per axis (x(t), y(t), ...).

    Actual positions are solid lines, planned targets dashed step lines (``steps-post``: a target
    holds until the next plan), one colour per robot. Robots with no finite target get no dashed line.
    """
    positions = _check_traj(positions)
    t_len, n, d = positions.shape
    times = np.asarray(times, dtype=float)
    if times.shape != (t_len,):
        raise ValueError(f"times {times.shape} must have shape ({t_len},)")
    if targets is not None:
        targets = _check_traj(targets, "targets")
        if targets.shape != positions.shape:
            raise ValueError(f"targets {targets.shape} must have the shape of positions {positions.shape}")
    names = _labels(n, labels)
    palette = colors(n)
    fig = new_figure(figsize=(9, 2.6 * d + 1.0))
    axes = fig.subplots(d, 1, sharex=True, squeeze=False)[:, 0]
    for k, ax in enumerate(axes):
        axis = _AXIS_NAMES[k] if k < len(_AXIS_NAMES) else f"q{k}"
        for i in range(n):
            ax.plot(times, positions[:, i, k], "-", color=palette[i], lw=1.5,
                    label=names[i] if n <= MAX_LEGEND_ROBOTS else None)
            if targets is not None and np.isfinite(targets[:, i, k]).any():
                ax.plot(times, targets[:, i, k], "--", color=palette[i], lw=1.2, drawstyle="steps-post")
        ax.set_ylabel(f"{axis} [m]")
        ax.grid(True, alpha=0.3)
    style = [Line2D([], [], color="0.3", ls="-", label="actual")]
    if targets is not None:
        style.append(Line2D([], [], color="0.3", ls="--", label="planned target"))
    handles, _ = axes[0].get_legend_handles_labels()
    axes[0].legend(handles=handles + style, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                   fontsize="small")
    axes[-1].set_xlabel("time [s]")
    fig.suptitle(f"{title or 'Planned vs actual position'} (N={n})")
    fig.tight_layout()
    return fig


def plot_planned_vs_actual(times: np.ndarray, positions: np.ndarray, targets: np.ndarray | None,
                           out_png: str | Path, *, title: str = "", labels: Sequence[str] | None = None,
                           svg: bool = False) -> Path:
    """Write ``planned_vs_actual_figure`` to ``out_png``; returns the PNG path."""
    return save_figure(planned_vs_actual_figure(times, positions, targets, title=title, labels=labels), out_png, svg)


def rounds_figure(rounds: Sequence[int] | np.ndarray, values: np.ndarray, *, title: str = "",
                  labels: Sequence[str] | None = None, ylabel: str = "state") -> Figure:
    """Paper-1 Fig. 2 style: each agent's 1-D state (``values (R, n)``) over negotiation rounds."""
    values = np.asarray(values, dtype=float)
    rounds = np.asarray(rounds)
    if values.ndim != 2 or values.shape[0] != len(rounds):
        raise ValueError(f"values must have shape (R, n) with R = {len(rounds)}, got {values.shape}")
    n = values.shape[1]
    names = _labels(n, labels if labels is not None else [f"agent {i}" for i in range(n)])
    palette = colors(n)
    fig = new_figure(figsize=(7, 4.5))
    ax = fig.add_subplot(1, 1, 1)
    for i in range(n):
        ax.plot(rounds, values[:, i], "-o", color=palette[i], ms=4, label=names[i] if n <= MAX_LEGEND_ROBOTS else None)
    if n <= MAX_LEGEND_ROBOTS:
        ax.legend(loc="best", fontsize="small", framealpha=0.8)
    ax.set_xlabel("negotiation round")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title or 'State per negotiation round'} (N={n})")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def plot_1d_rounds(rounds: Sequence[int] | np.ndarray, values: np.ndarray, out_png: str | Path, *,
                   title: str = "", labels: Sequence[str] | None = None, ylabel: str = "state",
                   svg: bool = False) -> Path:
    """Write ``rounds_figure`` to ``out_png``; returns the PNG path."""
    return save_figure(rounds_figure(rounds, values, title=title, labels=labels, ylabel=ylabel), out_png, svg)



def spread_figure(times: np.ndarray, positions: np.ndarray, *, title: str = "", tol: float | None = None) -> Figure:
    """The fleet's spread (``consensus.metrics.convergence.spread``) over time; ``tol`` as a dotted line."""
    positions = _check_traj(positions)
    fig = new_figure(figsize=(7, 3.2))
    ax = fig.subplots()
    ax.plot(np.asarray(times, dtype=float), spread_series(positions), "-", color="C0", lw=1.5)
    if tol is not None:
        ax.axhline(tol, color="0.4", ls=":", lw=1.0, label=f"tolerance {tol:g} m")
        ax.legend(loc="upper right", fontsize="small")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("spread [m]")
    ax.grid(True, alpha=0.3)
    ax.set_title(f"{title or 'Spread over time'} (N={positions.shape[1]})")
    fig.tight_layout()
    return fig


def plot_spread(times: np.ndarray, positions: np.ndarray, out_png: str | Path, *, title: str = "",
                tol: float | None = None, svg: bool = False) -> Path:
    """Write ``spread_figure`` to ``out_png``; returns the PNG path."""
    return save_figure(spread_figure(times, positions, title=title, tol=tol), out_png, svg)
