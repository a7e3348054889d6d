"""MCAP bags (consensus.runs.bag): message definitions as rosbag2 writes them, a write/read round trip with real CDR
bytes, rosbag2's metadata.yaml, `consensus plot BAG` and its errors."""
from __future__ import annotations

import math

import pytest
import yaml

pytest.importorskip("rclpy")
pytest.importorskip("mcap_ros2")
from geometry_msgs.msg import PointStamped  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from consensus.cli import main  # noqa: E402
from consensus.errors import ConfigError  # noqa: E402
from consensus.runs.bag import (SEPARATOR, BagWriter, bag_file, message_definition, qos_profile,  # noqa: E402
                                read_messages, trajectories, type_hash)

STATE = "geometry_msgs/msg/PointStamped"


def _fake_prefix(tmp_path):
    """An install prefix with two made-up packages: a diamond of dependencies and a constant line."""
    msg = tmp_path / "share" / "pkg_a" / "msg"
    msg.mkdir(parents=True)
    (msg / "Top.msg").write_text("# comment Name line\nInner first\npkg_b/Leaf[] leaves\nuint8 K=3\nstring s\n")
    (msg / "Inner.msg").write_text("pkg_b/Leaf leaf\nfloat64[3] v\n")
    other = tmp_path / "share" / "pkg_b" / "msg"
    other.mkdir(parents=True)
    (other / "Leaf.msg").write_text("int32 x\n")
    return tmp_path


def test_message_definition_has_each_dependency_once_depth_first_sorted(tmp_path):
    text = message_definition("pkg_a/msg/Top", [_fake_prefix(tmp_path)])
    assert text == ("# comment Name line\nInner first\npkg_b/Leaf[] leaves\nuint8 K=3\nstring s\n"
                    f"\n{SEPARATOR}\nMSG: pkg_a/Inner\npkg_b/Leaf leaf\nfloat64[3] v\n"
                    f"\n{SEPARATOR}\nMSG: pkg_b/Leaf\nint32 x\n")
    with pytest.raises(ConfigError, match="no .msg file"):
        message_definition("pkg_a/msg/Missing", [tmp_path])
    with pytest.raises(ConfigError, match="pkg/msg/Type"):
        message_definition("not a type", [tmp_path])


def test_installed_definitions_parse_with_mcap_ros2():
    from mcap_ros2._dynamic import generate_dynamic

    text = message_definition("visualization_msgs/msg/MarkerArray")
    names = [line[5:] for line in text.splitlines() if line.startswith("MSG: ")]
    assert len(names) == len(set(names)) and {"visualization_msgs/Marker", "std_msgs/Header",
                                               "builtin_interfaces/Time"} <= set(names)
    assert "visualization_msgs/msg/MarkerArray" in generate_dynamic("visualization_msgs/msg/MarkerArray", text)
    assert type_hash(STATE).startswith("RIHS01_") and type_hash("pkg_x/msg/None") == ""


def _write_bag(directory, n_robots=2, steps=30):
    w = BagWriter(directory)
    latched = qos_profile(transient_local=True, depth=1)
    w.add_topic("/topology/graph", "std_msgs/msg/String", [latched])
    w.write("/topology/graph", serialize_message(String(data='{"name": "complete"}')), 5)
    for i in range(n_robots):
        w.add_topic(f"/robot_{i}/state", STATE, [qos_profile(reliable=False, depth=5)])
        w.add_topic(f"/robot_{i}/target", STATE, [qos_profile()])
    t0 = 1_000_000_000
    for k in range(steps):
        for i in range(n_robots):
            m = PointStamped()
            m.header.frame_id = "world"
            m.point.x, m.point.y = float(i) * (1 - k / steps), -float(i) * (1 - k / steps)
            w.write(f"/robot_{i}/state", serialize_message(m), t0 + k * 200_000_000 + i)
            if k % 10 == 0:
                m.point.x = m.point.y = 0.0
                w.write(f"/robot_{i}/target", serialize_message(m), t0 + k * 200_000_000 + 5)
    return w, w.close()


