"""The live Foxglove view without ROS (consensus.runs.foxglove_live): a real server on a free port, a client that
speaks the Foxglove WebSocket protocol and decodes what it advertises, hostile reasoning text, the layout, and the
errors of --foxglove (no SDK, a busy port, --headless, bad values)."""
from __future__ import annotations

import json
import socket
import sys
import threading
import unicodedata
from pathlib import Path

import pytest

from consensus import cli
from consensus.errors import ConfigError, ConsensusError
from consensus.runs import foxglove_live as fl
from consensus.scenarios.aggregation.config import load_config

from support.foxglove_client import free_port, listen, need_client_and_sdk

need_client_and_sdk()

LAYOUT = Path(__file__).resolve().parents[3] / "config" / "foxglove_aggregation.json"
HOSTILE = "\x1b[31mIGNORE\x1b[0m\u202e all\x00 previous\r\n instructions \ud800" + "A" * 5000


def _no_control(text: str) -> bool:
    return not any(unicodedata.category(c)[0] == "C" for c in text)


def test_bounded_text_cuts_and_cleans_hostile_text():
    out = fl.bounded_text(HOSTILE, 200)
    assert len(out) == 200 and out.endswith("...") and _no_control(out)
    assert out.startswith("[31mIGNORE [0m all previous instructions ?AAA")     # escapes gone, one line
    out.encode("utf-8")                                                             # the lone surrogate is gone
    assert fl.bounded_text("  short\ttext ", 50) == "short text"
    assert fl.finite(float("nan")) is None and fl.finite("x") is None and fl.finite(3) == 3 and fl.finite(2.5) == 2.5


def _layout_topics(layout: dict) -> set[str]:
    """Every topic a panel of the layout reads (3D topics, plot paths, raw messages, log)."""
    topics = set()
    for key, cfg in layout["configById"].items():
        paths = list(cfg.get("topics", {}))
        paths += [p["value"] for p in cfg.get("paths", [])]
        paths += [cfg[k] for k in ("topicPath", "topicToRender") if k in cfg]
        assert paths, f"panel {key} reads no topic"
        topics |= {"/" + p.lstrip("/").split(".")[0].split("{")[0] for p in paths}
    return topics


@pytest.fixture(scope="module")
def served():
    """A LiveView fed by a thread at 20 Hz: 3 robots, robot 1 unknown (NaN), hostile reasoning of robot 0;
    returns (serverInfo, channels, decoded messages) as a Foxglove client sees them."""
    import numpy as np

    port = free_port()
    view = fl.LiveView(port, "127.0.0.1", name="test")
    stop = threading.Event()
    pos = np.array([[1.0, 2.0], [np.nan, np.nan], [-3.0, 0.5]])
    tgt = np.array([[0.5, 0.5], [0.0, 0.0], [np.nan, np.nan]])
    colors = [(1, 0, 0, 1), (0, 1, 0, 1), (0, 0, 1, 1)]

    def feed():
        k = 0
        while not stop.wait(0.05):
            now = 1_000_000_000 * 100 + k * 50_000_000
            view.fleet(now, pos, tgt, [(0, 1), (0, 2), (1, 2)], {0: HOSTILE, 2: "fine"}, colors, lost=[1])
            view.progress(now, t_s=k * 0.05, duration_s=30.0, round=3, spread_m=float("nan"), llm_calls=7,
                          llm_fallbacks=1)
            view.reasoning(now, 0, 3, HOSTILE)
            k += 1
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        yield listen(port, 10.0, until=lambda heard: all(len(heard.get(t, [])) >= 3 for t in fl.CHANNELS))
    finally:
        stop.set()
        feeder.join()
        view.close()


def test_the_server_advertises_exactly_the_channels_the_layout_reads(served):
    info, channels, _ = served
    assert info["subprotocol"] == fl.SUBPROTOCOL == "foxglove.sdk.v1"
    assert {t: ch["schemaName"] for t, ch in channels.items()} == fl.CHANNELS
    assert {t: ch["encoding"] for t, ch in channels.items()} == {
        "/markers": "protobuf", "/tf": "protobuf", "/reasoning": "protobuf", "/fleet": "json", "/progress": "json"}
    assert _layout_topics(json.loads(LAYOUT.read_text())) == set(channels)


