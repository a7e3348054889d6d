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
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from consensus.errors import ConfigError
from consensus.jsonl import AppendFile, RecordWriteError, free_space
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
    """``path`` replaced whole by ``data`` as JSON (written beside it, then renamed): a full disk leaves the old file,
    no cut one, and a ``RecordWriteError`` naming the path and the free space left."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(_jsonable(data), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RecordWriteError(exc.errno or 0, f"{exc.strerror or exc}: not written ({free_space(path)})",
                               str(path)) from None
    return path


def ros_context(namespace: str = "") -> dict:
    """Where a ROS run's traffic is (the manifest's ``ros``): its domain, discovery range, static peers, middleware
    and the run's namespace (``""``: the root), so that a tool attaching to the run later (``consensus mcp --run``)
    joins the same graph."""
    env = os.environ
    domain = env.get("ROS_DOMAIN_ID", "").strip()
    return {"domain_id": int(domain) if domain.isdigit() else 0,
            "discovery_range": env.get("ROS_AUTOMATIC_DISCOVERY_RANGE", ""),
            "static_peers": env.get("ROS_STATIC_PEERS", ""),
            "rmw_implementation": env.get("RMW_IMPLEMENTATION", ""),
            "namespace": namespace.rstrip("/")}


def write_manifest(out_dir: str | Path, *, scenario: str, config: dict, seed: int, backend: str, model: str,
                   mode: str, extra: dict | None = None) -> Path:
    """manifest.json: enough to reproduce the run. Holds the name of the API-key variable, never its value. A ROS
    run (``mode`` "ros") also records where its traffic is (``ros_context``) unless ``extra`` gives ``ros``."""
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
    if mode == "ros":
        manifest["ros"] = ros_context()
    if extra:
        manifest.update(extra)
    return write_json(out / "manifest.json", manifest)


TRAJECTORY_COLUMNS = ("t", "robot", "x", "y", "target_x", "target_y")


def trajectory_rows(t: float, positions: np.ndarray, targets: np.ndarray) -> str:
    """The CSV lines of one time step (one per robot) of ``(n, d)`` positions and targets (``d`` 1 or 2)."""
    d = positions.shape[-1]
    return "".join(f"{t:.3f},{i},{p[0]:.4f},{f'{p[1]:.4f}' if d > 1 else '0'},"
                   f"{g[0]:.4f},{f'{g[1]:.4f}' if d > 1 else '0'}\n"
                   for i, (p, g) in enumerate(zip(positions, targets)))


def write_trajectories(path: str | Path, times: np.ndarray, positions: np.ndarray, targets: np.ndarray) -> Path:
    """Long-format CSV: one row per time step and robot; written beside ``path`` and renamed, so a full disk leaves
    no cut file (a ``RecordWriteError`` names the path and the free space)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", newline="") as fh:
            fh.write(",".join(TRAJECTORY_COLUMNS) + "\n")
            for k in range(positions.shape[0]):
                fh.write(trajectory_rows(times[k], positions[k], targets[k]))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RecordWriteError(exc.errno or 0, f"{exc.strerror or exc}: not written ({free_space(path)})",
                               str(path)) from None
    return path


class TrajectoryStream:
    """``trajectories.csv`` written as the run goes: each time step's rows in one whole append
    (``consensus.jsonl.AppendFile``), so a recorder killed at any moment leaves every sample it took up to then,
    and a full disk leaves whole samples only. Same format as ``write_trajectories``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file = AppendFile(self.path, header=",".join(TRAJECTORY_COLUMNS))

    def append(self, t: float, positions: np.ndarray, targets: np.ndarray) -> None:
        self._file.append(trajectory_rows(t, np.asarray(positions, float), np.asarray(targets, float)))

    def close(self) -> None:
        self._file.close()


def read_trajectories(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of write_trajectories: (times (T,), positions (T,n,2), targets (T,n,2))."""
    with Path(path).open() as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return np.zeros(0), np.zeros((0, 0, 2)), np.zeros((0, 0, 2))
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


def outside_geofence_m(positions: np.ndarray, workspace) -> float | None:
    """How far any robot's centre went outside the workspace box ``[xmin, xmax(, ymin, ymax)]`` over ``(T, n, d)``
    positions: 0.0 when nobody left it, None without a workspace or a position."""
    if workspace is None:
        return None
    bounds = np.asarray(workspace, dtype=float).reshape(-1, 2)
    p = np.asarray(positions, dtype=float)[..., : len(bounds)]
    if p.size == 0 or not np.isfinite(p).any():
        return None
    with np.errstate(invalid="ignore"):
        beyond = np.maximum(np.maximum(bounds[:, 0] - p, p - bounds[:, 1]), 0.0)
        dist = np.sqrt((beyond ** 2).sum(axis=-1))
    return float(np.nanmax(dist)) if np.isfinite(dist).any() else None


