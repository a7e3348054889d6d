"""Run plots: files are written and the figures contain what they claim."""
from __future__ import annotations

import numpy as np
import pytest

from consensus.graphs.topology import make_graph
from consensus.runs.plots import (
    paths_figure,
    plot_1d_rounds,
    plot_paths,
    plot_planned_vs_actual,
    planned_vs_actual_figure,
    rounds_figure,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture()
def run() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """3 robots converging to their centroid; targets re-planned every 10 steps, none before step 3."""
    t = np.arange(60) * 0.1
    start = np.array([[0.0, 0.0], [4.0, 0.0], [2.0, 3.0]])
    goal = start.mean(axis=0)
    pos = start[None] + (goal - start)[None] * (1 - np.exp(-t))[:, None, None]
    targets = pos[np.minimum((np.arange(60) // 10 + 1) * 10, 59)]
    targets[:3] = np.nan
    return t, pos, targets


def test_paths_figure_lines_markers_and_labels(run):
    t, pos, targets = run
    fig = paths_figure(t, pos, None, title="Aggregation")
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert len(lines) == 3 * 3 + 1  # path + start + end per robot, one consensus star
    paths = [ln for ln in lines if ln.get_linestyle() == "-"]
    assert len(paths) == 3
    for i, ln in enumerate(paths):
        assert np.allclose(ln.get_xydata(), pos[:, i])
    star = [ln for ln in lines if ln.get_marker() == "*"]
    assert len(star) == 1 and np.allclose(star[0].get_xydata()[0], pos[-1].mean(axis=0))
    assert "N=3" in ax.get_title() and "Aggregation" in ax.get_title()
    assert ax.get_xlabel() == "x [m]" and ax.get_ylabel() == "y [m]"
    legend = [txt.get_text() for txt in ax.get_legend().get_texts()]
    assert {"robot 0", "robot 1", "robot 2", "start", "end", "final consensus point"} <= set(legend)


def test_paths_figure_with_targets_graph_and_workspace(run):
    t, pos, targets = run
    fig = paths_figure(t, pos, targets, graph=make_graph("ring", 3), workspace=[-1, 5, -1, 4],
                       labels=["a", "b", "c"])
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 10 + 3 + 3  # + one target marker set per robot + 3 ring edges
    assert "topology: ring" in ax.get_title()
    assert ax.get_xlim() == pytest.approx((-1.18, 5.18))
    assert {"a", "b", "c", "planned targets", "workspace"} <= {x.get_text() for x in ax.get_legend().get_texts()}


def test_paths_figure_skips_robot_that_never_appears(run):
    t, pos, _ = run
    pos = pos.copy()
    pos[:, 1] = np.nan
    pos[:5, 0] = np.nan
    ax = paths_figure(t, pos, None).axes[0]
    assert len(ax.get_lines()) == 2 * 3 + 1
    start0 = [ln for ln in ax.get_lines() if ln.get_marker() == "o"][0]
    assert np.allclose(start0.get_xydata()[0], pos[5, 0])


def test_plot_paths_writes_png_and_svg(run, tmp_path):
    t, pos, targets = run
    out = plot_paths(t, pos, targets, tmp_path / "sub" / "paths.png", title="demo",
                     graph=make_graph("leader_follower", 3))
    assert out == tmp_path / "sub" / "paths.png"
    assert out.read_bytes()[:8] == PNG_MAGIC and out.stat().st_size > 1000
    svg = out.with_suffix(".svg")
    assert svg.exists() and b"<svg" in svg.read_bytes()[:2000]


def test_planned_vs_actual_figure(run):
    t, pos, targets = run
    targets = targets.copy()
    targets[:, 2] = np.nan  # robot 2 never got a plan: no dashed line for it
    fig = planned_vs_actual_figure(t, pos, targets, title="Control process")
    assert len(fig.axes) == 2
    for k, ax in enumerate(fig.axes):
        solid = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
        dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert len(solid) == 3 and len(dashed) == 2
        assert all(ln.get_drawstyle() == "steps-post" for ln in dashed)
        assert np.allclose(solid[0].get_ydata(), pos[:, 0, k])
        assert ax.get_ylabel() == ("x [m]", "y [m]")[k]
    assert fig.axes[-1].get_xlabel() == "time [s]"
    assert "Control process" in fig.get_suptitle() and "N=3" in fig.get_suptitle()


def test_plot_planned_vs_actual_and_rounds_write_files(run, tmp_path):
    t, pos, targets = run
    out = plot_planned_vs_actual(t, pos, targets, tmp_path / "pva.png")
    assert out.read_bytes()[:8] == PNG_MAGIC
    values = np.array([[10.0, 50.0, 90.0, 30.0], [40.0, 45.0, 60.0, 42.0], [47.0, 47.5, 48.0, 47.0]])
    fig = rounds_figure([0, 1, 2], values, title="1-D negotiation")
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 4
    assert np.allclose(ax.get_lines()[2].get_ydata(), values[:, 2])
    assert ax.get_xlabel() == "negotiation round" and "N=4" in ax.get_title()
    out = plot_1d_rounds([0, 1, 2], values, tmp_path / "rounds.png")
    assert out.read_bytes()[:8] == PNG_MAGIC and out.stat().st_size > 1000


def test_plot_input_errors(run):
    t, pos, _ = run
    with pytest.raises(ValueError, match="2-D"):
        paths_figure(t, np.zeros((60, 3, 3)), None)
    with pytest.raises(ValueError, match="times"):
        planned_vs_actual_figure(t[:-1], pos, None)
    with pytest.raises(ValueError, match="labels"):
        paths_figure(t, pos, None, labels=["only one"])
