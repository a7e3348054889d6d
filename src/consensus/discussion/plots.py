"""Per-round figures of paper 2's studies: one metric over the rounds, mean ± 1 s.d. over the runs of each group."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from consensus.runs.plots import colors, new_figure, save_figure


def plot_rounds_band(groups: Mapping[str, Sequence[Sequence[float | None]]], out_png: str | Path, *, ylabel: str,
                     title: str = "", ylim: tuple[float, float] | None = None, svg: bool = True) -> Path:
    """Mean per round of each group (e.g. "Implicit Consensus") with a ±1 s.d. band; runs may differ in length."""
    fig = new_figure(figsize=(7.5, 4.5))
    ax = fig.add_subplot(1, 1, 1)
    palette = colors(max(len(groups), 1))
    for k, (label, runs) in enumerate(groups.items()):
        if not runs:
            continue
        length = max(len(r) for r in runs)
        mat = np.full((len(runs), length), np.nan)
        for i, r in enumerate(runs):
            mat[i, :len(r)] = [np.nan if v is None else float(v) for v in r]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, sd = np.nanmean(mat, axis=0), np.nanstd(mat, axis=0)
        x = np.arange(1, length + 1)
        ax.plot(x, mean, "-o", ms=3, color=palette[k], label=f"{label} (n={len(runs)} runs)")
        ax.fill_between(x, mean - sd, mean + sd, color=palette[k], alpha=0.2, linewidth=0)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", framealpha=0.8)
    fig.tight_layout()
    return save_figure(fig, out_png, svg)
