"""What really happened in a ROS run, read back from its MCAP bag (``<run>/bag``): the simulator's ``/ground_truth``
(every body's true position, whatever any robot or stranger says), the ``/diagnostics`` statuses, and the relay's
``nearby`` / ``/census`` rows (what the fleet believed of each robot). The deployed-layout safety tests
(tests/ros/test_deployed_safety.py) judge on these, never on a robot's ``state`` or ``odom``, which a stranger may
forge.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GROUND_TRUTH = "/ground_truth"
DIAGNOSTICS = "/diagnostics"
CENSUS = "/census"
ERROR = 2                    # diagnostic_msgs/DiagnosticStatus.ERROR


def _stamp(header) -> float:
    return header.stamp.sec + header.stamp.nanosec * 1e-9


@dataclass
class Truth:
    """The simulator's true positions: ``t`` (m,) header stamps [s, the wall clock of a run without sim time],
    ``pos`` (m, n, 2) [m]."""

    t: np.ndarray
    pos: np.ndarray

    @property
    def robots(self) -> int:
        return self.pos.shape[1]

    def window(self, start: float = -math.inf, end: float = math.inf) -> Truth:
        keep = (self.t >= start) & (self.t <= end)
        return Truth(self.t[keep], self.pos[keep])

    def at(self, t: float) -> np.ndarray:
        """(n, 2): the sample nearest to time ``t``."""
        return self.pos[int(np.argmin(np.abs(self.t - t)))]

    def closest(self, a=None, b=None) -> tuple[float, float, tuple[int, int]]:
        """The smallest distance between a body of ``a`` and another of ``b`` (robot indices; every robot when None)
        over all samples: ``(distance, when, (i, j))``."""
        n = self.robots
        a = list(range(n)) if a is None else list(a)
        b = list(range(n)) if b is None else list(b)
        best = (math.inf, math.nan, (-1, -1))
        if not len(self.t):
            return best
        d = np.linalg.norm(self.pos[:, a, None, :] - self.pos[:, None, b, :], axis=3)      # (m, |a|, |b|)
        same = np.asarray(a)[:, None] == np.asarray(b)[None, :]
        d[:, same] = np.inf
        k = int(np.argmin(d))
        m, i, j = np.unravel_index(k, d.shape)
        return float(d[m, i, j]), float(self.t[m]), (a[i], b[j])

    def beyond_fence(self, workspace) -> tuple[float, float, int]:
        """How far a body's centre went outside the workspace ``[xlo, xhi, ylo, yhi]`` (0.0 = never):
        ``(metres, when, robot)``."""
        lo = np.asarray(workspace[0::2], dtype=float)
        hi = np.asarray(workspace[1::2], dtype=float)
        out = np.maximum(lo - self.pos, 0.0) + np.maximum(self.pos - hi, 0.0)          # (m, n, 2)
        dist = np.linalg.norm(out, axis=2)
        if not dist.size:
            return 0.0, math.nan, -1
        m, i = np.unravel_index(int(np.argmax(dist)), dist.shape)
        return float(dist[m, i]), float(self.t[m]), int(i)

    def travelled(self, robot: int, start: float = -math.inf, end: float = math.inf) -> float:
        """The largest distance of robot ``robot``'s body from where it was at the window's first sample."""
        w = self.window(start, end)
        if not len(w.t):
            return 0.0
        return float(np.linalg.norm(w.pos[:, robot] - w.pos[0, robot], axis=1).max())

    def speed(self, robot: int, t: float, span: float = 0.3) -> float:
        """Robot ``robot``'s true speed around time ``t`` (over ``span`` seconds)."""
        a, b = self.at(t - span / 2)[robot], self.at(t + span / 2)[robot]
        return float(np.linalg.norm(b - a) / span)


def truth_in_bag(run: Path) -> Truth:
    """Every ``/ground_truth`` message of the run's bag, in order."""
    from consensus.runs.bag import read_messages

    ts, rows = [], []
    for _topic, _type, _t, msg in read_messages(Path(run) / "bag", topics=[GROUND_TRUTH]):
        ts.append(_stamp(msg.header))
        rows.append([(p.position.x, p.position.y) for p in msg.poses])
    if not rows:
        raise AssertionError(f"no {GROUND_TRUTH} message in {run}/bag")
    order = np.argsort(ts, kind="stable")
    return Truth(np.asarray(ts)[order], np.asarray(rows, dtype=float)[order])


@dataclass(frozen=True)
class Diagnostic:
    t: float            # the array's header stamp [s]
    name: str           # the node, e.g. /robot_0/agent
    level: int          # 0 OK, 1 WARN, 2 ERROR, 3 STALE
    message: str


def _level(v) -> int:
    if isinstance(v, (bytes, bytearray)):
        return v[0] if v else 0
    return int(v)


def diagnostics_in_bag(run: Path) -> list[Diagnostic]:
    """Every status of every ``/diagnostics`` array in the run's bag."""
    from consensus.runs.bag import read_messages

    out = []
    for _topic, _type, _t, msg in read_messages(Path(run) / "bag", topics=[DIAGNOSTICS]):
        t = _stamp(msg.header)
        out.extend(Diagnostic(t, s.name, _level(s.level), s.message) for s in msg.status)
    return out


_POINT_TYPES = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 8: "f8"}


def cloud_rows(msg) -> np.ndarray:
    """A ``sensor_msgs/PointCloud2`` (as decoded from the bag) as a structured array with its named fields (the relay's
    ``nearby``/``census`` layout: x, y, z, age, speed, id, and whatever fields it grows)."""
    order = ">" if msg.is_bigendian else "<"
    fields = {f.name: (order + _POINT_TYPES[f.datatype], f.offset) for f in msg.fields if f.count == 1}
    dtype = np.dtype({"names": list(fields), "formats": [v[0] for v in fields.values()],
                      "offsets": [v[1] for v in fields.values()], "itemsize": msg.point_step})
    count = msg.width * msg.height
    return np.frombuffer(bytes(msg.data), dtype=dtype, count=count)


@dataclass(frozen=True)
class Row:
    """One robot's row in a relay message: what the fleet was told of that robot."""

    t: float            # the message's header stamp [s]
    topic: str
    xy: tuple[float, float]
    age: float          # the row's age at ``t`` [s] (NaN when the layout has none)


def relay_rows(run: Path, robot: int, topics_like: tuple[str, ...] = (CENSUS, "/nearby")) -> tuple[list[Row], list]:
    """Robot ``robot``'s rows in every relay message of the bag whose topic ends with one of ``topics_like``
    (``/census`` for all; ``/robot_<i>/nearby`` only when the run's ``bag_exclude`` keeps it), and the stamps of the
    ``/census`` messages that left it out: ``(rows, [(t, topic), ...])``."""
    from consensus.runs.bag import read_messages, topics_of

    wanted = [t for t in topics_of(Path(run) / "bag") if t.endswith(topics_like)]
    rows, missing = [], []
    for topic, _type, _t, msg in read_messages(Path(run) / "bag", topics=wanted):
        pts = cloud_rows(msg)
        t = _stamp(msg.header)
        mine = pts[pts["id"] == robot] if "id" in pts.dtype.names else pts[:0]
        if len(mine):
            p = mine[0]
            age = float(p["age"]) if "age" in pts.dtype.names else math.nan
            rows.append(Row(t, topic, (float(p["x"]), float(p["y"])), age))
        elif topic == CENSUS:
            missing.append((t, topic))
    return rows, missing