def finalize(out_dir: str | Path, *, times: np.ndarray, positions: np.ndarray, targets: np.ndarray,
             tol: float, counters: dict, title: str, workspace=None, extra: dict | None = None,
             d_min: float | None = None, footprint_radius: float | None = None, packing_slack: float = 0.0,
             trajectories_written: bool = False) -> dict:
    """Write trajectories.csv (unless ``trajectories_written``: a ``TrajectoryStream`` wrote it during the run),
    summary.json and both plots; return the summary. The summary is written before the plots: a figure that does
    not fit on the disk leaves it, with ``plots_error``.

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
    if not trajectories_written:
        write_trajectories(out / "trajectories.csv", times, positions, targets)
    summary: dict[str, Any] = {"samples": int(len(times))}
    if len(times):
        summary.update(convergence_summary(times, positions, tol, initial_positions=positions[0], targets=targets,
                                           d_min=d_min, packing_slack=packing_slack))
    else:
        summary.update({"converged": False, "final_spread_m": None, "consensus_point": None,
                        "time_to_converge_s": None})
    summary["converge_tol_m"] = tol
    summary["outside_geofence_m"] = outside_geofence_m(positions, workspace) if len(times) else None
    summary.update(counters)
    if extra:
        summary.update(extra)
    write_json(out / "summary.json", summary)           # first: the record, before the figures
    if len(times) >= 2:
        try:
            plot_paths(times, positions, targets, out / "paths.png", title=title, workspace=workspace,
                       footprint_radius=footprint_radius)
            plot_planned_vs_actual(times, positions, targets, out / "planned_vs_actual.png",
                                   title=title)
            summary["plots"] = ["paths.png", "planned_vs_actual.png"]
        except OSError as exc:          # a full disk: the summary stands; the figures are redrawn from the record
            summary["plots_error"] = f"{exc.filename or out}: {exc.strerror or exc} ({free_space(out)})"
            for name in ("paths.png", "paths.svg", "planned_vs_actual.png"):     # no cut figure is left
                (out / name).unlink(missing_ok=True)
        try:
            write_json(out / "summary.json", summary)
        except OSError:
            pass
    return summary


# --------------------------------------------------------------------------- room for the record on a full disk
RESERVE_FILE = ".space_reserve"
RESERVE_BYTES = 1_000_000


def reserve_space(out_dir: str | Path) -> None:
    """Set aside room for the end of a run's record (``RUN/.space_reserve``: 1 MB, or an eighth of a small file
    system) while it runs: a disk that fills during the run still takes the summary, which ``release_space`` frees
    the room for first. Best effort (a disk that is already full gets no reserve)."""
    path = Path(out_dir) / RESERVE_FILE
    try:
        size = int(min(RESERVE_BYTES, shutil.disk_usage(out_dir).total / 8))
        with path.open("wb") as fh:
            fh.write(b"\0" * size)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError:
        path.unlink(missing_ok=True)


def release_space(out_dir: str | Path) -> None:
    """Give the room ``reserve_space`` set aside back (before the summary is written)."""
    Path(out_dir, RESERVE_FILE).unlink(missing_ok=True)


# --------------------------------------------------------------------------- a run that lost one of its processes
def lost_reason(lost: list[dict]) -> str:
    """``end_reason`` of a run that lost ``lost`` (``{"process", "exit_code", "rule"}`` each, in order):
    ``lost:<process>`` of the process whose death ended the run (``rule: "the run ended"``), else of the first."""
    ended = [d for d in lost if d.get("rule") == "the run ended"]
    return f"lost:{(ended or lost)[0]['process']}"


def note_lost_processes(out_dir: str | Path, lost: list[dict]) -> dict | None:
    """Mark ``summary.json`` (written by the process that ended the run) with the processes that died during it
    (``lost``: ``{"process", "exit_code", "rule"}`` each): ``lost_processes`` lists them, ``end_reason`` becomes
    ``lost_reason(lost)`` and the reason the run gave itself moves to ``run_end_reason``. Returns the summary, or None
    when there is none."""
    path = Path(out_dir) / "summary.json"
    if not lost or not path.is_file():
        return None
    try:
        summary = json.loads(path.read_text())
    except ValueError:
        return None
    summary.setdefault("run_end_reason", summary.get("end_reason"))
    summary["end_reason"] = lost_reason(lost)
    summary["lost_processes"] = lost
    write_json(path, summary)
    return summary


def note_in_summary(out_dir: str | Path, **fields) -> None:
    """Add ``fields`` to ``summary.json`` (replaced whole; nothing when there is none or it does not parse)."""
    path = Path(out_dir) / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    summary.update(fields)
    write_json(path, summary)


def salvage_summary(out_dir: str | Path, lost: list[dict], workspace=None) -> dict:
    """``summary.json`` from what a run left when the process that writes it died: the streamed
    ``trajectories.csv`` (samples, duration, closest pair, geofence, final spread) and the number of planning
    records in ``plans.jsonl``. ``converged`` is None: nobody judged it. Returns the summary written."""
    from consensus.metrics.convergence import min_pair_distance_series, spread

    out = Path(out_dir)
    summary: dict[str, Any] = {"end_reason": lost_reason(lost), "lost_processes": lost,
                               "salvaged": True, "converged": None, "samples": 0}
    traj = out / "trajectories.csv"
    if traj.is_file():
        try:
            times, pos, tgt = read_trajectories(traj)
        except (ValueError, KeyError, OSError) as exc:
            summary["trajectories_error"] = str(exc)
        else:
            if len(times):
                mins = min_pair_distance_series(pos)
                last = pos[-1][np.isfinite(pos[-1]).all(axis=1)]
                summary.update(samples=int(len(times)), duration_s=float(times[-1]),
                               min_pair_distance_m=float(np.nanmin(mins)) if np.isfinite(mins).any() else None,
                               outside_geofence_m=outside_geofence_m(pos, workspace),
                               final_spread_m=float(spread(last)) if len(last) > 1 else None)
    plans = out / "plans.jsonl"
    if plans.is_file():
        summary["plans"] = sum(1 for line in plans.read_text(errors="replace").split("\n") if line.strip())
    write_json(out / "summary.json", summary)
    return summary
