"""``topology``: owns the communication graph and delivers each robot only the states it may hear.

Subscribes ``/robot_<j>/state`` (PointStamped) and ``/robot_<j>/target`` (PointStamped: its planner's target, the
robot's *meeting point*) of every robot and publishes, at ``neighbor_rate_hz``, to each robot i
``/robot_<i>/neighbors`` (geometry_msgs/PoseArray, frame ``world``): the positions of i's in-neighbours (the robots
j with adjacency[i][j] = 1), in ascending index order, as delivered over each link, and right after it
``/robot_<i>/neighbor_targets`` (PoseArray, the same header stamp and order): those neighbours' meeting points as
they travelled with the positions (a robot without a target yet: its position). A robot never receives a
non-neighbour's state. The link model is ``consensus.graphs.links`` (the headless loop's too): a delivery delay
(``link_delay_s``: the state delivered is the newest one at least that old) and a seeded drop probability
(``link_drop_prob``: the link keeps its previous delivery). A neighbour whose delivered state is older than
``robot_timeout_s + link_delay_s`` is left out: a robot whose process died (or whose link failed) drops out of
everybody's neighbours, the others go on among themselves, and the node logs the loss (and a return, should the
robot come back). States are read and the neighbour arrays written as serialized bytes (``consensus.ros.cdr``):
at 100 robots on a complete graph a relay is 200 messages of 99 poses.

With collision avoidance (``collision_avoidance``: ``auto`` is ``cbf`` in a ROS run) the node also hosts the
``nearby`` relay (``consensus.ros.nearby.NearbyRelay``): every control period, each robot gets every other robot's
position (``/robot_<i>/nearby``), independent of the graph, through the same link delay and drops.

The graph is published latched on ``/topology/graph`` (std_msgs/String, JSON of ``Graph.to_dict()``: ``name``,
``n``, ``directed``, ``adjacency`` (0/1 rows, row i = whom i hears), ``edges``) and can be switched at run time:
``ros2 param set /topology topology ring`` (also ``adjacency``, ``directed``, ``topology_p``, ``leader``); an
invalid graph is refused with its reason. A graph on which consensus is impossible is accepted with a warning.

A state with a non-finite or absurd (``|v| > MAX_ABS_VALUE``) position, or undecodable, is dropped and counted
(``bad_messages``), as is every exception of a callback (``callback_errors``); the node's health record goes out on
``/health`` every second (``consensus.ros.health.publish_health``).

Nothing heard is trusted (``consensus.control.plausibility``, one check shared with the ``nearby`` relay): a state
outside the workspace plus a margin, one that jumps beyond the speed limit since the robot's last accepted state, or
one stamped in the future is dropped and counted by kind (``state.outside``, ``state.jump``, ``state.future``; a
target outside the workspace plus the margin: ``target.outside``). A robot whose states keep being implausible is
*suspect*: its states are not delivered for planning until it has sent none implausible for a while, so its last
good state ages out of its neighbours' ``neighbors`` as a lost robot's does (the ``nearby`` relay still sends its
plausible positions: its body must be avoided). The health record carries ``implausible`` (per kind), ``suspects``
(now) and ``suspected`` (ever); the recorder puts them in the summary.
"""
from __future__ import annotations

import numpy as np
from geometry_msgs.msg import PointStamped, PoseArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from std_msgs.msg import String

from consensus.control.plausibility import Plausibility
from consensus.errors import ConfigError
from consensus.ros import qos
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.ros.cdr import pose_array_bytes
from consensus.graphs.links import LinkModel
from consensus.ros.nearby import NearbyRelay, checked_state
from consensus.ros.health import HEALTH, Health, guarded, publish_health
from consensus.ros.inputs import read_xy
from consensus.ros.params import declare_config
from consensus.ros.process import node_main
from consensus.ros.records import GraphRecord
from consensus import names

GRAPH_PARAMS = ("topology", "adjacency", "directed", "topology_p", "leader")
#: the fields the topology node reads besides ``GRAPH_PARAMS`` (its parameters: ``declare_config(uses=...)``)
USES = ("num_robots", "dim", "workspace", "seed", "executor", "fleet", "link_delay_s", "link_drop_prob",
        "neighbor_rate_hz", "state_rate_hz", "robot_timeout_s", "control_period_s", "v_max", "collision_avoidance",
        "robots_file", "nearby_horizon_s", "planner_period_s", "kinematics", "w_max", "footprint_radius_m",
        "safety_margin_m", "cbf_gamma")


