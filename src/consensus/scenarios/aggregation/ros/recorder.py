"""``recorder``: watches a run, writes the run directory and ends the run after ``duration_s``, or earlier: with
``settle_s > 0`` once the robots' spread has stayed below ``converge_tol_m`` for ``settle_s`` (consensus shown), with
``max_rounds`` one planning period after every robot has made its last planning round. ``summary.json`` says which
(``end_reason``: converged_and_settled | duration | max_rounds | interrupted).

Subscribes per robot its pose source, ``state``, ``target``, ``planner/reasoning`` and ``planner/status``; samples
trajectories at ``state_rate_hz``; logs progress once per planning period; at the end (``duration_s`` on the node
clock, so sim time works, or Ctrl-C) writes the summary and plots (``consensus.runs.rundir.finalize``) and exits with
status 0. Launch files end the whole run when it exits.

Ground truth in the record: the positions of ``trajectories.csv``, of the summary's safety figures
(``min_pair_distance_m``: the closest two robots came; ``outside_geofence_m``: how far a robot's centre went outside
the workspace, 0.0 = never) and of the convergence judgement are each robot's *pose source*, never the ``state``
topic the robots broadcast to each other (anyone on the network can publish a ``state``): with a simulator that
knows every robot's true pose (``sim``: builtin, mujoco; ``consensus.control.motion.Simulator.ground_truth``) its
``ground_truth`` message, all robots in one (``positions_from: "ground_truth"``; the robots' odometry may carry the
simulator's noise and offset knobs, and one message instead of a topic per robot costs the recorder far less CPU:
docs/benchmarks.md, 'Why the code is as it is'); with turtlesim and gz each robot's ``/robot_<i>/odom`` from the bridge
(the simulator's own poses); on real robots the pose topic the robot node itself reads (``robots_file``: the entry's
odometry or motion-capture pose, brought into the shared frame the same way, ``RobotEntry.to_shared``); those two
``positions_from: "odom"``, as when no ``ground_truth`` message came within ``START_WAIT_S`` (a simulator started
some other way: logged, and the odometry is read instead). A ``PoseStamped`` in another frame, a ``ground_truth``
message with another number of poses than robots, a non-finite or absurd pose is a bad message. The ``state`` topic
still tells the recorder a robot is alive and is what the planners see.
Sampling starts once every robot has a pose and every robot has sent a state or some robot has a target (or after
``START_WAIT_S``). A sample the sampling timer skipped (a machine too slow for the run starves it, and rcl skips a
timer's missed slots) is counted in the summary's ``samples_missed``, and the first time more than a thousandth of
them is missed one warning says how many (``consensus.runs.keepup``).

Lost robots (``consensus.metrics.convergence.LossWatch``): a robot whose state stops for ``robot_timeout_s`` is lost,
and so is a robot that never sent one by ``robot_timeout_s`` after sampling started (its process died at start-up);
one that speaks again is back. ``summary.json`` names them (``lost_robots``, ``losses``; ``consensus run`` also adds a
robot whose own process died, ``consensus.runs.ros_runner``). Agreement is judged on the living: the convergence
figures (``converged``, ``final_spread_m``, the meeting points, the packing around them) leave a robot out while it
is lost, and a robot never heard at every sample. Safety is judged on every body: ``trajectories.csv``,
``min_pair_distance_m`` and ``outside_geofence_m`` keep a lost robot's body where its pose source puts it (a dead
robot's body still stands there, a real one may still move).

Nothing written is lost when the recorder dies: each sample's rows go to ``trajectories.csv`` as it is taken, and
every planning record to ``plans.jsonl`` as it arrives, each in one whole append (``consensus.jsonl.AppendFile``:
no buffer in the process, a full disk truncates the record back and is logged once per file and counted as
``write_errors``). When the recorder itself dies the run ends and ``consensus run`` writes ``summary.json`` from
these files (``consensus.runs.ros_runner``: ``end_reason: lost:recorder``).

Topology: the recorder follows the latched ``/topology/graph``; ``summary.json``'s ``topology_changes`` lists every
graph the run had, in order, with its time: ``{"t_s", "topology", "directed", "links"}`` (``t_s`` on the run's
clock, 0.0 for a graph published before sampling started; ``links``: the directed "i hears j" pairs). ``topology``
stays the configured (start) graph.

Health: the summary's ``callback_errors`` and ``bad_messages`` are the run's totals: the robots' (their
``planner/status``), the other root-namespace nodes' (sim, topology: the newest record of each on ``/health``) and
the recorder's own (also published on ``/health``). The recorder counts as bad messages a
``state``/``target`` with a non-finite or absurd (``|v| > MAX_ABS_VALUE``) position and a malformed reasoning,
status or health record.

Visualization (``markers``, default on): at 2 Hz the recorder publishes ``markers`` (visualization_msgs/MarkerArray,
frame ``world``: robots, targets, plans, the communication edges of the latched ``/topology/graph``, each robot's
last reasoning; see ``consensus.scenarios.aggregation.ros.markers``) and, where tf2_msgs is installed, ``/tf``
(``world -> robot_<i>/base_link``). A malformed graph record counts as a bad message.

Live view (``foxglove``: a port, default 0 = off): the recorder also serves a Foxglove WebSocket server on
``foxglove_host:foxglove`` (``consensus.runs.foxglove_live.LiveView``) and feeds it at the same 2 Hz the scene
(robots, targets, plans, edges, reasoning labels), the robots' frames, ``/fleet``, ``/progress`` and every planning
record as it arrives (``/reasoning``). It is independent of ``markers``.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import rclpy
import rclpy.task
from geometry_msgs.msg import PointStamped, PoseArray, PoseStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from consensus.runs.foxglove_live import REASONING_CHARS, LiveView
from consensus.control.avoidance import avoidance_from_config, sum_collision
from consensus.control.plausibility import sum_implausible
from consensus.metrics.convergence import LossWatch, SettleWatch, min_pair_distance_series, on_the_living, spread
from consensus.robots.map import fleet_footprint
from consensus.scenarios.aggregation.headless import agreement_measure
from consensus.ros import qos
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.scenarios.aggregation.ros import markers
from consensus.ros.health import HEALTH, Health, guarded, publish_health, sum_health
from consensus.ros.supervisor import RunEnd
from consensus.ros.inputs import read_xy
from consensus.ros.params import declare_config
from consensus.ros.process import node_main
from consensus.runs.rundir import (TrajectoryStream, default_run_dir, finalize, outside_geofence_m, release_space,
                                   write_manifest, ros_context)
from consensus.jsonl import AppendFile
from consensus.metrics.progress import ProgressEstimate
from consensus.runs.keepup import Shortfall, TimerSlots
from consensus.robots.map import robot_entry
from consensus.robots.presets import ODOMETRY
from consensus.control.controller import yaw_from_quaternion
from consensus.ros.cdr import odom_pose
from consensus.control.motion import sim_spec
from consensus.ros.inputs import decode_or_count, read_pose_array, sane, sane_rows
from consensus.ros.records import GraphRecord, HealthRecord, ReasoningRecord, RecordError, StatusRecord
from consensus import names

START_WAIT_S = 10.0
PROGRESS_PERIOD_S = 5.0     # a progress line at least this often (or once per planning period, if that is shorter)
VIZ_PERIOD_S = 0.5          # markers and TF at 2 Hz


#: the fields the recorder reads (its parameters, ``declare_config(uses=...)``); the others reach its manifest from
#: the parameters file without being its parameters
USES = ("num_robots", "dim", "workspace", "output_dir", "seed", "executor", "duration_s", "max_rounds", "settle_s",
        "converge_tol_m", "planner", "planner_period_s", "state_rate_hz", "robot_timeout_s", "topology", "markers",
        "foxglove", "foxglove_host", "robots_file", "kinematics", "footprint_radius_m", "safety_margin_m",
        "collision_avoidance", "cbf_gamma", "v_max", "w_max", "sim", "silent_bound_m")


class Recorder:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.fqn = node.get_fully_qualified_name()        # the node's handle is gone when finish() runs after Ctrl-C
        self.cfg = cfg = declare_config(node, AggregationConfig, uses=USES)
        n = cfg.num_robots
        self.out = Path(cfg.output_dir) if cfg.output_dir else default_run_dir("aggregation")
        self.out.mkdir(parents=True, exist_ok=True)
        self.end = RunEnd(node, self.out)               # the run's end, once (consensus.ros.supervisor)
        if not (self.out / "manifest.json").exists():
            write_manifest(self.out, scenario="aggregation", config=cfg.to_dict(), seed=cfg.seed,
                           **cfg.manifest_llm(),
                           mode="ros", extra={"ros": ros_context(names.split_robot_namespace(node.get_namespace())[0])})
        self.pos = np.full((n, 2), np.nan)              # each robot's newest pose from its pose source
        self.state_pos = np.full((n, 2), np.nan)        # what it broadcast on `state` (liveness only)
        self.entries = [robot_entry(cfg, i) for i in range(n)]     # None each: our sims' /robot_<i>/odom
        self._pose_raw: list[bytes | None] = [None] * n
        # the simulator's one ground-truth message instead of each robot's odometry (module docstring)
        self.ground_truth = sim_spec(cfg.sim).ground_truth and all(e is None for e in self.entries)
        self._truth_raw: bytes | None = None
        self._truth_seen = False
        self.watch = LossWatch(n, cfg.robot_timeout_s, first_s=START_WAIT_S)   # who is alive (agreement on the living)
        self.last_seen = self.watch.last_seen             # when each robot's state last arrived (written in place)
        self.mps = np.full((n, 2), np.nan)
        self.status: dict[int, dict] = {}
        self.times: list[float] = []
        self.positions: list[np.ndarray] = []             # every body at each sample, the lost ones too
        self.mps_log: list[np.ndarray] = []
        self.health = Health(parent=HEALTH, logger=node.get_logger())               # the recorder's own counters
        self.write_errors: dict[str, int] = {}           # file -> records that could not be written (full disk)
        self.plans = AppendFile(self.out / "plans.jsonl")
        self.traj = TrajectoryStream(self.out / "trajectories.csv")
        self.topology_changes: list[dict] = []
        self._graph_seen: dict | None = None
        self.node_health: dict[str, dict] = {}            # newest /health record of every other node
        g = lambda fn, what: guarded(fn, what, self.health)             # noqa: E731
        self._truth_sub = None
        if self.ground_truth:
            self._truth_sub = node.create_subscription(PoseArray, names.GROUND_TRUTH.name, self._truth_in,
                                                       qos.recording(names.GROUND_TRUTH), raw=True)
        else:
            self._subscribe_odometry()
        for i in range(n):
            node.create_subscription(PointStamped, names.STATE.of(i),
                                     g(self._point(i, self.state_pos, "recorder.state", self.last_seen),
                                       "recorder.state"),
                                     qos.recording(names.STATE), raw=True)
            node.create_subscription(PointStamped, names.TARGET.of(i),
                                     g(self._point(i, self.mps, "recorder.target"), "recorder.target"),
                                     qos.profile(names.TARGET))
            node.create_subscription(String, names.PLANNER_REASONING.of(i), g(self._on_plan, "recorder.plan"),
                                     qos.profile(names.PLANNER_REASONING))
            node.create_subscription(String, names.PLANNER_STATUS.of(i), g(self._on_status, "recorder.status"),
                                     qos.profile(names.PLANNER_STATUS))
        node.create_subscription(String, names.HEALTH.name, g(self._on_health, "recorder.health"),
                                 qos.profile(names.HEALTH))
        node.create_subscription(String, names.TOPOLOGY_GRAPH.name, g(self._on_graph, "recorder.graph"),
                                 qos.profile(names.TOPOLOGY_GRAPH))
        self.t_created = self._now()
        self.t0: float | None = None
        self.done = rclpy.task.Future()
        self.last_progress = -math.inf
        self.rounds_planned = np.zeros(cfg.num_robots, dtype=int)   # planning rounds recorded per robot
        self.t_all_planned: float | None = None                       # when every robot reached max_rounds
        self.settle = SettleWatch(cfg.converge_tol_m, cfg.settle_s)
        self.estimate = ProgressEstimate(cfg.converge_tol_m)     # rounds, s/round, time to consensus (LLM runs)
        # collision avoidance: the fleet's clearance (largest footprint) judges convergence on the targets and the
        # packing radius, as headless
        self.footprint = fleet_footprint(cfg)
        self.avoid = avoidance_from_config(cfg, ros=True, radius=self.footprint)
        self.end_reason = "interrupted"                               # until the run ends on its own
        node.create_timer(1.0 / cfg.state_rate_hz, g(self.sample, "recorder.sample"))
        # a starved sampling timer skips its missed slots (rcl): each is a sample the record lacks, said once, early
        # (consensus.runs.keepup; the summary's ``samples_missed``)
        self.missed = Shortfall("recorder: trajectory samples", unit="samples", min_expected=25,
                                advice="the machine is too slow for this fleet: fewer robots, a lower state_rate_hz, "
                                       "or fewer other processes on this host")
        self.slots = TimerSlots(1.0 / cfg.state_rate_hz, self.missed)
        self.publish_health = publish_health(node, self.health)
        self.live = LiveView(cfg.foxglove, cfg.foxglove_host, name="consensus aggregation") if cfg.foxglove else None
        if self.live is not None:
            node.get_logger().info(f"Foxglove live view: ws://{self.live.host}:{self.live.port} "
                                   f"(layout config/foxglove_aggregation.json)")
        self.viz = cfg.markers or self.live is not None
        if self.viz:
            self._init_viz(g)

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    @property
    def lost(self) -> dict[int, float]:
        """The robots lost now -> the run time each was declared lost."""
        return self.watch.lost

    @property
    def losses(self) -> list[dict]:
        """Every loss and return, in order (``LossWatch``)."""
        return self.watch.losses

    def _pose_in(self, i: int):
        """Robot ``i``'s pose source: the newest message is kept serialized and decoded when a sample is taken."""
        def cb(raw: bytes) -> None:
            self._pose_raw[i] = raw
        return cb

    def _subscribe_odometry(self) -> None:
        """Each robot's pose source: its odometry (our bridges' ``/robot_<i>/odom``) or its map entry's pose topic."""
        for i, entry in enumerate(self.entries):
            self.node.create_subscription(
                PoseStamped if entry is not None and entry.pose_type != ODOMETRY else Odometry,
                entry.pose_topic_name if entry is not None else names.ODOM.of(i),
                guarded(self._pose_in(i), "recorder.odom", self.health), qos.recording(names.ODOM), raw=True)

    def _no_ground_truth(self, now: float) -> None:
        """No ``ground_truth`` message within ``START_WAIT_S`` (a simulator started some other way, or another one
        that publishes odometry only): the recorder reads each robot's odometry instead, says so in its log and the
        summary's ``positions_from``, and waits up to ``START_WAIT_S`` again for the poses."""
        self.node.get_logger().warning(
            f"no {names.GROUND_TRUTH.name} message from the simulator ({self.cfg.sim}) within {START_WAIT_S:g} s: "
            f"recording each robot's odometry instead")
        # the subscription stays, ignored: destroying one while the EventsExecutor spins can crash the process
        # (ros2/rclpy#1644, ros2/rclcpp#2437)
        self.ground_truth = False
        self._subscribe_odometry()
        self.t_created = now

    def _truth_in(self, raw: bytes) -> None:
        if not self.ground_truth:
            return                                # turned to the odometry (``_no_ground_truth``)
        self._truth_raw = raw
        self._truth_seen = True

    def _decode_truth(self) -> None:
        """The newest ``ground_truth`` message into ``self.pos``: a message with another number of poses than
        robots is a bad message (the last good positions stay), as is each non-finite or absurd pose (that robot's
        last good one stays)."""
        raw, self._truth_raw = self._truth_raw, None
        if raw is None:
            return
        got = read_pose_array(raw, self.health, "recorder.ground_truth")
        if got is None:
            return
        xy = got[1]
        if len(xy) != len(self.pos):
            self.health.count_bad_message("recorder.ground_truth")
            return
        good = sane_rows(xy)
        self.health.count_bad_message("recorder.ground_truth", int((~good).sum()))
        self.pos[good] = xy[good]

    def _decode_poses(self) -> None:
        """Every robot's newest pose into ``self.pos`` (a bad one is counted and leaves the last good one)."""
        if self.ground_truth:
            self._decode_truth()
            return
        for i, raw in enumerate(self._pose_raw):
            if raw is None:
                continue
            self._pose_raw[i] = None
            entry = self.entries[i]
            if entry is not None and entry.pose_type != ODOMETRY:
                msg = decode_or_count(raw, PoseStamped, self.health, "recorder.odom")
                if msg is None:
                    continue
                if msg.header.frame_id.lstrip("/") != entry.frame:
                    self.health.count_bad_message("recorder.odom")
                    continue
                p, q = msg.pose.position, msg.pose.orientation
                pose = (p.x, p.y, q.x, q.y, q.z, q.w)
            else:
                fast = odom_pose(raw)
                if fast is None:
                    msg = decode_or_count(raw, Odometry, self.health, "recorder.odom")
                    if msg is None:
                        continue
                    p, q = msg.pose.pose.position, msg.pose.pose.orientation
                    pose = (p.x, p.y, q.x, q.y, q.z, q.w)
                else:
                    pose = (fast[0], fast[1], *fast[3:])
            x, y = pose[0], pose[1]
            if not sane(x, y):
                self.health.count_bad_message("recorder.odom")
                continue
            if entry is not None:
                try:
                    yaw = yaw_from_quaternion(*pose[2:])
                except ValueError:
                    self.health.count_bad_message("recorder.odom")
                    continue
                x, y, _ = entry.to_shared(x, y, yaw)
            self.pos[i] = (x, y)

    def _append(self, name: str, write) -> None:
        """One whole record into one of the streamed files; a failure (a full disk: the file keeps its whole
        records) is logged once per file and counted in the summary's ``write_errors``."""
        try:
            write()
        except OSError as exc:
            if name not in self.write_errors:
                self.node.get_logger().error(f"{exc.filename}: {exc.strerror}; the run goes on, records of "
                                             f"{name} are lost until it can be written")
            self.write_errors[name] = self.write_errors.get(name, 0) + 1

    def _point(self, i: int, store: np.ndarray, what: str, seen: np.ndarray | None = None):
        """The callback of robot ``i``'s PointStamped input (serialized or a message): a sane position into
        ``store[i]``, the arrival time into ``seen[i]`` (a bad message counts as a sign of life too)."""
        def cb(raw_or_msg) -> None:
            if seen is not None:
                seen[i] = self._now()
            p = read_xy(raw_or_msg, PointStamped, self.health, what)
            if p is not None:
                store[i] = p
        return cb

    def _on_plan(self, msg: String) -> None:
        self._append("plans.jsonl", lambda: self.plans.append(msg.data.replace("\n", " ") + "\n"))
        try:
            rec = ReasoningRecord.decode(msg.data)
        except RecordError:
            self.health.count_bad_message("recorder.plan")
            return
        robot = rec.robot
        if 0 <= robot < len(self.rounds_planned):
            self.rounds_planned[robot] = max(self.rounds_planned[robot], rec.round + 1)
            self._note_reasoning(robot, rec)
        else:
            self.health.count_bad_message("recorder.plan")

    def _on_status(self, msg: String) -> None:
        try:
            st = StatusRecord.decode(msg.data)
        except RecordError:
            self.health.count_bad_message("recorder.status")
            return
        if 0 <= st.robot < self.cfg.num_robots:
            self.status[st.robot] = st.to_dict()
        else:
            self.health.count_bad_message("recorder.status")

    def _on_health(self, msg: String) -> None:
        try:
            rec = HealthRecord.decode(msg.data)
        except RecordError:
            self.health.count_bad_message("recorder.health")
            return
        if rec.node != self.node.get_fully_qualified_name():     # the recorder's own counts are read directly
            self.node_health[rec.node] = rec.to_dict()

    def health_totals(self) -> dict:
        """``callback_errors`` and ``bad_messages`` of the whole run: robots + other nodes + the recorder."""
        return sum_health([*self.status.values(), *self.node_health.values(), self.health.counts()])

    def _ready_to_record(self) -> bool:
        """Sampling may start: every body has a pose, and every robot has sent a state or some robot has a target
        already (the fleet is moving: a robot that died before its first state must not delay the record's start,
        or ``trajectories.csv`` would miss the fleet's first moves and ``time_to_converge_s`` be too short)."""
        if np.isnan(self.pos).any():
            return False
        return not np.isnan(self.last_seen).any() or not np.isnan(self.mps).all()

    def sample(self) -> None:
        now = self._now()
        self._decode_poses()
        if self.t0 is None:
            if not self._ready_to_record() and now - self.t_created < START_WAIT_S:
                return
            if self.ground_truth and not self._truth_seen:
                self._no_ground_truth(now)
                return
            self.t0 = now
            self.node.get_logger().info(f"recording {self.cfg.num_robots} robots for {self.cfg.duration_s:.0f} s "
                                        f"into {self.out}")
        t = now - self.t0
        self.slots.call(now)
        warn = self.missed.check(t)
        if warn:
            self.node.get_logger().warning(warn)
        self._note_losses(now)
        living = self.watch.sample()
        self.times.append(t)
        bodies = self.pos.copy()
        self.positions.append(bodies)
        self.mps_log.append(self.mps.copy())
        dim = 1 if self.cfg.dim == 1 else 2
        self._append("trajectories.csv", lambda: self.traj.append(t, bodies[:, :dim], self.mps[:, :dim]))
        pos = bodies.copy()
        pos[~living] = np.nan                             # a lost robot is not part of the fleet's agreement
        sp = self._spread(pos)
        settled = self.settle.update(t, sp if self.avoid is None else self._agreement(pos))
        if t - self.last_progress >= min(PROGRESS_PERIOD_S, self.cfg.planner_period_s) or settled:
            self.last_progress = t
            self.node.get_logger().info(self.progress_line(t, sp, living))
        if (self.cfg.max_rounds and self.t_all_planned is None
                and all(r >= self.cfg.max_rounds for i, r in enumerate(self.rounds_planned) if i not in self.lost)):
            self.t_all_planned = t
        # the run ends at duration_s; once consensus has held for settle_s; or one planning period after every robot
        # made its last round (max_rounds), so the robots can fly to their final targets
        reason = ("converged_and_settled" if settled else
                  "max_rounds" if self.t_all_planned is not None and t >= self.t_all_planned + self.cfg.planner_period_s
                  else "duration" if t >= self.cfg.duration_s else None)
        if reason and not self.done.done():
            self.end_reason = reason
            self.done.set_result(True)

    def progress_line(self, t: float, sp: float, living: np.ndarray | None = None) -> str:
        """The line a person watching the run reads: time, round, spread, LLM calls (and how long consensus held);
        the meeting points of the ``living`` robots (default: all)."""
        c = self.counters()
        held = self.settle.held_s(t)
        line = f"progress t={t:5.1f}/{self.cfg.duration_s:.0f} s  round {c['rounds_max']}  "
        tsp = math.nan
        if self.avoid is None:
            line += f"spread {sp:.3f} m (tol {self.cfg.converge_tol_m:g})"
        else:                      # bodies: the meeting points agree, the robots pack around them
            mps = self.mps if living is None else np.where(living[:, None], self.mps, np.nan)
            tsp = self._spread(mps)                      # NaN until two robots have planned
            line += (f"meeting points within {'n/a' if math.isnan(tsp) else f'{tsp:.3f}'} m "
                     f"(tol {self.cfg.converge_tol_m:g})  spread {sp:.3f} m")
        if self.cfg.settle_s > 0 and held > 0:
            line += f"  consensus held {held:.0f}/{self.cfg.settle_s:g} s"
        if self.cfg.planner == "llm":
            line += f"  llm calls {c['llm_calls']}  fallbacks {c['llm_fallbacks']}"
            # a person waiting on a slow model: the rounds all robots completed, their pace, and when consensus may
            # come at that pace (metrics.progress; the meeting points' spread with bodies, else the positions')
            disagreement = sp if self.avoid is None else tsp
            line += "  " + self.estimate.update(t, c["rounds_min"], disagreement).text()
        return line

    def _agreement(self, pos: np.ndarray) -> float:
        """With collision avoidance: the targets' spread while every present robot is packed around them."""
        present = ~np.isnan(pos).any(axis=1)
        if present.sum() < 2:
            return float("nan")
        return agreement_measure(pos[present], self.mps[present], self.avoid)

    @staticmethod
    def _spread(pos: np.ndarray) -> float:
        valid = pos[~np.isnan(pos).any(axis=1)]
        return spread(valid) if len(valid) > 1 else float("nan")

    def _note_losses(self, now: float) -> None:
        """A robot whose state is older than robot_timeout_s, or that never sent one by robot_timeout_s after
        sampling started, is lost (its process died, its link failed): it leaves the agreement from then on, its body
        stays in the safety figures, and ``summary.json`` lists it (``lost_robots``, ``losses``)."""
        for ev in self.watch.update(now, self.t0):
            i, t = ev["robot"], ev["t_s"]
            if ev["event"] == "lost":
                why = (f"no state for {self.cfg.robot_timeout_s:g} s" if ev["last_state_s"] is not None
                       else "no state since the recording started")
                self.node.get_logger().warning(f"robot_{i} lost at t={t:.1f} s ({why}); the run goes on without it")
            else:
                self.node.get_logger().info(f"robot_{i} back at t={t:.1f} s")

    def counters(self) -> dict:
        keys = ("llm_calls", "llm_fallbacks", "clamped", "overruns", "planner_errors", "stale_stops",
                "deadlocks", "pose_suspect_stops", "suggestions", "suggestions_refused", "rounds_dropped")
        out = {k: int(sum(st.get(k, 0) for st in self.status.values())) for k in keys}
        rounds = [st.get("round", 0) for st in self.status.values()]
        out["rounds_max"] = int(max(rounds, default=0))
        out["rounds_min"] = int(min(rounds, default=0))
        ticks = sum(st.get("control", {}).get("ticks", 0) for st in self.status.values())
        on_time = sum(st.get("control", {}).get("on_time", 0) for st in self.status.values())
        out["control_ticks"] = int(ticks)
        if self.avoid is not None:
            out["collision"] = sum_collision([st["collision"] for st in self.status.values()
                                              if isinstance(st.get("collision"), dict)])
        out["control_on_time_share"] = (on_time / ticks) if ticks else None
        out.update(self.health_totals())
        by_node = {name: {k: rec.get(k) for k in ("callback_errors", "bad_messages")}
                   for name, rec in self.node_health.items()}
        by_node[self.fqn] = self.health.counts()
        out["health_by_node"] = dict(sorted(by_node.items()))
        # the nearby relay's traffic (one process per robot): messages sent and the positions in them
        relay = [rec for rec in self.node_health.values() if "nearby_points" in rec]
        if relay:
            out["nearby_relay"] = {"messages": int(sum(r.get("nearby_messages", 0) for r in relay)),
                                   "points": int(sum(r["nearby_points"] for r in relay))}
        # what the robots and the relays refused as implausible, by kind, and who was ever suspect
        out.update(sum_implausible([*self.status.values(), *self.node_health.values()]))
        # meeting points the topology node refused as no evidence of their robot's planner, and the nodes it saw
        # publishing on a robot's topics besides the robot (records are outside text: only well-formed entries)
        out["meeting_points_refused"] = int(sum(r["meeting_points_refused"] for r in self.node_health.values()
                                                if isinstance(r.get("meeting_points_refused"), int)))
        foreign: dict[str, list[str]] = {}
        for rec in self.node_health.values():
            got = rec.get("foreign_publishers")
            if isinstance(got, dict):
                for topic, nodes in got.items():
                    if isinstance(topic, str) and isinstance(nodes, list):
                        foreign[topic[:200]] = sorted({str(n)[:200] for n in nodes} | set(foreign.get(topic, [])))
        out["foreign_publishers"] = dict(sorted(foreign.items())[:100])
        return out

    # ------------------------------------------------------------------ visualization: markers and TF (cfg.markers)
    def _init_viz(self, g) -> None:
        from consensus.runs.plots import colors

        node, n = self.node, self.cfg.num_robots
        self.colors = colors(n)
        self.reasoning: dict[int, str] = {}
        self.edges: list[tuple[int, int]] = []
        self.frames = [names.base_link(i) for i in range(n)]
        self.marker_pub = self.tf_pub = None
        if self.cfg.markers:
            self.marker_pub = node.create_publisher(MarkerArray, names.MARKERS.name, qos.profile(names.MARKERS))
            if markers.TFMessage:
                self.tf_pub = node.create_publisher(markers.TFMessage, names.TF.name, qos.profile(names.TF))
        node.create_timer(VIZ_PERIOD_S, g(self.publish_viz, "recorder.viz"))

    def _note_reasoning(self, robot: int, rec: ReasoningRecord) -> None:
        if self.viz:
            self.reasoning[robot] = text = rec.reasoning[:REASONING_CHARS + 1]
            if self.live is not None:
                self.live.reasoning(self.node.get_clock().now().nanoseconds, robot, rec.round, text)

    def _on_graph(self, msg: String) -> None:
        try:
            rec = GraphRecord.decode(msg.data)
            edges = markers.graph_edges(rec.to_dict(), self.cfg.num_robots)
        except RecordError:
            edges = None
        if edges is None:
            self.health.count_bad_message("recorder.graph")
            return
        self.edges = edges
        adj = np.asarray(rec.adjacency, dtype=float)
        change = {"topology": rec.name, "directed": rec.directed,
                  "links": int((adj != 0).sum() - (np.diag(adj) != 0).sum())}
        key = {**change, "adjacency": rec.adjacency}
        if key == self._graph_seen:            # the same graph again (a latched re-delivery)
            return
        self._graph_seen = key
        t = 0.0 if self.t0 is None else round(self._now() - self.t0, 3)
        self.topology_changes.append({"t_s": t, **change})
        if self.t0 is not None:
            self.node.get_logger().info(f"topology changed at t={t:.1f} s: {change['topology']}")

    def publish_viz(self) -> None:
        now = self.node.get_clock().now()
        if self.marker_pub is not None:
            stamp = now.to_msg()
            self.marker_pub.publish(markers.fleet_markers(self.pos, self.mps, self.edges, self.reasoning, stamp,
                                                          self.colors))
            if self.tf_pub is not None:
                self.tf_pub.publish(markers.tf_message(markers.robot_transforms(self.pos, stamp, self.frames)))
        if self.live is not None:
            self.publish_live(now.nanoseconds)

    def publish_live(self, now_ns: int) -> None:
        """The Foxglove live view: the fleet (lost robots' positions left out, as in the agreement; named in
        ``lost``) and the progress the log line shows."""
        pos = self.pos.copy()
        pos[list(self.lost)] = np.nan
        self.live.fleet(now_ns, pos, self.mps, self.edges, self.reasoning, self.colors, lost=sorted(self.lost))
        c = self.counters()
        self.live.progress(now_ns, t_s=None if self.t0 is None else now_ns * 1e-9 - self.t0,
                           duration_s=self.cfg.duration_s, round=c["rounds_max"], spread_m=self._spread(pos),
                           llm_calls=c["llm_calls"], llm_fallbacks=c["llm_fallbacks"], lost_robots=len(self.lost),
                           bad_messages=c["bad_messages"], callback_errors=c["callback_errors"])

    def finish(self) -> dict:
        """The run's end, once (``consensus.ros.supervisor.RunEnd``), with this scenario's judgement (``finalize``
        writes summary.json and the plots)."""
        return self.end.conclude(self._judge, written=True)

    def _judge(self) -> tuple[dict, str]:
        self.plans.close()
        self.traj.close()
        release_space(self.out)            # the room consensus run set aside for this summary (a full disk)
        if self.live is not None:
            self.live.close()
        n = self.cfg.num_robots
        times = np.asarray(self.times)
        bodies = np.asarray(self.positions).reshape(-1, n, 2)
        mps = np.asarray(self.mps_log).reshape(-1, n, 2)
        if self.cfg.dim == 1:
            bodies, mps = bodies[..., :1], mps[..., :1]
        # agreement on the living (the convergence figures, the plots), safety on every body (module docstring)
        members = self.watch.members()
        pos, mps = on_the_living(bodies, members), on_the_living(mps, members)
        summary = finalize(self.out, times=times, positions=pos, targets=mps, tol=self.cfg.converge_tol_m,
                           trajectories_written=True,
                           counters=self.counters(), title=f"Aggregation through ROS 2, planner={self.cfg.planner}",
                           workspace=self.cfg.workspace,
                           d_min=None if self.avoid is None else self.avoid.d_min_m,
                           # each dead robot's body is a keep-out the living pack around (consensus.control.robot_core)
                           packing_slack=self.cfg.silent_bound_m * len(self.lost),
                           footprint_radius=None if self.avoid is None else self.footprint,
                           extra={"planner": self.cfg.planner, "topology": self.cfg.topology,
                                  "num_robots": n, "duration_s": float(times[-1]) if len(times) else 0.0,
                                  "end_reason": self.end_reason, "settle_s": self.cfg.settle_s,
                                  "collision_avoidance": "none" if self.avoid is None else "cbf",
                                  **({} if self.avoid is None else {"clearance_m": self.avoid.clearance_m}),
                                  "per_robot": [self.status.get(i, {}) for i in range(n)],
                                  "lost_robots": sorted(self.lost), "losses": self.losses,
                                  **self.body_safety(bodies),
                                  "positions_from": "ground_truth" if self.ground_truth else "odom",
                                  "topology_changes": self.topology_changes,
                                  "write_errors": dict(self.write_errors),
                                  "samples_missed": self.missed.lost})
        return summary, (f"{self.end_reason}, converged={summary['converged']} "
                         f"final_spread={_fmt(summary['final_spread_m'])} m")

    def body_safety(self, bodies: np.ndarray) -> dict:
        """The safety figures on every body, a lost robot's too (``(T, n, d)`` as recorded): ``min_pair_distance_m``
        (the closest two bodies came) and ``outside_geofence_m``; they replace ``finalize``'s, which see the living
        only."""
        if not len(bodies):
            return {}
        flat = bodies if bodies.shape[-1] == 2 else np.concatenate([bodies, np.zeros_like(bodies)], axis=-1)
        mins = min_pair_distance_series(flat)
        return {"min_pair_distance_m": float(np.nanmin(mins)) if np.isfinite(mins).any() else None,
                "outside_geofence_m": outside_geofence_m(flat, self.cfg.workspace)}


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def main() -> int:
    return node_main("recorder", Recorder, background=True)
