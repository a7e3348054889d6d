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
``ros2 param set /topology aggregation.topology ring`` (also ``.adjacency``, ``.directed``, ``.topology_p``,
``.leader``); an
invalid graph is refused with its reason. A graph on which consensus is impossible is accepted with a warning.

A state with a non-finite or absurd (``|v| > MAX_ABS_VALUE``) position, or undecodable, is dropped and counted
(``bad_messages``), as is every exception of a callback (``callback_errors``); the node's health record goes out on
``/health`` every second (``consensus.ros.health.publish_health``).

Nothing heard is trusted (``consensus.control.plausibility``, one track per robot shared with the ``nearby`` relay):
a state outside the workspace plus a margin, one farther than the robot's track can have moved, a replay stamped before
the track's newest position, or one stamped in the future is dropped and counted by kind (``state.outside``,
``state.jump``, ``state.past``, ``state.future``); a robot's first state must be where it starts (``known_starts``: the
run's initial positions, where its pose starts there). Refused states never reach the track, so the robot is still
relayed for planning (a stranger's lies cost nothing but their count; the robot is *suspect* while they come, logged
and reported). A robot with two consistent streams of states (*contested*: a stranger slow enough to look like a robot)
is not delivered for planning while it lasts, since which stream is the robot cannot be told (both are avoided as
bodies by the ``nearby`` relay): it costs that robot's part in the agreement, never the others'.

