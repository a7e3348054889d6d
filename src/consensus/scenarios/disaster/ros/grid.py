"""``disaster_grid``: owns the disaster environment, runs the round clock and writes the run directory.

The node holds ``consensus.scenarios.disaster.environment.DisasterEnv`` (config and seed from the run's parameters) and
steps it once per round, exactly as ``consensus.scenarios.disaster.headless`` does headless::

    obs = env.begin_round()                      -> /disaster/state phase "discuss" (turn 0..K-1), then "decide"
    the drones discuss and decide over ROS       (drone nodes; explicit mode: the aggregator node)
    decision = rounds.run_round(recorded, ...)   the core's round assembly over the replies received (below)
    flight                                       -> /disaster/state phase "flight" with every drone's cell
    cells = cells under the drones' odometry     (x, y) = (floor(px / s), floor(py / s)) clipped to the grid
    outcome = env.end_round(cells, decision.actions)      -> /disaster/metrics, rounds.jsonl

Phases are event-driven with deadlines on the node clock (``use_sim_time`` works): a discussion turn or the
implicit action phase ends when every drone has answered, at the latest ``round_timeout_s`` after it began; the
explicit vote ends when the aggregator's result arrives, at the latest ``(2 max_agreement_turns + 1)
round_timeout_s`` after it began (each vote and coordinator merge has its own ``round_timeout_s``). A drone that
did not answer in time gets the core's failure reply with reason ``timeout`` (``DroneReply(fallback=True)``,
counted in ``llm_fallbacks_by_reason``); a late answer is dropped and counted (``late_replies``, its LLM calls in
``late_llm_calls``).

Round assembly: the replies collected over ROS are handed to ``consensus.scenarios.disaster.rounds.run_round`` through
recorded drones (``RecordedDrone``: each step returns the reply that drone sent for that step; the recorded
coordinator returns the aggregator's merges). So heard messages, proposals, the actions a failed reply falls back
to, the explicit aggregation (re-computed from the recorded votes with ``consensus.decision`` and checked against
the aggregator's decision: ``replay_mismatches``), ``final_messages`` and the round counters come from the same
code as headless. The live phases use the core's ``message_of`` for what each phase hears, like ``run_round``.

Flight: ``motion: kinematic`` flies exactly ``round_time_s`` (a far cell may take more than one round, as
headless); ``motion: teleport`` — the paper's "on its chosen cell at the round's end" — flies until every drone is
within ``ARRIVE_FRACTION`` of a cell of its chosen cell's centre (at most ``round_timeout_s``; else counted in
``flight_timeouts``). Drones always fly (P controller, ``v_max``); nobody is teleported.

Topics (relative; the node lives in the root namespace): ``disaster/state`` (the round clock, schema in
``consensus.scenarios.disaster.ros.agent``; re-published every ``HEARTBEAT_S``), ``disaster/metrics`` (std_msgs/String JSON per
round: ``RoundOutcome.to_dict()`` plus ``counters``, ``cells_end``, ``positions_end``, ``durations_s``),
``disaster/markers`` (visualization_msgs/MarkerArray, frame ``world``, 2 Hz: namespace ``grid`` = the cell
lines, ``disasters`` = one cube per active disaster coloured yellow (severity 1) to red (10) and as tall as its
severity, ``labels`` = kind and severity, ``drones`` = a sphere per drone at its odometry, ``targets`` = a flat
square on each drone's chosen cell). Inputs: ``/robot_<i>/odom`` (nav_msgs/Odometry), ``/robot_<i>/planner/status``
(readiness, per-drone counters), ``/disaster/discussion``, ``/disaster/decisions``, ``/disaster/collective``,
``/disaster/aggregator/status``.

Start: round 0 begins when every drone reports a position (and, in explicit mode, the aggregator is up), at the
latest ``START_TIMEOUT_S`` after the node started. End: after ``rounds`` rounds the state goes to ``done``, the
run directory is written and the node exits (which ends the run). Ctrl-C writes what was completed.

Run directory (with ``consensus.runs.processes.prepare_run``, same layout as headless):
``manifest.json``, ``params.yaml``, ``rounds.jsonl`` (one line per round, the headless record plus ``ros``: phase
durations, timeouts, late replies, positions), ``transcripts.jsonl`` (the drones' and aggregator's LLM clients),
``trajectories.csv`` (odometry at ``SAMPLE_HZ``, targets = chosen cell centres), ``summary.json``
(``metrics.summarize`` + the round counters + settings, as headless; plus ``per_drone`` status, control timing,
timeouts, late replies), ``coverage_deviation.png/.svg``.
"""
from __future__ import annotations

