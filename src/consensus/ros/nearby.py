"""The ``nearby`` relay: the other robots' positions to each robot, for collision avoidance.

``NearbyRelay(node, cfg)`` subscribes ``/robot_<j>/state`` of every robot and publishes, every control period, to
each robot i ``/robot_<i>/nearby``: the positions of the other robots it can physically meet, whatever the
communication graph. Why not ``neighbors``: the planning graph says whom a robot *listens to*; collision avoidance
needs every robot it can meet (a ring's robot i meets robot i + 3 at the meeting point), so this set is a proximity
set, independent of the graph (docs/real-robots.md). It goes through the same link model as the planning graph's
deliveries (``consensus.graphs.links``: ``link_delay_s``, ``link_drop_prob``).

**Silent robots are bodies** (issue 41). A robot whose states stop (its process died, its link failed, its pose turned
suspect) is never left out: the relay goes on sending its last position with its growing age, and each robot core
widens its keep-out with that age up to ``silent_bound_m`` (``consensus.control.robot_core``). A robot that never spoke
is a body where it starts, when the host knows the starts (``starts``: the topology node passes the run's initial
positions), aged from the relay's first tick. An operator who knows a silent body is gone (lifted away, switched off)
says so on ``/clear_body`` (std_msgs/Int32: the robot's index; ``ros2 topic pub --once /clear_body std_msgs/msg/Int32
"{data: 3}"``): the relay stops sending it until it speaks again (refused, logged, for a robot that is not silent;
counted in ``cleared_bodies``). Every other stream of positions claimed for a robot (a stranger, a copy,
a relocation not yet confirmed: ``Plausibility.bodies``) is sent too, with id -1 and the fleet's ``v_max`` as its
speed: a lie costs progress, never clearance.

**Reach** (issue 29: the relay's traffic grows with the robots in reach, not with n²). With ``nearby_horizon_s`` > 0
(default 0.5 s) robot i gets robot j only when ``consensus.control.avoidance.within_reach`` says it can meet it within
the horizon and one control period (a robot drives one more period on a message just within the horizon): their distance
is at most the fleet's largest ``d_min`` from a broadcast centre (``consensus.robots.map.fleet_reach``: every preset's
kinematics and limits) plus the fastest filtered point's speed times (i's position's age + twice j's + twice the horizon
and period). A position's age runs from its state's stamp (the robot's odometry receive time) or from when the relay got
it, whichever is earlier. A robot whose newest ``nearby`` message is older than the horizon (from its stamp, or from
when it came if that is earlier) stops (``RobotCore.rules``: ``stale_nearby``), so no robot outside a message can reach
it before a newer message comes. The slots of a packing need every robot's position (their assignment is solved over all
of them, ``consensus.control.packing``): once a planning period the relay also publishes its *census* (``names.CENSUS``,
the same layout, one message for all: every robot's newest accepted position, a lost one left out), and a robot solves
its slot on it, again on each new one (``RobotCore.check_census``). ``nearby_horizon_s: 0``: every robot in every
message, no census, no stop (the relay before issue 29's item 3). The relay's health record counts its messages and the
positions in them (``nearby_messages``, ``nearby_points``; the aggregation summary's ``nearby_relay``).

Every state is checked first against the robot's track (``consensus.control.plausibility``): outside the workspace
plus a margin, farther than the track can have moved, stamped before the track's newest position (a replay) or from
the future is dropped and counted in the host's ``Health`` (``state.outside``, ``state.jump``, ``state.past``,
``state.future``), and the relay goes on sending that robot's track (where its body is), ageing (the filter widens its
distance with the age). A suspect robot's plausible states are
still relayed here: its body is real and must be avoided. The host's health record carries ``implausible``,
``suspects`` and ``suspected``.

**The message** (``sensor_msgs/PointCloud2``, frame ``world``, one row of points, little-endian; ``NEARBY_FIELDS``):
``x``, ``y``, ``z`` (float64: the position; z = 0), ``age`` (float32: seconds from when the relay received that
position to the message's header stamp), ``speed`` (float32: the robot's speed measured from its last two states,
timed by their header stamps, at most ``v_max``, m/s), ``id`` (int32: the robot's index; -1: a body of no known
robot). A reader fails closed (``read_nearby``): a non-finite, negative or absurd age or speed, or one id twice, refuses
the whole message (counted), and a robot keeps the robots it knew. A robot adds the time
since the header stamp to each ``age``: the filter then widens its distance to each neighbour by that position's age
times the pair's closing speed (``consensus.control.robot_core``), instead of a fixed worst case.
PointCloud2 is the standard message for points that carry named fields; RViz and Foxglove draw it.

Hosted by a node that runs in every run whose robots move (the aggregation's ``topology``, the disaster grid, the
naming game's matchmaker) when the robots run one process each (``single_process: false``); vectorised over the n × n
links. A fleet process (``single_process: true``) holds every robot's odometry already: it computes each robot's set
itself through the same link model (``FleetNearby``), and no relay runs (a relay's n × (n − 1) positions ten times a
second would be a large fleet's largest traffic: docs/benchmarks.md, 'Why the code is as it is'). A state with a
non-finite or absurd position, or undecodable, is dropped and counted in the host's ``Health``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import PointCloud2, PointField
from std_msgs.msg import Int32

from consensus import names
from consensus.control.avoidance import within_reach
from consensus.control.plausibility import Plausibility
from consensus.control.fleet_core import NearbyBatch
from consensus.control.robot_core import Nearby, RobotCore
from consensus.graphs.links import LinkModel
from consensus.ros import qos
from consensus.ros.cdr import header_stamp_ns
from consensus.ros.health import Health, guarded
from consensus.robots.map import fleet_reach
from consensus.ros.inputs import read_xy, sane_rows

NEARBY_FIELDS = (("x", PointField.FLOAT64, "<f8"), ("y", PointField.FLOAT64, "<f8"), ("z", PointField.FLOAT64, "<f8"),
                 ("age", PointField.FLOAT32, "<f4"), ("speed", PointField.FLOAT32, "<f4"),
                 ("id", PointField.INT32, "<i4"))
NEARBY_DTYPE = np.dtype([(name, code) for name, _, code in NEARBY_FIELDS])
MAX_AGE_S = 1e6             # a nearby age beyond this (11 days) is not one a relay sends: the message is refused [s]
MAX_SPEED = 1e3             # nor a speed beyond this [m/s]


def nearby_cloud(stamp_ns: int, xy: np.ndarray, age: np.ndarray, speed: np.ndarray, ids: np.ndarray) -> PointCloud2:
    """A ``nearby`` message of ``k`` robots (module docstring)."""
    k = len(xy)
    pts = np.zeros(k, dtype=NEARBY_DTYPE)
    if k:
        pts["x"], pts["y"] = xy[:, 0], (xy[:, 1] if xy.shape[1] > 1 else 0.0)
        pts["age"], pts["speed"], pts["id"] = age, speed, ids
    msg = PointCloud2()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
    msg.header.frame_id = names.WORLD_FRAME
    msg.height, msg.width = 1, k
    msg.fields = [PointField(name=name, offset=NEARBY_DTYPE.fields[name][1], datatype=dt, count=1)
                  for name, dt, _ in NEARBY_FIELDS]
    msg.is_bigendian = False
    msg.point_step = NEARBY_DTYPE.itemsize
    msg.row_step = NEARBY_DTYPE.itemsize * k
    msg.data = pts.tobytes()
    msg.is_dense = True
    return msg


def read_nearby(raw: bytes, now_s: float, dim: int) -> tuple[Nearby, int] | None:
    """A serialized ``nearby`` message as the robot core's ``Nearby`` (ages brought to ``now_s``) and the number of
    points dropped for a non-finite or absurd (``|v| > MAX_ABS_VALUE``) position; None when it is not one (another
    layout, a short buffer) or fails closed: a non-finite, negative or absurd age or speed, or one robot id twice (ids
    below 0 are bodies of no known robot and may repeat). A field that cannot be read never becomes "fresh and
    still": the caller counts a bad message and keeps the robots it knew (``RobotCore.check_nearby``)."""
    try:
        msg = deserialize_message(raw, PointCloud2)
        layout = [(f.name, f.offset, f.datatype) for f in msg.fields]
        if (msg.is_bigendian or msg.point_step != NEARBY_DTYPE.itemsize or layout != [
                (name, NEARBY_DTYPE.fields[name][1], dt) for name, dt, _ in NEARBY_FIELDS]):
            return None
        pts = np.frombuffer(bytes(msg.data), dtype=NEARBY_DTYPE, count=msg.width * msg.height)
    except Exception:  # noqa: BLE001 - an undecodable message is the caller's counted bad message
        return None
    age_in, speed = pts["age"].astype(float), pts["speed"].astype(float)
    ids = pts["id"].astype(int)
    known = ids[ids >= 0]
    if (not (np.isfinite(age_in).all() and np.isfinite(speed).all()) or (age_in < 0).any() or (speed < 0).any()
            or (age_in > MAX_AGE_S).any() or (speed > MAX_SPEED).any() or len(np.unique(known)) != len(known)):
        return None
    xy = np.column_stack([pts["x"], pts["y"]])[:, :dim]
    good = sane_rows(xy)
    stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
    age = age_in + max(now_s - stamp, 0.0)
    return Nearby(xy[good], age[good], speed[good], ids[good]), int(len(xy) - good.sum())