class TopologyRelay:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.cfg = cfg = declare_config(node, AggregationConfig, runtime=GRAPH_PARAMS, uses=USES)
        self.health = Health(parent=HEALTH, logger=node.get_logger())     # this node's (also in HEALTH)
        self.graph = cfg.graph()
        self._warn_if_impossible()
        n = cfg.num_robots
        # a sample of robot j: its position and its meeting point (the target it last published, else its position)
        self.links = LinkModel(n, 4, delay_s=cfg.link_delay_s, drop_prob=cfg.link_drop_prob,
                               max_age_s=cfg.robot_timeout_s + cfg.link_delay_s, seed=cfg.seed + 7919,
                               rate_hz=cfg.state_rate_hz)
        self.targets = np.full((n, 2), np.nan)
        self.last_state = np.full(n, -np.inf)       # receive time of every robot's newest state
        self.lost: set[int] = set()
        # the collision relay shares the node's state subscriptions and their plausibility checks
        self.nearby = (NearbyRelay(node, cfg, self.health, subscribe=False)
                       if cfg.resolved_collision_avoidance(ros=True) == "cbf" else None)
        if self.nearby is not None:
            self.plausible = self.nearby.plausible
        else:
            self.plausible = Plausibility.for_workspace(n, cfg.workspace, cfg.v_max)
            self.health.extra = lambda: self.plausible.record(self._now())
        self.suspects: set[int] = set()
        for j in range(n):
            node.create_subscription(PointStamped, names.STATE.of(j),
                                     guarded(self._on_state(j), "topology.state", self.health),
                                     qos.profile(names.STATE), raw=True)
            node.create_subscription(PointStamped, names.TARGET.of(j),
                                     guarded(self._on_target(j), "topology.target", self.health),
                                     qos.profile(names.TARGET), raw=True)
        self.pubs = [node.create_publisher(PoseArray, names.NEIGHBORS.of(i), qos.profile(names.NEIGHBORS))
                     for i in range(n)]
        self.target_pubs = [node.create_publisher(PoseArray, names.NEIGHBOR_TARGETS.of(i),
                                                  qos.profile(names.NEIGHBOR_TARGETS)) for i in range(n)]
        self.graph_pub = node.create_publisher(String, names.TOPOLOGY_GRAPH.name, qos.profile(names.TOPOLOGY_GRAPH))
        node.add_on_set_parameters_callback(self._on_params)
        node.create_timer(1.0 / cfg.neighbor_rate_hz, guarded(self.relay, "topology.relay", self.health))
        self.publish_graph()
        self.publish_health = publish_health(node, self.health)

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _warn_if_impossible(self) -> None:
        ok, msg = self.graph.consensus_check()
        if not ok:
            self.node.get_logger().warning(msg)

    def _on_state(self, j: int):
        def cb(raw: bytes) -> None:
            p = self._accept(j, raw)
            if p is None:
                return
            now = self._now()
            if self._suspect(j, now):
                return                          # not delivered for planning: its last good state ages out
            self.last_state[j] = now
            mp = self.targets[j] if np.isfinite(self.targets[j]).all() else p
            self.links.record(j, now, (p[0], p[1], mp[0], mp[1]))
        return cb

    def _accept(self, j: int, raw) -> tuple[float, float] | None:
        """Robot ``j``'s state, decoded and checked (module docstring), or None (counted)."""
        if self.nearby is not None:
            return self.nearby.accept(j, raw, "topology.state")
        got = checked_state(raw, j, self.plausible, self.health, self._now(), "topology.state")
        return None if got is None else got[0]

    def _suspect(self, j: int, now: float) -> bool:
        """Whether robot ``j`` is suspect now; logs when it becomes suspect and when it is trusted again."""
        suspect = self.plausible.suspect(j, now)
        if suspect and j not in self.suspects:
            self.suspects.add(j)
            self.node.get_logger().warning(f"robot_{j} suspect: its states keep being implausible (outside the "
                                           f"workspace, jumps or future stamps); not relayed for planning")
        elif not suspect and j in self.suspects:
            self.suspects.discard(j)
            self.node.get_logger().info(f"robot_{j}'s states are plausible again")
        return suspect

    def _on_target(self, j: int):
        def cb(raw: bytes) -> None:
            p = read_xy(raw, PointStamped, self.health, "topology.target")
            if p is None:
                return
            if self.plausible.outside(p[: self.plausible.dim])[0]:
                self.plausible.count("outside", j, self._now())
                self.health.count_bad_message("target.outside")
                return
            self.targets[j] = p
        return cb

    def _note_losses(self, now: float) -> None:
        for j, last in enumerate(self.last_state):
            silent = now - last > self.cfg.robot_timeout_s
            if silent and np.isfinite(last) and j not in self.lost:
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
        values, times = self.links.deliver(now, self.graph.adj)
        for i, pub in enumerate(self.pubs):
            known = np.flatnonzero(np.isfinite(times[i]))           # ascending: the in-neighbours still heard
            pub.publish(pose_array_bytes(stamp_ns, names.WORLD_FRAME, values[i, known, :2]))
            self.target_pubs[i].publish(pose_array_bytes(stamp_ns, names.WORLD_FRAME, values[i, known, 2:4]))

    def publish_graph(self) -> None:
        self.graph_pub.publish(String(data=GraphRecord.from_dict(self.graph.to_dict()).encode()))

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
        self.links.forget(graph.adj)
        self.node.get_logger().info(f"topology switched to '{graph.name}'")
        self._warn_if_impossible()
        self.publish_graph()
        return SetParametersResult(successful=True)


def main() -> int:
    return node_main("topology", TopologyRelay)