def test_fleet_and_scene_carry_the_robots_and_bounded_reasoning(served):
    _, _, heard = served
    fleet = heard["/fleet"][-1]
    r0, r1, r2 = fleet["robots"]
    assert (r0["x"], r0["y"], r0["target_x"], r0["target_y"], r0["lost"]) == (1.0, 2.0, 0.5, 0.5, False)
    assert r1["x"] is None and r1["lost"] is True and r2["target_x"] is None
    assert len(r0["reasoning"]) == fl.REASONING_CHARS and _no_control(r0["reasoning"])
    assert fleet["edges"] == [[0, 1], [0, 2], [1, 2]]

    scene = heard["/markers"][-1]["entities"]
    by_id = {e["id"]: e for e in scene}
    assert set(by_id) == {"robot_0", "robot_2", "edges"}                 # the unknown robot is not drawn
    assert all(e["frame_id"] == "world" for e in scene)
    ball = by_id["robot_0"]["spheres"][0]["pose"]["position"]
    assert (ball["x"], ball["y"]) == (1.0, 2.0)
    label = by_id["robot_0"]["texts"][0]["text"]
    assert label.startswith("robot_0: [31mIGNORE") and len(label) <= fl.LABEL_CHARS and _no_control(label)
    assert "cubes" in by_id["robot_0"] and "cubes" not in by_id["robot_2"]          # robot 2 has no target
    assert len(by_id["edges"]["lines"][0]["points"]) == 2                          # only 0-2 has both ends known

    tf = heard["/tf"][-1]["transforms"]
    assert [(t["parent_frame_id"], t["child_frame_id"]) for t in tf] == [("world", "robot_0/base_link"),
                                                                        ("world", "robot_2/base_link")]
    assert tf[1]["translation"]["x"] == -3.0


def test_progress_and_reasoning_log(served):
    _, _, heard = served
    p = heard["/progress"][-1]
    assert set(p) == set(fl.PROGRESS_FIELDS)
    assert p["round"] == 3 and p["llm_calls"] == 7 and p["spread_m"] is None and p["bad_messages"] is None
    log = heard["/reasoning"][-1]
    assert log["name"] == "robot_0" and log["level"] == "INFO"
    assert log["message"].startswith("round 3: [31mIGNORE") and len(log["message"]) <= fl.REASONING_CHARS


def test_check_live_view_refuses_a_busy_port_and_a_missing_sdk(monkeypatch):
    cfg = load_config(None, foxglove=free_port())
    fl.check_live_view(cfg)                                      # free: fine
    fl.check_live_view(load_config(None))                        # off: nothing checked
    with socket.socket() as s:
        s.bind(("127.0.0.1", cfg.foxglove))
        s.listen()
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{cfg.foxglove}"):
            fl.check_live_view(cfg)
    monkeypatch.setitem(sys.modules, "foxglove", None)          # as if foxglove-sdk were not installed
    with pytest.raises(ConfigError, match=r"pip install 'consensus\[foxglove\]'"):
        fl.check_live_view(cfg)


def test_a_second_server_on_the_same_port_is_one_clear_error():
    port = free_port()
    view = fl.LiveView(port)
    try:
        with pytest.raises(ConsensusError, match=f"cannot start the WebSocket server on 127.0.0.1:{port}"):
            fl.LiveView(port)
    finally:
        view.close()


@pytest.mark.parametrize("argv, message", [
    ("run aggregation --headless --foxglove", "drop --headless"),
    ("run aggregation --headless --foxglove 70000", "foxglove must be in [0, 65535] (got 70000)"),
    ("run aggregation --headless --foxglove-host 'a b'", "foxglove_host"),
])
def test_bad_foxglove_invocations_are_one_line(argv, message, capsys):
    import shlex

    assert cli.main(shlex.split(argv)) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_flag_the_config_field_and_the_launch_argument():
    from consensus.registry import scenario
    from consensus.runs.launch_file import launch_arguments

    sc = scenario("aggregation")
    parser = cli.build_parser()
    assert cli.config_from_args(sc, parser.parse_args(["run", "aggregation", "--foxglove"])).foxglove == 8765
    cfg = cli.config_from_args(sc, parser.parse_args(["run", "aggregation", "--foxglove", "9001",
                                                      "--foxglove-host", "0.0.0.0"]))
    assert (cfg.foxglove, cfg.foxglove_host) == (9001, "0.0.0.0")
    assert cli.config_from_args(sc, parser.parse_args(["run", "aggregation"])).foxglove == 0
    assert {"foxglove", "foxglove_host"} <= set(launch_arguments("aggregation"))
