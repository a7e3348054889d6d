"""One disaster-response drone's ROS wiring: the round protocol's drone side on top of the robot controller.

A drone is a ``consensus.ros.robot.RobotNode`` (P controller, geofence, speed limit, stale-odometry stop,
``cmd_vel``/``state``/``target``/``planner/status`` topics, control timing) whose meeting point is not planned
periodically but set by the round clock of the ``disaster_grid`` node: the centre of the cell the drone flies to,
cell (x, y) -> ((x + 0.5) s, (y + 0.5) s) with s = ``cell_size_m`` (drones sharing a cell: see Flight below). The
drone's decisions come from the core agent of ``consensus.scenarios.disaster.agents`` (``make_drone``), called
exactly as
``consensus.scenarios.disaster.rounds.run_round`` calls it in the headless runner:
``discuss(obs, inbox_for(id, heard), turn, cell)``, ``act(...)``, ``prepare_vote(...)`` + ``propose(ctx)``. No
prompt, parsing, validation or fallback is done here.

Namespaces: drone i lives in ``robot_<i>`` (the namespace the ``sim`` node and real-robot drivers of this
package serve, so the same simulator and drivers carry both scenarios). Its own topics are relative (``odom``,
``cmd_vel``, ``state``, ``target``, ``planner/status``, see consensus.ros.robot, and ``disaster/vote_request``); the
shared channels of the team are absolute (``protocol.TOPICS``: ``/disaster/state``,
``/disaster/discussion``, ``/disaster/decisions``, ``/disaster/votes``, ``/disaster/collective``, as the grid and
the aggregator live in the root namespace and the drones in their own). Every record is a ``std_msgs/String``
holding one JSON object, one dataclass each in ``consensus.scenarios.disaster.ros.protocol`` (its schema table in
docs/disaster.md): the drone decodes ``StateRecord`` (grid -> all, the round clock) and ``VoteRequestRecord``
(aggregator -> drone i) and publishes ``DiscussionRecord``, ``DecisionRecord`` (implicit) and ``VoteRecord``
(explicit).

``/disaster/state``: ``seq`` increases with every phase (a heartbeat re-publishes the same seq every
``HEARTBEAT_S``); ``phase`` is ``"waiting"`` (before round 0), ``"discuss"`` (turn ``turn`` = 0..K-1),
``"decide"`` (implicit: every drone acts; explicit: the aggregator collects votes), ``"flight"`` (``actions`` = the
cell of every drone, drone order) or ``"done"``; ``cells`` = every drone's cell at the round's start (what the core
calls ``own_cell``); ``heard`` = the ``InboxMessage.to_dict()`` list the phase reads (each drone reads
``inbox_for(id, heard)``). ``reply`` = ``DroneReply.to_dict()``; ``context`` = ``ProposeContext`` as JSON (cells as
lists, see ``context_to_dict``).

Threads: an LLM planner call runs on the thread pool (never on the executor thread, like consensus.ros.robot's planner);
one drone's calls run one at a time in arrival order (``PlannerJobs``), and a queued call whose phase is over when
its turn comes is skipped and counted (``jobs_skipped``). Finished calls are published from the control tick.
Classical planners (no pool) answer inline. Every reply's LLM calls and fallbacks are added to the status counters;
a planner that raises gives a counted ``planner_exception`` fallback reply, never a dead drone.

Flight: in the ``flight`` phase the drone flies to the centre of its cell; with the collision filter the k drones
sent to one cell fly to k slots centred on it (``drone_control.fly_to_cell``, which the headless flight calls too:
headless and ROS drones sent to one cell stand in the same slots; ``metrics.CellSlots``). With ``motion:
kinematic`` it hovers where it is from the next phase on, so it flies exactly the flight phase's ``round_time_s`` per
round however long the deliberation takes (the headless kinematic model freezes time between flights too); with
``motion: teleport`` it goes on to its cell's centre or slot (it is near it when the flight phase ends: arrived, or
the flight timed out).

Safety on top of consensus.ros.robot: an action off the grid is refused (the drone holds its meeting point,
``bad_actions``); the round clock counts as the planner for ``target_timeout_s``: without a state message (phase or
heartbeat) for ``target_timeout_s`` the drone stops.

Health: a malformed ``/disaster/state`` or vote request record (one that does not decode, a cell off
the grid, a flight action off the grid) is dropped and counted in the drone's health (``consensus.ros.health.Health``,
the robot node's), so the status ``bad_messages`` holds these and the robot node's dropped odometry/neighbours;
an exception of any other kind in a callback is counted in ``callback_errors``.
"""
from __future__ import annotations

