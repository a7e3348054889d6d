"""Records that survive their writer (issue 28, parts 5 and 6): every file a sweep or a run appends to is written
whole or not at all (``consensus.jsonl.AppendFile``: one write per record, truncated back on a full disk, an error
naming the path and the free space left), trajectories are streamed, and a bag cut by its writer's death is made
readable by ``consensus bag repair`` (checked with ``rosbags``, a reader that is not ours).

A full disk is injected: ``os.write`` as ``consensus.jsonl`` sees it writes part of a record and then raises ENOSPC,
as a file system does when it fills mid-write; the ROS runs fill a real (tmpfs) disk where the test may mount one."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Callable

import numpy as np
import pytest

from support import experiment_fixtures as fx
from consensus import jsonl
from consensus.errors import ConfigError
from consensus.jsonl import AppendFile, RecordWriteError, read_records


class DiskFills:
    """``os.write`` that works for ``budget`` bytes, then writes half of what it is given and fails with ENOSPC
    on the next call (what a filling disk does: a short write, then no space)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.real = os.write
        self.failed = 0

    def __call__(self, fd: int, data) -> int:
        data = bytes(data)
        if len(data) <= self.budget:
            self.budget -= len(data)
            return self.real(fd, data)
        if self.budget >= 0:
            n = self.real(fd, data[: max(1, len(data) // 2)])
            self.budget = -1
            return n                                      # a short write ...
        self.failed += 1
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))   # ... then no space


class OsWith:
    """``os`` as ``consensus.jsonl`` sees it, with another ``write`` (only that module is patched: pytest and its
    workers keep the real one)."""

    def __init__(self, write) -> None:
        self.write = write

    def __getattr__(self, name):
        return getattr(os, name)


def _valid_jsonl(path) -> list[dict]:
    text = path.read_text()
    assert text == "" or text.endswith("\n"), "the file ends in a cut record"
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_a_full_disk_leaves_only_whole_records_and_names_the_path_and_free_space(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    fh = AppendFile(path)
    fh.append(json.dumps({"i": 0}))
    fill = DiskFills(budget=len(json.dumps({"i": 1})) + 1)
    monkeypatch.setattr(jsonl, "os", OsWith(fill))
    fh.append(json.dumps({"i": 1}))
    with pytest.raises(RecordWriteError) as err:
        fh.append(json.dumps({"i": 2, "pad": "x" * 100}))
    assert err.value.filename == str(path) and err.value.errno == errno.ENOSPC
    assert "free" in err.value.strerror and "No space left" in err.value.strerror
    assert _valid_jsonl(path) == [{"i": 0}, {"i": 1}]
    with pytest.raises(RecordWriteError):                 # still full: still nothing half-written
        fh.append(json.dumps({"i": 3}))
    monkeypatch.undo()
    fh.append(json.dumps({"i": 4}))                      # space again: the file goes on from its last whole record
    fh.close()
    assert _valid_jsonl(path) == [{"i": 0}, {"i": 1}, {"i": 4}]


def test_a_cut_last_line_is_ended_before_the_next_record(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"b": ')
    with AppendFile(path) as fh:
        fh.append('{"c": 3}')
    records, bad = read_records(path, lambda r: isinstance(r, dict))
    assert records == [{"a": 1}, {"c": 3}] and bad == [2]


def test_a_sweep_on_a_full_disk_leaves_valid_results_and_one_clear_error(tmp_path, monkeypatch, capsys):
    """`consensus experiment` when results.jsonl cannot grow: exit 1, one line naming the file and the free space,
    and results.jsonl still valid JSONL; the resume then records the rest."""
    from consensus.errors import error_boundary
    from consensus.experiments.runner import RESULTS_FILE, read_results, run_experiment
    from consensus.experiments.spec import expand, resolve_spec

    spec = resolve_spec({"study": "toy", "trials": 6, "workers": 1}, fx.STUDIES)
    out = tmp_path / "sweep"

    line = 200                                           # a toy record is ~150 bytes: two fit, the third is cut
    monkeypatch.setattr(jsonl, "os", OsWith(DiskFills(budget=2 * line)))
    with pytest.raises(RecordWriteError) as err:
        run_experiment(spec, fx.STUDIES["toy"], out, progress=False)
    monkeypatch.undo()
    assert err.value.filename == str(out / RESULTS_FILE) and "free" in err.value.strerror
    # the CLI's boundary turns it into one line naming the path

    def body():
        raise err.value
    assert error_boundary(body, "consensus") == 1
    msg = capsys.readouterr().err
    assert str(out / RESULTS_FILE) in msg and "No space left on device" in msg and msg.count("\n") == 1
    total = len(expand(spec))
    kept = _valid_jsonl(out / RESULTS_FILE)
    assert 1 <= len(kept) < total and all(r["status"] == "ok" for r in kept)
    run_experiment(spec, fx.STUDIES["toy"], out, progress=False)          # resumed with space: all of them
    assert len(read_results(out / RESULTS_FILE)) == total == len(_valid_jsonl(out / RESULTS_FILE))


def test_a_transcript_on_a_full_disk_keeps_whole_records(tmp_path, monkeypatch):
    from consensus.llm.base import ChatRequest, ChatResponse
    from consensus.llm.transcripts import TranscriptStore

    store = TranscriptStore(tmp_path / "transcripts.jsonl")
    req = ChatRequest(messages=[{"role": "user", "content": "hi"}], model="m", tag="t")
    store.record_reply(req, ChatResponse(text="one", model="m", latency_s=0.1))
    monkeypatch.setattr(jsonl, "os", OsWith(DiskFills(budget=0)))
    with pytest.raises(RecordWriteError) as err:
        store.record_reply(req, ChatResponse(text="two " * 200, model="m", latency_s=0.1))
    monkeypatch.undo()
    assert err.value.filename == str(tmp_path / "transcripts.jsonl")
    store.record_reply(req, ChatResponse(text="three", model="m", latency_s=0.1))
    store.close()
    assert [r["response"] for r in _valid_jsonl(tmp_path / "transcripts.jsonl")] == ["one", "three"]
    assert store.written == 2


def test_streamed_trajectories_are_the_written_ones_and_keep_whole_samples_on_a_full_disk(tmp_path, monkeypatch):
    from consensus.runs.rundir import TrajectoryStream, read_trajectories, write_trajectories

    rng = np.random.default_rng(1)
    times = np.arange(6) * 0.2
    pos, tgt = rng.normal(size=(6, 3, 2)), rng.normal(size=(6, 3, 2))
    tgt[0] = np.nan
    write_trajectories(tmp_path / "whole.csv", times, pos, tgt)
    stream = TrajectoryStream(tmp_path / "streamed.csv")
    for k in range(6):
        stream.append(times[k], pos[k], tgt[k])
    assert (tmp_path / "streamed.csv").read_text() == (tmp_path / "whole.csv").read_text()
    monkeypatch.setattr(jsonl, "os", OsWith(DiskFills(budget=0)))
    with pytest.raises(RecordWriteError):
        stream.append(1.2, pos[0], tgt[0])
    monkeypatch.undo()
    stream.close()
    t, p, _ = read_trajectories(tmp_path / "streamed.csv")
    assert len(t) == 6 and np.allclose(p, np.round(pos, 4), atol=1e-4)
    # written whole (headless runs, the disaster grid): a full disk midway leaves the old file, no cut one
    from consensus.runs import rundir

    before = (tmp_path / "whole.csv").read_text()
    rows = rundir.trajectory_rows
    calls = iter(range(100))

    def rows_then_full(*a):
        if next(calls) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return rows(*a)
    monkeypatch.setattr(rundir, "trajectory_rows", rows_then_full)
    with pytest.raises(RecordWriteError, match="free"):
        write_trajectories(tmp_path / "whole.csv", times, pos * 2, tgt)
    assert (tmp_path / "whole.csv").read_text() == before and not list(tmp_path.glob("*.tmp"))


def test_outside_geofence_and_a_summary_salvaged_from_what_a_run_left(tmp_path):
    from consensus.runs.rundir import (TrajectoryStream, note_lost_processes, outside_geofence_m, salvage_summary,
                                       write_json)

    pos = np.zeros((3, 2, 2))
    pos[:, 1] = [1.0, 0.0]
    assert outside_geofence_m(pos, [-1, 1, -1, 1]) == 0.0
    pos[2, 1] = [4.0, -5.0]                                   # 3 m beyond x = 1, 4 m below y = -1
    assert outside_geofence_m(pos, [-1, 1, -1, 1]) == pytest.approx(5.0)
    assert outside_geofence_m(pos[..., :1], [-1, 1]) == pytest.approx(3.0)
    assert outside_geofence_m(pos, None) is None
    stream = TrajectoryStream(tmp_path / "trajectories.csv")
    for k in range(3):
        stream.append(0.2 * k, pos[k], pos[k])
    stream.close()
    (tmp_path / "plans.jsonl").write_text('{"robot": 0}\n{"robot": 1}\n')
    lost = [{"process": "recorder", "exit_code": -9, "rule": "the run ended"}]
    s = salvage_summary(tmp_path, lost, workspace=[-1, 1, -1, 1])
    assert json.loads((tmp_path / "summary.json").read_text()) == s
    assert s["end_reason"] == "lost:recorder" and s["salvaged"] is True and s["converged"] is None
    assert s["samples"] == 3 and s["plans"] == 2 and s["duration_s"] == pytest.approx(0.4)
    assert s["min_pair_distance_m"] == pytest.approx(1.0) and s["outside_geofence_m"] == pytest.approx(5.0)
    write_json(tmp_path / "summary.json", {"end_reason": "interrupted", "converged": False})
    s = note_lost_processes(tmp_path, [{"process": "fleet", "exit_code": -9, "rule": "the run ended"}])
    assert s["end_reason"] == "lost:fleet" and s["run_end_reason"] == "interrupted"


# --------------------------------------------------------------------------- bags cut by their writer's death
def _cut_bag(directory, n=400, cut=100, flush_at=250):
    """A bag whose writer died: flushed once at message ``flush_at``, then ``cut`` bytes short of what the writer
    had written when it was killed (no summary, no footer, no metadata.yaml)."""
    rclpy_ser = pytest.importorskip("rclpy.serialization")
    from geometry_msgs.msg import PointStamped

    from consensus.runs.bag import BagWriter, qos_profile

    w = BagWriter(directory, chunk_size=4096)
    w.add_topic("/robot_0/state", "geometry_msgs/msg/PointStamped", [qos_profile(reliable=False)])
    w.add_topic("/topology/graph", "std_msgs/msg/String", [qos_profile(transient_local=True)])
    for k in range(n):
        m = PointStamped()
        m.point.x = float(k)
        w.write("/robot_0/state", rclpy_ser.serialize_message(m), 10**9 + k * 10**7)
        if k == flush_at:
            w.flush()
    w._file.flush()
    data = w.path.read_bytes()
    w.path.write_bytes(data[: len(data) - cut])
    return w.path


@pytest.mark.parametrize("cut", [1, 100, 2000])
def test_consensus_bag_repair_makes_a_cut_bag_readable_by_rosbags(tmp_path, cut, capsys):
    rosbags = pytest.importorskip("rosbags.rosbag2")
    from consensus.cli import main
    from consensus.runs.bag import read_messages

    path = _cut_bag(tmp_path / "bag", cut=cut)
    assert not (tmp_path / "bag" / "metadata.yaml").exists()
    assert main(["plot", str(tmp_path / "bag")]) == 2                  # cut: no reader opens it
    assert main(["bag", "repair", str(tmp_path / "bag")]) == 0
    out = capsys.readouterr().out
    assert "repaired" in out, out
    msgs = [m for m in read_messages(tmp_path / "bag") if m[0] == "/robot_0/state"]
    xs = [m[3].point.x for m in msgs]
    assert xs == [float(k) for k in range(len(xs))] and len(xs) >= 251     # everything up to the flush, in order
    with rosbags.Reader(tmp_path / "bag") as reader:
        assert reader.message_count == len(msgs)
        got = [ts for _, ts, _ in reader.messages()]
        assert len(got) == len(msgs) and got == sorted(got)
        assert {c.topic for c in reader.connections} >= {"/robot_0/state"}
    assert main(["bag", "repair", str(path)]) == 0                      # a complete bag is left as it is
    assert "nothing to repair" in capsys.readouterr().out


@pytest.mark.needs("rosbag2")
@pytest.mark.parametrize("on_full_disk", [False, True])
def test_ros2_bag_info_reads_a_repaired_bag(tmp_path, monkeypatch, on_full_disk):
    import mcap.writer

    from support.needs import ros2_executable

    from consensus.runs.bag import repair_bag

    _cut_bag(tmp_path / "bag", cut=300)
    if on_full_disk:
        monkeypatch.setattr(mcap.writer.Writer, "finish",
                            lambda self: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device")))
    fixed = repair_bag(tmp_path / "bag")
    monkeypatch.undo()
    res = subprocess.run([ros2_executable(), "bag", "info", str(tmp_path / "bag")], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stderr
    assert "mcap" in res.stdout and "/robot_0/state" in res.stdout and str(fixed["messages"]) in res.stdout


def test_a_cut_bag_on_a_full_disk_is_repaired_in_place(tmp_path, monkeypatch):
    """No room for a repaired copy (ENOSPC while writing it): the cut tail is truncated away and the summary and
    footer appended in place; rosbags and our reader see every message of the whole chunks."""
    rosbags = pytest.importorskip("rosbags.rosbag2")
    import mcap.writer

    from consensus.runs.bag import read_messages, repair_bag

    path = _cut_bag(tmp_path / "bag", cut=300)
    size = path.stat().st_size

    def no_space(self):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(mcap.writer.Writer, "finish", no_space)
    fixed = repair_bag(tmp_path / "bag")
    monkeypatch.undo()
    assert fixed["repaired"] and fixed.get("in_place") and not list((tmp_path / "bag").glob("*.repair"))
    xs = [m[3].point.x for m in read_messages(tmp_path / "bag") if m[0] == "/robot_0/state"]
    assert xs == [float(k) for k in range(len(xs))] and len(xs) == fixed["messages"] >= 251
    with rosbags.Reader(tmp_path / "bag") as reader:
        assert reader.message_count == len(xs) == sum(1 for _ in reader.messages())
    assert path.stat().st_size < size + 8192                   # a summary, not a copy


class FillingFile:
    """The bag file as a filling disk sees it: writes pass until ``budget`` bytes, then one short write and
    ENOSPC."""

    def __init__(self, real, budget: int) -> None:
        self.real, self.budget = real, budget

    def write(self, data) -> int:
        data = bytes(data)
        if len(data) > self.budget:
            self.real.write(data[: max(0, self.budget)])
            self.budget = -1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.budget -= len(data)
        return self.real.write(data)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_a_bag_writer_on_a_full_disk_stops_once_and_its_bag_is_repaired(tmp_path):
    """The first failed write stops the writer with one error naming the file and the free space; later messages
    are dropped and counted, close() leaves the cut file, and repair_bag makes the flushed part readable."""
    rosbags = pytest.importorskip("rosbags.rosbag2")
    rclpy_ser = pytest.importorskip("rclpy.serialization")
    from geometry_msgs.msg import PointStamped

    from consensus.runs.bag import BagWriter, qos_profile, read_messages, repair_bag

    w = BagWriter(tmp_path / "bag", chunk_size=2048)
    w.add_topic("/robot_0/state", "geometry_msgs/msg/PointStamped", [qos_profile(reliable=False)])
    w._writer._Writer__stream = FillingFile(w._file, budget=6000)      # mcap's writer writes to this stream
    errors = []
    for k in range(400):
        m = PointStamped()
        m.point.x = float(k)
        try:
            w.write("/robot_0/state", rclpy_ser.serialize_message(m), 10**9 + k * 10**7)
            if k % 20 == 0:
                w.flush()
        except RecordWriteError as exc:
            errors.append(exc)
    assert len(errors) == 1 and errors[0].filename == str(w.path) and "free" in errors[0].strerror
    assert w.dropped > 0
    w.close()                                                   # no summary: left for the repair
    assert not (tmp_path / "bag" / "metadata.yaml").exists()
    assert repair_bag(tmp_path / "bag")["repaired"]
    xs = [m[3].point.x for m in read_messages(tmp_path / "bag")]
    assert len(xs) >= 20 and xs == [float(k) for k in range(len(xs))]
    with rosbags.Reader(tmp_path / "bag") as reader:
        assert reader.message_count == len(xs)


def test_bag_repair_of_what_is_not_a_bag_is_one_clear_error(tmp_path, capsys):
    from consensus.cli import main
    from consensus.runs.bag import repair_bag

    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "bag_0.mcap").write_bytes(b"not an mcap file" * 20)
    with pytest.raises(ConfigError, match="not an MCAP file"):
        repair_bag(tmp_path / "junk")
    assert (tmp_path / "junk" / "bag_0.mcap").read_bytes() == b"not an mcap file" * 20      # left as it was
    assert not list((tmp_path / "junk").glob("*.repair"))
    assert main(["bag", "repair", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "no such bag" in err and err.count("\n") == 1


# --------------------------------------------------------------------------- real runs that lose a writer
STRANGER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import rclpy
    from geometry_msgs.msg import PointStamped
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    rclpy.init()
    node = rclpy.create_node("stranger")
    pub = node.create_publisher(PointStamped, "/robot_0/state", 10)
    client = node.create_client(SetParameters, "/topology/set_parameters")
    msg = PointStamped()
    msg.header.frame_id = "world"
    msg.point.x = msg.point.y = 1000.0
    gate, switched = Path(sys.argv[1]), False
    while rclpy.ok():
        msg.header.stamp = node.get_clock().now().to_msg()
        pub.publish(msg)
        if not switched and gate.exists() and client.service_is_ready():
            value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value="ring")
            switch = Parameter(name="aggregation.topology", value=value)
            future = client.call_async(SetParameters.Request(parameters=[switch]))
            rclpy.spin_until_future_complete(node, future, timeout_sec=10)
            print("switched", future.result().results[0].successful, flush=True)
            switched = True
        time.sleep(1 / 50)
""")


def _pids(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _last_t(out) -> float:
    try:
        lines = (out / "trajectories.csv").read_text().splitlines()
    except OSError:
        return -1.0
    return float(lines[-1].split(",")[0]) if len(lines) > 1 else -1.0


def _kill(pattern: str, log) -> None:
    pids = _pids(pattern)
    assert pids, f"no process matches {pattern}:\n" + log.read_text()[-3000:]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


def _run_cli(tmp_path, name: str, events: list[tuple[float, Callable[[], None]]], duration: float = 30.0,
             log_dir=None):
    """``consensus run aggregation`` (3 robots, average planner) in a subprocess; each event runs once the
    recorder's streamed trajectories.csv reaches its time [s of the run]. Returns (exit code, output, run dir)."""
    out = tmp_path / name
    log = (log_dir or tmp_path) / f"{name}.log"
    cmd = [sys.executable, "-m", "consensus.cli", "run", "aggregation", "--robots", "3", "--planner", "average",
           "--duration", str(duration), "--seed", "5", "--out", str(out), "--set", "settle_s=0"]
    with log.open("w") as fh:
        run = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            for at, action in events:
                deadline = time.monotonic() + 60
                while _last_t(out) < at and run.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert run.poll() is None, log.read_text()[-3000:]
                action()
            run.wait(timeout=90)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
    return run.returncode, log.read_text(), out


@pytest.mark.ros
def test_a_killed_recorder_ends_the_run_with_a_summary_from_what_it_streamed(tmp_path):
    rosbags = pytest.importorskip("rosbags.rosbag2")
    killed_at: list[float] = []
    out = tmp_path / "run"

    def kill_recorder():
        killed_at.append(_last_t(out))
        _kill(f"__node:=recorder .*{out}", tmp_path / "run.log")

    code, output, out = _run_cli(tmp_path, "run", [(4.0, kill_recorder)])
    assert code == 1 and "summary.json is written from what the run left" in output, output[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["end_reason"] == "lost:recorder" and summary["salvaged"] is True, summary
    assert summary["lost_processes"][0]["process"] == "recorder" and summary["lost_processes"][0]["exit_code"] == -9
    # everything the recorder sampled up to its death is on disk, whole
    from consensus.runs.rundir import read_trajectories

    times, pos, _ = read_trajectories(out / "trajectories.csv")
    assert times[-1] >= killed_at[0] and summary["samples"] == len(times) >= 15
    assert np.isfinite(pos[-1]).all() and summary["min_pair_distance_m"] > 0
    assert summary["plans"] == len(_valid_jsonl(out / "plans.jsonl")) > 0
    with rosbags.Reader(out / "bag") as reader:            # the bag writer was stopped as usual: complete
        assert reader.message_count > 100


@pytest.mark.ros
def test_a_lost_bag_writer_and_fleet_are_named_and_the_record_is_ground_truth(tmp_path):
    """A stranger publishes robot 0's state at (1000, 1000) all along and switches the graph to a ring; the bag
    writer is killed (the run goes on), then the fleet process (the run ends). The summary names both losses,
    not `interrupted`; the trajectories and safety figures are the simulator's odometry, not the stranger's
    states; every graph is listed with its time; the bag is repaired and read by rosbags."""
    rosbags = pytest.importorskip("rosbags.rosbag2")
    from support.bag_odometry import odometry_in_bag

    out = tmp_path / "run"
    gate = tmp_path / "switch"
    stranger = subprocess.Popen([sys.executable, "-c", STRANGER, str(gate)], env=dict(os.environ),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        code, output, out = _run_cli(tmp_path, "run", [
            (2.0, gate.touch),
            (4.0, lambda: _kill(f"__node:=bag_recorder .*{out}", tmp_path / "run.log")),
            (7.0, lambda: _kill(f"__node:=fleet .*{out}", tmp_path / "run.log"))])
    finally:
        stranger.kill()
        said, err = stranger.communicate(timeout=30)
    assert "switched True" in said, (said, err[-2000:])
    assert code == 1 and "'bag_recorder' died" in output, output[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["end_reason"] == "lost:fleet" and summary["run_end_reason"] == "interrupted", summary
    assert [d["process"] for d in summary["lost_processes"]] == ["bag_recorder", "fleet"]
    changes = summary["topology_changes"]
    assert [c["topology"] for c in changes] == ["complete", "ring"], changes
    assert changes[0]["t_s"] == 0.0 and 1.0 < changes[1]["t_s"] < 7.5 and changes[1]["links"] == 6
    # the record is the simulator's: robot 0 never appears at the stranger's (1000, 1000)
    from consensus.runs.rundir import read_trajectories

    _, pos, _ = read_trajectories(out / "trajectories.csv")
    assert summary["positions_from"] == "ground_truth" and np.nanmax(np.abs(pos)) < 20
    assert summary["outside_geofence_m"] == 0.0
    with rosbags.Reader(out / "bag") as reader:              # repaired: whole chunks up to the kill
        topics = {c.topic: c.msgcount for c in reader.connections}
        assert topics.get("/robot_0/odom", 0) > 20 and topics.get("/robot_0/state", 0) > 5, topics
    odom = odometry_in_bag(out)
    assert odom.robots == 3 and summary["min_pair_distance_m"] <= odom.closest + 0.5


@pytest.fixture
def small_disk(tmp_path):
    """A 600 kB tmpfs for a run's directory (the test needs the privilege to mount one; else it skips)."""
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(where)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); the full-disk run "
                    f"needs the privilege (the unit tests above inject ENOSPC instead)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(disk) -> None:
    """Another program fills the disk: write until there is no space left."""
    with open(disk / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"x" * 4096)
        except OSError:
            pass


@pytest.mark.ros
def test_a_run_whose_disk_fills_leaves_every_file_readable(tmp_path, small_disk):
    """The disk of a running aggregation fills (another program takes the rest at t = 4 s): the run still ends
    with its summary (the room set aside at the start), the streamed files hold whole records up to the fill, the
    bag writer's cut file is repaired in place, and no figure is left half-written."""
    rosbags = pytest.importorskip("rosbags.rosbag2")
    from consensus.runs.rundir import read_trajectories

    out = small_disk / "run"
    code, output, out = _run_cli(small_disk, "run", [(4.0, lambda: _fill(small_disk))], duration=9.0,
                                 log_dir=tmp_path)
    assert code == 0, output[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["end_reason"] == "duration" and summary["write_errors"], summary
    assert not (out / ".space_reserve").exists()
    times, _, _ = read_trajectories(out / "trajectories.csv")
    assert 4.0 <= times[-1] < 9.0 and summary["samples"] > len(times)      # whole samples, up to the fill
    _valid_jsonl(out / "plans.jsonl")
    for name in ("paths.png", "planned_vs_actual.png"):
        assert not (out / name).exists() or (out / name).read_bytes().endswith(b"IEND\xaeB`\x82")
    assert "the bag was cut" in output, output[-3000:]
    # said before the repair; its figures too unless the repair took the last bytes the summary's rewrite needed
    assert summary["bag_repaired"].get("in_place", True) is True, summary["bag_repaired"]
    assert "messages" in summary["bag_repaired"] or "summary.json could not take" in output, output[-3000:]
    with rosbags.Reader(out / "bag") as reader:
        assert reader.message_count > 100 and reader.message_count == sum(1 for _ in reader.messages())


@pytest.mark.ros
def test_a_recorder_started_after_the_robots_first_rounds_still_records_them(ros, tmp_path):
    """The recorder starts last, and on a loaded host its subscriptions may match seconds after the robots planned
    their first rounds (a CI run's plans.jsonl lacked the first round's fallback that the summary counted). The
    planning records are kept for a late subscriber (QoS class ``history``): the recorder gets every one of them."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from consensus import names
    from consensus.ros import qos
    from consensus.ros.records import ReasoningRecord
    from consensus.scenarios.aggregation.ros.recorder import Recorder

    robot = Node("agent", namespace="robot_1")
    pub = robot.create_publisher(String, names.PLANNER_REASONING.name, qos.profile(names.PLANNER_REASONING))
    for k in range(3):        # as the robot publishes them (consensus.ros.robot), before any recorder runs
        pub.publish(String(data=ReasoningRecord(robot=1, round=k, fallback=k == 0,
                                                fallback_reason="llm_error" if k == 0 else "").encode()))
    node = Node("recorder", parameter_overrides=[Parameter("num_robots", value=2),
                                                 Parameter("output_dir", value=str(tmp_path / "run")),
                                                 Parameter("markers", value=False)])
    executor = SingleThreadedExecutor()
    try:
        rec = Recorder(node)
        executor.add_node(node)
        executor.add_node(robot)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and rec.rounds_planned[1] < 3:
            executor.spin_once(timeout_sec=0.1)
        assert list(rec.rounds_planned) == [0, 3]
    finally:
        executor.shutdown()
        node.destroy_node()
        robot.destroy_node()
