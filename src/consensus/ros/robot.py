"""One robot's ROS wiring: slow planner + fast controller on top of the core.

Topics (relative, inside the robot's namespace, e.g. ``/robot_3/...``):

========================  =====================================  ==============================================
topic                     type                                   meaning
========================  =====================================  ==============================================
``odom`` (sub)            nav_msgs/Odometry                      own pose (from the sim or the real robot)
``neighbors`` (sub)       geometry_msgs/PoseArray                states of the robots this one may hear,
                                                                 delivered by the topology node
``nearby`` (sub)          geometry_msgs/PoseArray                every other robot's state (collision avoidance
                                                                 only; ``consensus.ros.nearby``)
``cmd_vel`` (pub)         geometry_msgs/Twist                    velocity command (body frame)
``estop_topic`` (sub)     std_msgs/Bool, reliable, transient     fleet e-stop (``/estop``): true stops the robot
                          local                                  at once and holds zero until false
``state`` (pub)           geometry_msgs/PointStamped             own position, broadcast at ``state_rate_hz``
``target`` (pub)          geometry_msgs/PointStamped             planner output (after geofence clamping)
``planner/reasoning``     std_msgs/String, JSON                  one record per planning round (schema below)
``planner/status``        std_msgs/String, JSON                  counters, LLM client state, control timing
========================  =====================================  ==============================================

``planner/reasoning`` JSON: ``{"robot": int, "round": int, "stamp": float, "target": [x, y] | null,
"reasoning": str (<= 500 chars), "fallback": bool, "fallback_reason": str, "clamped": bool, "llm_calls": int}``.

``planner/status`` JSON: ``{"robot": int, "round": int, "state": "ok"|"waiting"|"degraded"|"stopped",
"llm_calls": int, "llm_fallbacks": int, "clamped": int, "overruns": int, "planner_errors": int, "stale_stops": int,
"callback_errors": int, "bad_messages": int, "control": {"ticks": int, "on_time": int, "max_late_ms": float,
"rate_hz": float | null}, "llm": {...}}`` (``llm`` only with an LLM client).

Health (``consensus.ros.params.Health``, one per robot, counting into the process's ``HEALTH`` too):
``callback_errors`` = exceptions of the robot's control and planning ticks (caught, logged, counted; the robot goes
on); ``bad_messages`` = inputs dropped: an odometry message with a non-finite or absurd (``|v| > MAX_ABS_VALUE``,
1e6 m) position or an invalid orientation (unicycle), each neighbour pose of ``neighbors`` with a non-finite or
absurd coordinate (the others of the message are used), and undecodable messages.

The planner never runs on the executor thread: an LLM plan is submitted to a thread pool and the control tick picks
up the finished result, so a slow or dead endpoint cannot delay ``cmd_vel``. Safety layer in the control tick:
stale odometry (``odom_timeout_s``) or no completed planning round for ``target_timeout_s`` → zero velocity; the
target is clamped into the workspace geofence; the speed is saturated at ``v_max``.

Collision avoidance (``collision_avoidance``: ``auto`` is ``cbf`` here, every robot being a ROS node): the
controller's nominal command goes through the barrier-certificate filter (``consensus.control.avoidance``) before
it is sent, with the robot's own odometry and the other robots' positions of its newest ``nearby`` message (not
``neighbors``: a robot must avoid robots it can meet even if the communication graph does not connect them). The
footprint is the entry's preset's (robots file) or ``footprint_radius_m``; a neighbour's is taken as the fleet's
largest; ``d_min`` includes the age budget of the positions (``avoidance.nearby_age_s``). The status has
``collision`` (``Avoidance.info()``: d_min, interventions, infeasible steps, the nearest neighbour seen). Neighbour
poses with a non-finite or absurd coordinate are dropped and counted (``bad_messages``), as for ``neighbors``.

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

Dry run (``dry_run: true``): no command publisher is created; each command the robot would send is written, with
its topic and type, to ``<output_dir>/dry_run.jsonl`` and logged (at most once a second per robot).
"""
from __future__ import annotations

