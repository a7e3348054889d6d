"""One robot's ROS wiring: decode the inputs, call the robot's core, publish what it decided.

Every decision (planner scheduling, safety rules, controller, packing, collision filter) is the robot's
``consensus.control.robot_core.RobotCore``, the one the headless loop calls; this node decodes and checks its inputs,
calls ``observe`` / ``plan`` / ``collect`` / ``step`` and publishes.

Topics (relative, inside the robot's namespace, e.g. ``/robot_3/...``):

========================  =====================================  ==============================================
topic                     type                                   meaning
========================  =====================================  ==============================================
``odom`` (sub)            nav_msgs/Odometry                      own pose (from the sim or the real robot)
``neighbors`` (sub)       geometry_msgs/PoseArray                states of the robots this one may hear,
                                                                 delivered by the topology node
``neighbor_targets``      geometry_msgs/PoseArray                those robots' meeting points (same order and
(sub)                                                            header stamp as the ``neighbors`` message)
``nearby`` (sub)          sensor_msgs/PointCloud2                the other robots' positions with their age and
                                                                 speed (collision avoidance only; one process per
                                                                 robot: those in reach; ``consensus.ros.nearby``)
``/census`` (sub)         sensor_msgs/PointCloud2, transient     every robot's position once a planning period,
                          local                                  for the packing slots (``nearby_horizon_s`` > 0)
``cmd_vel`` (pub)         geometry_msgs/Twist                    velocity command (body frame)
``estop_topic`` (sub)     std_msgs/Bool, reliable, transient     fleet e-stop (``/estop``): true stops the robot
                          local                                  at once and holds zero until false
``/operator/meeting_      geometry_msgs/PointStamped, reliable   an operator's meeting point for the fleet
point`` (sub)             (``events``)                           (``RobotCore.suggest``; robots with a planner)
``state`` (pub)           geometry_msgs/PointStamped             own position, broadcast at ``state_rate_hz``
``target`` (pub)          geometry_msgs/PointStamped             planner output (after geofence clamping): the
                                                                 robot's meeting point
``planner/reasoning``     std_msgs/String, JSON                  one record per planning round (schema below)
``planner/status``        std_msgs/String, JSON                  counters, LLM client state, control timing
========================  =====================================  ==============================================

``planner/reasoning`` and ``planner/status`` JSON: ``consensus.ros.records.ReasoningRecord`` (``RobotCore.collect``)
and ``StatusRecord`` (``RobotCore.status()`` plus the health counts), encoded by those classes; their schema tables
are in docs/nodes.md. The status's ``control`` is ``consensus.control.ticks.TickTimer.as_dict`` (the control ticks'
start, ``{"ticks", "on_time", "max_late_ms", "rate_hz"}``, and the publish of their ``cmd_vel``, the delay a robot
feels from its slot, ``{"published", "publish_on_time", "publish_late_ms": {"p50", "p99", "p999", "max"},
"publish_late_hist"}``); its ``llm`` is the LLM client's status (only with a client).

Health (``consensus.ros.health.Health``, one per robot, counting into the process's ``HEALTH`` too):
``callback_errors`` = exceptions of the robot's control and planning ticks (caught, logged, counted; the robot goes
on); ``bad_messages`` = inputs dropped: an odometry message with a non-finite or absurd (``|v| > MAX_ABS_VALUE``,
1e6 m) position or an invalid orientation (unicycle), each neighbour pose of ``neighbors``, ``neighbor_targets`` and
``nearby`` with a non-finite or absurd coordinate (the others of the message are used), a ``neighbors`` delivery
used without its meeting points (``neighbor_targets``: a different length, or none matching for more than
``UNPAIRED_DELIVERIES`` deliveries; the neighbours' positions stand in for them) and undecodable messages.
Then the core's plausibility checks (``RobotCore.accept``, ``check_heard``, ``check_nearby``;
``consensus.control.plausibility``): odometry outside the workspace plus a margin, jumping beyond the speed limit or
stamped in the future (``odom.outside``/``odom.jump``/``odom.future``: the pose is refused, the robot goes stale if
no plausible one follows; robot clocks must be synchronised, as for TF), a neighbour outside the workspace
(``neighbors.outside``), a delivery stamped in the future (``neighbors.future``, ``nearby.future``: the previous one
stays) and a nearby robot that jumped (``nearby.implausible``: avoided at its last plausible position, ageing).

The planner never runs on the executor thread: an LLM plan is submitted to a thread pool and the control tick picks
up the finished result, so a slow or dead endpoint cannot delay ``cmd_vel``.

Collision avoidance (``collision_avoidance``: ``auto`` is ``cbf`` here, every robot being a ROS node): the core
filters the controller's command with the robot's own odometry and the other robots' positions of its newest
``nearby`` message (not ``neighbors``: a robot must avoid robots it can meet even if the communication graph does
not connect them), each widened by its measured age times the closing speed. The footprint is the entry's preset's
(robots file) or ``footprint_radius_m``; a neighbour's is taken as the fleet's largest.

Real robots (``robots_file``, ``consensus.robots``): robot ``i`` is the ``i``-th enabled entry of the map. Its own
topics stay as above; the command goes to the entry's driver topic with the preset's type (Twist, or TwistStamped
with ``header.stamp`` and the preset's body ``frame_id``) and the pose comes from the entry's pose topic (Odometry
or PoseStamped; a PoseStamped in another frame than the map's ``frame`` is a bad message), brought into the shared
frame (``RobotEntry.to_shared``). The preset's kinematics and speed caps apply on top of the run's; a single
integrator's world-frame velocity is rotated into the robot's body frame by its measured yaw.

E-stop: every robot subscribes ``estop_topic``. ``true`` publishes a zero command from the callback (no wait for
the next tick) and every tick publishes zero until ``false``; the planner keeps planning. Counted in the status
(``estops``: engagements, ``estopped``: now, state ``"estopped"``). Geofence, speed limit and the stale-input
stops are untouched by it.

Operator's meeting point: a robot with a planner subscribes ``names.MEETING_POINT_SUGGESTION`` (under the run's
namespace; a fleet process's robots share one subscription, ``consensus.ros.fleet.FleetClock``), the point
``consensus mcp``'s ``suggest_meeting_point`` publishes once a human approved it (frame ``world``; a 1-D run takes x
only). A non-finite or absurd point, another frame or undecodable bytes is a counted bad message
(``operator.meeting_point``, ``operator.meeting_point.frame``); the rest goes to ``RobotCore.suggest``, which applies
it (the robot's meeting point; no round before ``suggestion_hold_s`` is over; the round in flight dropped) or refuses
it with a reason (outside the geofence, ...). The node logs each message once (applied: where, and when planning
resumes; refused or dropped: why) and, applied, publishes ``target`` at once (the topology node and the recorder see
the new meeting point without waiting for a round) and its status.

Dry run (``dry_run: true``): no command publisher is created; each command the robot would send is written, with
its topic and type, to ``<output_dir>/dry_run.jsonl`` and logged (at most once a second per robot).
"""
from __future__ import annotations