import dataclasses
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterable

from rclpy.node import Node
from std_msgs.msg import String

from consensus.decision import ProposeContext
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.scenarios.disaster.environment import Disaster, Observation, ReportItem, in_grid
from consensus.scenarios.disaster.rounds import inbox_for
from consensus.scenarios.disaster.agents import DroneReply, InboxMessage
from consensus.ros import qos
from consensus.ros.health import guarded_record
from consensus.ros.params import declare_config
from consensus.ros.records import Record
from consensus.ros.robot import RobotNode
from consensus.scenarios.disaster.round_clock import cell_list
from consensus.scenarios.disaster.drone_control import controller_config, fly_to_cell
from consensus.scenarios.disaster.ros import protocol
from consensus.scenarios.disaster.ros.protocol import (DecisionRecord, DiscussionRecord, StateRecord, VoteRecord,
                                                       VoteRequestRecord)


HEARTBEAT_S = 2.0          # the grid re-publishes the current state this often


# --------------------------------------------------------------------------------------------------- configuration
def declare_disaster_config(node: Node, uses: Iterable[str]) -> DisasterConfig:
    """The ``DisasterConfig`` fields ``node`` reads (``uses``: its module's ``USES``) as its declared parameters
    (``consensus.ros.params.declare_config``; the other fields still take the run's values); the validated config."""
    return declare_config(node, DisasterConfig, uses=uses)