**Meeting points are evidence too.** Robot j's ``target`` is refused (counted as ``target.<why>``, the previous one
stays; ``meeting_points_refused`` in the health record) when it lies outside the workspace plus the margin
(``target.outside``), outside the box of what j can have planned on (what the node delivered to j since j's last
accepted meeting point and before it, j's track and last meeting point) widened by ``MEETING_POINT_MARGIN_M``
(``target.unreachable``), when more than ``TARGETS_PER_PERIOD`` came within a planning period (``target.rate``: a second
publisher), or while the ROS graph shows a publisher of another node on j's ``target`` (``target.foreign``). In the last
two cases j is not delivered for planning for ``UNTRUSTED_S`` (its position is no stand-in for its meeting point: a
packed robot's body is not where it wants the fleet to meet, and would pull the agreement towards it). Every
``GRAPH_CHECK_S`` the node asks the graph who publishes each robot's ``state`` and ``target``: a node outside the
robot's namespace is counted (``foreign_publisher``), logged and named in the health record (``foreign_publishers``:
topic -> nodes; on ``/health`` and ``/diagnostics``). A forged meeting point may cost one robot's round, never the
fleet's agreement. An operator's meeting point (``names.MEETING_POINT_SUGGESTION``, which every robot takes at once:
``RobotCore.suggest``) is evidence too: one inside the workspace is kept for ``SUGGESTION_KEEP_S``
(``AcceptedSuggestions``), and a robot's ``target`` within ``SUGGESTION_TOL_M`` of it is not ``target.unreachable``
(every other refusal stands). The robot's target and the suggestion travel on two topics, so the target may come
first: a target that would be ``target.unreachable`` waits up to ``SUGGESTION_RACE_S`` for a suggestion it equals
before it is refused and counted.

The health record carries ``implausible`` (per kind), ``suspects`` (now), ``suspected``, ``contested`` (ever) and
``relocations``; the recorder puts them in the summary.
"""
from __future__ import annotations

from collections import deque

import numpy as np
from geometry_msgs.msg import PointStamped, PoseArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from std_msgs.msg import String

from consensus.control.kinematics import initial_positions
from consensus.control.plausibility import Plausibility
from consensus.control.safety import Geofence
from consensus.errors import ConfigError
from consensus.ros import qos
from consensus.scenarios.aggregation.config import GRAPH_FIELDS, AggregationConfig
from consensus.ros.cdr import pose_array_bytes
from consensus.graphs.links import LinkModel
from consensus.ros.nearby import NearbyRelay, checked_state
from consensus.ros.health import HEALTH, Health, guarded, publish_health
from consensus.ros.inputs import read_xy
from consensus.ros.params import changed_fields, declare_config
from consensus.ros.process import node_main
from consensus.ros.records import GraphRecord
from consensus import names

GRAPH_PARAMS = GRAPH_FIELDS      # the graph's run-time fields (AggregationConfig's module)
MEETING_POINT_MARGIN_M = 1.0   # a meeting point this far outside the box of what its robot heard is still its [m]
TARGETS_PER_PERIOD = 3         # more meeting points than this from one robot within a planning period: a second
                               # publisher (a robot publishes one a round)
UNTRUSTED_S = 10.0             # then its meeting points are not relayed for this long [s]
GRAPH_CHECK_S = 2.0            # the ROS graph's publishers of the robots' topics are checked this often [s]
UNNAMED_NODE = "_NODE_NAME_UNKNOWN_"     # the node name the ROS graph gives a publisher before its node is known
SUGGESTION_KEEP_S = 60.0       # an operator's meeting point accepted is evidence for this long [s]
SUGGESTION_TOL_M = 1e-6        # a robot's meeting point this close to one is that one [m]
SUGGESTION_RACE_S = 2.0        # a far meeting point waits this long for the suggestion it took before it is refused [s]


class AcceptedSuggestions:
    """The operator's meeting points the node accepted (no ROS): ``offer`` keeps one inside the workspace
    ``workspace`` (the robots refuse the others) for ``keep_s``; ``matches`` says whether a robot's meeting point is
    one of them (within ``tol`` m), i.e. the robot took it rather than jumped there. Compared on the run's ``dim``
    coordinates (a 1-D run's robots take x alone and publish y = 0)."""

    def __init__(self, workspace, *, keep_s: float = SUGGESTION_KEEP_S, tol: float = SUGGESTION_TOL_M,
                 race_s: float = SUGGESTION_RACE_S) -> None:
        self.fence = Geofence.from_bounds(workspace)
        self.keep_s, self.tol, self.race_s = float(keep_s), float(tol), float(race_s)
        self.kept: list[tuple[float, np.ndarray]] = []       # (until, point)
        self.waiting: dict[int, tuple[float, np.ndarray]] = {}    # robot -> (when, its far meeting point): ``wait``

    def offer(self, point, now: float) -> bool:
        """An operator's meeting point heard at ``now``: kept (True) when finite and inside the workspace."""
        p = np.asarray(point, dtype=float).reshape(-1)[: self.fence.dim]
        if p.size != self.fence.dim or not self.fence.contains(p):
            return False
        self._forget(now)
        self.kept.append((float(now) + self.keep_s, p))
        return True

    def matches(self, point, now: float) -> bool:
        """Is ``point`` (a robot's meeting point heard at ``now``) within ``tol`` of a suggestion still kept?"""
        self._forget(now)
        p = np.asarray(point, dtype=float).reshape(-1)[: self.fence.dim]
        return p.size == self.fence.dim and any(float(np.linalg.norm(p - q)) <= self.tol for _, q in self.kept)

    def wait(self, robot: int, point, now: float) -> bool:
        """Robot ``robot``'s meeting point ``point`` would be refused as unreachable at ``now``: it waits for a
        suggestion it equals (``claimed``) for ``race_s`` (``expired``). Returns whether the robot had one waiting
        already (the caller refuses that one now: a newer meeting point replaces it)."""
        had = robot in self.waiting
        self.waiting[robot] = (float(now), np.asarray(point, dtype=float).reshape(-1))
        return had

    def claimed(self, now: float) -> list[tuple[int, np.ndarray]]:
        """The waiting meeting points that equal a suggestion kept now (each robot's, taken out of the wait)."""
        out = [(j, p) for j, (_, p) in self.waiting.items() if self.matches(p, now)]
        for j, _ in out:
            del self.waiting[j]
        return out

    def expired(self, now: float) -> list[int]:
        """The robots whose meeting point waited ``race_s`` for no suggestion (taken out of the wait: refused)."""
        out = [j for j, (t, _) in self.waiting.items() if now - t > self.race_s]
        for j in out:
            del self.waiting[j]
        return out

    def _forget(self, now: float) -> None:
        self.kept = [(until, q) for until, q in self.kept if until >= now]


def known_starts(cfg) -> np.ndarray | None:
    """Where each robot's first state must be (``Plausibility.expect``): the run's initial positions, where the
    robots' poses start there (our simulators; a robots file's entries whose pose is odometry composed with their
    ``initial_pose``); NaN rows for the others (a motion-capture pose is wherever the robot stands)."""
    starts = np.asarray(initial_positions(cfg), dtype=float)[:, :2].copy()
    if cfg.robots_file:
        from consensus.robots.map import check_robots, load_robots

        enabled = check_robots(load_robots(cfg.robots_file), cfg.workspace, cfg.robots_file)
        for j, entry in enumerate(enabled[: len(starts)]):
            if entry.pose_source != "odom":
                starts[j] = np.nan
    return starts
#: the fields the topology node reads besides ``GRAPH_PARAMS`` (its parameters: ``declare_config(uses=...)``)
USES = ("num_robots", "dim", "workspace", "seed", "executor", "single_process", "link_delay_s", "link_drop_prob",
        "neighbor_rate_hz", "state_rate_hz", "robot_timeout_s", "control_period_s", "v_max", "collision_avoidance",
        "robots_file", "nearby_horizon_s", "planner_period_s", "kinematics", "w_max", "footprint_radius_m",
        "safety_margin_m", "cbf_gamma", "init_radius", "initial_positions")


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
        starts = known_starts(cfg)
        self.nearby = (NearbyRelay(node, cfg, self.health, subscribe=False, starts=starts)
                       if cfg.resolved_collision_avoidance(ros=True) == "cbf" else None)
        if self.nearby is not None:
            self.plausible = self.nearby.plausible
        else:
            self.plausible = Plausibility.for_workspace(n, cfg.workspace, cfg.v_max)
            if starts is not None:
                self.plausible.expect(starts)
        relay_extra = self.health.extra
        self.health.extra = lambda: {**(relay_extra() if relay_extra else self.plausible.record(self._now())),
                                     "meeting_points_refused": self.mp_refused,
                                     "foreign_publishers": {t: sorted(v) for t, v in self.foreign.items()}}
        self.suspects: set[int] = set()
        self.contested: set[int] = set()
        # the meeting points' evidence (module docstring): the box of what each robot heard since its last accepted
        # meeting point and before (lo, hi; NaN: nothing yet), the times its recent meeting points came
        self.heard_box = np.full((2, n, 2, 2), np.nan)     # [current, previous], robot, lo/hi, axis
        self.target_times = [deque() for _ in range(n)]
        self.targets_untrusted_until = np.full(n, -np.inf)
        self.mp_refused = 0
        self.suggestions = AcceptedSuggestions(cfg.workspace)   # an operator's meeting points (module docstring)
        self.foreign: dict[str, set[str]] = {}             # topic -> publishers that are not its robot's node
        self._unnamed: dict[str, set[str]] = {}            # topic -> unnamed publishers seen at the last check only
        self._graph_due = -np.inf
        # (before the robots' targets: an executor that takes ready subscriptions in their order sees it first)
        node.create_subscription(PointStamped, names.MEETING_POINT_SUGGESTION.in_run(node.get_namespace()),
                                 guarded(self._on_suggestion, "topology.suggestion", self.health),
                                 qos.profile(names.MEETING_POINT_SUGGESTION))
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
            now = self._now()
            self._suspect(j, now)                 # (logged; its refused states never reached its track)
            if p is None:
                return
            self.last_state[j] = now              # (alive, even while left out of planning)
            if self._contested(j, now) or now < self.targets_untrusted_until[j]:
                return                          # not delivered for planning: its last good state ages out
            mp = self.targets[j] if np.isfinite(self.targets[j]).all() else p
            self.links.record(j, now, (p[0], p[1], mp[0], mp[1]))
        return cb

    def _contested(self, j: int, now: float) -> bool:
        """Whether robot ``j`` has a second body now (``Plausibility.contested``: two consistent streams of states,
        so which one is the robot cannot be told); logs when it starts and ends."""
        return self._log_change(self.contested, j, self.plausible.contested(j, now),
                                f"robot_{j} contested: two consistent streams of states claim it; not relayed for "
                                f"planning (both are avoided as bodies)", f"robot_{j} has one stream of states again")

    def _log_change(self, members: set[int], j: int, now_in: bool, started: str, ended: str) -> bool:
        """Keep ``members`` (the robots in some state) up to date for robot ``j`` (``now_in``: in it now), logging
        ``started`` (a warning) when it enters and ``ended`` when it leaves; returns ``now_in``."""
        if now_in and j not in members:
            members.add(j)
            self.node.get_logger().warning(started)
        elif not now_in and j in members:
            members.discard(j)
            self.node.get_logger().info(ended)
        return now_in

    def _accept(self, j: int, raw) -> tuple[float, float] | None:
        """Robot ``j``'s state, decoded and checked (module docstring), or None (counted)."""
        if self.nearby is not None:
            return self.nearby.accept(j, raw, "topology.state")
        got = checked_state(raw, j, self.plausible, self.health, self._now(), "topology.state")
        return None if got is None else got[0]

    def _suspect(self, j: int, now: float) -> bool:
        """Whether robot ``j`` is suspect now; logs when it becomes suspect and when it is trusted again."""
        return self._log_change(self.suspects, j, self.plausible.suspect(j, now),
                                f"robot_{j} suspect: states claiming it keep being implausible (outside the "
                                f"workspace, jumps, replays or future stamps); refused, its track kept",
                                f"robot_{j}'s states are plausible again")

    def _on_target(self, j: int):
        def cb(raw: bytes) -> None:
            p = read_xy(raw, PointStamped, self.health, "topology.target")
            if p is None:
                return
            now = self._now()
            if self.plausible.outside(p[: self.plausible.dim])[0]:
                self.plausible.count("outside", j, now)
                self.health.count_bad_message("target.outside")
                return
            kind = self._target_problem(j, now, np.asarray(p[:2], dtype=float))
            if kind == "unreachable":       # perhaps a suggestion it took, still on its way (module docstring)
                if self.suggestions.wait(j, p, now):
                    self._refuse("unreachable")               # the one that waited: replaced, refused
                return
            if self.suggestions.waiting.pop(j, None) is not None:
                self._refuse("unreachable")
            if kind is not None:
                self._refuse(kind)
                return
            self._take_target(j, p)
        return cb

    def _refuse(self, kind: str) -> None:
        """A robot's meeting point refused (``target.<kind>``, ``meeting_points_refused``)."""
        self.mp_refused += 1
        self.health.count_bad_message(f"target.{kind}")

    def _take_target(self, j: int, p) -> None:
        """Robot ``j``'s meeting point ``p`` accepted: what the node relays for it from now on."""
        self.targets[j] = p
        self.heard_box[1, j], self.heard_box[0, j] = self.heard_box[0, j], np.nan

    def _settle_waiting(self, now: float) -> None:
        """The far meeting points that waited for a suggestion: taken once it came, refused once it did not."""
        for j, p in self.suggestions.claimed(now):
            self._take_target(j, p)
        for _ in self.suggestions.expired(now):
            self._refuse("unreachable")

    def _on_suggestion(self, msg: PointStamped) -> None:
        """An operator's meeting point: kept as evidence when inside the workspace (``AcceptedSuggestions``); another
        frame than ``world`` or a non-finite point is a bad message (the robots drop it too)."""
        if msg.header.frame_id.lstrip("/") not in ("", names.WORLD_FRAME):
            self.health.count_bad_message("topology.suggestion.frame")
            return
        p = read_xy(msg, PointStamped, self.health, "topology.suggestion")
        if p is None:
            return
        where = ", ".join(f"{v:g}" for v in p[: self.suggestions.fence.dim])
        now = self._now()
        if self.suggestions.offer(p, now):
            self._settle_waiting(now)
            self.node.get_logger().info(f"operator's meeting point ({where}): the robots' meeting points there are "
                                        f"accepted for {SUGGESTION_KEEP_S:g} s")
        else:
            self.node.get_logger().warning(f"operator's meeting point ({where}) is outside the workspace: not kept "
                                           f"(the robots refuse it)")

    def _target_problem(self, j: int, now: float, p: np.ndarray) -> str | None:
        """Why robot ``j``'s meeting point ``p`` is not evidence of its planner (module docstring), or None:
        ``rate`` (more than ``TARGETS_PER_PERIOD`` within a planning period: a second publisher; the robot is not
        relayed for planning for ``UNTRUSTED_S``), ``foreign`` (the graph shows a publisher of another node on its
        topic), ``unreachable`` (outside what it heard, widened by ``MEETING_POINT_MARGIN_M``, and not an operator's
        meeting point kept: ``AcceptedSuggestions``)."""
        times = self.target_times[j]
        times.append(now)
        while times and times[0] < now - self.cfg.planner_period_s:
            times.popleft()
        if len(times) > TARGETS_PER_PERIOD:
            self.targets_untrusted_until[j] = now + UNTRUSTED_S
            return "rate"
        if now < self.targets_untrusted_until[j]:
            return "rate"
        if names.TARGET.of(j) in self.foreign or f"/{names.TARGET.of(j)}" in self.foreign:
            return "foreign"
        box = self._reach_box(j)
        if box is not None and not np.all((p >= box[0] - MEETING_POINT_MARGIN_M) &
                                          (p <= box[1] + MEETING_POINT_MARGIN_M)) \
                and not self.suggestions.matches(p, now):      # (an operator's point the robot took)
            return "unreachable"
        return None

    def _reach_box(self, j: int) -> np.ndarray | None:
        """The box (lo, hi) of what robot ``j`` can have planned on: what it heard since its last accepted meeting
        point and before it, its track and its last meeting point; None while nothing is known."""
        pts = [self.heard_box[k, j, b] for k in range(2) for b in range(2)]
        if np.isfinite(self.plausible.last[j]).all():
            pts.append(self.plausible.last[j][:2])
        if np.isfinite(self.targets[j]).all():
            pts.append(self.targets[j])
        pts = [q for q in pts if np.isfinite(q).all()]
        if not pts:
            return None
        arr = np.asarray(pts)
        return np.stack([arr.min(axis=0), arr.max(axis=0)])

    def _check_graph(self, now: float) -> None:
        """Every ``GRAPH_CHECK_S``: the publishers of each robot's ``state`` and ``target`` that are not a node of
        that robot's namespace (a stranger on a topic only one robot should write): counted once each and named in
        the health record (``foreign_publishers``, on ``/health`` and ``/diagnostics``)."""
        if now < self._graph_due:
            return
        self._graph_due = now + GRAPH_CHECK_S
        base = self.node.get_namespace().rstrip("/")
        for j in range(self.cfg.num_robots):
            ns = f"{base}/{names.namespace(j)}"
            for topic in (f"{base}/{names.STATE.of(j)}", f"{base}/{names.TARGET.of(j)}"):
                try:
                    infos = self.node.get_publishers_info_by_topic(topic)
                except Exception:  # noqa: BLE001 - a graph query that fails leaves the last answer
                    continue
                strangers = {f"{i.node_namespace.rstrip('/')}/{i.node_name}" for i in infos
                             if i.node_namespace.rstrip("/") != ns}
                new = strangers - self.foreign.get(topic, set())
                # a publisher the graph cannot name yet (its node's discovery under way on a loaded host: the robot's
                # own node, as often as not) is foreign at once, but counted and named only if it is still unnamed
                # at the next check
                unnamed = {s for s in new if s.endswith(UNNAMED_NODE)}
                report = (new - unnamed) | (strangers & self._unnamed.pop(topic, set()))
                if unnamed:
                    self._unnamed[topic] = unnamed
                if report:
                    self.health.count_bad_message("foreign_publisher", len(report))
                    self.node.get_logger().warning(f"{topic}: published by {sorted(report)} besides robot_{j}'s own "
                                                   f"node; its meeting points are not relayed while they publish")
                if strangers:
                    self.foreign[topic] = strangers
                    if topic.endswith(names.TARGET.of(j)):
                        self.targets_untrusted_until[j] = now + UNTRUSTED_S
                else:
                    self.foreign.pop(topic, None)

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
        self._settle_waiting(now)
        self._note_losses(now)
        self._check_graph(now)
        stamp_ns = self.node.get_clock().now().nanoseconds
        values, times = self.links.deliver(now, self.graph.adj)
        for i, pub in enumerate(self.pubs):
            known = np.flatnonzero(np.isfinite(times[i]))           # ascending: the in-neighbours still heard
            if len(known):                                           # what robot i heard: its meeting point's box
                seen = np.vstack([values[i, known, :2], values[i, known, 2:4]])
                box = self.heard_box[0, i]
                box[0] = np.fmin(box[0], seen.min(axis=0))
                box[1] = np.fmax(box[1], seen.max(axis=0))
            pub.publish(pose_array_bytes(stamp_ns, names.WORLD_FRAME, values[i, known, :2]))
            self.target_pubs[i].publish(pose_array_bytes(stamp_ns, names.WORLD_FRAME, values[i, known, 2:4]))

    def publish_graph(self) -> None:
        self.graph_pub.publish(String(data=GraphRecord.from_dict(self.graph.to_dict()).encode()))

    def _on_params(self, params) -> SetParametersResult:
        changes = changed_fields(type(self.cfg), params, GRAPH_PARAMS)
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