import json
import math
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from geometry_msgs.msg import PointStamped, PoseArray, PoseStamped, Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import PointCloud2
from std_msgs.msg import Bool, String

from consensus import names
from consensus.control.avoidance import avoidance_from_config
from consensus.control.controller import yaw_from_quaternion
from consensus.control.planner import Planner
from consensus.control.robot_core import Heard, Nearby, RobotCore
from consensus.control.ticks import TickTimer
from consensus.robots.map import fleet_footprint, robot_entry
from consensus.robots.presets import ODOMETRY, TWIST
from consensus.ros import qos
from consensus.ros.cdr import CdrTemplate, header_stamp_ns, odom_pose
from consensus.ros.nearby import read_nearby
from consensus.ros.health import HEALTH, Health, guarded
from consensus.ros.inputs import MAX_ABS_VALUE, decode_or_count, read_pose_array, read_xy, sane, sane_rows
from consensus.ros.records import ReasoningRecord, StatusRecord
from consensus.settings import RobotBaseConfig

#: a robot stops waiting for its relay's meeting points once more than this many ``neighbors`` deliveries in a row
#: came without their ``neighbor_targets``, and takes the neighbours' positions for them
#: (``RobotNode._decode_neighbors``)
UNPAIRED_DELIVERIES = 3
#: odometry messages kept between two control ticks, every one checked at the tick (``RobotNode._decode_inputs``):
#: a 640 Hz stream at 10 Hz control; of a faster one the newest this many (a second stream on the topic is among them
#: as long as it sends at all)
ODOM_KEPT = 64
#: what became of an operator's meeting point (``RobotNode.take_suggestion``)
SUGGESTION_APPLIED, SUGGESTION_REFUSED, SUGGESTION_BAD = "applied", "refused", "bad"


