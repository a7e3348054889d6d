"""The odometry fast path reads exactly what rclpy's deserializer reads."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("rclpy")
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402

from consensus.ros.cdr import odom_pose  # noqa: E402

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
names = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=40)


@settings(max_examples=200, deadline=None)
@given(frame=names, child=names, sec=st.integers(0, 2**31 - 1), vals=st.lists(finite, min_size=7, max_size=7))
def test_fast_path_matches_rclpy(frame, child, sec, vals):
    m = Odometry()
    m.header.frame_id, m.child_frame_id, m.header.stamp.sec = frame, child, sec
    p, q = m.pose.pose.position, m.pose.pose.orientation
    p.x, p.y, p.z, q.x, q.y, q.z, q.w = vals
    m.twist.twist.linear.x = 3.0
    raw = serialize_message(m)
    ref = deserialize_message(raw, Odometry).pose.pose
    got = odom_pose(raw)
    assert got == (ref.position.x, ref.position.y, ref.position.z, ref.orientation.x, ref.orientation.y,
                   ref.orientation.z, ref.orientation.w)


def test_unknown_encoding_or_truncated_buffer_falls_back():
    raw = serialize_message(Odometry())
    assert odom_pose(b"\x00\x00" + raw[2:]) is None          # big-endian CDR: not handled here
    assert odom_pose(raw[:30]) is None
    assert odom_pose(b"") is None
    assert all(math.isfinite(v) for v in odom_pose(raw))


@settings(max_examples=100, deadline=None)
@given(frame=names, xs=st.lists(st.tuples(finite, finite), max_size=30))
def test_pose_array_fast_path_matches_rclpy(frame, xs):
    from geometry_msgs.msg import Pose, PoseArray

    from consensus.ros.cdr import pose_array_xy

    m = PoseArray()
    m.header.frame_id = frame
    for x, y in xs:
        p = Pose()
        p.position.x, p.position.y, p.orientation.w = x, y, 1.0
        m.poses.append(p)
    raw = serialize_message(m)
    got = pose_array_xy(raw)
    ref = [(p.position.x, p.position.y) for p in deserialize_message(raw, PoseArray).poses]
    assert got.shape == (len(xs), 2) and [tuple(r) for r in got.tolist()] == ref
    assert pose_array_xy(raw[: len(raw) - 8]) is None if xs else True


@settings(max_examples=100, deadline=None)
@given(frame=names, xs=st.lists(st.tuples(finite, finite), max_size=20), stamp=st.integers(0, 2**40))
def test_pose_array_writer_is_read_back_by_rclpy(frame, xs, stamp):
    from geometry_msgs.msg import PoseArray

    import numpy as np

    from consensus.ros.cdr import pose_array_bytes

    raw = pose_array_bytes(stamp, frame, np.asarray(xs, dtype=float).reshape(-1, 2))
    msg = deserialize_message(raw, PoseArray)
    assert msg.header.frame_id == frame
    assert msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec == stamp
    assert [(p.position.x, p.position.y, p.orientation.w) for p in msg.poses] == [(x, y, 1.0) for x, y in xs]


@settings(max_examples=50, deadline=None)
@given(vals=st.lists(finite, min_size=3, max_size=3), stamp=st.integers(0, 2**40), frame=names)
def test_templates_write_what_rclpy_reads(vals, stamp, frame):
    from geometry_msgs.msg import PointStamped, Twist

    from consensus.ros.cdr import CdrTemplate, point_stamped_xy

    tw = CdrTemplate(Twist(), {"vx": "linear.x", "vy": "linear.y", "wz": "angular.z"}, stamped=False)
    got = deserialize_message(tw.pack(vx=vals[0], vy=vals[1], wz=vals[2]), Twist)
    assert (got.linear.x, got.linear.y, got.angular.z) == tuple(vals)
    odom = Odometry()
    odom.header.frame_id = frame
    ot = CdrTemplate(odom, {"x": "pose.pose.position.x", "y": "pose.pose.position.y",
                            "vx": "twist.twist.linear.x"}, stamped=True)
    got = deserialize_message(ot.pack(stamp, x=vals[0], y=vals[1], vx=vals[2]), Odometry)
    assert (got.pose.pose.position.x, got.pose.pose.position.y, got.twist.twist.linear.x) == tuple(vals)
    assert got.header.stamp.sec * 1_000_000_000 + got.header.stamp.nanosec == stamp and got.header.frame_id == frame
    ps = PointStamped()
    ps.header.frame_id = frame
    pt = CdrTemplate(ps, {"x": "point.x", "y": "point.y"}, stamped=True)
    assert point_stamped_xy(pt.pack(stamp, x=vals[0], y=vals[1])) == (vals[0], vals[1])