import json
import math
import time
from collections import Counter
from pathlib import Path

import numpy as np
import rclpy
import rclpy.task
from geometry_msgs.msg import Point
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from std_msgs.msg import ColorRGBA, String
from visualization_msgs.msg import Marker, MarkerArray

from consensus.scenarios.disaster import metrics
from consensus.scenarios.disaster.environment import DisasterEnv
from consensus.scenarios.disaster.plots import plot_run
from consensus.scenarios.disaster.rounds import add_round_counters, message_of, run_round
from consensus.scenarios.disaster.agents import DroneReply
from consensus.scenarios.disaster.prompts import role_for
from consensus.ros import qos
from consensus.ros.cdr import odom_pose
from consensus.scenarios.disaster.ros.agent import (COLLECTIVE, DECISIONS, DISCUSSION, HEARTBEAT_S, STATE, STATE_QOS, cell_list,
                                       declare_disaster_config, dumps, namespace, reply_from_dict, timeout_reply)
from consensus.scenarios.disaster.ros.aggregator import STATUS as AGGREGATOR_STATUS
from consensus.ros.params import guarded, run_node, spin_node
from consensus.scenarios.disaster.environment import cell_centre
from consensus.runs.rundir import default_run_dir, write_json, write_manifest, write_trajectories

START_TIMEOUT_S = 60.0
ARRIVE_FRACTION = 0.25        # teleport flights end when every drone is this close (in cells) to its cell centre
SAMPLE_HZ = 5.0
TICK_S = 0.05


class RecordedDrone:
    """A drone for ``run_round`` whose replies were received over ROS (see the module docstring)."""

    def __init__(self, drone_id: int, role) -> None:
        self.drone_id, self.role = drone_id, role
        self.discussion: dict[int, DroneReply] = {}
        self.action: DroneReply | None = None
        self.votes: list[DroneReply] = []
        self.vote_log: list[DroneReply] = []

    def reset(self) -> None:
        self.discussion, self.action, self.votes, self.vote_log = {}, None, [], []

    def discuss(self, obs, inbox, turn, own_cell=None) -> DroneReply:
        reply = self.discussion.get(turn)
        return reply if reply is not None else timeout_reply("discussion message")

    def act(self, obs, inbox, own_cell=None) -> DroneReply:
        return self.action if self.action is not None else timeout_reply("decision")

    def prepare_vote(self, obs, inbox, own_cell, strategy) -> None:
        self.vote_log = []

    def propose(self, ctx):
        reply = self.votes[ctx.turn] if ctx.turn < len(self.votes) else timeout_reply("vote")
        self.vote_log.append(reply)
        return None if reply.fallback else reply.action


class RecordedCoordinator:
    """The aggregator's coordinator merges, in order, for ``run_round``."""

    def __init__(self, log: list[DroneReply]) -> None:
        self.recorded = log
        self.log: list[DroneReply] = []

    def prepare(self, obs, roles=()) -> None:
        self.log = []

    def merge(self, proposals, turn):
        reply = self.recorded[len(self.log)] if len(self.log) < len(self.recorded) else DroneReply(
            fallback=True, fallback_reason="timeout", error="no coordinator merge received")
        self.log.append(reply)
        return reply.action


def cells_of(positions: np.ndarray, cfg) -> list[tuple[int, int]]:
    """The cell under each position: (floor(x / s), floor(y / s)) clipped to the grid (as headless kinematic)."""
    idx = np.floor(np.asarray(positions, dtype=float) / cfg.cell_size_m).astype(int)
    return [(int(min(max(x, 0), cfg.width - 1)), int(min(max(y, 0), cfg.height - 1))) for x, y in idx]


def severity_colour(severity: int) -> ColorRGBA:
    s = min(max(severity, 1), 10)
    return ColorRGBA(r=1.0, g=float(1.0 - (s - 1) / 9.0), b=0.0, a=0.85)


