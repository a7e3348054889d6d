"""What the vendors' simulators say the bodies did, read back from a run's MCAP bag (``<run>/bag``, which records every
topic): the TurtleBot 3 fake nodes' own ``/<ns>/odom`` composed with each robot's start pose (their ground truth:
the fake node integrates exactly what it was commanded, from zero where it started), and crazyswarm2's ``/tf``
(``world`` -> ``<cf>``, the simulator's state of every drone). The driver tests (tests/ros/test_driver_sims.py) judge
on these, never on what our robots say of themselves."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


def _stamp(header) -> float:
    return header.stamp.sec + header.stamp.nanosec * 1e-9


@dataclass
class Track:
    """One body's samples: stamps [s] (the driver's clock), positions, and (odometry) the measured twist."""

    t: list = field(default_factory=list)
    pos: list = field(default_factory=list)          # (x, y) or (x, y, z), in the shared frame
    v: list = field(default_factory=list)            # forward speed [m/s] (odometry)
    w: list = field(default_factory=list)            # yaw rate [rad/s] (odometry)

    def array(self) -> np.ndarray:
        return np.asarray(self.pos, dtype=float)


def tb3_tracks(run: Path, start: dict[str, tuple[float, float, float]]) -> dict[str, Track]:
    """``namespace -> Track`` from every ``/<ns>/odom`` of the bag: initial_pose ∘ odometry (x, y), v, w."""
    from consensus.runs.bag import read_messages

    tracks = {ns: Track() for ns in start}
    topics = [f"/{ns}/odom" for ns in start]
    for topic, _type, _log, msg in read_messages(Path(run) / "bag", topics):
        ns = topic.split("/")[1]
        x0, y0, th = start[ns]
        p = msg.pose.pose.position
        c, s = math.cos(th), math.sin(th)
        tr = tracks[ns]
        tr.t.append(_stamp(msg.header))
        tr.pos.append((x0 + c * p.x - s * p.y, y0 + s * p.x + c * p.y))
        tr.v.append(msg.twist.twist.linear.x)
        tr.w.append(msg.twist.twist.angular.z)
    return tracks


def tf_tracks(run: Path, names: list[str], frame: str = "world") -> dict[str, Track]:
    """``name -> Track`` of (x, y, z) from the bag's ``/tf`` transforms ``frame`` -> ``name`` (crazyswarm2's), stamped
    in the simulator's time. An idle drone of the ``none`` backend reports (0, 0, 0), not where it stands: those
    samples are left out."""
    from consensus.runs.bag import read_messages

    tracks = {n: Track() for n in names}
    for _topic, _type, _log, msg in read_messages(Path(run) / "bag", ["/tf"]):
        for tf in msg.transforms:
            if tf.header.frame_id != frame or tf.child_frame_id not in tracks:
                continue
            q = tf.transform.translation
            if q.x == 0.0 and q.y == 0.0 and q.z == 0.0:
                continue
            tracks[tf.child_frame_id].t.append(_stamp(tf.header))
            tracks[tf.child_frame_id].pos.append((q.x, q.y, q.z))
    return tracks


def closest_pair(tracks: dict[str, Track], *, when=None) -> float:
    """The smallest horizontal distance between two bodies, each at its newest sample whenever any body's sample
    comes (in stamp order); ``when(positions) -> bool`` limits it to the moments it holds for (e.g. airborne)."""
    events = sorted((t, name, p) for name, tr in tracks.items() for t, p in zip(tr.t, tr.pos))
    newest: dict[str, tuple] = {}
    best = math.inf
    for _t, name, p in events:
        newest[name] = p
        if len(newest) < len(tracks) or (when is not None and not when(newest)):
            continue
        pts = list(newest.values())
        for i in range(len(pts)):
            for j in range(i + 1, len(pts)):
                best = min(best, math.dist(pts[i][:2], pts[j][:2]))
    return best
