"""What RViz2/Foxglove get of an aggregation run (consensus.scenarios.aggregation.ros.markers), built without a
node; the TF part without tf2_msgs."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("visualization_msgs")
from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from consensus.scenarios.aggregation.ros import markers  # noqa: E402

COLORS = [(1.0, 0.0, 0.0, 1.0), (0.0, 1.0, 0.0, 1.0), (0.0, 0.0, 1.0, 1.0)]
STAMP = Time(sec=12, nanosec=5)


def _by(arr: MarkerArray) -> dict:
    return {(m.ns, m.id): m for m in arr.markers}


def test_markers_of_a_fleet():
    pos = np.array([[0.0, 0.0], [1.0, 2.0], [np.nan, np.nan]])         # robot 2 not heard yet
    tgt = np.array([[0.5, 0.5], [np.nan, np.nan], [3.0, 3.0]])
    long = "x" * 500
    arr = markers.fleet_markers(pos, tgt, [(0, 1), (1, 2)], {0: "go to\nthe centre", 1: long}, STAMP, COLORS)
    got = _by(arr)
    assert {m.header.frame_id for m in arr.markers} == {"world"}
    assert all(m.header.stamp == STAMP and math.isclose(m.lifetime.sec + m.lifetime.nanosec * 1e-9,
                                                         markers.LIFETIME_S) for m in arr.markers)
    assert set(got) == {("robots", 0), ("robots", 1), ("reasoning", 0), ("reasoning", 1), ("targets", 0),
                        ("plans", 0), ("edges", 0)}
    ball = got["robots", 1]
    assert ball.type == Marker.SPHERE and (ball.pose.position.x, ball.pose.position.y) == (1.0, 2.0)
    assert (ball.color.r, ball.color.g, ball.color.a) == (0.0, 1.0, 1.0)
    assert got["targets", 0].type == Marker.CUBE and got["targets", 0].pose.position.x == 0.5
    assert got["targets", 0].color.a < 1.0
    text = got["reasoning", 0]
    assert text.type == Marker.TEXT_VIEW_FACING and text.text == "robot_0: go to the centre"
    assert text.pose.position.z > 0
    assert len(got["reasoning", 1].text) == len("robot_1: ") + markers.TEXT_CHARS
    assert got["reasoning", 1].text.endswith("...")
    edges = got["edges", 0]                       # the edge to robot 2 (unknown position) is left out
    assert edges.type == Marker.LINE_LIST and edges.action == Marker.ADD
    assert [(p.x, p.y) for p in edges.points] == [(0.0, 0.0), (1.0, 2.0)]
    plans = got["plans", 0]                       # robot 0 -> its target, nothing else
    assert [(p.x, p.y) for p in plans.points] == [(0.0, 0.0), (0.5, 0.5)] and len(plans.colors) == 2
    # it goes over the wire as it is
    back = deserialize_message(serialize_message(arr), MarkerArray)
    assert [(m.ns, m.id, m.type, m.text, len(m.points)) for m in back.markers] == \
        [(m.ns, m.id, m.type, m.text, len(m.points)) for m in arr.markers]


def test_empty_line_lists_are_deleted_not_drawn():
    pos = np.array([[0.0, 0.0], [1.0, 1.0]])
    got = _by(markers.fleet_markers(pos, np.full((2, 2), np.nan), [], {}, STAMP, COLORS))
    assert got["edges", 0].action == Marker.DELETE and got["plans", 0].action == Marker.DELETE
    assert got["reasoning", 1].text == "robot_1"


def test_graph_edges_from_the_topology_record():
    rec = {"adjacency": [[0, 1, 0], [0, 0, 1], [0, 0, 0]], "directed": True}       # 0 hears 1, 1 hears 2
    assert markers.graph_edges(rec, 3) == [(0, 1), (1, 2)]
    full = {"adjacency": (np.ones((3, 3)) - np.eye(3)).tolist()}
    assert markers.graph_edges(full, 3) == [(0, 1), (0, 2), (1, 2)]
    for bad in ({}, {"adjacency": [[0, 1], [1, 0]]}, {"adjacency": "x"}, {"adjacency": [[0, float("nan"), 0]] * 3},
                []):
        assert markers.graph_edges(bad, 3) is None, bad


def test_tf_transforms_without_tf2_msgs():
    pos = np.array([[1.0, -2.0], [np.nan, 0.0], [3.0, 4.0]])
    tfs = markers.robot_transforms(pos, STAMP, [f"robot_{i}/base_link" for i in range(3)])
    assert [t.child_frame_id for t in tfs] == ["robot_0/base_link", "robot_2/base_link"]
    assert {t.header.frame_id for t in tfs} == {"world"} and tfs[0].header.stamp == STAMP
    assert (tfs[1].transform.translation.x, tfs[1].transform.translation.y) == (3.0, 4.0)
    assert tfs[0].transform.rotation.w == 1.0
    msg = markers.tf_message(tfs)
    if markers.TFMessage is None:
        assert msg is None                        # no tf2_msgs here: nothing to publish
    else:
        assert list(msg.transforms) == tfs
