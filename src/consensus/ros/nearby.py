"""The ``nearby`` relay: every robot's position to every other robot, for collision avoidance.

``NearbyRelay(node, cfg)`` subscribes ``/robot_<j>/state`` of every robot and publishes, every control period, to
each robot i ``/robot_<i>/nearby`` (geometry_msgs/PoseArray, frame ``world``): the positions of all the other
robots, whatever the communication graph. Why not ``neighbors``: the planning graph says whom a robot *listens
to*; collision avoidance needs every robot it can physically meet (a ring's robot i meets robot i + 3 at the
meeting point), so this set is the proximity set of the whole fleet, independent of the graph (docs/real-robots.md).
It goes through the same link model as the planning graph's deliveries (``link_delay_s``: the position delivered is
the newest one at least that old; ``link_drop_prob``: per link and delivery, seeded, the link keeps its previous
delivery), and a position older than ``robot_timeout_s + link_delay_s`` is left out (a lost robot).

Hosted by a node that runs in every run whose robots move (the aggregation's ``topology``); vectorised over the
n × n links, so 100 robots cost one array update and 100 publishes per period. A state with a non-finite or absurd
position, or undecodable, is dropped and counted in the host's ``Health``.
"""
from __future__ import annotations

from collections import deque

import numpy as np
from geometry_msgs.msg import PointStamped, PoseArray
from rclpy.node import Node

from consensus import names
from consensus.ros import qos
from consensus.ros.cdr import pose_array_bytes
from consensus.ros.params import Health, guarded, read_xy


class NearbyRelay:
    def __init__(self, node: Node, cfg, health: Health, *, seed_offset: int = 104729) -> None:
        self.node, self.cfg, self.health = node, cfg, health
        n = self.n = cfg.num_robots
        self.delay_s = float(getattr(cfg, "link_delay_s", 0.0))
        self.drop_prob = float(getattr(cfg, "link_drop_prob", 0.0))
        self.max_age = cfg.robot_timeout_s + self.delay_s
        keep = max(2, int(np.ceil((self.delay_s + 1.0) * max(cfg.state_rate_hz, 1.0) * 2)))
        self.history: list[deque] = [deque(maxlen=keep) for _ in range(n)]
        self.rng = np.random.default_rng(cfg.seed + seed_offset)
        self.pos = np.full((n, n, 2), np.nan)          # pos[i, j]: where i last got j
        self.stamp = np.full((n, n), -np.inf)          # receive time of that position
        self.published = 0
        for j in range(n):
            node.create_subscription(PointStamped, names.STATE.of(j), guarded(self._on_state(j), "nearby.state",
                                                                              health),
                                     qos.profile(names.STATE), raw=True)
        self.pubs = [node.create_publisher(PoseArray, names.NEARBY.of(i), qos.profile(names.NEARBY))
                     for i in range(n)]
        node.create_timer(cfg.control_period_s, guarded(self.relay, "nearby.relay", health))

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _on_state(self, j: int):
        def cb(raw: bytes) -> None:
            p = read_xy(raw, PointStamped, self.health, "nearby.state")
            if p is not None:
                self.history[j].append((self._now(), p))
        return cb

    def _latest(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """The newest state of every robot at least ``link_delay_s`` old (NaN, -inf where none)."""
        xy = np.full((self.n, 2), np.nan)
        t = np.full(self.n, -np.inf)
        cutoff = now - self.delay_s
        for j, hist in enumerate(self.history):
            for tj, p in reversed(hist):
                if tj <= cutoff:
                    xy[j], t[j] = p, tj
                    break
        return xy, t

    def relay(self) -> None:
        now = self._now()
        xy, t = self._latest(now)
        update = np.broadcast_to(np.isfinite(t)[None, :], (self.n, self.n))
        if self.drop_prob > 0:
            update = update & (self.rng.random((self.n, self.n)) >= self.drop_prob)
        self.pos = np.where(update[:, :, None], xy[None, :, :], self.pos)
        self.stamp = np.where(update, t[None, :], self.stamp)
        fresh = (now - self.stamp) <= self.max_age
        np.fill_diagonal(fresh, False)
        stamp_ns = self.node.get_clock().now().nanoseconds
        for i, pub in enumerate(self.pubs):
            pub.publish(pose_array_bytes(stamp_ns, names.WORLD_FRAME, self.pos[i][fresh[i]]))
        self.published += 1