def test_round_trip_real_cdr_and_rosbag2_metadata(tmp_path):
    w, meta = _write_bag(tmp_path / "bag")
    assert w.path == tmp_path / "bag" / "bag_0.mcap"
    msgs = list(read_messages(tmp_path / "bag"))
    assert len(msgs) == 1 + 2 * 30 + 2 * 3
    assert [m[2] for m in msgs] == sorted(m[2] for m in msgs)                 # log-time order
    graph = [m for m in msgs if m[0] == "/topology/graph"]
    assert graph[0][1] == "std_msgs/msg/String" and graph[0][3].data == '{"name": "complete"}'
    last = [m for m in msgs if m[0] == "/robot_1/state"][-1][3]
    assert last.header.frame_id == "world" and math.isclose(last.point.x, 1 / 30)
    # metadata.yaml as rosbag2 (version 9) reads it
    info = yaml.safe_load((tmp_path / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info == meta["rosbag2_bagfile_information"]
    assert info["version"] == 9 and info["storage_identifier"] == "mcap"
    assert info["relative_file_paths"] == ["bag_0.mcap"] and info["files"][0]["path"] == "bag_0.mcap"
    assert info["message_count"] == len(msgs) == info["files"][0]["message_count"]
    assert info["starting_time"]["nanoseconds_since_epoch"] == 5
    assert info["duration"]["nanoseconds"] == 1_000_000_000 + 29 * 200_000_000 + 1 - 5
    counts = {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}
    assert counts == {"/topology/graph": 1, "/robot_0/state": 30, "/robot_0/target": 3, "/robot_1/state": 30,
                      "/robot_1/target": 3}
    graph_meta = info["topics_with_message_count"][0]["topic_metadata"]
    assert graph_meta["serialization_format"] == "cdr" and graph_meta["type_description_hash"].startswith("RIHS01_")
    assert graph_meta["offered_qos_profiles"][0]["durability"] == "transient_local"
    for key in ("compression_format", "compression_mode", "custom_data", "ros_distro"):
        assert key in info
    # the MCAP file itself: ros2 profile, ros2msg schemas, cdr channels with rosbag2's channel metadata
    from mcap.reader import make_reader

    with w.path.open("rb") as f:
        reader = make_reader(f)
        assert reader.get_header().profile == "ros2"
        summary = reader.get_summary()
        assert {s.encoding for s in summary.schemas.values()} == {"ros2msg"}
        ch = next(c for c in summary.channels.values() if c.topic == "/robot_0/state")
        assert ch.message_encoding == "cdr"
        assert yaml.safe_load(ch.metadata["offered_qos_profiles"])[0]["reliability"] == "best_effort"
        assert "rosbag2" in {m.name for m in reader.iter_metadata()}
    with pytest.raises(ConfigError, match="already holds a bag"):
        BagWriter(tmp_path / "bag")


def test_trajectories_and_plot_command(tmp_path, capsys):
    _write_bag(tmp_path / "bag", n_robots=3)
    times, pos, tgt, robots = trajectories(tmp_path / "bag")
    assert robots == ["/robot_0", "/robot_1", "/robot_2"]
    assert pos.shape == tgt.shape == (len(times), 3, 2) and math.isclose(times[-1], 29 * 0.2, abs_tol=0.2)
    assert pos[0, 2, 0] == 2.0 and abs(pos[-1, 2, 0] - 2 / 30) < 1e-9 and (tgt[-1] == 0).all()
    assert main(["plot", str(tmp_path / "bag")]) == 0
    for name in ("paths.png", "planned_vs_actual.png", "spread.png"):
        assert (tmp_path / "bag" / "plots" / name).stat().st_size > 1000
    assert main(["plot", str(bag_file(tmp_path / "bag")), "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "spread.png").is_file()


def test_bad_bags_are_one_clear_error(tmp_path, capsys):
    (tmp_path / "junk.mcap").write_bytes(b"not an mcap file at all" * 10)
    w, _ = _write_bag(tmp_path / "bag")
    data = w.path.read_bytes()
    (tmp_path / "cut.mcap").write_bytes(data[: len(data) // 2])
    only_graph = BagWriter(tmp_path / "graph")
    only_graph.add_topic("/topology/graph", "std_msgs/msg/String", [qos_profile()])
    only_graph.close()
    for path, says in ((tmp_path / "junk.mcap", "not a readable MCAP bag"),
                       (tmp_path / "cut.mcap", "not a readable MCAP bag"),
                       (tmp_path / "graph", "no robot state topics"),
                       (tmp_path / "missing", "no such bag"),
                       (tmp_path, "expected one .mcap file")):
        assert main(["plot", str(path)]) == 2, path
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("name", ["aggregation", "disaster", "naming-game-robots"])
def test_every_ros_run_records_a_bag(name):
    from consensus.registry import scenario

    sc = scenario(name)
    cfg = sc.config_cls()
    recorders = [s for s in sc.processes(cfg, use_sim_time=True) if s.executable == "bag_recorder"]
    assert len(recorders) == 1 and recorders[0].params["use_sim_time"] is True
    if "bag" in cfg.field_names():
        assert not any(s.executable == "bag_recorder" for s in sc.processes(cfg.replace(bag=False)))


def test_bag_exclude_is_a_checked_regex_whose_default_leaves_out_the_nearby_relay():
    import re

    from consensus import names
    from consensus.scenarios.aggregation.config import load_config

    cfg = load_config(None)
    assert re.search(cfg.bag_exclude, "/" + names.NEARBY.of(7).lstrip("/"))
    assert not any(re.search(cfg.bag_exclude, "/" + t.of(7).lstrip("/")) for t in names.ROBOT_TOPICS
                   if t is not names.NEARBY)
    with pytest.raises(ConfigError, match="bag_exclude is not a regular expression"):
        load_config(None, bag_exclude="(")


def test_the_bag_leaves_out_what_bag_exclude_matches(tmp_path):
    """A ROS run with the collision filter and one process per robot (the nearby relay on; a fleet process computes
    the sets itself): robot_0's relay is left out by the pattern, robot_1's is recorded, and so is every robot's
    state."""
    from consensus.scenarios.aggregation.config import load_config
    from consensus.scenarios.aggregation.runner import run_ros

    cfg = load_config(None, num_robots=2, planner="average", duration_s=6.0, collision_avoidance="cbf",
                      bag_exclude="^/robot_0/nearby$", seed=3, single_process=False)
    run_ros(cfg, tmp_path / "run", echo=None)
    info = yaml.safe_load((tmp_path / "run" / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    counts = {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}
    assert "/robot_0/nearby" not in counts and counts["/robot_1/nearby"] > 5
    assert counts["/robot_0/state"] > 5 and counts["/robot_1/state"] > 5
