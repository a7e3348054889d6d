"""A video of a finished run, from its run directory: ``consensus plot RUN --video`` and ``consensus run ... --video``.

What it reads (``consensus.runs.rundir``'s layout): ``trajectories.csv`` (t, robot, x, y, target_x, target_y; the one
file it needs), ``params.yaml`` (ROS runs) or else ``manifest.json``'s config (headless runs) for the topology, the
workspace, ``footprint_radius_m``, the sim and the scenario, and ``plans.jsonl`` for the planners' targets when
``trajectories.csv`` has none.

Two sources of frames:

* **top-down** (every sim, every scenario that writes ``trajectories.csv``): matplotlib on the Agg canvas, one figure
  whose artists are moved frame by frame: each robot's footprint (a disc of ``footprint_radius_m``), its trail, its
  current target (``+``, a dashed line to it), the communication graph's edges between the robots' current positions
  (``consensus.graphs.topology.make_graph`` of the run's topology; up to ``plots.MAX_DRAWN_EDGES``), the workspace
  rectangle and the run time.
* **a simulator's renderer**: the ``renderer`` of the run's simulator in the registry (``consensus.control.motion``;
  ``sim: mujoco``: ``consensus.sims.mujoco.world.render_frames(params, times, poses, width, height)``) when its
  module imports and offers it; a renderer that raises ``RuntimeError`` (no OpenGL: EGL or OSMesa) gives the
  top-down animation and one line saying why.

Frames are taken at ``FPS`` frames per second of run time (played at ``FPS``: real time), at most ``MAX_FRAMES``
(a longer run is subsampled evenly and plays faster; the frame says how much). Formats: MP4 (H.264) through an
ffmpeg (``imageio-ffmpeg``'s bundled binary, the ``video`` extra, else ``ffmpeg`` on PATH), GIF through Pillow
(matplotlib's own dependency: always there). The default is MP4 when an ffmpeg is found, else GIF; MP4 asked for
without an ffmpeg gives the GIF and one line saying why. The file is written beside its place and renamed: a
failure leaves no cut video.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from consensus.errors import ConfigError, ConsensusError
from consensus.loader import load

#: frames per second of run time, and the video's playback rate
FPS = 10.0
#: at most this many frames (a long run is subsampled evenly)
MAX_FRAMES = 400
#: frame size in pixels (square; a multiple of 16 for H.264)
SIZE_PX = {"mp4": 640, "gif": 512}
FORMATS = ("mp4", "gif")
OPENGL_HINT = "apt install libegl1 (EGL) or libosmesa6 (OSMesa) for MuJoCo's renderer"


# --------------------------------------------------------------------------- what a run recorded
class RunRecord:
    """What the video needs from a run directory: times ``(T,)``, positions and targets ``(T, n, 2)``, the run's
    parameters (``params.yaml`` over ``manifest.json``'s config) and its scenario."""

    def __init__(self, run_dir: str | Path) -> None:
        from consensus.runs.rundir import read_trajectories

        self.dir = Path(run_dir)
        if not self.dir.is_dir():
            raise ConfigError(f"{self.dir}: no such run directory")
        traj = self.dir / "trajectories.csv"
        if not traj.is_file():
            raise ConfigError(f"{traj}: not found; a video is drawn from a run's trajectories.csv (runs of scenarios "
                              f"that move robots write it)")
        try:
            self.times, self.positions, self.targets = read_trajectories(traj)
        except (KeyError, ValueError, TypeError) as exc:
            raise ConfigError(f"{traj}: not a trajectories file (columns t, robot, x, y, target_x, target_y): "
                              f"{type(exc).__name__}: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{traj}: cannot be read: {exc.strerror or exc}") from None
        if len(self.times) < 2 or not np.isfinite(self.positions).any():
            raise ConfigError(f"{traj}: fewer than two samples of the robots' positions; nothing to animate")
        self.params, self.scenario = self._params()
        if not np.isfinite(self.targets).any():
            self._targets_from_plans()

    def _params(self) -> tuple[dict, str]:
        params: dict[str, Any] = {}
        scenario = ""
        manifest = self.dir / "manifest.json"
        if manifest.is_file():
            try:
                data = json.loads(manifest.read_text())
            except (OSError, ValueError) as exc:
                raise ConfigError(f"{manifest}: not readable JSON ({exc})") from None
            if isinstance(data, dict):
                params.update(data.get("config") or {})
                scenario = str(data.get("scenario") or "")
        if (self.dir / "params.yaml").is_file():          # what the nodes were started with wins
            from consensus.settings import params_file_fields

            params.update(params_file_fields(self.dir / "params.yaml", _config_class(scenario)))
        return params, scenario

    def _targets_from_plans(self) -> None:
        """Each robot's newest planned target (``plans.jsonl``: t, robot, target) at each sample, when the
        trajectories hold none."""
        plans = self.dir / "plans.jsonl"
        if not plans.is_file():
            return
        rows = []
        for line in plans.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
                tgt = rec["target"]
                rows.append((float(rec["t"]), int(rec["robot"]), float(tgt[0]), float(tgt[1]) if len(tgt) > 1 else 0.0))
            except (ValueError, KeyError, TypeError, IndexError):
                continue                                # a record without a target (a cut line, a failed plan)
        n = self.positions.shape[1]
        for i in range(n):
            mine = sorted((t, x, y) for t, r, x, y in rows if r == i)
            if not mine:
                continue
            arr = np.asarray(mine)
            k = np.searchsorted(arr[:, 0], self.times, side="right") - 1
            ok = k >= 0
            self.targets[ok, i] = arr[k[ok], 1:]

    @property
    def n(self) -> int:
        return int(self.positions.shape[1])

    @property
    def sim(self) -> str:
        return str(self.params.get("sim") or "builtin")

    def footprint_radius(self) -> float:
        try:
            r = float(self.params.get("footprint_radius_m", 0.0) or 0.0)
        except (TypeError, ValueError):
            return 0.0
        return r if math.isfinite(r) and r > 0 else 0.0

    def workspace(self) -> tuple[float, float, float, float] | None:
        ws = self.params.get("workspace")
        try:
            vals = [float(v) for v in ws]
        except (TypeError, ValueError):
            return None
        if len(vals) < 4 or not all(math.isfinite(v) for v in vals[:4]) or vals[1] <= vals[0] or vals[3] <= vals[2]:
            return None
        return vals[0], vals[1], vals[2], vals[3]

    def graph(self):
        """The run's communication graph (its ``topology`` and that field's companions), or None when the run
        names none this module can rebuild."""
        from consensus.graphs.topology import make_graph

        name = self.params.get("topology")
        if not isinstance(name, str) or not name:
            return None
        adjacency = None
        if name == "custom":
            import yaml

            try:
                adjacency = yaml.safe_load(str(self.params.get("adjacency") or "")) or None
            except yaml.YAMLError:
                return None
        try:
            return make_graph(name, self.n, directed=bool(self.params.get("directed")) or None,
                              seed=self.params.get("seed"), p=float(self.params.get("topology_p", 0.5)),
                              adjacency=adjacency, leader=int(self.params.get("leader", 0) or 0))
        except (ConfigError, TypeError, ValueError):
            return None

    def poses(self) -> np.ndarray:
        """``(T, n, 3)``: x, y and a yaw read from the direction of motion (held while a robot stands still)."""
        pos = self.positions
        yaw = np.zeros(pos.shape[:2])
        for i in range(self.n):
            heading = 0.0
            for k in range(1, len(pos)):
                d = pos[k, i] - pos[k - 1, i]
                if np.all(np.isfinite(d)) and float(np.hypot(*d)) > 1e-4:
                    heading = float(np.arctan2(d[1], d[0]))
                yaw[k, i] = heading
            if len(pos) > 1:
                yaw[0, i] = yaw[1, i]
        return np.concatenate([np.nan_to_num(pos), yaw[..., None]], axis=-1)


def frame_times(times: np.ndarray, fps: float = FPS, max_frames: int = MAX_FRAMES) -> np.ndarray:
    """Evenly spaced frame times over the run: ``fps`` per second of run time, at most ``max_frames``."""
    t0, t1 = float(times[0]), float(times[-1])
    count = int(min(max_frames, max(2, math.floor((t1 - t0) * fps) + 1)))
    return np.linspace(t0, t1, count)


def sample_index(times: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The newest sample at or before each of ``at``."""
    return np.clip(np.searchsorted(times, at, side="right") - 1, 0, len(times) - 1)


# --------------------------------------------------------------------------- the top-down animation
def _view(rec: RunRecord, radius: float) -> tuple[float, float, float, float]:
    pts = np.concatenate([rec.positions.reshape(-1, 2), rec.targets.reshape(-1, 2)])
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    span = np.maximum(hi - lo, 1.0)
    lo, hi = lo - 0.08 * span - radius, hi + 0.08 * span + radius
    ws = rec.workspace()
    if ws is not None:                              # the workspace whole when it is not much larger than the paths
        wlo, whi = np.array([ws[0], ws[2]]), np.array([ws[1], ws[3]])
        if np.all(whi - wlo <= 2.5 * (hi - lo)):
            pad = 0.03 * (whi - wlo)
            lo, hi = np.minimum(lo, wlo - pad), np.maximum(hi, whi + pad)
    centre, half = (lo + hi) / 2, float(max(hi - lo)) / 2          # square, like the frame
    return centre[0] - half, centre[0] + half, centre[1] - half, centre[1] + half


def topdown_frames(rec: RunRecord, at: np.ndarray, size_px: int, speedup: float = 1.0) -> Iterator[np.ndarray]:
    """``size_px``² RGB frames (uint8) of the run at times ``at``, drawn top-down."""
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Circle, Rectangle

    from consensus.runs.plots import MAX_DRAWN_EDGES, colors, new_figure

    n, radius = rec.n, rec.footprint_radius()
    palette = colors(n)
    dpi = 100
    fig = new_figure(figsize=(size_px / dpi, size_px / dpi), dpi=dpi)
    ax = fig.add_axes((0.07, 0.06, 0.9, 0.86))
    x0, x1, y0, y1 = _view(rec, radius)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal", adjustable="box")
    ax.grid(True, alpha=0.25)
    ax.tick_params(labelsize=7)
    ws = rec.workspace()
    if ws is not None:
        ax.add_patch(Rectangle((ws[0], ws[2]), ws[1] - ws[0], ws[3] - ws[2], fill=False, ls="--", ec="0.45", lw=1.0))
    graph = rec.graph()
    edges = [(i, j) for i, j in graph.edges() if graph.directed or i < j] \
        if graph is not None and graph.n_edges <= MAX_DRAWN_EDGES else []
    edge_lines = LineCollection([], colors="0.72", linewidths=0.8, zorder=1)
    ax.add_collection(edge_lines)
    aim_lines = LineCollection([], colors=palette, linewidths=0.8, linestyles="--", alpha=0.6, zorder=2)
    ax.add_collection(aim_lines)
    trails = [ax.plot([], [], "-", color=palette[i], lw=1.0, alpha=0.45, zorder=2)[0] for i in range(n)]
    aims = [ax.plot([], [], "+", color=palette[i], ms=8, mew=1.6, zorder=3)[0] for i in range(n)]
    dots = [ax.plot([], [], "o", color=palette[i], ms=3, zorder=5)[0] for i in range(n)]
    discs = [ax.add_patch(Circle((0, 0), radius, fc=palette[i], ec=palette[i], alpha=0.35, lw=1.0, zorder=4))
             for i in range(n)] if radius > 0 else []
    topo = f", {graph.name} graph" if graph is not None else ""
    fig.suptitle(f"{rec.scenario or 'run'}: {n} robots{topo}, sim {rec.sim}", fontsize=10, y=0.975)
    clock = ax.text(0.02, 0.97, "", transform=ax.transAxes, va="top", ha="left", fontsize=10, family="monospace",
                    bbox={"fc": "white", "ec": "0.7", "alpha": 0.85}, zorder=6)
    speed = f"  ({speedup:.1f}x)" if speedup > 1.05 else ""
    idx = sample_index(rec.times, at)
    try:
        for t, k in zip(at, idx):
            pos, tgt = rec.positions[k], rec.targets[k]
            ok = np.all(np.isfinite(pos), axis=1)
            aim_ok = ok & np.all(np.isfinite(tgt), axis=1)
            for i in range(n):
                track = rec.positions[: k + 1, i]
                trails[i].set_data(track[:, 0], track[:, 1])
                dots[i].set_data(*(([pos[i, 0]], [pos[i, 1]]) if ok[i] else ([], [])))
                aims[i].set_data(*(([tgt[i, 0]], [tgt[i, 1]]) if aim_ok[i] else ([], [])))
                if discs:
                    discs[i].set_visible(bool(ok[i]))
                    if ok[i]:
                        discs[i].set_center((pos[i, 0], pos[i, 1]))
            edge_lines.set_segments([(pos[i], pos[j]) for i, j in edges if ok[i] and ok[j]])
            aim_lines.set_segments([(pos[i], tgt[i]) if aim_ok[i] else np.zeros((0, 2)) for i in range(n)])
            clock.set_text(f"t = {t:.1f} s{speed}")
            fig.canvas.draw()
            yield np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    finally:
        fig.clear()


# --------------------------------------------------------------------------- a simulator's renderer
def sim_renderer(sim: str) -> tuple[Callable | None, str]:
    """``(render_frames, "")`` of ``sim``'s renderer, or ``(None, why not)``; ``(None, "")`` for a sim without
    one."""
    from consensus.control.motion import sim_names, sim_spec

    target = sim_spec(sim).renderer if sim in sim_names() else ""
    if not target:
        return None, ""
    try:
        render = load(target)
    except ConfigError as exc:                  # no such module or function; the sim's extra missing
        return None, str(exc)
    except ImportError as exc:                  # the module is there but does not import
        return None, f"{target.partition(':')[0]} does not import ({exc})"
    if not callable(render):
        return None, f"{target} is not callable"
    return render, ""


def _checked(frames: Iterator, size_px: int, at: np.ndarray, speedup: float) -> Iterator[np.ndarray]:
    """A renderer's frames, checked (``size_px``² RGB), with the run time written in the top-left corner."""
    from PIL import Image, ImageDraw, ImageFont

    try:
        font = ImageFont.load_default(size=max(12, size_px // 32))
    except (TypeError, OSError):                # an old Pillow or one without FreeType: the bitmap font
        font = ImageFont.load_default()
    speed = f"  ({speedup:.1f}x)" if speedup > 1.05 else ""
    for t, frame in zip(at, frames):
        arr = np.asarray(frame)
        if arr.shape != (size_px, size_px, 3):
            raise RuntimeError(f"the renderer gave a frame of shape {arr.shape}, not {(size_px, size_px, 3)}")
        im = Image.fromarray(arr.astype(np.uint8, copy=False))
        draw = ImageDraw.Draw(im)
        text = f"t = {t:.1f} s{speed}"
        box = draw.textbbox((10, 8), text, font=font)
        draw.rectangle((box[0] - 4, box[1] - 3, box[2] + 4, box[3] + 3), fill=(255, 255, 255))
        draw.text((10, 8), text, fill=(0, 0, 0), font=font)
        yield np.asarray(im)


# --------------------------------------------------------------------------- writers
def ffmpeg_exe() -> tuple[str | None, str]:
    """``(path, "")`` of an ffmpeg (imageio-ffmpeg's, else one on PATH) or ``(None, why not)``."""
    from consensus.extras import install_command, optional

    bundled = optional("imageio_ffmpeg")
    if bundled is not None:
        try:
            return bundled.get_ffmpeg_exe(), ""
        except RuntimeError as exc:
            why = f"imageio-ffmpeg has no binary here ({exc})"
    else:
        why = f"no imageio-ffmpeg ({install_command('video')})"
    found = shutil.which("ffmpeg")
    return (found, "") if found else (None, f"{why} and no ffmpeg on PATH")


def _write_gif(frames: Iterator[np.ndarray], path: Path, fps: float) -> int:
    from PIL import Image

    # one palette for every frame, the first frame's (every robot, edge and target is drawn in it): colours do not
    # flicker, and each frame is kept as its 8-bit indices only (400 frames of 512 px: 100 MB)
    quantized: list = []
    palette = None
    for frame in frames:
        im = Image.fromarray(frame)
        if palette is None:
            palette = im.quantize(colors=128, method=Image.Quantize.MEDIANCUT)
        quantized.append(im.quantize(palette=palette, dither=Image.Dither.NONE))
    if not quantized:
        raise ConsensusError("no frames to write")
    quantized[0].save(path, format="GIF", save_all=True, append_images=quantized[1:],
                      duration=max(20, int(round(1000 / fps))), loop=0)
    return len(quantized)


def _write_mp4(frames: Iterator[np.ndarray], path: Path, fps: float, size_px: int, exe: str) -> int:
    cmd = [exe, "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{size_px}x{size_px}",
           "-r", f"{fps:g}", "-i", "-", "-an", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart",
           "-f", "mp4", str(path)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    count = 0
    try:
        for frame in frames:
            proc.stdin.write(np.ascontiguousarray(frame, dtype=np.uint8).tobytes())
            count += 1
        proc.stdin.close()
        err = proc.stderr.read().decode(errors="replace")
        code = proc.wait()
    except BrokenPipeError:
        code, err = proc.wait(), proc.stderr.read().decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if code != 0:
        raise ConsensusError(f"ffmpeg ({exe}) failed with exit status {code}: {err.strip()[-300:]}")
    return count


# --------------------------------------------------------------------------- the one entry point
def write_video(run_dir: str | Path, out: str | Path | None = None, fmt: str | None = None, *,
                fps: float = FPS, max_frames: int = MAX_FRAMES, say: Callable[[str], None] = print) -> Path:
    """Write the video of the run in ``run_dir`` (module docstring) to ``out``: a file ``*.mp4``/``*.gif`` (its
    suffix is the format unless ``fmt`` says otherwise), or a folder for ``video.<fmt>`` (default: the run
    directory). ``fmt`` "mp4", "gif" or None (mp4 when an ffmpeg is found). Returns the path written. ``say`` gets
    the one line of each fallback (gif for mp4, top-down for the sim's renderer)."""
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"video format {fmt!r}: choose one of {', '.join(FORMATS)}")
    out_file = out is not None and Path(out).suffix.lower().lstrip(".") in FORMATS
    if out_file and fmt is None:
        fmt = Path(out).suffix.lower().lstrip(".")
    rec = RunRecord(run_dir)
    exe, why = ffmpeg_exe() if fmt in (None, "mp4") else (None, "")
    if fmt == "mp4" and exe is None:
        say(f"video: GIF instead of MP4: {why}")
    fmt = "mp4" if exe is not None else "gif"
    path = Path(out) if out_file else Path(out or rec.dir) / f"video.{fmt}"
    if path.suffix.lower() != f".{fmt}":
        path = path.with_suffix(f".{fmt}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{path.parent}: cannot create it ({exc.strerror or exc})") from None
    size = SIZE_PX[fmt]
    at = frame_times(rec.times, fps, max_frames)
    run_span = float(rec.times[-1] - rec.times[0])
    speedup = run_span / max((len(at) - 1) / fps, 1e-9)
    tmp = path.with_name(f".{path.name}.part")

    def write(frames: Iterator[np.ndarray]) -> None:
        try:
            if fmt == "mp4":
                _write_mp4(frames, tmp, fps, size, exe)
            else:
                _write_gif(frames, tmp, fps)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    render, why = sim_renderer(rec.sim)
    if render is not None:
        try:
            params = dict(rec.params)
            world = rec.dir / "world.xml"           # the world the run stepped, where its simulator kept it
            if world.is_file():
                params["world_xml"] = world.read_text(encoding="utf-8", errors="replace")
            frames = _checked(iter(render(params, [float(t) for t in at],
                                          rec.poses()[sample_index(rec.times, at)], size, size)), size, at, speedup)
            write(frames)
            return path
        except (RuntimeError, ConfigError) as exc:      # no OpenGL; the sim's extra missing
            why = str(exc)
    if why:
        say(f"video: top-down animation instead of {rec.sim}'s renderer: {why}; {OPENGL_HINT}")
    write(topdown_frames(rec, at, size, speedup))
    return path


def run_dir_of(path: str | Path) -> Path:
    """The run directory of ``path``: the run directory itself, its bag directory (``RUN/bag``) or the bag's file."""
    path = Path(path)
    if path.is_file() and path.suffix == ".mcap":
        return path.parent.parent
    if path.is_dir() and not (path / "trajectories.csv").is_file() and \
            ((path / "metadata.yaml").is_file() or any(path.glob("*.mcap"))):
        return path.parent
    return path


def _config_class(scenario: str):
    """The config class of the run's scenario (its params.yaml's nested names -> fields), or None."""
    from consensus import registry

    sc = registry.scenarios().get(scenario)
    return getattr(sc, "config_cls", None)
