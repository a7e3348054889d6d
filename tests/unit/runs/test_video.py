"""A video of every run (consensus.runs.video): `consensus plot RUN --video` and `consensus run ... --video` write
an animation of the run from its run directory (GIF always, MP4 with an ffmpeg), a simulator's renderer is used
when it offers one (MuJoCo's; the top-down animation when it cannot render), and bad input is one error."""
from __future__ import annotations

import json
import shutil
import sys
import types

import numpy as np
import pytest
from PIL import Image, ImageChops

from consensus.cli import main
from consensus.errors import ConfigError
from consensus.runs import video


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A small headless aggregation run: 4 robots gathering for 8 s."""
    out = tmp_path_factory.mktemp("video") / "run"
    code = main(["run", "aggregation", "--robots", "4", "--planner", "average", "--topology", "ring", "--headless",
                 "--duration", "8", "--out", str(out), "-q"])
    assert code == 0
    return out


@pytest.fixture
def run_copy(run_dir, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(run_dir, out)
    for old in out.glob("video.*"):
        old.unlink()
    return out


def _frames(path):
    im = Image.open(path)
    frames = []
    for k in range(im.n_frames):
        im.seek(k)
        frames.append(im.convert("RGB"))
    return frames


def _leftovers(path):
    return [p.name for p in path.iterdir() if p.name.startswith(".") or p.name.endswith(".part")]


def test_a_gif_of_the_run_is_an_animation_of_the_robots_moving(run_copy):
    rec = video.RunRecord(run_copy)
    assert rec.n == 4 and rec.footprint_radius() == pytest.approx(0.2)
    assert rec.graph().name == "ring" and rec.workspace() == (-10.0, 10.0, -10.0, 10.0)
    path = video.write_video(run_copy, fmt="gif")
    assert path == run_copy / "video.gif"
    frames = _frames(path)
    assert len(frames) == len(video.frame_times(rec.times)) == 81          # 8 s at 10 frames per second of run time
    assert frames[0].size == (video.SIZE_PX["gif"],) * 2
    assert ImageChops.difference(frames[0], frames[-1]).getbbox() is not None   # the robots moved
    assert Image.open(path).info["duration"] == 100                         # played in real time
    assert _leftovers(run_copy) == []


def test_a_long_run_is_subsampled_to_the_frame_cap():
    at = video.frame_times(np.linspace(0.0, 300.0, 3001))
    assert len(at) == video.MAX_FRAMES and at[0] == 0.0 and at[-1] == 300.0
    assert np.allclose(np.diff(at), np.diff(at)[0])


def test_an_mp4_where_an_ffmpeg_is_found(run_copy):
    exe, why = video.ffmpeg_exe()
    if exe is None:
        pytest.skip(f"no ffmpeg: {why}")
    path = video.write_video(run_copy)                                      # mp4 is the default with an ffmpeg
    assert path == run_copy / "video.mp4"
    assert path.read_bytes()[4:8] == b"ftyp"
    ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="counting the frames uses imageio-ffmpeg")
    frames, seconds = ffmpeg.count_frames_and_secs(str(path))
    assert frames == 81 and seconds == pytest.approx(8.1, abs=0.15)
    assert _leftovers(run_copy) == []


def test_mp4_without_an_ffmpeg_is_a_gif_and_one_line_says_why(run_copy, monkeypatch):
    monkeypatch.setattr(video, "ffmpeg_exe", lambda: (None, "no ffmpeg here"))
    said = []
    path = video.write_video(run_copy, fmt="mp4", max_frames=12, say=said.append)
    assert path == run_copy / "video.gif" and len(_frames(path)) == 12
    assert said == ["video: GIF instead of MP4: no ffmpeg here"]
    assert not (run_copy / "video.mp4").exists()


def test_a_run_without_trajectories_is_one_error_naming_the_file(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(ConfigError, match="trajectories.csv: not found"):
        video.write_video(tmp_path)
    assert main(["plot", str(tmp_path), "--video"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trajectories.csv" in err[0] and "Traceback" not in err[0]
    (tmp_path / "trajectories.csv").write_text("time,who\n1,2\n")
    with pytest.raises(ConfigError, match="not a trajectories file"):
        video.write_video(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "trajectories.csv"]   # nothing written


def test_a_renderer_that_fails_midway_leaves_no_cut_file(run_copy, monkeypatch):
    def broken(rec, at, size_px, speedup=1.0):
        yield np.zeros((size_px, size_px, 3), np.uint8)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(video, "topdown_frames", broken)
    with pytest.raises(OSError):
        video.write_video(run_copy, fmt="gif")
    assert not (run_copy / "video.gif").exists() and _leftovers(run_copy) == []


def _as_mujoco_run(run):
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["config"]["sim"] = "mujoco"
    (run / "manifest.json").write_text(json.dumps(manifest))


def test_a_mujoco_run_uses_the_simulators_renderer(run_copy, monkeypatch):
    _as_mujoco_run(run_copy)
    calls = []

    def render_frames(params, times, poses, width, height):
        calls.append((params, times, poses, width, height))
        for k in range(len(times)):                     # a solid colour with a white square moving across
            frame = np.full((height, width, 3), (200, 30, 40), np.uint8)
            frame[100:120, 100 + 20 * k:120 + 20 * k] = 255
            yield frame

    monkeypatch.setitem(sys.modules, "consensus.sims.mujoco.world",
                        types.SimpleNamespace(render_frames=render_frames))
    said = []
    path = video.write_video(run_copy, fmt="gif", max_frames=20, say=said.append)
    assert said == []
    (params, times, poses, width, height), = calls
    assert params["sim"] == "mujoco" and params["num_robots"] == 4
    assert len(times) == 20 and poses.shape == (20, 4, 3) and width == height == video.SIZE_PX["gif"]
    rec = video.RunRecord(run_copy)
    assert np.allclose(poses[-1, :, :2], rec.positions[-1])                 # the recorded positions, with a yaw
    frames = _frames(path)
    def near(px, rgb):                                                      # within the GIF palette's rounding
        return max(abs(a - b) for a, b in zip(px, rgb)) <= 8

    assert len(frames) == 20 and near(frames[-1].getpixel((5, 300)), (200, 30, 40))
    assert near(frames[0].getpixel((8, 8)), (255, 255, 255))                # the time's box, written over the frame
    assert near(frames[0].getpixel((105, 105)), (255, 255, 255))            # the square moved across
    assert near(frames[-1].getpixel((485, 105)), (255, 255, 255)) and near(frames[-1].getpixel((105, 105)),
                                                                            (200, 30, 40))


def test_without_opengl_the_top_down_animation_and_one_line_naming_the_apt_package(run_copy, monkeypatch):
    _as_mujoco_run(run_copy)

    def render_frames(params, times, poses, width, height):
        raise RuntimeError("no OpenGL context for MuJoCo's renderer (EGL)")
        yield                                                               # a generator, as the real one

    monkeypatch.setitem(sys.modules, "consensus.sims.mujoco.world",
                        types.SimpleNamespace(render_frames=render_frames))
    said = []
    path = video.write_video(run_copy, fmt="gif", max_frames=10, say=said.append)
    assert len(said) == 1 and "top-down animation" in said[0] and "no OpenGL" in said[0] and "libegl1" in said[0]
    frames = _frames(path)
    assert len(frames) == 10 and ImageChops.difference(frames[0], frames[-1]).getbbox() is not None
    # a module without render_frames: the same fallback, saying so
    monkeypatch.setitem(sys.modules, "consensus.sims.mujoco.world", types.SimpleNamespace())
    said.clear()
    video.write_video(run_copy, fmt="gif", max_frames=5, say=said.append)
    assert len(said) == 1 and "offers no render_frames" in said[0]


def test_consensus_run_video_writes_it_and_names_it_in_the_summary(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "aggregation", "--robots", "3", "--planner", "average", "--headless", "--duration", "4",
                 "--video", "--video-format", "gif", "--out", str(out), "-q"]) == 0
    assert len(_frames(out / "video.gif")) == 41
    assert json.loads((out / "summary.json").read_text())["video"] == "video.gif"
    assert f"video: {out / 'video.gif'}" in capsys.readouterr().out


def test_consensus_plot_video_from_the_run_or_its_bag(run_copy, tmp_path, capsys):
    bag = run_copy / "bag"
    bag.mkdir()
    (bag / "bag_0.mcap").write_bytes(b"")
    assert video.run_dir_of(bag) == run_copy and video.run_dir_of(bag / "bag_0.mcap") == run_copy
    assert video.run_dir_of(run_copy) == run_copy
    assert main(["plot", str(bag), "--video", "--video-format", "gif", "--out", str(tmp_path / "vids")]) == 0
    assert len(_frames(tmp_path / "vids" / "video.gif")) == 81
    assert "video:" in capsys.readouterr().out


def test_a_scenario_that_moves_no_robots_refuses_video_before_it_runs(tmp_path, capsys):
    out = tmp_path / "ng"
    assert main(["run", "naming-game", "--agents", "10", "--video", "--out", str(out)]) == 2
    assert "moves no robots" in capsys.readouterr().err
    assert not out.exists()