def checked_state(raw, j: int, plausible: Plausibility, health: Health, now: float,
                  what: str) -> tuple[tuple[float, float], int | None] | None:
    """Robot ``j``'s ``state`` (serialized, or a message): ``(position, header stamp [ns] or None)`` when it decodes
    and is plausible (``consensus.control.plausibility``), else None, counted in ``health`` (``what`` when
    undecodable or absurd, ``state.<kind>`` when implausible). The one check of the relays that read states."""
    p = read_xy(raw, PointStamped, health, what)
    if p is None:
        return None
    stamp_ns = header_stamp_ns(raw) if isinstance(raw, bytes) else None
    kind = plausible.check(j, now, p[: plausible.dim], stamp_ns * 1e-9 if stamp_ns else None)
    if kind is not None:
        health.count_bad_message(f"state.{kind}")
        return None
    return p, stamp_ns


class NearbyRelay:
    """The relay on ``node``. ``subscribe=False``: the host subscribes the states itself and hands each one to
    ``accept`` (the topology node, which relays the same states for planning). With ``cfg.single_process`` it relays
    nothing (``relaying`` False): the fleet process computes the sets (``FleetNearby``)."""

    def __init__(self, node: Node, cfg, health: Health, *, seed_offset: int = 104729, subscribe: bool = True,
                 starts: np.ndarray | None = None) -> None:
        self.node, self.cfg, self.health = node, cfg, health
        n = self.n = cfg.num_robots
        delay = float(getattr(cfg, "link_delay_s", 0.0))
        # a sample: x, y and the speed measured from the robot's previous state; no age limit: a robot whose states
        # stopped is still a body (module docstring, "Silent robots")
        self.links = LinkModel(n, 3, delay_s=delay, drop_prob=float(getattr(cfg, "link_drop_prob", 0.0)),
                               seed=cfg.seed + seed_offset, rate_hz=cfg.state_rate_hz)
        self.last = np.full((n, 3), np.nan)           # stamp, x, y of every robot's previous state
        self.v_max = float(cfg.v_max)
        self.plausible = Plausibility.for_workspace(n, cfg.workspace, self.v_max)
        # where the robots start, when the host knows it (the run's initial positions): the first state is checked
        # against it, and a robot that never spoke is a body there
        self.starts = None if starts is None else np.asarray(starts, dtype=float).reshape(n, -1)[:, :2]
        if self.starts is not None:
            self.plausible.expect(self.starts)
        self.t0: float | None = None                  # the relay's first tick (a silent start's age runs from it)
        self.cleared = np.zeros(n, dtype=bool)        # silent bodies an operator said are gone (``clear``)
        self.cleared_bodies = 0
        health.extra = lambda: {**self.plausible.record(self._now()), "nearby_points": self.sent_points,
                                "nearby_messages": self.published * len(self.pubs),
                                "cleared_bodies": self.cleared_bodies}
        self.speed = np.zeros(n)                      # every robot's speed measured from its last two states
        self.published = 0
        self.sent_points = 0                          # positions sent in nearby messages (the relay's traffic)
        # a fleet process computes every robot's set from the odometry it holds (FleetNearby): nothing to relay; the
        # host's own use of ``accept`` (the topology node's state checks) stays
        self.relaying = not bool(getattr(cfg, "single_process", False))
        if not self.relaying:
            self.pubs = []
            return
        # the reach (module docstring): the fleet's largest d_min and filtered point speed, for every pair; a robot
        # may drive one control period on a message that is just within the horizon
        self.horizon = float(getattr(cfg, "nearby_horizon_s", 0.0))
        reach = fleet_reach(cfg) if self.horizon > 0 else None
        self.d_min, self.reach_v = (None, self.v_max) if reach is None else reach
        self.reach_s = self.horizon + float(cfg.control_period_s)
        self.census_pub = None
        self._census_due = -np.inf
        if self.d_min is not None:
            self.census_pub = node.create_publisher(PointCloud2, names.CENSUS.in_run(node.get_namespace()),
                                                    qos.profile(names.CENSUS))
        for j in range(n) if subscribe else ():
            node.create_subscription(PointStamped, names.STATE.of(j), guarded(self._on_state(j), "nearby.state",
                                                                              health),
                                     qos.profile(names.STATE), raw=True)
        self.pubs = [node.create_publisher(PointCloud2, names.NEARBY.of(i), qos.profile(names.NEARBY))
                     for i in range(n)]
        node.create_subscription(Int32, names.CLEAR_BODY.in_run(node.get_namespace()),
                                 guarded(self._on_clear, "nearby.clear_body", health), qos.profile(names.CLEAR_BODY))
        node.create_timer(cfg.control_period_s, guarded(self.relay, "nearby.relay", health))

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _on_state(self, j: int):
        def cb(raw: bytes) -> None:
            self.accept(j, raw)
        return cb

    def accept(self, j: int, raw, what: str = "nearby.state") -> tuple[float, float] | None:
        """Robot ``j``'s serialized ``state``: decoded, checked (``checked_state``) and recorded; returns its
        position, or None when it was dropped (counted)."""
        now = self._now()
        got = checked_state(raw, j, self.plausible, self.health, now, what)
        if got is None:
            return None
        _, stamp_ns = got
        p = tuple(float(v) for v in self.plausible.last[j][:2])    # the track: where the body is
        # the speed between the robot's last two accepted states, timed by their own stamps (two states that arrive
        # in one burst are still a state period apart), at most the fleet's speed limit; the position's time is its
        # stamp, or when it came if that is earlier (a sender's clock ahead of ours never makes it younger), so its
        # age holds the transport too
        t = min(stamp_ns * 1e-9, now) if stamp_ns else now
        self.cleared[j] = False                       # it speaks: a body again
        t0, x0, y0 = self.last[j]
        if np.isfinite(t0) and t <= t0:
            return p              # no newer than the last (a state repeated while its odometry paused): kept as it was
        dt = t - t0
        speed = float(np.hypot(p[0] - x0, p[1] - y0) / dt) if np.isfinite(t0) and dt > 1e-3 else 0.0
        self.last[j] = (t, p[0], p[1])
        self.speed[j] = min(speed, self.v_max)
        self.links.record(j, t, (p[0], p[1], self.speed[j]))
        return p

    def _on_clear(self, msg: Int32) -> None:
        self.clear(int(msg.data))

    def clear(self, j: int) -> bool:
        """An operator's word that robot ``j``'s silent body is gone (``names.CLEAR_BODY``): its last position (or its
        start) is no longer sent, until it speaks again. Refused (logged, False) for a robot that is not silent (a
        state within ``robot_timeout_s``) or not of this fleet."""
        log = self.node.get_logger()
        if not 0 <= j < self.n:
            log.warning(f"clear_body: no robot {j} in a fleet of {self.n}")
            return False
        age = self._now() - self.last[j, 0]
        if np.isfinite(age) and age <= self.cfg.robot_timeout_s:
            log.warning(f"clear_body: robot_{j} is not silent (its state is {age:.1f} s old): its body stays avoided")
            return False
        self.cleared[j] = True
        self.cleared_bodies += 1
        log.warning(f"clear_body: robot_{j}'s silent body cleared by an operator; no longer avoided until it speaks")
        return True

    def relay(self) -> None:
        now_ns = self.node.get_clock().now().nanoseconds
        now = now_ns * 1e-9
        if self.t0 is None:
            self.t0 = now
        values, times = self.links.deliver(now)
        silent, extra = self._more_bodies(now)
        if silent is not None and silent.any():      # robots that never spoke: bodies where they start
            never = ~np.isfinite(times) & silent[None, :]
            values[never, :2] = self.starts[np.nonzero(never)[1]]
            values[never, 2] = 0.0
            times[never] = self.t0
        own, own_age = self.last[:, 1:3], now - self.last[:, 0]
        for i, pub in enumerate(self.pubs):
            known = np.isfinite(times[i]) & ~self.cleared
            known[i] = False
            xy, age, speed = values[i, :, :2], now - times[i], values[i, :, 2]
            ids = np.arange(self.n)
            more = [b for b in extra if b[0] != i and not self.cleared[b[0]]]
            if more:                                  # every other stream claimed for a robot: a body of no known id
                xy = np.vstack([xy, [b[1] for b in more]])
                age = np.concatenate([age, [now - b[2] for b in more]])
                speed = np.concatenate([speed, np.full(len(more), self.v_max)])
                ids = np.concatenate([ids, np.full(len(more), -1)])
                known = np.concatenate([known, np.ones(len(more), dtype=bool)])
            if self.d_min is not None:
                k = np.flatnonzero(known)
                known[k] = within_reach(own[i], own_age[i], xy[k], age[k], d_min=self.d_min, v_max=self.reach_v,
                                        horizon_s=self.reach_s)
            known = np.flatnonzero(known)
            self.sent_points += len(known)
            pub.publish(nearby_cloud(now_ns, xy[known], np.maximum(age[known], 0.0), speed[known], ids[known]))
        self.published += 1
        if self.census_pub is not None and now >= self._census_due:
            self._census_due = now + float(self.cfg.planner_period_s)
            self.census_pub.publish(self.census(now_ns))

    def _more_bodies(self, now: float) -> tuple[np.ndarray | None, list[tuple[int, np.ndarray, float]]]:
        """The bodies besides each robot's track: which robots never spoke (``(n,)`` bool, None without known
        starts), and every other stream of positions claimed for a robot (``Plausibility.bodies``: ``(robot,
        position, time)``)."""
        # a robot whose start is unknown (NaN: a motion-capture pose is wherever the robot stands) is no body there
        silent = None if self.starts is None else (~np.isfinite(self.plausible.last_t)
                                                   & np.isfinite(self.starts).all(axis=1))
        extra = [(j, p[:2], t) for j in range(self.n) for p, t in self.plausible.bodies(j, now)]
        return silent, extra

    def census(self, now_ns: int) -> PointCloud2:
        """Every robot's newest accepted position (as received, no link model: one message that every robot reads
        the same), a lost robot's (older than ``robot_timeout_s``) left out: the packing slots' assignment
        (``consensus.control.robot_core``) of robots that hear only the robots in reach."""
        now = now_ns * 1e-9
        age = now - self.last[:, 0]
        known = np.flatnonzero(np.isfinite(age) & (age <= self.cfg.robot_timeout_s))
        return nearby_cloud(now_ns, self.last[known, 1:3], np.maximum(age[known], 0.0), self.speed[known], known)