class RobotNode:
    """The ROS side of robot ``robot_id`` attached to ``node`` (whose namespace is the robot's); its decisions are
    ``self.core``'s."""

    def __init__(self, node: Node, cfg: RobotBaseConfig, robot_id: int, planner: Planner | None,
                 pool: ThreadPoolExecutor | None, llm_status=None, *, meeting_points: bool = False) -> None:
        self.node, self.cfg, self.id, self.planner = node, cfg, robot_id, planner
        self.llm_status = llm_status          # callable returning the LLM client's status dict, or None
        self.entry = entry = robot_entry(cfg, robot_id)        # None: no robots_file (our sims)
        kinematics = entry.kinematics(cfg.kinematics) if entry else cfg.kinematics
        v_max, w_max = entry.limits(cfg.v_max, cfg.w_max) if entry else (cfg.v_max, cfg.w_max)
        avoid = avoidance_from_config(cfg, ros=True, kinematics=kinematics, v_max=v_max, w_max=w_max,
                                      radius=entry.preset.footprint_radius_m if entry else None,
                                      fleet_radius=fleet_footprint(cfg))
        self.core = RobotCore(cfg, robot_id, planner, pool=pool, kinematics=kinematics, v_max=v_max, w_max=w_max,
                              avoid=avoid, meeting_points=meeting_points)
        self.kinematics = kinematics
        self.geofence = self.core.geofence
        self.nearby: Nearby | None = None
        self.cmd_topic = entry.cmd_topic if entry else node.resolve_topic_name(names.CMD_VEL.name)
        self.cmd_type = entry.cmd_type if entry else TWIST
        self.pose_type = entry.pose_type if entry else ODOMETRY
        self.neighbors = Heard.none(cfg.dim)
        self.timing = TickTimer(cfg.control_period_s)
        self.health = Health(parent=HEALTH, logger=node.get_logger())   # this robot's share of the process's
        self.state_every = max(1, round(1.0 / (cfg.state_rate_hz * cfg.control_period_s)))

        # raw (serialized) subscriptions: a message is only decoded when it is used — odometry at the control
        # tick, neighbours at the planning tick — which keeps ~100 robots in one process on time. Every odometry
        # message since the last tick is checked, in order (``ODOM_KEPT`` at most): keeping only the newest would let
        # a second stream on the topic go unseen whenever the real one happens to arrive just after it each tick
        # (serialized message, monotonic receive time, header stamp [s] or None: unstamped)
        self._odom_queue: deque[tuple[bytes, float, float | None]] = deque(maxlen=ODOM_KEPT)
        self._neighbors_raw: bytes | None = None
        self._targets_raw: bytes | None = None
        self._unpaired = 0                # neighbors deliveries since the last one whose neighbor_targets came
        self._neighbors_stamp: int | None = None      # the header stamps of the newest of each [ns]
        self._targets_stamp: int | None = None
        self._nearby_raw: bytes | None = None
        self._census_raw: bytes | None = None
        self._tick_now = 0.0
        self._round_out = None            # a round applied by the control tick, published after its command
        self.clock_stats = None           # the fleet clock's figures, once it ticks this robot (join_clock)
        node.create_subscription(Odometry if self.pose_type == ODOMETRY else PoseStamped,
                                 entry.pose_topic_name if entry else names.ODOM.name, self._on_odom_raw,
                                 qos.profile(names.ODOM), raw=True)
        node.create_subscription(PoseArray, names.NEIGHBORS.name, self._on_neighbors_raw, qos.profile(names.NEIGHBORS),
                                 raw=True)
        node.create_subscription(PoseArray, names.NEIGHBOR_TARGETS.name, self._on_targets_raw,
                                 qos.profile(names.NEIGHBOR_TARGETS), raw=True)
        self._nearby_sub = self._census_sub = None
        if avoid is not None:
            self._nearby_sub = node.create_subscription(PointCloud2, names.NEARBY.name, self._on_nearby_raw,
                                                        qos.profile(names.NEARBY), raw=True)
            if cfg.nearby_horizon_s > 0:        # the relay sends the robots in reach, and its census for the slots
                self._census_sub = node.create_subscription(
                    PointCloud2, names.CENSUS.in_run(node.get_namespace()), self._on_census_raw,
                    qos.profile(names.CENSUS), raw=True)
                self.core.census_expected = True
        # (the raw callbacks above only store bytes; the timers below never let an exception escape)
        self._estop_sub = node.create_subscription(Bool, cfg.estop_topic,
                                                   guarded(self._on_estop, f"robot_{robot_id}.estop", self.health),
                                                   qos.profile(names.ESTOP))
        # an operator's meeting point, for a robot whose planner sets its meeting points (a scenario's protocol that
        # sets them, planner None, takes none)
        self._suggestion_sub = None
        if planner is not None:
            self._suggestion_sub = node.create_subscription(
                PointStamped, names.MEETING_POINT_SUGGESTION.in_run(node.get_namespace()),
                guarded(self._on_suggestion, f"robot_{robot_id}.suggestion", self.health),
                qos.profile(names.MEETING_POINT_SUGGESTION))
        # cmd_vel and state are published as pre-serialized bytes (10 Hz x N robots; see consensus.ros.cdr)
        if self.cmd_type == TWIST:
            self._cmd_tpl = CdrTemplate(Twist(), {"vx": "linear.x", "vy": "linear.y", "wz": "angular.z"},
                                        stamped=False)
        else:
            cmd = TwistStamped()
            cmd.header.frame_id = entry.preset.cmd_frame
            self._cmd_tpl = CdrTemplate(cmd, {"vx": "twist.linear.x", "vy": "twist.linear.y",
                                              "wz": "twist.angular.z"}, stamped=True)
        self._dry_log = None
        if cfg.dry_run:
            self.pub_cmd = None               # nothing is published: not even a publisher to match
            self.core.watch_creep = False     # the robot does not move: its odometry cannot follow the commands
            if cfg.output_dir:
                self._dry_log = open(f"{cfg.output_dir}/dry_run.jsonl", "a", buffering=1, encoding="utf-8")
        else:
            cmd_qos = qos.profile(names.CMD_VEL, best_effort_commands=cfg.cmd_vel_best_effort)
            self.pub_cmd = node.create_publisher(Twist if self.cmd_type == TWIST else TwistStamped, self.cmd_topic,
                                                 cmd_qos)
        state = PointStamped()
        state.header.frame_id = names.WORLD_FRAME
        self._state_tpl = CdrTemplate(state, {"x": "point.x", "y": "point.y"}, stamped=True)
        self.pub_state = node.create_publisher(PointStamped, names.STATE.name, qos.profile(names.STATE))
        self.pub_target = node.create_publisher(PointStamped, names.TARGET.name, qos.profile(names.TARGET))
        self.pub_reason = node.create_publisher(String, names.PLANNER_REASONING.name,
                                                qos.profile(names.PLANNER_REASONING))
        self.pub_status = node.create_publisher(String, names.PLANNER_STATUS.name, qos.profile(names.PLANNER_STATUS))
        self.last_status: dict | None = None     # the last planner/status record published
        # no timer of its own: the process's fleet clock ticks it (``join_clock``; one robot is a fleet of one)

    # ------------------------------------------------------------------ what the core holds, by name
    @property
    def pos(self) -> np.ndarray | None:
        return self.core.pos

    @property
    def yaw(self) -> float:
        return self.core.yaw

    @property
    def meeting_point(self) -> np.ndarray | None:
        return self.core.meeting_point

    @property
    def estopped(self) -> bool:
        return self.core.estopped

    @property
    def counters(self) -> dict:
        return self.core.counters

    # ------------------------------------------------------------------ inputs
    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _on_odom_raw(self, data: bytes) -> None:
        stamp = header_stamp_ns(data)
        # (a ROS clock read per message costs more than a monotonic one: converted at use)
        self._odom_queue.append((data, time.monotonic(), stamp * 1e-9 if stamp else None))

    def _on_neighbors_raw(self, data: bytes) -> None:
        self._neighbors_raw = data
        stamp = header_stamp_ns(data)
        # deliveries since the last one whose meeting points came (either may arrive first)
        self._unpaired = 0 if stamp is not None and stamp == self._targets_stamp else self._unpaired + 1
        self._neighbors_stamp = stamp

    def _on_targets_raw(self, data: bytes) -> None:
        self._targets_raw = data
        self._targets_stamp = stamp = header_stamp_ns(data)
        if stamp is not None and stamp == self._neighbors_stamp:
            self._unpaired = 0

    def _on_nearby_raw(self, data: bytes) -> None:
        self._nearby_raw = data

    def _on_census_raw(self, data: bytes) -> None:
        self._census_raw = data

    def _decode_inputs(self, now: float | None = None, mono: float | None = None) -> None:
        """Every odometry message that came since the last call, oldest first, each checked by the core (the last
        accepted one is the robot's pose); ``now`` (ROS clock) and ``mono`` (monotonic) are the time of the call
        (read when not given): a message's receive time on the ROS clock is ``now`` less the wall time since it came
        (of a stream faster than ``ODOM_KEPT`` a tick, the newest ``ODOM_KEPT``)."""
        if not self._odom_queue:
            return
        now = self._now() if now is None else now
        mono = time.monotonic() if mono is None else mono
        while self._odom_queue:
            raw, recv_mono, stamp = self._odom_queue.popleft()
            recv = now - max(mono - recv_mono, 0.0)
            if self.pose_type != ODOMETRY:
                self._on_pose_stamped(raw, recv, stamp)
                continue
            pose = odom_pose(raw)
            if pose is None:
                msg = decode_or_count(raw, Odometry, self.health, "odom")
                if msg is not None:
                    self._on_odom(msg, recv, stamp)
            else:
                self._set_pose(pose[0], pose[1], pose[3:], recv, stamp)

    def _on_pose_stamped(self, raw: bytes, recv: float, stamp: float | None) -> None:
        """A motion-capture pose: it must be in the map's shared frame (else a bad message: the robot goes stale)."""
        msg = decode_or_count(raw, PoseStamped, self.health, "odom")
        if msg is not None and msg.header.frame_id.lstrip("/") != self.entry.frame:
            self.health.count_bad_message("odom")
            msg = None
        if msg is None:
            return
        p, q = msg.pose.position, msg.pose.orientation
        self._set_pose(p.x, p.y, (q.x, q.y, q.z, q.w), recv, stamp)

    def _decode_neighbors(self) -> None:
        """The newest ``neighbors`` message and the ``neighbor_targets`` of the same delivery (same header stamp and
        length): every pose with a non-finite or absurd (``|v| > MAX_ABS_VALUE``) coordinate is dropped and counted,
        the others are used.

        The two messages travel on two topics, so a planning slot can fall between them. Then the previous delivery
        stays what the robot heard and the new one waits for its meeting points. Planning on the neighbours'
        positions instead would pull the robot's meeting point towards their centroid, and the agreed point would
        drift (measured: docs/benchmarks.md, 'Why the code is as it is'). Once more than
        ``UNPAIRED_DELIVERIES`` deliveries in a row came without their meeting points (a relay that sends none, or
        ``neighbor_targets`` that never match: undecodable, other stamps), a neighbour's meeting point is its
        position, counted as a bad ``neighbor_targets`` message at each such planning slot. A robot whose planner
        plans on positions (``meeting_points`` off) waits for nothing."""
        if self._neighbors_raw is None:
            return
        got = self._poses(self._neighbors_raw, "neighbors")
        if got is None:
            self._neighbors_raw = None
            return
        stamp, xy = got
        # the meeting points of this delivery, if they came (decoded only then: a bad one is counted once a slot)
        same = self._targets_raw is not None and self._targets_stamp == stamp
        tg = self._poses(self._targets_raw, "neighbor_targets") if same else None
        paired = tg is not None and len(tg[1]) == len(xy)
        waits = self.core.meeting_points and not paired       # (a planner on positions needs no meeting points)
        if waits and not same and self._unpaired <= UNPAIRED_DELIVERIES:
            return                      # its meeting points are on the way: the previous delivery stays
        self._neighbors_raw = None
        good = self._sane_rows(xy, "neighbors")
        mps = xy
        if paired:
            mps = tg[1]
            good &= self._sane_rows(mps, "neighbor_targets")
        elif waits:
            self.health.count_bad_message("neighbor_targets")
        heard, bad = self.core.check_heard(self._now(), Heard(xy[good], mps[good]),
                                           stamp * 1e-9 if stamp else None)
        if heard is None:
            self.health.count_bad_message("neighbors.future")
            return
        self.health.count_bad_message("neighbors.outside", bad)
        self.neighbors = heard

    def _poses(self, raw: bytes, what: str) -> tuple[int | None, np.ndarray] | None:
        """``(header stamp [ns], positions (k, d))`` of a serialized PoseArray; None (counted) if undecodable."""
        got = read_pose_array(raw, self.health, what)
        return None if got is None else (got[0], got[1][:, : self.cfg.dim])

    def _sane_rows(self, xy: np.ndarray, what: str) -> np.ndarray:
        good = sane_rows(xy)
        self.health.count_bad_message(what, int(len(xy) - good.sum()))
        return good

    def _read_cloud(self, raw: bytes, now: float, what: str) -> tuple[Nearby, float | None] | None:
        """A serialized ``nearby`` or census message (``read_nearby``) and its header stamp [s], its bad points
        counted under ``what``; None (counted) when it does not decode."""
        got = read_nearby(raw, now, self.cfg.dim)
        if got is None:
            self.health.count_bad_message(what)
            return None
        self.health.count_bad_message(what, got[1])
        stamp = header_stamp_ns(raw)
        return got[0], (stamp * 1e-9 if stamp else None)

    def _decode_nearby(self, now: float) -> None:
        """The newest ``nearby`` message (the positions the collision filter avoids), checked as ``neighbors``, and
        the newest census (the packing slots' positions)."""
        if self._nearby_raw is not None:
            raw, self._nearby_raw = self._nearby_raw, None
            got = self._read_cloud(raw, now, "nearby")
            if got is not None:
                checked, implausible = self.core.check_nearby(now, *got)
                if checked is None:
                    self.health.count_bad_message("nearby.future")
                else:
                    self.health.count_bad_message("nearby.implausible", implausible)
                    self.nearby = checked
        if self._census_raw is not None:
            raw, self._census_raw = self._census_raw, None
            got = self._read_cloud(raw, now, "census")
            if got is not None:
                outside = self.core.check_census(now, *got)
                if outside is None:
                    self.health.count_bad_message("census.future")     # refused whole: the previous one stays
                else:
                    self.health.count_bad_message("census.outside", outside)

    def _on_odom(self, msg: Odometry, recv: float, stamp: float | None) -> None:
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        self._set_pose(p.x, p.y, (q.x, q.y, q.z, q.w), recv, stamp)

    def _set_pose(self, x: float, y: float, quat, recv: float, stamp: float | None) -> None:
        """Accept a pose from odometry received at ``recv`` (ROS clock) and stamped ``stamp`` (None: unstamped); a
        non-finite or absurd one never becomes our position (it is counted as a bad message and the robot goes stale:
        the core keeps the time of the last good one)."""
        vals = (x, y)[: self.cfg.dim]
        ok = sane(*vals)
        yaw = self.core.yaw
        if ok and (self.core.dynamics.turns or self.entry is not None):
            try:
                yaw = yaw_from_quaternion(*quat)
            except ValueError:
                ok = False
        if not ok:
            self.health.count_bad_message("odom")
            return
        if self.entry is not None:
            x, y, yaw = self.entry.to_shared(x, y, yaw)
            vals = (x, y)[: self.cfg.dim]
        kind = self.core.accept(recv, vals, yaw, stamp)
        if kind is not None:
            self.health.count_bad_message(f"odom.{kind}")

    # ------------------------------------------------------------------ planner (slow loop)
    def plan_tick(self) -> None:
        """One planning slot; the status goes out once per slot (after the round when it completes at once, as
        with a classical planner: one publish fewer per robot and round in the fleet's planning burst)."""
        self._decode_inputs()
        self._decode_neighbors()
        req = self.core.plan(self._now(), self.neighbors)
        if req is None or self.core.pool is not None or not self._collect_plan():
            self.publish_status()

    def _collect_plan(self, now: float | None = None, *, defer: bool = False) -> bool:
        """Apply a finished planning round; its outputs (meeting point, reasoning, status) are published now, or with
        ``defer`` by ``flush`` (a control tick publishes its command first)."""
        pending = self.core.pending
        if pending is None or not pending.done():
            return False
        rec = self.core.collect(self._now() if now is None else now)
        if rec is None:
            return False
        if rec["fallback_reason"].startswith("planner_exception"):
            self.node.get_logger().error(f"robot {self.id}: planner raised {self.core.planner_error}")
        self._round_out = (self.core.meeting_point.copy(), rec)
        if not defer:
            self._publish_round()
        return True

    def flush(self) -> None:
        """What a control tick publishes after its command: the robot's state (every ``1 / state_rate_hz``) and the
        outputs of the round ``_collect_plan`` applied, if any."""
        if (self.timing.ticks + self.id) % self.state_every == 0:                          # robots staggered
            # stamped when the pose came (its odometry's receive time), not now: the relays age it from there; a
            # robot whose odometry is stale or suspect says nothing (``RobotCore.broadcast_pose``): the others keep
            # its last state as a body, ageing, instead of a position it cannot vouch for
            got = self.core.broadcast_pose(self._tick_now)
            if got is not None:
                pos, stamp = got
                y = float(pos[1]) if self.cfg.dim > 1 else 0.0
                self.pub_state.publish(self._state_tpl.pack(int(stamp * 1e9), x=float(pos[0]), y=y))
        self._publish_round()

    def _publish_round(self) -> None:
        if self._round_out is None:
            return
        meeting_point, rec = self._round_out
        self._round_out = None
        self._publish_point(self.pub_target, meeting_point)
        self.pub_reason.publish(String(data=ReasoningRecord.from_dict(rec).encode()))
        self.publish_status()

    # ------------------------------------------------------------------ controller (fast loop)
    def prepare(self, now: float, mono: float) -> None:
        """The inputs of the control tick at ``now`` (ROS clock; ``mono``: the same instant, monotonic): the newest
        odometry, a finished planning round, the newest ``nearby`` (unless the fleet process computes it)."""
        self._tick_now = now
        self._decode_inputs(now, mono)
        self._collect_plan(now, defer=True)          # its outputs go out after the command (flush)
        if self.core.avoid is not None and self._nearby_sub is not None:
            self._decode_nearby(now)

    def finish(self, cmd) -> None:
        """Publish the tick's command (``prepare``'s time) and mark the publish for the timing."""
        now = self._tick_now
        vx, vy, wz = cmd.vx, cmd.vy, cmd.wz
        if self.entry is not None and not self.core.dynamics.turns and self.core.yaw:
            c, s = math.cos(self.core.yaw), math.sin(self.core.yaw)    # world-frame velocity -> the body frame
            vx, vy = c * vx + s * vy, -s * vx + c * vy
        self.send(vx, vy, wz, now)
        self.timing.published()               # the delay from the slot to this publish is what the robot feels

    def after_control(self) -> None:
        """A scenario's work after the commands went out (the disaster drones collect finished jobs)."""

    def join_clock(self, *, nearby_in_process: bool, shared_estop: bool = False,
                   shared_suggestion: bool = False) -> None:
        """Join the process's fleet clock, which ticks the robot (``prepare``, the fleet core's step, ``finish``,
        ``flush``, ``after_control`` and the planning slots' ``plan_tick``; the robot has no timer of its own): with
        ``nearby_in_process`` the fleet computes its ``nearby`` set (``consensus.ros.nearby.FleetNearby``) and the
        topic is not subscribed; with ``shared_estop`` the clock's one subscription of the (absolute) e-stop topic
        calls ``_on_estop`` and the robot's own goes; with ``shared_suggestion`` the clock's one subscription of the
        operator's meeting point calls ``take_suggestion`` and the robot's own goes."""
        if nearby_in_process and self._nearby_sub is not None:
            self.node.destroy_subscription(self._nearby_sub)
            self._nearby_sub = None
            if self._census_sub is not None:
                self.node.destroy_subscription(self._census_sub)
                self._census_sub = None
                self.core.census_expected = False
        if shared_estop and self._estop_sub is not None:
            self.node.destroy_subscription(self._estop_sub)
            self._estop_sub = None
        if shared_suggestion and self._suggestion_sub is not None:
            self.node.destroy_subscription(self._suggestion_sub)
            self._suggestion_sub = None

    @property
    def takes_suggestions(self) -> bool:
        """Does the robot take an operator's meeting point (it subscribed ``names.MEETING_POINT_SUGGESTION``)?"""
        return self._suggestion_sub is not None

    # ------------------------------------------------------------------ an operator's meeting point
    def _on_suggestion(self, msg: PointStamped) -> None:
        """The robot's own subscription of the operator's meeting point: taken and logged once."""
        kind, text = self.take_suggestion(msg)
        log = self.node.get_logger()
        (log.info if kind == SUGGESTION_APPLIED else log.warning)(f"robot {self.id}: {text}")

    def take_suggestion(self, msg: PointStamped, now: float | None = None) -> tuple[str, str]:
        """An operator's meeting point (module docstring), received at ``now`` (ROS clock; read when not given):
        decoded (a bad message counted), given to ``RobotCore.suggest`` and, applied, the robot's ``target`` and status
        published at once. Returns ``(kind, text)``: ``SUGGESTION_APPLIED`` (where, and when planning resumes),
        ``SUGGESTION_REFUSED`` (the core's reason) or ``SUGGESTION_BAD`` (why the message was dropped); the caller logs
        the text once (a fleet process once for all its robots)."""
        what = "operator.meeting_point"
        frame = msg.header.frame_id.lstrip("/")
        if frame not in ("", names.WORLD_FRAME):
            self.health.count_bad_message(f"{what}.frame")
            return SUGGESTION_BAD, (f"operator's meeting point dropped: frame '{msg.header.frame_id}', not "
                                    f"'{names.WORLD_FRAME}'")
        xy = read_xy(msg, PointStamped, self.health, what)
        if xy is None:
            return SUGGESTION_BAD, (f"operator's meeting point dropped: ({msg.point.x}, {msg.point.y}) is not a "
                                    f"finite point within {MAX_ABS_VALUE:g} m")
        point = xy[: self.cfg.dim]                      # a 1-D run: its line is the x axis
        now = self._now() if now is None else now
        reason = self.core.suggest(point, now)
        where = ", ".join(f"{v:g}" for v in point)
        if reason is not None:
            return SUGGESTION_REFUSED, f"operator's meeting point ({where}) refused: {reason}"
        self._publish_point(self.pub_target, self.core.meeting_point)
        self.publish_status()
        until = self.core.planning_held_until
        return SUGGESTION_APPLIED, (f"operator's meeting point ({where}) applied; planning resumes in "
                                    f"{until - now:g} s (ROS time {until:.1f} s)")

    # ------------------------------------------------------------------ outputs
    def _on_estop(self, msg: Bool) -> None:
        engage = bool(msg.data)
        changed = self.core.set_estop(engage)
        if changed and engage:
            self.node.get_logger().warning(f"robot {self.id}: e-stop engaged ({self.cfg.estop_topic})")
        elif changed:
            self.node.get_logger().warning(f"robot {self.id}: e-stop released")
        if engage:
            self.send(0.0, 0.0, 0.0)          # at once, not at the next tick

    def send(self, vx: float, vy: float, wz: float, now: float | None = None) -> None:
        """Publish one velocity command (or, in a dry run, record it)."""
        now = self._now() if now is None else now
        if self.pub_cmd is not None:
            self.pub_cmd.publish(self._cmd_tpl.pack(int(now * 1e9), vx=vx, vy=vy, wz=wz))
            return
        rec = {"robot": self.id, "stamp": now, "topic": self.cmd_topic, "type": self.cmd_type,
               "linear": [vx, vy, 0.0], "angular": [0.0, 0.0, wz]}
        if self.cmd_type != TWIST:
            rec["frame_id"] = self.entry.preset.cmd_frame
        line = json.dumps(rec)
        if self._dry_log is not None:
            self._dry_log.write(line + "\n")
        self.node.get_logger().info(f"dry run: {line}", throttle_duration_sec=1.0)

    def _publish_point(self, pub, p: np.ndarray) -> None:
        msg = PointStamped()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = names.WORLD_FRAME
        msg.point.x = float(p[0])
        msg.point.y = float(p[1]) if len(p) > 1 else 0.0
        pub.publish(msg)

    def status(self) -> dict:
        llm = self.llm_status() if self.llm_status else None
        out = {**self.core.status(self._now(), llm.get("state") if llm else None), **self.health.counts(),
               "control": self.timing.as_dict()}
        if self.clock_stats is not None:
            out["control"]["clock"] = self.clock_stats()
        if llm is not None:
            out["llm"] = llm
        return out

    def publish_status(self) -> None:
        self.last_status = rec = self.status()        # also the robot's /diagnostics status (consensus.ros.diagnostics)
        self.pub_status.publish(String(data=StatusRecord.from_dict(rec).encode()))

    def set_limits(self, cfg: RobotBaseConfig) -> None:
        """Apply changed controller settings (``runtime_fields(ControlParams)``: kp, v_max, w_max, deadband;
        validated by the caller) from the next control tick on; a robots-file preset's own limits still cap them."""
        self.cfg = cfg
        v_max, w_max = self.entry.limits(cfg.v_max, cfg.w_max) if self.entry else (cfg.v_max, cfg.w_max)
        self.core.set_limits(cfg, v_max, w_max)

    def stop(self) -> None:
        """Send one zero command (used on shutdown so a real robot does not keep its last velocity)."""
        self.send(0.0, 0.0, 0.0)
        if self._dry_log is not None:
            self._dry_log.close()
            self._dry_log = None
