"""The operator's seat on the ROS graph: the ``operator`` node ``consensus mcp`` runs beside a fleet
(``consensus.operator.server``). It only reads what the fleet publishes and acts through the fleet's own channels:

* reads each robot's ``state`` (its position as broadcast), ``target`` (its meeting point), ``planner/status`` and
  ``planner/reasoning`` records, the ``topology/graph`` record, and the e-stop topic (latched);
* acts: publishes the e-stop (``estop_topic``, latched, as ``ros2 topic pub`` would), an operator's meeting point
  (``names.MEETING_POINT_SUGGESTION``), and sets parameters through the nodes' own parameter services, so every
  change meets the node's own checks (ranges, ``v_max`` not above its launch value, an invalid graph) and its reason
  comes back as it is.

Everything heard is decoded with the records' own classes; an undecodable message is counted (``bad_messages``) and
left out. The node spins on its own thread in its own context (its domain: the run's, from its manifest).
"""
from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Any

import rclpy
from geometry_msgs.msg import PointStamped
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from std_msgs.msg import Bool, String

from consensus import names
from consensus.ros import qos
from consensus.ros.records import GraphRecord, ReasoningRecord, RecordError, StatusRecord

REASONING_KEPT = 5          # reasoning records kept per robot
PARAM_SERVICE_WAIT_S = 5.0  # how long a parameter service may take to appear


