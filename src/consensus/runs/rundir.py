"""The run directory: everything a run leaves behind, written the same way by the ROS recorder and the headless
runner.

Layout::

    RUN_DIR/
      manifest.json        config, seed, scenario, backend, model, git revision, package versions, command line
      params.yaml          the /**: parameters file the nodes were started with (ROS runs)
      trajectories.csv     t, robot, x, y, target_x, target_y (NaN before the first target)
      plans.jsonl          one record per planning round and robot (the planner/reasoning schema)
      transcripts.jsonl    every LLM request/response (LLM runs; replay with --backend replay)
      summary.json         converged, final_spread_m, target_spread_m, min_pair_distance_m, consensus_point,
                           time_to_converge_s, llm_calls, ... (collision avoidance: converged_on targets, d_min_m)
      paths.png/.svg       paths in the plane (paper 1, Fig. 10a)
      planned_vs_actual.png  planned and actual x, y over time (paper 1, Fig. 10b)
"""
from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from consensus.errors import ConfigError
from consensus.metrics.convergence import convergence_summary

_PACKAGES = ("consensus", "numpy", "matplotlib", "openai", "pyyaml", "ros-rclpy", "ros-rmw-fastrtps-cpp",
             "xllamacpp", "transforms3d")


def default_run_dir(scenario: str, base: str | Path = "runs") -> Path:
    """``base/<scenario>-<YYYYmmdd-HHMMSS>``, or with ``-2``, ``-3``, ... when a run of the same second has that
    name: two runs started within one second (a script, a test) never get the same folder."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(base) / f"{scenario}-{stamp}"
    k = 1
    while path.exists():
        k += 1
        path = Path(base) / f"{scenario}-{stamp}-{k}"
    return path


RUN_MARKERS = ("manifest.json", "summary.json", "transcripts.jsonl")


def new_run_dir(path: str | Path) -> Path:
    """``path`` (resolved) created as a fresh run directory. A directory that already holds a run is refused, so
    two runs never mix their transcripts or results; a path that cannot be a directory is a ``ConfigError`` too."""
    out = Path(path).resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"run directory {out}: cannot create it ({exc.strerror or exc})") from None
    held = [name for name in RUN_MARKERS if (out / name).exists()]
    if held:
        raise ConfigError(f"run directory {out} already holds a run ({', '.join(held)}); choose another --out "
                          f"or remove it")
    return out


def git_revision() -> str:
    """The git commit of the source tree this package runs from, or 'unknown' (e.g. installed from a wheel)."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
        rev = out.stdout.strip()
        if out.returncode == 0 and rev:
            dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=5, check=False).stdout.strip()
            return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("CONSENSUS_GIT_REVISION", "unknown")


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def write_json(path: Path, data: Any) -> Path:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_jsonable(data), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def write_manifest(out_dir: str | Path, *, scenario: str, config: dict, seed: int, backend: str, model: str,
                   mode: str, extra: dict | None = None) -> Path:
    """manifest.json: enough to reproduce the run. Holds the name of the API-key variable, never its value."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "scenario": scenario,
        "mode": mode,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "seed": seed,
        "backend": backend,
        "model": model,
        "git_revision": git_revision(),
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "command": sys.argv,
        "config": config,
    }
    if extra:
        manifest.update(extra)
    return write_json(out / "manifest.json", manifest)


def write_trajectories(path: str | Path, times: np.ndarray, positions: np.ndarray, targets: np.ndarray) -> Path:
    """Long-format CSV: one row per time step and robot."""
    path = Path(path)
    T, n, d = positions.shape
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "robot", "x", "y", "target_x", "target_y"])
        for k in range(T):
            for i in range(n):
                p, g = positions[k, i], targets[k, i]
                w.writerow([f"{times[k]:.3f}", i, f"{p[0]:.4f}", f"{p[1]:.4f}" if d > 1 else "0",
                            f"{g[0]:.4f}", f"{g[1]:.4f}" if d > 1 else "0"])
    return path


def read_trajectories(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of write_trajectories: (times (T,), positions (T,n,2), targets (T,n,2))."""
    rows = list(csv.DictReader(Path(path).open()))
    times = sorted({float(r["t"]) for r in rows})
    n = 1 + max(int(r["robot"]) for r in rows)
    index = {t: k for k, t in enumerate(times)}
    pos = np.full((len(times), n, 2), np.nan)
    tgt = np.full((len(times), n, 2), np.nan)
    for r in rows:
        k, i = index[float(r["t"])], int(r["robot"])
        pos[k, i] = float(r["x"]), float(r["y"])
        tgt[k, i] = float(r["target_x"]), float(r["target_y"])
    return np.asarray(times), pos, tgt


def finalize(out_dir: str | Path, *, times: np.ndarray, positions: np.ndarray, targets: np.ndarray,
             tol: float, counters: dict, title: str, workspace=None, extra: dict | None = None,
             d_min: float | None = None, footprint_radius: float | None = None) -> dict:
    """Write trajectories.csv, summary.json and both plots; return the summary.

    ``d_min`` (robots kept that far apart by collision avoidance): convergence is judged on the targets and a
    packing radius (``consensus.metrics.convergence.convergence_summary``); ``footprint_radius``: the footprints
    drawn at the robots' last positions in paths.png."""
    from consensus.runs.plots import plot_paths, plot_planned_vs_actual

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    times = np.asarray(times, dtype=float)
    positions = np.asarray(positions, dtype=float)
    targets = np.asarray(targets, dtype=float)
    if positions.shape[-1] == 1:                       # 1-D runs are drawn on the x axis
        positions = np.concatenate([positions, np.zeros_like(positions)], axis=-1)
        targets = np.concatenate([targets, np.zeros_like(targets)], axis=-1)
    write_trajectories(out / "trajectories.csv", times, positions, targets)
    summary: dict[str, Any] = {"samples": int(len(times))}
    if len(times):
        summary.update(convergence_summary(times, positions, tol, initial_positions=positions[0], targets=targets,
                                           d_min=d_min))
    else:
        summary.update({"converged": False, "final_spread_m": None, "consensus_point": None,
                        "time_to_converge_s": None})
    summary["converge_tol_m"] = tol
    summary.update(counters)
    if extra:
        summary.update(extra)
    if len(times) >= 2:
        plot_paths(times, positions, targets, out / "paths.png", title=title, workspace=workspace,
                   footprint_radius=footprint_radius)
        plot_planned_vs_actual(times, positions, targets, out / "planned_vs_actual.png",
                               title=title)
        summary["plots"] = ["paths.png", "planned_vs_actual.png"]
    write_json(out / "summary.json", summary)
    return summary