class FleetNearby:
    """Each robot's ``Nearby`` from the positions its process already holds, instead of the n² ``nearby`` relay.

    A fleet process runs every robot, and so receives every robot's odometry, each checked by that robot's own core
    (``RobotCore.accept``: plausibility). ``record`` takes each robot's newest accepted pose (once, when it is new;
    timed by when it was received) with its speed measured from the previous one (at most ``v_max``); ``deliver``
    hands each robot the others' samples (as the fleet core's dense ``NearbyBatch``) through the same link model as
    the relays (``consensus.graphs.links``: ``link_delay_s``, ``link_drop_prob``, and a position older than
    ``robot_timeout_s + link_delay_s`` left out), with their ages: what the ``nearby`` relay would have delivered,
    without n × (n − 1) positions on the wire ten times a second. The relay stays for robots in separate processes
    (``single_process:=false``).
    """

    def __init__(self, cores: Sequence[RobotCore], cfg, *, seed_offset: int = 104729) -> None:
        self.cores = list(cores)
        self.n = n = len(self.cores)
        self.ids = np.array([c.id for c in self.cores], dtype=int)
        self.dim = int(cfg.dim)
        delay = float(getattr(cfg, "link_delay_s", 0.0))
        self.links = LinkModel(n, 3, delay_s=delay, drop_prob=float(getattr(cfg, "link_drop_prob", 0.0)),
                               seed=cfg.seed + seed_offset, rate_hz=1.0 / cfg.control_period_s)
        self.v_max = float(cfg.v_max)
        self._last = np.full((n, 3), np.nan)            # time, x, y of each robot's last recorded pose

    def record(self) -> None:
        """Every robot's newest accepted pose, if it is new since the last call."""
        t = np.array([np.nan if c.odom_stamp is None or c.pos is None else c.odom_stamp for c in self.cores])
        new = np.isfinite(t) & (t != self._last[:, 0])
        if not new.any():
            return
        idx = np.flatnonzero(new)
        xy = np.zeros((len(idx), 2))
        for r, j in enumerate(idx):
            pos = self.cores[j].pos
            xy[r, : min(self.dim, 2)] = pos[:2]
        t0, prev = self._last[idx, 0], self._last[idx, 1:]
        dt = t[idx] - t0
        with np.errstate(invalid="ignore", divide="ignore"):
            speed = np.where(np.isfinite(t0) & (dt > 1e-3), np.hypot(*(xy - prev).T) / dt, 0.0)
        self._last[idx, 0], self._last[idx, 1:] = t[idx], xy
        sample = np.full((self.n, 3), np.nan)
        sample[idx] = np.column_stack([xy, np.minimum(speed, self.v_max)])
        for j in idx:
            self.links.record(int(j), float(t[j]), sample[j])

    def deliver(self, now: float, rows=None) -> NearbyBatch:
        """What each robot (``rows``: these robots, by their index here) now holds of the others (module docstring
        of ``FleetNearby``), as the fleet core's dense ``NearbyBatch`` (``NearbyBatch.robot(i)``: row i's
        ``Nearby``)."""
        values, times = self.links.deliver(now, rows=rows)
        pos = values[:, :, : self.dim]
        with np.errstate(invalid="ignore"):
            ages = now - times
        return NearbyBatch(pos, ages, values[:, :, 2], self.ids)