class OperatorBridge:
    """The ``operator`` node of a run in ``namespace`` with ``num_robots`` robots, on domain ``domain_id``."""

    def __init__(self, *, namespace: str, num_robots: int, estop_topic: str, domain_id: int,
                 node_name: str = names.OPERATOR_NODE) -> None:
        self.n = int(num_robots)
        self.namespace = namespace.rstrip("/")
        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=int(domain_id))
        self.node = Node(node_name, namespace=self.namespace or "/", context=self.ctx)
        self._lock = threading.Lock()
        n = self.n
        self.positions: list[tuple[float, float, float] | None] = [None] * n     # x, y, heard (monotonic)
        self.meeting_points: list[list[float] | None] = [None] * n
        self.status_records: list[dict | None] = [None] * n
        self.reasoning_records: list[deque] = [deque(maxlen=REASONING_KEPT) for _ in range(n)]
        self.graph_record: dict | None = None
        self.estop_state: bool | None = None
        self.bad_messages = 0
        node = self.node
        for i in range(n):
            node.create_subscription(PointStamped, names.STATE.of(i), self._on_state(i), qos.profile(names.STATE))
            node.create_subscription(PointStamped, names.TARGET.of(i), self._on_target(i), qos.profile(names.TARGET))
            node.create_subscription(String, names.PLANNER_STATUS.of(i), self._on_status(i),
                                     qos.profile(names.PLANNER_STATUS))
            node.create_subscription(String, names.PLANNER_REASONING.of(i), self._on_reasoning(i),
                                     qos.profile(names.PLANNER_REASONING))
        node.create_subscription(String, names.TOPOLOGY_GRAPH.name, self._on_graph, qos.profile(names.TOPOLOGY_GRAPH))
        self.estop_topic = estop_topic
        node.create_subscription(Bool, estop_topic, self._on_estop, qos.profile(names.ESTOP))
        self._estop_pub = node.create_publisher(Bool, estop_topic, qos.profile(names.ESTOP))
        self._suggest_pub = node.create_publisher(
            PointStamped, names.MEETING_POINT_SUGGESTION.in_run(self.namespace or "/"),
            qos.profile(names.MEETING_POINT_SUGGESTION))
        self._param_clients: dict[str, AsyncParameterClient] = {}
        self.executor = SingleThreadedExecutor(context=self.ctx)
        self.executor.add_node(node)
        self._thread = threading.Thread(target=self._spin, name="operator-bridge", daemon=True)
        self._thread.start()

    # --- reading ---------------------------------------------------------------------------------------------------
    def _spin(self) -> None:
        try:
            while self.ctx.ok():
                self.executor.spin_once(timeout_sec=0.1)
        except Exception:          # the context shut down under the spin (close)
            pass

    def _bad(self) -> None:
        with self._lock:
            self.bad_messages += 1

    def _on_state(self, i: int):
        def cb(msg: PointStamped) -> None:
            x, y = float(msg.point.x), float(msg.point.y)
            if not (math.isfinite(x) and math.isfinite(y)):
                return self._bad()
            with self._lock:
                self.positions[i] = (x, y, time.monotonic())
        return cb

    def _on_target(self, i: int):
        def cb(msg: PointStamped) -> None:
            x, y = float(msg.point.x), float(msg.point.y)
            if not (math.isfinite(x) and math.isfinite(y)):
                return self._bad()
            with self._lock:
                self.meeting_points[i] = [x, y]
        return cb

    def _on_status(self, i: int):
        def cb(msg: String) -> None:
            try:
                rec = StatusRecord.decode(msg.data).to_dict()
            except RecordError:
                return self._bad()
            with self._lock:
                self.status_records[i] = rec
        return cb

    def _on_reasoning(self, i: int):
        def cb(msg: String) -> None:
            try:
                rec = ReasoningRecord.decode(msg.data).to_dict()
            except RecordError:
                return self._bad()
            with self._lock:
                self.reasoning_records[i].append(rec)
        return cb

    def _on_graph(self, msg: String) -> None:
        try:
            rec = GraphRecord.decode(msg.data).to_dict()
        except RecordError:
            return self._bad()
        with self._lock:
            self.graph_record = rec

    def _on_estop(self, msg: Bool) -> None:
        with self._lock:
            self.estop_state = bool(msg.data)

    def snapshot(self) -> dict[str, Any]:
        """What the fleet said last, copied: positions (with their age), meeting points, status and reasoning
        records, the graph, the e-stop as heard, the bad messages."""
        now = time.monotonic()
        with self._lock:
            return {
                "positions": [None if p is None else [p[0], p[1]] for p in self.positions],
                "position_age_s": [None if p is None else round(now - p[2], 3) for p in self.positions],
                "meeting_points": [None if m is None else list(m) for m in self.meeting_points],
                "status": [None if s is None else dict(s) for s in self.status_records],
                "reasoning": [list(d) for d in self.reasoning_records],
                "graph": None if self.graph_record is None else dict(self.graph_record),
                "estop": self.estop_state,
                "bad_messages": self.bad_messages,
            }

    # --- acting ----------------------------------------------------------------------------------------------------
    def estop(self, engage: bool) -> int:
        """Publish the e-stop (latched). Returns at once, with the number of its subscribers (0: no robot heard
        it): the robots stop from their subscription's callback."""
        self._estop_pub.publish(Bool(data=bool(engage)))
        return self._estop_pub.get_subscription_count()

    def suggest(self, x: float, y: float) -> None:
        msg = PointStamped()
        msg.header.frame_id = names.WORLD_FRAME
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.point.x, msg.point.y = float(x), float(y)
        self._suggest_pub.publish(msg)

    def set_parameters(self, node_name: str, values: dict[str, Any], timeout_s: float = 10.0) -> str | None:
        """Set ``values`` (ROS parameter name -> value) on the node ``node_name`` (relative to the run's namespace)
        through its parameter service, all at once. None if the node took them, else its reason (or why the call
        did not get through)."""
        with self._lock:
            client = self._param_clients.get(node_name)
            if client is None:
                client = self._param_clients[node_name] = AsyncParameterClient(self.node, node_name)
        if not client.wait_for_services(timeout_sec=PARAM_SERVICE_WAIT_S):
            return f"the node '{node_name}' does not answer (its parameter service is not there)"
        done = threading.Event()
        future = client.set_parameters_atomically([Parameter(k, value=v) for k, v in values.items()],
                                                  callback=lambda _f: done.set())
        if not done.wait(timeout_s):
            return f"the node '{node_name}' did not answer within {timeout_s:g} s"
        result = future.result()
        if result is None:
            return f"the node '{node_name}' failed to answer"
        res = result.result
        return None if res.successful else (res.reason or "refused by the node")

    def close(self) -> None:
        try:
            self.executor.shutdown(timeout_sec=1.0)
            self.node.destroy_node()
        finally:
            if self.ctx.ok():
                rclpy.shutdown(context=self.ctx)
            self._thread.join(timeout=2.0)
