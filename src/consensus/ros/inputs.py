"""Reading what a node hears: positions from ``PointStamped``/``Odometry`` (serialized or not) and from a serialized
``PoseArray``, sanity bounds (per value and per row), and the one way an undecodable message is counted
(``decode_or_count``) in the node's ``consensus.ros.health.Health``.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from geometry_msgs.msg import PointStamped, PoseArray
from nav_msgs.msg import Odometry
from rclpy.serialization import deserialize_message

from consensus.ros.cdr import header_stamp_ns, odom_xy, point_stamped_xy, pose_array_xy
from consensus.ros.health import Health

#: the largest absolute value a position (m) or velocity (m/s, rad/s) read from the wire may have; anything beyond
#: (e.g. a forged 1e308, which overflows to inf in the first arithmetic) is dropped as a bad message like NaN
MAX_ABS_VALUE = 1e6


def sane(*values: float) -> bool:
    """All of ``values`` finite and within ``MAX_ABS_VALUE`` (what an input must be to be used)."""
    return all(math.isfinite(v) and abs(v) <= MAX_ABS_VALUE for v in values)


def sane_rows(xy: np.ndarray) -> np.ndarray:
    """Per row of ``xy`` (k, d): all of its values finite and within ``MAX_ABS_VALUE`` (``sane`` for arrays)."""
    with np.errstate(invalid="ignore"):
        return (np.abs(xy) <= MAX_ABS_VALUE).all(axis=1)          # False for NaN and +-inf too


def decode_or_count(raw: bytes, msg_type, health: "Health", what: str):
    """The message in the serialized bytes ``raw``, or None - counted as a bad message of ``what`` - when they do
    not decode (the nodes' fast CDR paths in ``consensus.ros.cdr`` fall back to this)."""
    try:
        return deserialize_message(raw, msg_type)
    except Exception:  # noqa: BLE001 - undecodable bytes are a bad message, not a callback error
        health.count_bad_message(what)
        return None


#: message type -> (the fast decoder of its serialized bytes, its (x, y) read from a message object)
_XY_READERS: dict[type, tuple[Callable[[bytes], tuple[float, float] | None], Callable[[Any], tuple[float, float]]]] = {
    PointStamped: (point_stamped_xy, lambda m: (m.point.x, m.point.y)),
    Odometry: (odom_xy, lambda m: (m.pose.pose.position.x, m.pose.pose.position.y)),
}


def read_xy(raw_or_msg: Any, msg_type: type, health: "Health", what: str) -> tuple[float, float] | None:
    """The (x, y) position of a geometry_msgs/PointStamped or nav_msgs/Odometry (``msg_type``), given as its
    serialized bytes (a ``raw=True`` subscription: the fast decoders of ``consensus.ros.cdr``, deserialize_message
    where they cannot read the buffer) or as the message; None - counted as a bad message of ``what`` in ``health``
    - when the bytes do not decode or the position is not ``sane`` (non-finite, or beyond ``MAX_ABS_VALUE``)."""
    fast, of_msg = _XY_READERS[msg_type]
    if isinstance(raw_or_msg, (bytes, bytearray, memoryview)):
        xy = fast(raw_or_msg)
        if xy is None:
            msg = decode_or_count(raw_or_msg, msg_type, health, what)
            if msg is None:
                return None
            xy = of_msg(msg)
    else:
        xy = of_msg(raw_or_msg)
    if sane(*xy):
        return xy
    health.count_bad_message(what)
    return None


def read_pose_array(raw: bytes, health: "Health", what: str) -> tuple[int, np.ndarray] | None:
    """``(header stamp [ns], positions (k, 2))`` of a serialized geometry_msgs/PoseArray (the fast decoder of
    ``consensus.ros.cdr``, deserialize_message where it cannot read the buffer); None - counted as a bad message of
    ``what`` in ``health`` - when the bytes do not decode. The positions are not checked (``sane_rows``)."""
    xy, stamp = pose_array_xy(raw), header_stamp_ns(raw)
    if xy is None or stamp is None:
        msg = decode_or_count(raw, PoseArray, health, what)
        if msg is None:
            return None
        xy = np.array([(p.position.x, p.position.y) for p in msg.poses], dtype=float).reshape(-1, 2)
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
    return stamp, xy