class DisasterGrid:
    def __init__(self, node: Node) -> None:
        self.node = node
        raw = declare_disaster_config(node)
        self.raw_cfg = raw
        self.cfg = cfg = raw.resolved()
        self.n = cfg.num_robots
        self.out = Path(cfg.output_dir) if cfg.output_dir else default_run_dir("disaster")
        self.out.mkdir(parents=True, exist_ok=True)
        if not (self.out / "manifest.json").exists():
            write_manifest(self.out, scenario="disaster", config=raw.to_dict(), seed=raw.seed,
                           backend=raw.llm_backend if raw.uses_llm() else "none", model=raw.llm_model, mode="ros")
        self.env = DisasterEnv(cfg.env_config(), seed=cfg.seed)
        self.drones = [RecordedDrone(i, role_for(cfg.roles, i)) for i in range(self.n)]
        self.pos = np.full((self.n, 2), np.nan)
        self.targets = np.full((self.n, 2), np.nan)
        self.status: dict[int, dict] = {}
        self.aggregator_status: dict | None = None
        # round state
        self.seq = 0
        self.phase = "waiting"
        self.turn = -1
        self.deadline = math.inf
        self.phase_t0 = 0.0
        self.state_msg: dict = {}
        self.obs = None
        self.cells_start: list = []
        self.heard: list = []
        self.previous: list = []
        self.decision = None
        self.collective: dict | None = None
        self.round_ros: dict = {}
        self.outcomes: list = []
        self.counters: dict = {}
        self.ros_counters = Counter()
        self.log = (self.out / "rounds.jsonl").open("w", buffering=1)
        self.samples: list[tuple[float, np.ndarray, np.ndarray]] = []
        self.done = rclpy.task.Future()
        self.summary: dict | None = None
        self.t_created = self._now()
        self.wall0 = time.monotonic()

        for i in range(self.n):
            node.create_subscription(Odometry, f"/{namespace(i)}/odom", guarded(self._on_odom(i), "grid.odom"),
                                     qos.STREAM, raw=True)
            node.create_subscription(String, f"/{namespace(i)}/planner/status",
                                     guarded(self._on_status, "grid.status"), qos.EVENTS)
        node.create_subscription(String, DISCUSSION, guarded(self._on_discussion, "grid.discussion"), qos.EVENTS)
        node.create_subscription(String, DECISIONS, guarded(self._on_decision, "grid.decision"), qos.EVENTS)
        node.create_subscription(String, COLLECTIVE, guarded(self._on_collective, "grid.collective"), qos.EVENTS)
        node.create_subscription(String, AGGREGATOR_STATUS, guarded(self._on_aggregator, "grid.aggregator"),
                                 qos.EVENTS)
        self.pub_state = node.create_publisher(String, STATE.lstrip("/"), STATE_QOS)
        self.pub_metrics = node.create_publisher(String, "disaster/metrics", qos.EVENTS)
        self.pub_markers = node.create_publisher(MarkerArray, "disaster/markers", qos.EVENTS)
        node.create_timer(TICK_S, guarded(self.tick, "grid.tick"))
        node.create_timer(1.0 / SAMPLE_HZ, guarded(self.sample, "grid.sample"))
        node.create_timer(0.5, guarded(self.publish_markers, "grid.markers"))
        node.create_timer(HEARTBEAT_S, guarded(self._publish_state, "grid.heartbeat"))
        self._set_phase("waiting", self._now())

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    # ------------------------------------------------------------------ inputs
    def _on_odom(self, i: int):
        def cb(raw: bytes) -> None:
            pose = odom_pose(raw)
            if pose is None:
                p = deserialize_message(raw, Odometry).pose.pose.position
                pose = (p.x, p.y)
            if math.isfinite(pose[0]) and math.isfinite(pose[1]):
                self.pos[i] = pose[:2]
        return cb

    def _on_status(self, msg: String) -> None:
        st = json.loads(msg.data)
        if isinstance(st, dict) and isinstance(st.get("drone"), int) and 0 <= st["drone"] < self.n:
            self.status[st["drone"]] = st

    def _on_aggregator(self, msg: String) -> None:
        self.aggregator_status = json.loads(msg.data)

    def _reply(self, rec: dict) -> DroneReply:
        """The reply of a drone record; a malformed one (e.g. an action off the grid) is counted and becomes a
        failed reply (reason ``bad_message``): the drone stays, as after any failed reply."""
        try:
            return reply_from_dict(rec["reply"], self.cfg.width, self.cfg.height)
        except (ValueError, KeyError, TypeError) as exc:
            self.ros_counters["bad_messages"] += 1
            return DroneReply(fallback=True, fallback_reason="bad_message", error=str(exc)[:200])

    def _late(self, rec: dict) -> None:
        self.ros_counters["late_replies"] += 1
        reply = rec.get("reply") if isinstance(rec, dict) else None
        if isinstance(reply, dict) and isinstance(reply.get("llm_calls"), int):
            self.ros_counters["late_llm_calls"] += reply["llm_calls"]

    def _record(self, msg: String) -> dict | None:
        """A drone's or the aggregator's JSON record; None (counted) when it is not an object."""
        try:
            rec = json.loads(msg.data)
        except ValueError:
            rec = None
        if not isinstance(rec, dict):
            self.ros_counters["bad_messages"] += 1
            return None
        return rec

    def _drone_of(self, rec: dict) -> int | None:
        i = rec.get("drone")
        if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.n:
            return i
        self.ros_counters["bad_messages"] += 1
        return None

    def _expects(self, rec: dict, phase: str, turn: int = -1) -> bool:
        """Is ``rec`` an answer to the phase running now?"""
        return (self.phase == phase and self.obs is not None and rec.get("round") == self.obs.round
                and (phase != "discuss" or rec.get("turn") == turn == self.turn))

    def _on_discussion(self, msg: String) -> None:
        rec = self._record(msg)
        i = None if rec is None else self._drone_of(rec)
        if i is None:
            return
        if not self._expects(rec, "discuss", self.turn) or self.turn in self.drones[i].discussion:
            self._late(rec)
        else:
            self.drones[i].discussion[self.turn] = self._reply(rec)

    def _on_decision(self, msg: String) -> None:
        rec = self._record(msg)
        i = None if rec is None else self._drone_of(rec)
        if i is None:
            return
        if not self._expects(rec, "decide") or self.cfg.mode != "implicit" or self.drones[i].action is not None:
            self._late(rec)
        else:
            self.drones[i].action = self._reply(rec)

    def _on_collective(self, msg: String) -> None:
        rec = self._record(msg)
        if rec is None:
            return
        if not self._expects(rec, "decide") or self.cfg.mode != "explicit" or self.collective is not None:
            self.ros_counters["late_collectives"] += 1
            return
        self.collective = rec

    # ------------------------------------------------------------------ the round clock
    def tick(self) -> None:
        now = self._now()
        if self.phase == "waiting":
            if self._ready() or now - self.t_created > START_TIMEOUT_S:
                if not self._ready():
                    self.node.get_logger().warning("not every drone reported in time; starting anyway")
                self.begin_round()
        elif self.phase == "discuss":
            if all(self.turn in d.discussion for d in self.drones) or now >= self.deadline:
                self._end_discussion_turn(now)
        elif self.phase == "decide":
            got = (self.collective is not None if self.cfg.mode == "explicit"
                   else all(d.action is not None for d in self.drones))
            if got or now >= self.deadline:
                self._end_decision(now)
        elif self.phase == "flight":
            if self._flight_over(now):
                self.end_round(now)

    def _ready(self) -> bool:
        drones = all(self.status.get(i, {}).get("state", "waiting") != "waiting" for i in range(self.n))
        odom = not np.isnan(self.pos).any()
        return drones and odom and (self.cfg.mode != "explicit" or self.aggregator_status is not None)

    def _close_phase(self, now: float) -> None:
        """Record how long the phase that ends now took (``ros.durations_s`` of the round record)."""
        if self.phase in ("discuss", "decide", "flight"):
            key = self.phase if self.phase != "discuss" else f"discuss_{self.turn}"
            self.round_ros.setdefault("durations_s", {})[key] = round(now - self.phase_t0, 3)

    def _set_phase(self, phase: str, now: float, *, turn: int = -1, timeout: float = math.inf,
                   actions: list | None = None) -> None:
        self._close_phase(now)
        self.phase, self.turn, self.phase_t0 = phase, turn, now
        self.deadline = now + timeout
        self.seq += 1
        cfg = self.cfg
        self.state_msg = {
            "seq": self.seq, "round": self.obs.round if self.obs is not None else -1, "rounds": cfg.rounds,
            "phase": phase, "turn": turn, "mode": cfg.mode, "strategy": cfg.strategy if cfg.mode == "explicit" else "",
            "deadline_s": None if math.isinf(self.deadline) else self.deadline,
            "observation": self.obs.to_dict() if self.obs is not None and phase in ("discuss", "decide") else None,
            "cells": [cell_list(c) for c in self.cells_start] if phase in ("discuss", "decide") else None,
            "heard": [m.to_dict() for m in self.heard] if phase in ("discuss", "decide") else None,
            "actions": [cell_list(c) for c in actions] if actions is not None else None,
            "stamp": now}
        self._publish_state()

    def _publish_state(self) -> None:
        """Publish the current phase (also every HEARTBEAT_S: the drones' sign that the round clock is alive)."""
        self.pub_state.publish(dumps(self.state_msg))

    def begin_round(self) -> None:
        now = self._now()
        self.obs = self.env.begin_round()
        self.cells_start = cells_of(np.nan_to_num(self.pos), self.cfg)     # a silent drone counts at cell (0, 0)
        for d in self.drones:
            d.reset()
        self.collective = None
        self.round_ros = {"positions_start": self.pos.tolist()}
        k = self.cfg.discussion_turns
        self.heard = list(self.previous) if k > 0 else []
        if k > 0:
            self._set_phase("discuss", now, turn=0, timeout=self.cfg.round_timeout_s)
        else:
            self._begin_decision(now)

    def _end_discussion_turn(self, now: float) -> None:
        replies = [d.discuss(self.obs, (), self.turn) for d in self.drones]     # received, else the timeout reply
        missing = sum(self.turn not in d.discussion for d in self.drones)
        self._count_timeouts(f"discuss_{self.turn}", missing)
        self.heard = [message_of(d, r, self.turn) for d, r in zip(self.drones, replies)]
        if self.turn + 1 < self.cfg.discussion_turns:
            self._set_phase("discuss", now, turn=self.turn + 1, timeout=self.cfg.round_timeout_s)
        else:
            self._begin_decision(now)

    def _begin_decision(self, now: float) -> None:
        cfg = self.cfg
        timeout = cfg.round_timeout_s * (2 * cfg.max_agreement_turns + 1 if cfg.mode == "explicit" else 1)
        self._set_phase("decide", now, timeout=timeout)

    def _count_timeouts(self, what: str, missing: int) -> None:
        if missing:
            self.ros_counters["phase_timeouts"] += missing
            self.round_ros.setdefault("timeouts", {})[what] = missing

    def _end_decision(self, now: float) -> None:
        cfg = self.cfg
        coordinator = None
        if cfg.mode == "explicit":
            rec = self.collective or {}
            if not rec:
                self._count_timeouts("collective", 1)
            self._load_votes(rec)
            coordinator = RecordedCoordinator(self._replies(rec.get("coordinator", [])))
        else:
            self._count_timeouts("decide", sum(d.action is None for d in self.drones))
        self.decision = run_round(self.drones, self.obs, self.cells_start, mode=cfg.mode, strategy=cfg.strategy,
                                  discussion_turns=cfg.discussion_turns, coordinator=coordinator,
                                  max_agreement_turns=cfg.max_agreement_turns, previous=self.previous)
        if self.collective is not None and cell_list(self.decision.collective) != self.collective.get("decision"):
            self.ros_counters["replay_mismatches"] += 1
            self.node.get_logger().error(f"round {self.obs.round}: the aggregator decided "
                                         f"{self.collective.get('decision')}, the recorded votes give "
                                         f"{cell_list(self.decision.collective)}")
        actions = self.decision.actions
        self.targets = np.array([cell_centre(c, cfg.cell_size_m) for c in actions])
        flight = cfg.round_time_s if cfg.motion == "kinematic" else cfg.round_timeout_s
        self._set_phase("flight", now, timeout=flight, actions=actions)

    def _replies(self, dicts) -> list[DroneReply]:
        return [self._reply({"reply": d}) for d in (dicts if isinstance(dicts, list) else [])]

    def _load_votes(self, rec: dict) -> None:
        turns = rec.get("votes", [])
        for t, turn in enumerate(turns if isinstance(turns, list) else []):
            replies = self._replies(turn)
            for d, reply in zip(self.drones, replies):
                d.votes.append(reply)
            self._count_timeouts(f"vote_{t}", sum(r.fallback_reason == "timeout" for r in replies))

    def _flight_over(self, now: float) -> bool:
        if now >= self.deadline:
            if self.cfg.motion == "teleport":
                self.ros_counters["flight_timeouts"] += 1
                self.round_ros.setdefault("timeouts", {})["flight"] = 1
            return True
        if self.cfg.motion == "kinematic" or np.isnan(self.pos).any():
            return False
        dist = np.linalg.norm(self.pos - self.targets, axis=1)
        return bool((dist <= ARRIVE_FRACTION * self.cfg.cell_size_m).all())

    def end_round(self, now: float) -> None:
        cfg = self.cfg
        self._close_phase(now)
        self.phase = "ending"
        cells = cells_of(np.nan_to_num(self.pos), cfg)
        decision = self.decision
        outcome = self.env.end_round(cells, decision.actions)
        self.outcomes.append(outcome)
        add_round_counters(self.counters, decision.counters)
        self.previous = decision.final_messages
        self.round_ros["positions_end"] = self.pos.tolist()
        record = {"round": outcome.round, "observation": self.obs.to_dict(),
                  "cells_start": [list(c) for c in self.cells_start], "decision": decision.to_dict(),
                  "cells_end": [list(c) for c in cells], "outcome": outcome.to_dict(), "ros": self.round_ros}
        self.log.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.pub_metrics.publish(dumps({**outcome.to_dict(), "counters": decision.counters,
                                        "cells_end": [list(c) for c in cells], "ros": self.round_ros}))
        m = outcome.metrics
        self.node.get_logger().info(
            f"progress round {outcome.round + 1}/{cfg.rounds}: active={m['active']} attended={m['attended']} "
            f"cleared={m['cleared']} coverage={m['coverage']} net_reward={outcome.net_reward:.1f} "
            f"llm_calls={self.counters.get('llm_calls', 0)} fallbacks={self.counters.get('llm_fallbacks', 0)}")
        if len(self.outcomes) >= cfg.rounds:
            self._set_phase("done", now)
            self.finish()
            if not self.done.done():
                self.done.set_result(True)
        else:
            self.begin_round()

    # ------------------------------------------------------------------ recording
    def sample(self) -> None:
        if self.phase != "waiting" and self.summary is None:
            self.samples.append((self._now(), self.pos.copy(), self.targets.copy()))

    def publish_markers(self) -> None:
        cfg = self.cfg
        s = cfg.cell_size_m
        stamp = self.node.get_clock().now().to_msg()

        def marker(ns: str, mid: int, kind: int, **kw) -> Marker:
            m = Marker(ns=ns, id=mid, type=kind, action=Marker.ADD, **kw)
            m.header.frame_id, m.header.stamp = "world", stamp
            m.pose.orientation.w = 1.0
            return m

        clear = Marker(action=Marker.DELETEALL)
        clear.header.frame_id, clear.header.stamp = "world", stamp
        markers = [clear]
        lines = marker("grid", 0, Marker.LINE_LIST, color=ColorRGBA(r=0.6, g=0.6, b=0.6, a=0.6))
        lines.scale.x = 0.02 * s
        for x in range(cfg.width + 1):
            lines.points += [Point(x=x * s, y=0.0), Point(x=x * s, y=cfg.height * s)]
        for y in range(cfg.height + 1):
            lines.points += [Point(x=0.0, y=y * s), Point(x=cfg.width * s, y=y * s)]
        markers.append(lines)
        for d in self.env.active():
            cx, cy = cell_centre(d.cell, s)
            cube = marker("disasters", d.id, Marker.CUBE, color=severity_colour(d.severity))
            cube.pose.position.x, cube.pose.position.y = float(cx), float(cy)
            cube.pose.position.z = 0.05 * d.severity * s
            cube.scale.x = cube.scale.y = 0.9 * s
            cube.scale.z = 0.1 * d.severity * s
            label = marker("labels", d.id, Marker.TEXT_VIEW_FACING, text=f"{d.kind} s={d.severity}",
                           color=ColorRGBA(r=1.0, g=1.0, b=1.0, a=1.0))
            label.pose.position.x, label.pose.position.y = float(cx), float(cy)
            label.pose.position.z = 0.1 * d.severity * s + 0.3 * s
            label.scale.z = 0.3 * s
            markers += [cube, label]
        for i in range(self.n):
            if not np.isnan(self.pos[i]).any():
                ball = marker("drones", i, Marker.SPHERE, color=ColorRGBA(r=0.1, g=0.4, b=1.0, a=1.0))
                ball.pose.position.x, ball.pose.position.y = float(self.pos[i, 0]), float(self.pos[i, 1])
                ball.pose.position.z = 1.2 * s
                ball.scale.x = ball.scale.y = ball.scale.z = 0.3 * s
                markers.append(ball)
            if not np.isnan(self.targets[i]).any():
                pad = marker("targets", i, Marker.CUBE, color=ColorRGBA(r=0.1, g=0.4, b=1.0, a=0.3))
                pad.pose.position.x, pad.pose.position.y = float(self.targets[i, 0]), float(self.targets[i, 1])
                pad.scale.x = pad.scale.y = 0.5 * s
                pad.scale.z = 0.01 * s
                markers.append(pad)
        self.pub_markers.publish(MarkerArray(markers=markers))

    def finish(self) -> dict:
        """Write trajectories, summary and plot (once; also after Ctrl-C with the rounds completed so far)."""
        if self.summary is not None:
            return self.summary
        self.log.close()
        cfg, raw = self.cfg, self.raw_cfg
        if self.samples:
            t0 = self.samples[0][0]
            write_trajectories(self.out / "trajectories.csv", np.array([t - t0 for t, _, _ in self.samples]),
                               np.array([p for _, p, _ in self.samples]), np.array([g for _, _, g in self.samples]))
        summary = metrics.summarize(self.outcomes, self.env)
        summary.update(self.counters)
        elapsed = time.monotonic() - self.wall0
        summary.update(
            label=raw.baseline if raw.baseline != "none" else (
                cfg.mode if cfg.mode == "implicit" else f"explicit ({cfg.strategy})"),
            baseline=raw.baseline, planner=cfg.planner, mode=cfg.mode,
            strategy=cfg.strategy if cfg.mode == "explicit" else "", roles=cfg.roles, volatility=cfg.volatility,
            num_robots=cfg.num_robots, discussion_turns=cfg.discussion_turns, motion=cfg.motion, seed=cfg.seed,
            elapsed_s=round(elapsed, 3), rounds_per_s=round(len(self.outcomes) / elapsed, 3) if elapsed > 0 else None)
        summary.setdefault("llm_calls", 0)
        summary.setdefault("llm_fallbacks", 0)
        summary["llm_calls"] += self.ros_counters["late_llm_calls"]
        for key in ("phase_timeouts", "flight_timeouts", "late_replies", "late_llm_calls", "late_collectives",
                    "bad_messages", "replay_mismatches"):
            summary[key] = int(self.ros_counters[key])
        per_drone = [self.status.get(i, {}) for i in range(self.n)]
        ticks = sum(st.get("control", {}).get("ticks", 0) for st in per_drone)
        on_time = sum(st.get("control", {}).get("on_time", 0) for st in per_drone)
        summary.update(runtime="ros", per_drone=per_drone, aggregator=self.aggregator_status,
                       control_ticks=int(ticks), control_on_time_share=(on_time / ticks) if ticks else None,
                       stale_stops=int(sum(st.get("stale_stops", 0) for st in per_drone)))
        if len(self.outcomes) >= 1:
            title = (f"Disaster response through ROS 2: {summary['label']}, N={cfg.num_robots}, roles={cfg.roles}, "
                     f"volatility={cfg.volatility}, seed={cfg.seed}")
            plot_run(summary["series"], self.out / "coverage_deviation.png", title=title)
            summary["plots"] = ["coverage_deviation.png"]
        write_json(self.out / "summary.json", summary)
        self.summary = summary
        self.node.get_logger().info(
            f"done: {len(self.outcomes)} rounds, coverage_rate={summary['coverage_rate']} "
            f"net_reward={summary['net_reward']}; results in {self.out}")
        print(f"RESULTS {self.out.resolve()}", flush=True)
        return summary


def _body(_args: list[str]) -> None:
    node = Node("disaster_grid")
    grid = DisasterGrid(node)
    try:
        spin_node(node, "events", until=grid.done)
    finally:
        grid.finish()        # also on Ctrl-C: never lose the rounds completed


def main() -> int:
    return run_node(_body, "disaster_grid")