# ---------------------------------------------------------------------------------------------------- wire format
def cell_or_none(value: Any, width: int, height: int) -> tuple[int, int] | None:
    """A wire cell ``[x, y]`` as a tuple; None for null. Anything else, or a cell off the grid: ValueError."""
    if value is None:
        return None
    if not (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise ValueError(f"not a grid cell: {value!r}")
    cell = (int(value[0]), int(value[1]))
    if not in_grid(cell, width, height):
        raise ValueError(f"cell {cell} is off the {width}x{height} grid")
    return cell


def observation_from_dict(d: dict) -> Observation:
    """Inverse of ``Observation.to_dict``."""
    disasters = tuple(Disaster(**{**x, "cell": tuple(x["cell"])}) for x in d["disasters"])
    report = tuple(ReportItem(**item) for item in d["report"])
    return Observation(round=int(d["round"]), width=int(d["width"]), height=int(d["height"]), disasters=disasters,
                       report=report, report_text=str(d["report_text"]))


_REPLY_FIELDS = {f.name for f in dataclasses.fields(DroneReply)}


def reply_from_dict(d: dict, width: int, height: int) -> DroneReply:
    """Inverse of ``DroneReply.to_dict``; the action must be a cell on the grid or null (else ValueError)."""
    if not isinstance(d, dict):
        raise ValueError("reply is not an object")
    reply = DroneReply(**{k: v for k, v in d.items() if k in _REPLY_FIELDS})
    reply.action = cell_or_none(d.get("action"), width, height)
    return reply


def inbox_from_dict(d: dict) -> InboxMessage:
    return InboxMessage(sender=int(d["sender"]), role=str(d["role"]), text=str(d["text"]),
                        proposal=None if d.get("proposal") is None else tuple(d["proposal"]), turn=int(d["turn"]))


def context_to_dict(ctx: ProposeContext) -> dict:
    return {"agent": ctx.agent, "turn": ctx.turn, "own_previous": cell_list(ctx.own_previous),
            "others_previous": [cell_list(c) for c in ctx.others_previous],
            "coordinator_plan": cell_list(ctx.coordinator_plan),
            "history": [[cell_list(c) for c in turn] for turn in ctx.history]}


def context_from_dict(d: dict, width: int, height: int) -> ProposeContext:
    """Inverse of ``context_to_dict`` (cells back to tuples, as the aggregation hands them to proposers)."""
    cell = lambda v: cell_or_none(v, width, height)          # noqa: E731
    return ProposeContext(agent=int(d["agent"]), turn=int(d["turn"]), own_previous=cell(d["own_previous"]),
                          others_previous=tuple(cell(c) for c in d["others_previous"]),
                          coordinator_plan=cell(d["coordinator_plan"]),
                          history=tuple(tuple(cell(c) for c in turn) for turn in d["history"]))


def message(record: Record) -> String:
    """The ``std_msgs/String`` of a record (its ``encode``)."""
    return String(data=record.encode())


# ----------------------------------------------------------------------------------------------------- planner jobs
class PlannerJobs:
    """One drone's planner calls: one at a time, in arrival order, on ``pool`` (inline without a pool).

    ``submit(key, fn)`` queues a call; ``poll(is_current)`` (executor thread) returns the finished ``(key, result)``
    pairs and starts the next queued call whose key is still current, skipping (and counting) the others.
    """

    def __init__(self, pool: ThreadPoolExecutor | None) -> None:
        self.pool = pool
        self.queue: deque[tuple[tuple, Callable[[], Any]]] = deque()
        self.running: tuple[tuple, Future] | None = None
        self.finished: list[tuple[tuple, Any]] = []
        self.skipped = 0

    def submit(self, key: tuple, fn: Callable[[], Any]) -> None:
        self.queue.append((key, fn))

    def poll(self, is_current: Callable[[tuple], bool]) -> list[tuple[tuple, Any]]:
        while True:
            if self.running is not None:
                key, fut = self.running
                if not fut.done():
                    break
                self.running = None
                self.finished.append((key, fut.result()))
            if not self.queue:
                break
            key, fn = self.queue.popleft()
            if not is_current(key):
                self.skipped += 1
                continue
            if self.pool is None:
                self.finished.append((key, fn()))
            else:
                self.running = (key, self.pool.submit(fn))
        done, self.finished = self.finished, []
        return done

    def pending(self) -> int:
        return len(self.queue) + (self.running is not None)


# ------------------------------------------------------------------------------------------------------ the drone
@dataclasses.dataclass
class _Phase:
    seq: int = -1
    round: int = -1
    phase: str = "waiting"
    turn: int = -1
    obs: Observation | None = None
    cells: list = dataclasses.field(default_factory=list)
    heard: list = dataclasses.field(default_factory=list)


class DisasterRobot(RobotNode):
    """Drone ``drone_id`` of a (baseline-resolved) ``DisasterConfig``, attached to ``node`` (namespace
    ``robot_<id>``); ``planner`` picks its cell (``make_drone`` of ``consensus.scenarios.disaster.agents``:
    heuristic, random or LLM, as ``cfg.planner`` says), kept as ``cell_planner``: the kernel's periodic planner is
    off, the round clock sets the drone's meeting point."""

    def __init__(self, node: Node, cfg: DisasterConfig, drone_id: int, planner, pool: ThreadPoolExecutor | None,
                 llm_status: Callable[[], dict] | None = None) -> None:
        control_cfg, _ = controller_config(cfg)
        super().__init__(node, control_cfg, drone_id, planner=None, pool=pool, llm_status=llm_status)
        self.dcfg = cfg
        self.cell_planner = planner
        self.jobs = PlannerJobs(pool)
        self.now_phase = _Phase()
        self.prepared_round = -1
        self.vote_requests: list[VoteRequestRecord] = []
        self.counters.update(replies=0, jobs_skipped=0, bad_actions=0)    # (+ bad_messages from self.health)
        ns = node.get_namespace()  # the run's shared channels sit under its namespace (names.Topic.in_run)
        node.create_subscription(String, protocol.DISASTER_STATE.in_run(ns), self._guard(self._on_state),
                                 qos.profile(protocol.DISASTER_STATE))
        node.create_subscription(String, protocol.DISASTER_VOTE_REQUEST.in_run(ns),
                                 self._guard(self._on_vote_request), qos.profile(protocol.DISASTER_VOTE_REQUEST))
        self.pub_discussion = node.create_publisher(String, protocol.DISASTER_DISCUSSION.in_run(ns),
                                                    qos.profile(protocol.DISASTER_DISCUSSION))
        self.pub_decision = node.create_publisher(String, protocol.DISASTER_DECISIONS.in_run(ns),
                                                  qos.profile(protocol.DISASTER_DECISIONS))
        self.pub_vote = node.create_publisher(String, protocol.DISASTER_VOTES.in_run(ns),
                                              qos.profile(protocol.DISASTER_VOTES))

    def _guard(self, fn: Callable[[String], None]) -> Callable[[String], None]:
        """Subscription callback: a malformed record (one that does not decode: ``RecordError``, or whose cells are
        off the grid) is counted (``bad_messages``) and dropped; any other
        exception is counted by ``guarded`` (``callback_errors``); nothing reaches the executor."""
        return guarded_record(fn, f"drone_{self.id}.{fn.__name__.lstrip('_')}", self.health)

    # ------------------------------------------------------------------ the round clock
    def _on_state(self, msg: String) -> None:
        st = StateRecord.decode(msg.data)
        self.core.alive(self._now())                # the round clock is alive (phase or heartbeat)
        if st.seq <= self.now_phase.seq:
            return
        cfg = self.dcfg
        phase = _Phase(seq=st.seq, round=st.round, phase=st.phase, turn=st.turn)
        if phase.phase in ("discuss", "decide"):
            phase.obs = observation_from_dict(st.observation)
            phase.cells = [cell_or_none(c, cfg.width, cfg.height) for c in st.cells]
            phase.heard = [inbox_from_dict(m) for m in st.heard]
        self.now_phase = phase
        self.round = max(phase.round, 0)
        if phase.phase == "discuss":
            self._submit(("discuss", phase.round, phase.turn), self._discuss_job(phase))
        elif phase.phase == "decide" and st.mode == "explicit":
            self._submit(("prepare", phase.round), self._prepare_job(phase, st.strategy))
        elif phase.phase == "decide":
            self._submit(("act", phase.round), self._act_job(phase))
        if phase.phase == "flight":
            self._fly_to(st.actions[self.id], st.actions)
        elif cfg.motion == "kinematic" and self.meeting_point is not None and self.pos is not None:
            self._hold()

    def _on_vote_request(self, msg: String) -> None:
        req = VoteRequestRecord.decode(msg.data)
        if req.agent != self.id:
            return
        self.vote_requests.append(req)
        self._release_votes()

    def _release_votes(self) -> None:
        """Vote requests of the prepared round go to the planner (a request may overtake its round's state)."""
        keep = []
        for req in self.vote_requests:
            if req.round == self.prepared_round:
                ctx = context_from_dict(req.context, self.dcfg.width, self.dcfg.height)
                self._submit(("vote", req.round, req.id, ctx.turn), self._vote_job(ctx))
            elif req.round > self.prepared_round:
                keep.append(req)
        self.vote_requests = keep

    def _is_current(self, key: tuple) -> bool:
        p = self.now_phase
        if key[0] == "discuss":
            return (p.round, p.phase, p.turn) == (key[1], "discuss", key[2])
        return (p.round, p.phase) == (key[1], "decide")

    # ------------------------------------------------------------------ planner calls (worker thread)
    def _submit(self, key: tuple, fn: Callable[[], Any]) -> None:
        self.jobs.submit(key, fn)
        self._collect_jobs()

    def _safe(self, call: Callable[[], DroneReply]) -> DroneReply:
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - a planner bug becomes a counted fallback, never a dead drone
            self.node.get_logger().error(f"drone {self.id}: planner raised {type(exc).__name__}: {exc}")
            return DroneReply(fallback=True, fallback_reason="planner_exception", error=type(exc).__name__)

    def _discuss_job(self, p: _Phase) -> Callable[[], DroneReply]:
        inbox = inbox_for(self.id, p.heard)
        return lambda: self._safe(lambda: self.cell_planner.discuss(p.obs, inbox, p.turn, p.cells[self.id]))

    def _act_job(self, p: _Phase) -> Callable[[], DroneReply]:
        inbox = inbox_for(self.id, p.heard)
        return lambda: self._safe(lambda: self.cell_planner.act(p.obs, inbox, p.cells[self.id]))

    def _prepare_job(self, p: _Phase, strategy: str) -> Callable[[], None]:
        inbox = inbox_for(self.id, p.heard)

        def prepare() -> None:
            try:
                self.cell_planner.prepare_vote(p.obs, inbox, p.cells[self.id], strategy)
            except Exception as exc:  # noqa: BLE001 - the votes then fail as counted planner_exception fallbacks
                self.node.get_logger().error(f"drone {self.id}: prepare_vote raised {type(exc).__name__}: {exc}")
        return prepare

    def _vote_job(self, ctx: ProposeContext) -> Callable[[], DroneReply]:
        def vote() -> DroneReply:
            self.cell_planner.propose(ctx)
            return self.cell_planner.vote_log[-1]
        return lambda: self._safe(vote)

    def _collect_jobs(self) -> None:
        for key, result in self.jobs.poll(self._is_current):
            if key[0] == "prepare":
                self.prepared_round = key[1]
                self._release_votes()
                continue
            self._count(result)
            stamp = self._now()
            if key[0] == "discuss":
                self.pub_discussion.publish(message(DiscussionRecord(
                    round=key[1], turn=key[2], drone=self.id, message=result.message, reply=result.to_dict(),
                    stamp=stamp)))
            elif key[0] == "act":
                self.pub_decision.publish(message(DecisionRecord(
                    round=key[1], drone=self.id, action=cell_list(result.action), reply=result.to_dict(),
                    stamp=stamp)))
            else:
                self.pub_vote.publish(message(VoteRecord(
                    round=key[1], id=key[2], agent=self.id, turn=key[3],
                    action=None if result.fallback else cell_list(result.action), reply=result.to_dict(),
                    stamp=stamp)))
        self.counters["jobs_skipped"] = self.jobs.skipped

    def _count(self, reply: DroneReply) -> None:
        self.counters["replies"] += 1
        self.counters["llm_calls"] += reply.llm_calls
        if reply.fallback:
            self.counters["llm_fallbacks"] += 1
            if reply.fallback_reason == "planner_exception":
                self.counters["planner_errors"] += 1

    # ------------------------------------------------------------------ flight
    def _hold(self) -> None:
        """Hover where the drone is (kinematic motion: deliberation takes no flight time, as headless)."""
        self._decode_inputs()                          # the odometry that came since the last control tick
        point, _ = self.core.set_meeting_point(self.pos)
        self._publish_point(self.pub_target, point)

    def _fly_to(self, action: Any, actions: list | None = None) -> None:
        """Fly to the centre of the cell ``action``; with the collision filter the drones sent to the same cell
        (``actions``: every drone's) take slots centred on it (``drone_control.fly_to_cell``, the headless flight's
        command too)."""
        cfg = self.dcfg
        try:
            cell = cell_or_none(action, cfg.width, cfg.height)
        except ValueError:
            cell = None
        if cell is None:
            self.counters["bad_actions"] += 1          # hold the current meeting point
            self.health.count_bad_message(f"drone_{self.id}.flight_action")
            return
        point, _ = fly_to_cell(self.core, cell, actions, cfg.cell_size_m, self._now())
        self._publish_point(self.pub_target, point)

    # ------------------------------------------------------------------ RobotNode hooks
    def plan_tick(self) -> None:
        """The slow tick of the robot node: here only the status report (meeting points come from the round clock)."""
        self.publish_status()

    def after_control(self) -> None:
        self._collect_jobs()

    def status(self) -> dict:
        out = super().status()
        p = self.now_phase
        own = p.cells[self.id] if p.cells and p.cells[self.id] is not None else None
        out.update(drone=self.id, phase=p.phase, turn=p.turn, cell=cell_list(own), jobs_pending=self.jobs.pending(),
                   position=None if self.pos is None else [float(v) for v in self.pos])
        return out
