"""Read the pose out of a serialized nav_msgs/Odometry without building the whole Python message.

A fleet process receives ~2000 odometry messages per second at 100 robots; rclpy's deserialize_message builds
two 36-element covariance arrays and a dozen objects per message, which alone costs ~10 % of a core. The pose sits
at a fixed place after the two header strings in the XCDR1 little-endian encoding that Fast DDS and Cyclone DDS use
for ROS 2 messages; anything else (another encapsulation, a short buffer) returns None and the caller falls back
to deserialize_message. tests/test_ros_cdr.py checks this against rclpy's own deserializer.
"""
from __future__ import annotations

import struct

import numpy as np

_CDR_LE = b"\x00\x01"
_U32 = struct.Struct("<I")
_POSE = struct.Struct("<7d")


def _skip_header(body: memoryview) -> int:
    """Offset just after std_msgs/Header (stamp + frame_id string)."""
    (n,) = _U32.unpack_from(body, 8)
    return (8 + 4 + n + 3) & ~3


def pose_array_xy(raw: bytes) -> np.ndarray | None:
    """(n, 2) positions of a serialized geometry_msgs/PoseArray, or None when the buffer is not XCDR1-LE."""
    if len(raw) < 4 or raw[:2] != _CDR_LE:
        return None
    body = memoryview(raw)[4:]
    try:
        off = _skip_header(body)
        (count,) = _U32.unpack_from(body, off)
        if count == 0:
            return np.empty((0, 2))
        off = (off + 4 + 7) & ~7
        if len(body) < off + 56 * count:
            return None
        poses = np.frombuffer(body, dtype="<f8", count=7 * count, offset=off).reshape(count, 7)
    except (struct.error, ValueError):
        return None
    return poses[:, :2].copy()


def odom_pose(raw: bytes) -> tuple[float, float, float, float, float, float, float] | None:
    """(x, y, z, qx, qy, qz, qw) of a serialized nav_msgs/Odometry, or None when the buffer is not XCDR1-LE."""
    if len(raw) < 4 or raw[:2] != _CDR_LE:
        return None
    body = memoryview(raw)[4:]
    off = 8                                        # builtin_interfaces/Time: int32 sec, uint32 nanosec
    try:
        for _ in range(2):                         # header.frame_id, child_frame_id (uint32 length incl. NUL)
            (n,) = _U32.unpack_from(body, off)
            off = (off + 4 + n + 3) & ~3
        off = (off + 7) & ~7                       # doubles are 8-aligned
        return _POSE.unpack_from(body, off)
    except struct.error:
        return None