import json
import math
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
from geometry_msgs.msg import PointStamped, PoseArray, PoseStamped, Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from std_msgs.msg import Bool, String

from consensus.settings import RobotBaseConfig
from consensus.control.controller import make_controller, yaw_from_quaternion
from consensus.control.safety import Geofence, is_stale
from consensus.control.planner import Planner, PlanRequest, PlanResult
from consensus.ros import qos
from consensus.ros.params import HEALTH, MAX_ABS_VALUE, Health, decode_or_count, guarded, sane
from consensus.ros.cdr import CdrTemplate, odom_pose, pose_array_xy
from consensus.control.ticks import TickTimer
from consensus.control.avoidance import avoidance_from_config, nearby_age_s
from consensus.robots.map import fleet_footprint, robot_entry
from consensus.robots.presets import ODOMETRY, TWIST
from consensus import names


class RobotAgent:
    """Planner + controller of robot ``robot_id`` attached to ``node`` (whose namespace is the robot's)."""

    def __init__(self, node: Node, cfg: RobotBaseConfig, robot_id: int, planner: Planner,
                 pool: ThreadPoolExecutor | None, llm_status=None) -> None:
        self.node, self.cfg, self.id, self.planner = node, cfg, robot_id, planner
        self.pool = pool                      # None: plan inline (cheap classical planners)
        self.llm_status = llm_status          # callable returning the LLM client's status dict, or None
        self.geofence = Geofence.from_bounds(cfg.workspace)
        self.entry = entry = robot_entry(cfg, robot_id)        # None: no robots_file (our sims)
        self.kinematics = entry.kinematics(cfg.kinematics) if entry else cfg.kinematics
        v_max, w_max = entry.limits(cfg.v_max, cfg.w_max) if entry else (cfg.v_max, cfg.w_max)
        self.ctrl = make_controller(self.kinematics, kp=cfg.kp, v_max=v_max, w_max=w_max, deadband=cfg.deadband)
        self.avoid = avoidance_from_config(cfg, ros=True, kinematics=self.kinematics, v_max=v_max, w_max=w_max,
                                           radius=entry.preset.footprint_radius_m if entry else None,
                                           fleet_radius=fleet_footprint(cfg), delay_s=nearby_age_s(cfg))
        self.nearby = np.empty((0, cfg.dim))
        self.cmd_topic = entry.cmd_topic if entry else node.resolve_topic_name(names.CMD_VEL.name)
        self.cmd_type = entry.cmd_type if entry else TWIST
        self.pose_type = entry.pose_type if entry else ODOMETRY
        self.estopped = False

        self.pos: np.ndarray | None = None
        self.yaw = 0.0
        self.odom_stamp: float | None = None
        self._good_odom_stamp: float | None = None
        self.neighbors: list[np.ndarray] = []
        self.target: np.ndarray | None = None
        self.last_round_done: float | None = None
        self.round = 0
        self.pending: Future | None = None
        self.counters = {"llm_calls": 0, "llm_fallbacks": 0, "clamped": 0, "overruns": 0, "planner_errors": 0,
                         "stale_stops": 0, "estops": 0}
        self.timing = TickTimer(cfg.control_period_s)
        self.health = Health(parent=HEALTH, logger=node.get_logger())   # this robot's share of the process's
        self.state_every = max(1, round(1.0 / (cfg.state_rate_hz * cfg.control_period_s)))

        # raw (serialized) subscriptions: a message is only decoded when it is used — odometry at the control
        # tick, neighbours at the planning tick — which keeps ~100 robots in one process on time
        self._odom_raw: bytes | None = None
        self._neighbors_raw: bytes | None = None
        node.create_subscription(Odometry if self.pose_type == ODOMETRY else PoseStamped,
                                 entry.pose_topic_name if entry else names.ODOM.name, self._on_odom_raw,
                                 qos.profile(names.ODOM), raw=True)
        node.create_subscription(PoseArray, names.NEIGHBORS.name, self._on_neighbors_raw, qos.profile(names.NEIGHBORS),
                                 raw=True)
        self._nearby_raw: bytes | None = None
        if self.avoid is not None:
            node.create_subscription(PoseArray, names.NEARBY.name, self._on_nearby_raw, qos.profile(names.NEARBY),
                                     raw=True)
        # (the raw callbacks above only store bytes; the timers below never let an exception escape)
        node.create_subscription(Bool, cfg.estop_topic, guarded(self._on_estop, f"robot_{robot_id}.estop", self.health),
                                 qos.profile(names.ESTOP))
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
        # (Staggering the robots' timers over the period was measured and made timing worse with the
        # EventsExecutor: timers created from a callback cost more than the burst they avoid.)
        self.control_timer = node.create_timer(cfg.control_period_s,
                                               guarded(self.control_tick, f"robot_{robot_id}.control", self.health))
        self.plan_timer = node.create_timer(cfg.planner_period_s,
                                            guarded(self.plan_tick, f"robot_{robot_id}.plan", self.health))

    # ------------------------------------------------------------------ inputs
    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _on_odom_raw(self, data: bytes) -> None:
        self._odom_raw = data
        self.odom_stamp = self._now()

    def _on_neighbors_raw(self, data: bytes) -> None:
        self._neighbors_raw = data

    def _on_nearby_raw(self, data: bytes) -> None:
        self._nearby_raw = data

    def _decode_inputs(self) -> None:
        if self._odom_raw is not None:
            raw, self._odom_raw = self._odom_raw, None
            if self.pose_type != ODOMETRY:
                self._on_pose_stamped(raw)
                return
            pose = odom_pose(raw)
            if pose is None:
                msg = decode_or_count(raw, Odometry, self.health, "odom")
                if msg is None:
                    self.odom_stamp = self._good_odom_stamp
                    return
                self._on_odom(msg)
            else:
                self._set_pose(pose[0], pose[1], pose[3:])

    def _on_pose_stamped(self, raw: bytes) -> None:
        """A motion-capture pose: it must be in the map's shared frame (else a bad message: the robot goes stale)."""
        msg = decode_or_count(raw, PoseStamped, self.health, "odom")
        if msg is not None and msg.header.frame_id.lstrip("/") != self.entry.frame:
            self.health.count_bad_message("odom")
            msg = None
        if msg is None:
            self.odom_stamp = self._good_odom_stamp
            return
        p, q = msg.pose.position, msg.pose.orientation
        self._set_pose(p.x, p.y, (q.x, q.y, q.z, q.w))

    def _decode_neighbors(self) -> None:
        """The newest ``neighbors`` message: every pose with a non-finite or absurd (``|v| > MAX_ABS_VALUE``)
        coordinate is dropped and counted, the others are used."""
        if self._neighbors_raw is not None:
            raw, self._neighbors_raw = self._neighbors_raw, None
            xy = self._decode_poses(raw, "neighbors")
            if xy is not None:
                self.neighbors = list(xy)

    def _decode_nearby(self) -> None:
        """The newest ``nearby`` message (the positions the collision filter avoids), checked as ``neighbors``."""
        if self._nearby_raw is not None:
            raw, self._nearby_raw = self._nearby_raw, None
            xy = self._decode_poses(raw, "nearby")
            if xy is not None:
                self.nearby = xy

    def _decode_poses(self, raw: bytes, what: str) -> np.ndarray | None:
        xy = pose_array_xy(raw)
        if xy is None:
            msg = decode_or_count(raw, PoseArray, self.health, what)
            if msg is None:
                return None
            xy = np.array([(p.position.x, p.position.y) for p in msg.poses], dtype=float).reshape(-1, 2)
        xy = xy[:, : self.cfg.dim]
        with np.errstate(invalid="ignore"):
            good = (np.abs(xy) <= MAX_ABS_VALUE).all(axis=1)        # False for NaN and +-inf too
        self.health.count_bad_message(what, int(len(xy) - good.sum()))
        return xy[good]

    def _on_odom(self, msg: Odometry) -> None:
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        self._set_pose(p.x, p.y, (q.x, q.y, q.z, q.w))

    def _set_pose(self, x: float, y: float, quat) -> None:
        """Accept a pose from odometry; a non-finite or absurd one never becomes our position (it is counted as a
        bad message and the robot goes stale)."""
        vals = (x, y)[: self.cfg.dim]
        ok = sane(*vals)
        yaw = self.yaw
        if ok and (self.kinematics == "unicycle" or self.entry is not None):
            try:
                yaw = yaw_from_quaternion(*quat)
            except ValueError:
                ok = False
        if not ok:
            self.health.count_bad_message("odom")
            self.odom_stamp = self._good_odom_stamp
            return
        if self.entry is not None:
            x, y, yaw = self.entry.to_shared(x, y, yaw)
            vals = (x, y)
        self.yaw = yaw
        self.pos = np.array(vals, dtype=float)
        self._good_odom_stamp = self.odom_stamp

    # ------------------------------------------------------------------ planner (slow loop)
    def plan_tick(self) -> None:
        """One planning slot; the status goes out once per slot (after the round when it completes at once, as
        with a classical planner: one publish fewer per robot and round in the fleet's planning burst)."""
        if not self._plan():
            self.publish_status()

    def _plan(self) -> bool:
        """Start a round if one is due; True when it also completed (and published) right away."""
        self._decode_inputs()
        self._decode_neighbors()
        if self.pos is None:
            return False                      # nothing to plan from yet
        if self.cfg.max_rounds and self.round >= self.cfg.max_rounds:
            return False
        if self.pending is not None:
            self.counters["overruns"] += 1    # the previous plan is still running (slow LLM): skip this slot
            return False
        req = PlanRequest(robot_id=self.id, own=self.pos.copy(), neighbors=list(self.neighbors), round=self.round)
        self.round += 1
        if self.pool is None:
            fut: Future = Future()
            fut.set_result(self._safe_plan(req))
            self.pending = fut
            self._collect_plan()
            return True
        self.pending = self.pool.submit(self._safe_plan, req)
        return False

    def _safe_plan(self, req: PlanRequest) -> tuple[PlanRequest, PlanResult]:
        try:
            return req, self.planner.plan(req)
        except Exception as exc:  # noqa: BLE001 - any planner bug becomes a counted fallback, never a dead robot
            self.node.get_logger().error(f"robot {self.id}: planner raised {type(exc).__name__}: {exc}")
            return req, PlanResult(target=None, reasoning="", fallback=True,
                                   fallback_reason=f"planner_exception: {type(exc).__name__}")

    def _collect_plan(self) -> None:
        fut = self.pending
        if fut is None or not fut.done():
            return
        self.pending = None
        req, res = fut.result()
        self.counters["llm_calls"] += res.llm_calls
        if res.fallback:
            self.counters["llm_fallbacks"] += 1
            if res.fallback_reason.startswith("planner_exception"):
                self.counters["planner_errors"] += 1
        target = res.target
        clamped = res.clamped
        if target is not None:
            try:
                target, changed = self.geofence.clamp(np.asarray(target, dtype=float).reshape(self.cfg.dim))
                clamped = clamped or changed
            except ValueError:
                target = None                 # NaN/inf: hold the last target
                if not res.fallback:
                    self.counters["llm_fallbacks"] += 1
        if clamped:
            self.counters["clamped"] += 1
        if target is None:
            target = self.target if self.target is not None else req.own.copy()   # hold (round 0: stay put)
        self.target = target
        self.last_round_done = self._now()
        self._publish_point(self.pub_target, target)
        rec = {"robot": self.id, "round": req.round, "stamp": self.last_round_done,
               "target": [float(v) for v in target], "reasoning": res.reasoning[:500], "fallback": res.fallback,
               "fallback_reason": res.fallback_reason, "clamped": bool(clamped), "llm_calls": res.llm_calls}
        self.pub_reason.publish(String(data=json.dumps(rec)))
        self.publish_status()

    # ------------------------------------------------------------------ controller (fast loop)
    def control_tick(self) -> None:
        self.timing.tick()
        self._decode_inputs()
        self._collect_plan()
        now = self._now()
        vx = vy = wz = 0.0
        if self.estopped:
            pass                              # e-stop: zero until released
        elif is_stale(self.odom_stamp, now, self.cfg.odom_timeout_s):
            if self.odom_stamp is not None:
                self.counters["stale_stops"] += 1
        elif self.target is None:
            pass                              # no plan yet: stand still
        elif is_stale(self.last_round_done, now, self.cfg.target_timeout_s):
            self.counters["stale_stops"] += 1
        elif self.kinematics == "unicycle":
            pose = np.array([self.pos[0], self.pos[1], self.yaw])
            v, w = self.ctrl.compute(pose, self.target)
            if self.avoid is not None:
                self._decode_nearby()
                v, w = self.avoid.filter_unicycle(pose, v, w, self.nearby)
            vx, wz = float(v), float(w)
        else:
            vel = self.ctrl.compute(self.pos, self.target)
            if self.avoid is not None:                  # world-frame velocity through the collision filter
                self._decode_nearby()
                vel = self.avoid.filter(self.pos, vel, self.nearby)
            vx = float(vel[0])
            if self.cfg.dim > 1:
                vy = float(vel[1])
            if self.entry is not None and self.yaw:     # world-frame velocity -> the robot's body frame
                c, s = math.cos(self.yaw), math.sin(self.yaw)
                vx, vy = c * vx + s * vy, -s * vx + c * vy
        self.send(vx, vy, wz, now)
        if self.pos is not None and self.timing.ticks % self.state_every == 0:
            y = float(self.pos[1]) if self.cfg.dim > 1 else 0.0
            self.pub_state.publish(self._state_tpl.pack(int(now * 1e9), x=float(self.pos[0]), y=y))

    # ------------------------------------------------------------------ outputs
    def _on_estop(self, msg: Bool) -> None:
        engage = bool(msg.data)
        if engage and not self.estopped:
            self.counters["estops"] += 1
            self.node.get_logger().warning(f"robot {self.id}: e-stop engaged ({self.cfg.estop_topic})")
        elif self.estopped and not engage:
            self.node.get_logger().warning(f"robot {self.id}: e-stop released")
        self.estopped = engage
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
        if self.estopped:
            state = "estopped"
        elif self.pos is None:
            state = "waiting"
        elif self.counters["stale_stops"] and is_stale(self.last_round_done, self._now(), self.cfg.target_timeout_s):
            state = "stopped"
        else:
            state = "degraded" if llm and llm.get("state") in ("retrying", "down") else "ok"
        out = {"robot": self.id, "round": self.round, "state": state, **self.counters, **self.health.counts(),
               "estopped": self.estopped, "control": self.timing.as_dict()}
        if self.avoid is not None:
            out["collision"] = self.avoid.info()
        if llm is not None:
            out["llm"] = llm
        return out

    def publish_status(self) -> None:
        self.pub_status.publish(String(data=json.dumps(self.status())))

    def set_limits(self, cfg: RobotBaseConfig) -> None:
        """Apply changed controller settings (``ControlParams.RUNTIME``: kp, v_max, w_max, deadband; validated by the
        caller) from the next control tick on; a robots-file preset's own limits still cap them."""
        self.cfg = cfg
        v_max, w_max = self.entry.limits(cfg.v_max, cfg.w_max) if self.entry else (cfg.v_max, cfg.w_max)
        self.ctrl = make_controller(self.kinematics, kp=cfg.kp, v_max=v_max, w_max=w_max, deadband=cfg.deadband)

    def stop(self) -> None:
        """Send one zero command (used on shutdown so a real robot does not keep its last velocity)."""
        self.send(0.0, 0.0, 0.0)
        if self._dry_log is not None:
            self._dry_log.close()
            self._dry_log = None
