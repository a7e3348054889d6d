"""``topology``: owns the communication graph and delivers each robot only the states it may hear.

Subscribes ``/robot_<j>/state`` (PointStamped) of every robot and publishes, at ``neighbor_rate_hz``, to each robot i
``/robot_<i>/neighbors`` (geometry_msgs/PoseArray, frame ``world``): the positions of i's in-neighbours (the robots
j with adjacency[i][j] = 1), in ascending index order, as delivered over each link. A robot never receives a
non-neighbour's state. Per link: a delivery delay (``link_delay_s``: the state delivered is the newest one at least
that old) and a seeded drop probability (``link_drop_prob``: the link keeps its previous delivery). A neighbour
whose delivered state is older than ``robot_timeout_s + link_delay_s`` is left out: a robot whose process died
(or whose link failed) drops out of everybody's neighbours, the others go on among themselves, and the node logs
the loss (and a return, should the robot come back). States are read
and the neighbour arrays written as serialized bytes (``consensus.ros.cdr``): at 100 robots on a complete graph a
relay is 100 messages of 99 poses.

With collision avoidance (``collision_avoidance``: ``auto`` is ``cbf`` in a ROS run) the node also hosts the
``nearby`` relay (``consensus.ros.nearby.NearbyRelay``): every control period, each robot gets every other robot's
position (``/robot_<i>/nearby``), independent of the graph, through the same link delay and drops.

The graph is published latched on ``/topology/graph`` (std_msgs/String, JSON of ``Graph.to_dict()``: ``name``,
``n``, ``directed``, ``adjacency`` (0/1 rows, row i = whom i hears), ``edges``) and can be switched at run time:
``ros2 param set /topology topology ring`` (also ``adjacency``, ``directed``, ``topology_p``, ``leader``); an
invalid graph is refused with its reason. A graph on which consensus is impossible is accepted with a warning.

A state with a non-finite or absurd (``|v| > MAX_ABS_VALUE``) position, or undecodable, is dropped and counted
(``bad_messages``), as is every exception of a callback (``callback_errors``); the node's health record goes out on
``/health`` every second (``consensus.ros.params.publish_health``).
"""
from __future__ import annotations

import json
import math
from collections import deque

import numpy as np
from geometry_msgs.msg import PointStamped, PoseArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from std_msgs.msg import String

from consensus.errors import ConfigError
from consensus.ros import qos
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.ros.cdr import pose_array_bytes
from consensus.ros.nearby import NearbyRelay
from consensus.ros.params import HEALTH, Health, declare_config, guarded, node_main, publish_health, read_xy
from consensus import names

GRAPH_PARAMS = ("topology", "adjacency", "directed", "topology_p", "leader")


class TopologyRelay:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.cfg = cfg = declare_config(node, AggregationConfig, runtime=GRAPH_PARAMS)
        self.health = Health(parent=HEALTH, logger=node.get_logger())     # this node's (also in HEALTH)
        self.graph = cfg.graph()
        self._warn_if_impossible()
        n = cfg.num_robots
        keep = max(2, int(math.ceil((cfg.link_delay_s + 1.0) * max(cfg.state_rate_hz, 1.0) * 2)))
        self.history: list[deque] = [deque(maxlen=keep) for _ in range(n)]   # (recv_time, (x, y)) per robot
        self.delivered: dict[tuple[int, int], tuple[float, tuple[float, float]]] = {}
        self.rng = np.random.default_rng(cfg.seed + 7919)
        self.max_age = cfg.robot_timeout_s + cfg.link_delay_s
        self.lost: set[int] = set()
        for j in range(n):
            node.create_subscription(PointStamped, names.STATE.of(j),
                                     guarded(self._on_state(j), "topology.state", self.health),
                                     qos.profile(names.STATE), raw=True)
        self.pubs = [node.create_publisher(PoseArray, names.NEIGHBORS.of(i), qos.profile(names.NEIGHBORS))
                     for i in range(n)]
        self.graph_pub = node.create_publisher(String, names.TOPOLOGY_GRAPH.name, qos.profile(names.TOPOLOGY_GRAPH))
        self.delivered_count = 0
        self.dropped_count = 0
        node.add_on_set_parameters_callback(self._on_params)
        node.create_timer(1.0 / cfg.neighbor_rate_hz, guarded(self.relay, "topology.relay", self.health))
        self.publish_graph()
        self.publish_health = publish_health(node, self.health)
        self.nearby = (NearbyRelay(node, cfg, self.health) if cfg.resolved_collision_avoidance(ros=True) == "cbf"
                       else None)

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _warn_if_impossible(self) -> None:
        ok, msg = self.graph.consensus_check()
        if not ok:
            self.node.get_logger().warning(msg)

    def _on_state(self, j: int):
        def cb(raw: bytes) -> None:
            p = read_xy(raw, PointStamped, self.health, "topology.state")
            if p is not None:
                self.history[j].append((self._now(), p))
        return cb

    def _sample(self, j: int, now: float):
        """Newest state of robot j that is at least link_delay_s old, or None."""
        cutoff = now - self.cfg.link_delay_s
        for t, p in reversed(self.history[j]):
            if t <= cutoff:
                return t, p
        return None

    def _note_losses(self, now: float) -> None:
        for j, hist in enumerate(self.history):
            silent = not hist or now - hist[-1][0] > self.cfg.robot_timeout_s
            if silent and hist and j not in self.lost:
                self.lost.add(j)
                self.node.get_logger().warning(f"robot_{j} lost: no state for {self.cfg.robot_timeout_s:g} s; "
                                               f"the others go on without it")
            elif not silent and j in self.lost:
                self.lost.discard(j)
                self.node.get_logger().info(f"robot_{j} is back")

    def relay(self) -> None:
        now = self._now()
        self._note_losses(now)
        stamp_ns = self.node.get_clock().now().nanoseconds
        adj = self.graph.adj
        for i, pub in enumerate(self.pubs):
            xy: list[tuple[float, float]] = []
            for j in np.flatnonzero(adj[i]):
                j = int(j)
                link = (i, j)
                if self.cfg.link_drop_prob > 0 and self.rng.random() < self.cfg.link_drop_prob:
                    self.dropped_count += 1
                else:
                    sample = self._sample(j, now)
                    if sample is not None:
                        self.delivered[link] = sample
                got = self.delivered.get(link)
                if got is None or now - got[0] > self.max_age:
                    continue
                xy.append(got[1])
                self.delivered_count += 1
            pub.publish(pose_array_bytes(stamp_ns, "world", np.asarray(xy, dtype=float).reshape(-1, 2)))

    def publish_graph(self) -> None:
        self.graph_pub.publish(String(data=json.dumps(self.graph.to_dict())))

    def _on_params(self, params) -> SetParametersResult:
        changes = {p.name: p.value for p in params if p.name in GRAPH_PARAMS}
        if not changes:
            return SetParametersResult(successful=True)
        try:
            cfg = self.cfg.replace(**changes)
            graph = cfg.graph()
        except ConfigError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        self.cfg, self.graph = cfg, graph
        self.delivered = {k: v for k, v in self.delivered.items() if graph.adj[k[0], k[1]]}
        self.node.get_logger().info(f"topology switched to '{graph.name}'")
        self._warn_if_impossible()
        self.publish_graph()
        return SetParametersResult(successful=True)


def main() -> int:
    return node_main("topology", TopologyRelay)
