"""What RViz2 and Foxglove draw of an aggregation run: a MarkerArray and the robots' TF frames, built from plain
arrays (no node here; the ``recorder`` publishes them, see its docstring).

Every marker is in the frame ``world`` (``FRAME``) and lives ``LIFETIME_S`` (so a robot that stops reporting fades
away). Namespaces and ids are stable, one id per robot (``i``) unless noted:

* ``robots``: a sphere per robot in its colour (the colours of the run's figures, ``consensus.runs.plots.colors``);
* ``targets``: a small cube at each robot's planned target, same colour, translucent;
* ``plans``: one LINE_LIST (id 0) from each robot to its target;
* ``edges``: one LINE_LIST (id 0) of the communication graph (from ``/topology/graph``): a grey segment between
  every pair of robots with a link (either direction);
* ``reasoning``: a TEXT_VIEW_FACING above each robot, ``robot_<i>: `` and its last reasoning cut to
  ``TEXT_CHARS`` characters.

TF: one ``world -> robot_<i>/base_link`` transform per robot at its position (identity rotation: the recorder
knows positions only). ``tf_message`` wraps them in a ``tf2_msgs/TFMessage`` when ``tf2_msgs`` is installed (a ROS
install; there is no PyPI wheel of it) and returns None otherwise.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point, TransformStamped
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from consensus import names

try:                                      # a ROS install only
    from tf2_msgs.msg import TFMessage
except ImportError:                       # pragma: no cover - depends on the install
    TFMessage = None

FRAME = names.WORLD_FRAME
LIFETIME_S = 2.0
TEXT_CHARS = 120
ROBOT_DIAMETER_M = 0.4
TARGET_SIZE_M = 0.2
TEXT_HEIGHT_M = 0.25


def _rgba(c, alpha: float | None = None) -> ColorRGBA:
    return ColorRGBA(r=float(c[0]), g=float(c[1]), b=float(c[2]), a=float(c[3] if alpha is None else alpha))


def _point(xy, z: float = 0.0) -> Point:
    return Point(x=float(xy[0]), y=float(xy[1]) if len(xy) > 1 else 0.0, z=float(z))


def _known(points) -> np.ndarray:
    """Per row of ``points`` (n, d): every coordinate finite."""
    arr = np.asarray(points, dtype=float)
    if arr.ndim < 2:
        arr = arr.reshape(len(arr), -1) if arr.size else np.zeros((len(arr), 1))
    return np.isfinite(arr).all(axis=1)


def graph_edges(record: Mapping, n: int) -> list[tuple[int, int]] | None:
    """The undirected edges ``(i, j)``, ``i < j``, of a ``/topology/graph`` record (its ``adjacency``: row i =
    whom i hears) over ``n`` robots, or None when the record is malformed."""
    try:
        adj = np.asarray(record["adjacency"], dtype=float)
    except (KeyError, TypeError, ValueError):
        return None
    if adj.shape != (n, n) or not np.isfinite(adj).all():
        return None
    linked = (adj != 0) | (adj.T != 0)
    return [(int(i), int(j)) for i, j in zip(*np.nonzero(np.triu(linked, k=1)))]


def fleet_markers(positions: np.ndarray, targets: np.ndarray, edges: Sequence[tuple[int, int]],
                  reasoning: Mapping[int, str], stamp: Time, colors: Sequence) -> MarkerArray:
    """The run's markers (module docstring). ``positions``, ``targets``: ``(n, d)`` with NaN where unknown (that
    robot's marker is left out); ``colors``: n RGBA tuples in [0, 1]."""
    life = Duration(sec=int(LIFETIME_S), nanosec=int((LIFETIME_S % 1) * 1e9))

    def marker(ns: str, mid: int, kind: int, **kw) -> Marker:
        m = Marker(ns=ns, id=mid, type=kind, action=Marker.ADD, lifetime=life, **kw)
        m.header.frame_id, m.header.stamp = FRAME, stamp
        m.pose.orientation.w = 1.0
        return m

    out: list[Marker] = []
    plans = marker("plans", 0, Marker.LINE_LIST)
    plans.scale.x = 0.02
    # validity and the Point of each robot once (a complete graph of 100 robots has 4,950 edges: checking and
    # building points per edge end would be most of the recorder's CPU, docs/benchmarks.md, 'Why the code is as
    # it is')
    ok, ok_t = _known(positions), _known(targets)
    points = [_point(p) if good else None for p, good in zip(positions, ok)]
    for i, p in enumerate(positions):
        if not ok[i]:
            continue
        ball = marker("robots", i, Marker.SPHERE, color=_rgba(colors[i]))
        ball.pose.position = points[i]
        ball.scale.x = ball.scale.y = ball.scale.z = ROBOT_DIAMETER_M
        out.append(ball)
        text = str(reasoning.get(i, "")).replace("\n", " ").strip()
        if len(text) > TEXT_CHARS:
            text = text[:TEXT_CHARS - 3] + "..."
        label = marker("reasoning", i, Marker.TEXT_VIEW_FACING, color=ColorRGBA(r=1.0, g=1.0, b=1.0, a=1.0),
                       text=f"robot_{i}: {text}" if text else f"robot_{i}")
        label.pose.position = _point(p, z=ROBOT_DIAMETER_M + TEXT_HEIGHT_M)
        label.scale.z = TEXT_HEIGHT_M
        out.append(label)
        if i < len(targets) and ok_t[i]:
            t = targets[i]
            cube = marker("targets", i, Marker.CUBE, color=_rgba(colors[i], 0.6))
            cube.pose.position = _point(t)
            cube.scale.x = cube.scale.y = cube.scale.z = TARGET_SIZE_M
            out.append(cube)
            plans.points += [points[i], _point(t)]
            plans.colors += [_rgba(colors[i], 0.8)] * 2
    links = marker("edges", 0, Marker.LINE_LIST, color=ColorRGBA(r=0.6, g=0.6, b=0.6, a=0.6))
    links.scale.x = 0.03
    n = len(positions)
    for i, j in edges:
        if i < n and j < n and ok[i] and ok[j]:
            links.points += [points[i], points[j]]
    for lines in (plans, links):           # an empty LINE_LIST is deleted (RViz2 warns about drawing one)
        if not lines.points:
            lines.action = Marker.DELETE
        out.append(lines)
    return MarkerArray(markers=out)


def robot_transforms(positions: np.ndarray, stamp: Time, frames: Sequence[str]) -> list[TransformStamped]:
    """``world -> frames[i]`` at each known position (identity rotation)."""
    out = []
    for p, frame, good in zip(positions, frames, _known(positions)):
        if not good:
            continue
        tf = TransformStamped()
        tf.header.frame_id, tf.header.stamp, tf.child_frame_id = FRAME, stamp, frame
        tf.transform.translation.x = float(p[0])
        tf.transform.translation.y = float(p[1]) if len(p) > 1 else 0.0
        tf.transform.rotation.w = 1.0
        out.append(tf)
    return out


def tf_message(transforms: list[TransformStamped]):
    """``tf2_msgs/TFMessage`` of ``transforms``, or None without tf2_msgs."""
    return None if TFMessage is None else TFMessage(transforms=transforms)
