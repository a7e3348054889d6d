"""``disaster_grid``: owns the disaster environment, runs the round clock over ROS and writes the run directory.

The node holds ``consensus.scenarios.disaster.environment.DisasterEnv`` (config and seed from the run's parameters)
and steps it once per round, exactly as ``consensus.scenarios.disaster.headless`` does headless::

    obs = env.begin_round()                      -> /disaster/state phase "discuss" (turn 0..K-1), then "decide"
    the drones discuss and decide over ROS       (drone nodes; explicit mode: the aggregator node)
    decision = rounds.run_round(recorded, ...)   the core's round assembly over the replies received
    flight                                       -> /disaster/state phase "flight" with every drone's cell
    cells = cells under the drones' odometry     (x, y) = (floor(px / s), floor(py / s)) clipped to the grid
                                                 (with collision avoidance: ``attended_cells``, below)
    outcome = env.end_round(cells, decision.actions)      -> /disaster/metrics, rounds.jsonl

The round protocol itself — phases, deadlines (``round_timeout_s``), timeouts of silent drones, late and malformed
records, the round assembly over the recorded replies, when the run is over — is
``consensus.scenarios.disaster.round_clock.RoundClock`` (see its module docstring). This node only does the I/O:
it feeds the clock the node-clock time (``use_sim_time`` works) every ``TICK_S`` and the records it receives, and
does what the clock answers (publish a state record, step the environment, set the flight targets, score the
round, write the results).

Flight: the drones always fly (P controller, ``v_max``); nobody is teleported. With ``motion: teleport`` — the
paper's "on its chosen cell at the round's end" — the node tells the clock the drones have arrived when every drone
is within ``metrics.ARRIVE_FRACTION`` of a cell of its chosen cell's centre; the clock ends the flight then, or at
its deadline (``round_clock.flight_deadline_s``: a counted flight timeout, and the round goes on with the drones
scored where they are).

Collision avoidance (``collision_avoidance``: ``auto`` is ``cbf`` in a ROS run, whatever the ``motion``: the ROS
drones always fly): every drone filters its command (``consensus.ros.robot``) with the positions of the ``nearby``
relay (``consensus.ros.nearby.NearbyRelay``), which this node hosts. The k drones sent to the same cell then take
k slots centred on its centre (``drone_control.fly_to_cell``; spacing d_min + ``packing_gap_m``, d_min the fleet's).
The node judges them by the radius of the cell's slots (``metrics.CellSlots``; it does not know which slot each drone
took): a drone within ``ARRIVE_FRACTION`` of a cell beyond its cell's farthest slot has arrived (teleport), and
within half a cell beyond it (at least ``arrival_radius(s / 2, k, d_min)``) it attends its chosen cell even when it
stands over a neighbour (``consensus.scenarios.disaster.headless.attended_cells``). When the k slots do not fit the
cell (more drones than the cell has room for: the paper's misallocation, more than M = 2 drones on a cell) the round
records the cell as ``[x, y, k]`` in ``ros.crowded_cells``; such drones still attend their cell, and one kept from
its slot by another cell's drones makes the flight time out at its deadline. The summary holds
``collision_avoidance``, ``clearance_m``, ``d_min_m``, ``min_pair_distance_m`` (from the sampled odometry),
``collision`` (the drones' filter counters summed, ``avoidance.sum_collision``) and ``crowded_cells`` (over the
run's flights).

Topics (``consensus.scenarios.disaster.ros.protocol.TOPICS``; the records are the dataclasses of that module, their
schemas in docs/disaster.md): ``/disaster/state`` (the round clock, ``StateRecord``; re-published every
``HEARTBEAT_S``), ``disaster/metrics`` (relative: the node lives in the root namespace; ``MetricsRecord`` per round:
``RoundOutcome.to_dict()`` plus ``counters``, ``cells_end``, ``ros``),
``disaster/markers`` (visualization_msgs/MarkerArray, frame ``world``, 2 Hz: namespace ``grid`` = the cell
lines, ``disasters`` = one cube per active disaster coloured yellow (severity 1) to red (10) and as tall as its
severity, ``labels`` = kind and severity, ``drones`` = a sphere per drone at its odometry, ``targets`` = a flat
square on each drone's chosen cell). Inputs: ``/robot_<i>/odom`` (nav_msgs/Odometry), ``/robot_<i>/planner/status``
(readiness, per-drone counters), ``/disaster/discussion``, ``/disaster/decisions``, ``/disaster/collective``,
``/disaster/aggregator/status``, ``/health``. A record that does not decode is a counted bad message of the node.

Start: the node reports the team ready when every drone reports a position and a status past ``waiting`` (and, in
explicit mode, the aggregator is up); the clock then begins round 0 (or without them after its start timeout).
End: when the clock says the run is done, the run directory is written and the node exits (which ends the run).
Ctrl-C writes what was completed.

Run directory (with ``consensus.runs.processes.prepare_run``, same layout as headless):
``manifest.json``, ``params.yaml``, ``rounds.jsonl`` (one line per round, the headless record plus ``ros``: phase
durations, timeouts, positions), ``transcripts.jsonl`` (the drones' and aggregator's LLM clients),
``trajectories.csv`` (odometry at ``SAMPLE_HZ``, targets = chosen cell centres), ``summary.json``
(``metrics.summarize`` + the round counters + settings, as headless; plus ``per_drone`` status, control timing,
the clock's counters: timeouts, late replies, bad messages, replay mismatches), ``coverage_deviation.png/.svg``.
"""
from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path

import numpy as np
import rclpy
import rclpy.task
from geometry_msgs.msg import Point
from nav_msgs.msg import Odometry
from rclpy.node import Node
from std_msgs.msg import ColorRGBA, String
from visualization_msgs.msg import Marker, MarkerArray

from consensus.robots.map import fleet_avoidance
from consensus.metrics.convergence import min_pair_distance_series
from consensus.ros.nearby import NearbyRelay
from consensus.scenarios.disaster import metrics
from consensus.scenarios.disaster.environment import DisasterEnv
from consensus.scenarios.disaster.plots import plot_run
from consensus.scenarios.disaster.round_clock import COUNTERS, RoundClock, Step
from consensus.ros import qos
from consensus import names
from consensus.scenarios.disaster.ros.agent import HEARTBEAT_S, declare_disaster_config, message, reply_from_dict
from consensus.scenarios.disaster.ros import protocol
from consensus.scenarios.disaster.ros.protocol import (AggregatorStatusRecord, CollectiveRecord, DecisionRecord,
                                                       DiscussionRecord, MetricsRecord, StateRecord)
from consensus.ros.records import HealthRecord, Record, RecordError, StatusRecord
from consensus.ros.health import HEALTH, Health, guarded, publish_health
from consensus.ros.supervisor import RunEnd, fleet_figures
from consensus.ros.inputs import read_xy
from consensus.ros.process import node_main
from consensus.scenarios.disaster.environment import cell_centre
from consensus.scenarios.disaster.headless import attended_cells, start_cells
from consensus.scenarios.disaster.drone_control import controller_config
from consensus.runs.rundir import default_run_dir, write_manifest, write_trajectories

SAMPLE_HZ = 5.0
TICK_S = 0.05




def severity_colour(severity: int) -> ColorRGBA:
    s = min(max(severity, 1), 10)
    return ColorRGBA(r=1.0, g=float(1.0 - (s - 1) / 9.0), b=0.0, a=0.85)


#: the fields the grid reads (its parameters, ``declare_config(uses=...)``): the run's, the team's (baseline, mode,
#: strategy and the rest its round clock and summary read), the environment's, the flights' (cells, motion, deadlines)
#: and those of the controller settings its nearby relay and cell slots need (``drone_control.controller_config``); the
#: others reach its manifest from the parameters file without being its parameters
USES = ("num_robots", "seed", "output_dir", "executor", "single_process", "planner", "baseline", "mode", "strategy",
        "roles",
        "volatility", "discussion_turns", "max_agreement_turns", "rounds", "round_timeout_s", "width", "height",
        "max_active", "p_new", "initial_disasters", "containment_per_drone", "alpha", "beta",
        "misallocation_threshold", "misallocation_cost", "misallocation", "high_severity", "report_noise", "motion",
        "cell_size_m", "round_time_s", "flight_time_factor", "flight_slack_s", "control_period_s", "kinematics",
        "v_max", "w_max", "collision_avoidance", "footprint_radius_m", "safety_margin_m", "cbf_gamma",
        "packing_gap_m")


class DisasterGrid:
    def __init__(self, node: Node) -> None:
        self.node = node
        raw = declare_disaster_config(node, USES)
        self.raw_cfg = raw
        self.cfg = cfg = raw.resolved()
        self.n = cfg.num_robots
        self.out = Path(cfg.output_dir) if cfg.output_dir else default_run_dir("disaster")
        self.out.mkdir(parents=True, exist_ok=True)
        if not (self.out / "manifest.json").exists():
            write_manifest(self.out, scenario="disaster", config=raw.to_dict(), seed=raw.seed,
                           **raw.manifest_llm(), mode="ros")
        self.env = DisasterEnv(cfg.env_config(), seed=cfg.seed)
        self.pos = np.full((self.n, 2), np.nan)
        self.targets = np.full((self.n, 2), np.nan)
        self.goals: list | None = None       # every drone's chosen cell of the last flight (at first: its start)
        self.arrive_radii: list[float] | None = None    # with the filter: per drone, CellSlots.arrive_radius
        self.attend_radii: list[float] | None = None    # with the filter: per drone, CellSlots.attend_radius
        self.crowded: list[list[int]] = []              # the flight's cells whose slots do not fit: [x, y, k]
        self.crowded_cells = 0                          # summed over the run's flights
        self.status: dict[int, dict] = {}
        self.aggregator_status: dict | None = None
        self.clock = RoundClock(cfg, self._now(), parse_reply=partial(reply_from_dict, width=cfg.width,
                                                                      height=cfg.height))
        self.outcomes: list = []
        self.log = (self.out / "rounds.jsonl").open("w", buffering=1)
        self.samples: list[tuple[float, np.ndarray, np.ndarray]] = []
        self.done = rclpy.task.Future()
        self.end = RunEnd(node, self.out)               # the run's end, once (consensus.ros.supervisor)
        self.wall0 = time.monotonic()
        self.health = Health(parent=HEALTH, logger=node.get_logger())
        self.node_health: dict[str, dict] = {}       # newest /health record of every other node

        for i in range(self.n):
            node.create_subscription(Odometry, names.ODOM.of(i),
                                     guarded(self._on_odom(i), "grid.odom", self.health), qos.profile(names.ODOM),
                                     raw=True)
            node.create_subscription(String, names.PLANNER_STATUS.of(i),
                                     guarded(self._on_status, "grid.status", self.health),
                                     qos.profile(names.PLANNER_STATUS))
        ns = node.get_namespace()  # the run's shared channels sit under its namespace (names.Topic.in_run)
        for topic, callback, what in ((protocol.DISASTER_DISCUSSION, self._on_discussion, "grid.discussion"),
                                      (protocol.DISASTER_DECISIONS, self._on_decision, "grid.decision"),
                                      (protocol.DISASTER_COLLECTIVE, self._on_collective, "grid.collective"),
                                      (protocol.DISASTER_AGGREGATOR_STATUS, self._on_aggregator, "grid.aggregator")):
            node.create_subscription(String, topic.in_run(ns), guarded(callback, what, self.health), qos.profile(topic))
        node.create_subscription(String, names.HEALTH.name, guarded(self._on_health, "grid.health", self.health),
                                 qos.profile(names.HEALTH))
        publish_health(node, self.health)
        base, _ = controller_config(raw)
        self.avoid = fleet_avoidance(base, ros=True)
        self.d_min = None if self.avoid is None else self.avoid.d_min_m
        self.slots = (None if self.avoid is None
                      else metrics.CellSlots(cfg.cell_size_m, self.avoid, base.packing_gap_m, base.workspace))
        self._set_goals(start_cells(cfg))
        self.nearby = NearbyRelay(node, base, self.health) if self.avoid is not None else None
        self.pub_state = node.create_publisher(String, protocol.DISASTER_STATE.in_run(ns),
                                               qos.profile(protocol.DISASTER_STATE))
        self.pub_metrics = node.create_publisher(String, protocol.DISASTER_METRICS.in_run(ns),
                                                 qos.profile(protocol.DISASTER_METRICS))
        self.pub_markers = node.create_publisher(MarkerArray, protocol.DISASTER_MARKERS.in_run(ns),
                                                 qos.profile(protocol.DISASTER_MARKERS))
        node.create_timer(TICK_S, guarded(self.tick, "grid.tick", self.health))
        node.create_timer(1.0 / SAMPLE_HZ, guarded(self.sample, "grid.sample", self.health))
        node.create_timer(0.5, guarded(self.publish_markers, "grid.markers", self.health))
        node.create_timer(HEARTBEAT_S, guarded(self._publish_state, "grid.heartbeat", self.health))
        self._publish_state()                                  # phase "waiting"

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    # ------------------------------------------------------------------ inputs
    def _on_odom(self, i: int):
        def cb(raw: bytes) -> None:
            p = read_xy(raw, Odometry, self.health, "grid.odom")
            if p is not None:
                self.pos[i] = p
        return cb

    def _on_status(self, msg: String) -> None:
        st = self._decoded(StatusRecord, msg, "grid.status")
        drone = None if st is None else st.extra.get("drone")
        if isinstance(drone, int) and not isinstance(drone, bool) and 0 <= drone < self.n:
            self.status[drone] = st.to_dict()
        elif st is not None:
            self.health.count_bad_message("grid.status")

    def _on_aggregator(self, msg: String) -> None:
        st = self._decoded(AggregatorStatusRecord, msg, "grid.aggregator")
        if st is not None:
            self.aggregator_status = st.to_dict()

    def _on_health(self, msg: String) -> None:
        rec = self._decoded(HealthRecord, msg, "grid.health")
        if rec is not None and rec.node != self.node.get_fully_qualified_name():   # its own counts: read directly
            self.node_health[rec.node] = rec.to_dict()

    def _decoded(self, cls: type[Record], msg: String, what: str):
        """The record ``cls`` in ``msg``; None, counted as a bad message of input ``what``, when it does not
        decode (what decodes but does not fit the round, e.g. a drone index off the team, the clock counts)."""
        try:
            return cls.decode(msg.data)
        except RecordError as exc:
            self.health.count_bad_message(what)
            self.node.get_logger().warning(f"bad message ({what}): {exc}")
            return None

    def _on_discussion(self, msg: String) -> None:
        rec = self._decoded(DiscussionRecord, msg, "grid.discussion")
        if rec is not None:
            self.clock.on_discussion(rec.to_dict())

    def _on_decision(self, msg: String) -> None:
        rec = self._decoded(DecisionRecord, msg, "grid.decision")
        if rec is not None:
            self.clock.on_decision(rec.to_dict())

    def _on_collective(self, msg: String) -> None:
        rec = self._decoded(CollectiveRecord, msg, "grid.collective")
        if rec is not None:
            self.clock.on_collective(rec.to_dict())

    # ------------------------------------------------------------------ the round clock
    def tick(self) -> None:
        now = self._now()
        self._do(self.clock.tick(now, ready=self._ready(), arrived=self._arrived()), now)

    def _ready(self) -> bool:
        drones = all(self.status.get(i, {}).get("state", "waiting") != "waiting" for i in range(self.n))
        odom = not np.isnan(self.pos).any()
        return drones and odom and (self.cfg.mode != "explicit" or self.aggregator_status is not None)

    def _set_goals(self, goals: list) -> None:
        """Every drone's chosen cell, and with the filter how close to its centre it arrives and attends it."""
        self.goals = [tuple(c) for c in goals]
        if self.slots is not None:
            self.arrive_radii, self.attend_radii = self.slots.radii(self.goals)

    def _arrived(self) -> bool:
        """Is every drone within ARRIVE_FRACTION of a cell of its chosen cell's centre (with the filter: of its
        cell's farthest slot, ``CellSlots.arrive_radius``)?"""
        if np.isnan(self.pos).any() or np.isnan(self.targets).any():
            return False
        dist = np.linalg.norm(self.pos - self.targets, axis=1)
        if self.arrive_radii is None:
            return bool((dist <= metrics.ARRIVE_FRACTION * self.cfg.cell_size_m).all())
        return bool((dist <= np.asarray(self.arrive_radii)).all())

    def _cells(self) -> list[tuple[int, int]]:
        """The cell every drone attends now (a silent drone counts at cell (0, 0))."""
        return attended_cells(np.nan_to_num(self.pos), self.goals, self.cfg, self.d_min, self.attend_radii)

    def _do(self, step: Step | None, now: float) -> None:
        """Do what the clock answered (the fields of ``Step`` in their order)."""
        if step is None:
            return
        if step.mismatch is not None:
            self.node.get_logger().error(f"round {self.clock.obs.round}: the aggregator decided {step.mismatch[0]}, "
                                         f"the recorded votes give {step.mismatch[1]}")
        if step.decision is not None:
            self.targets = np.array([cell_centre(c, self.cfg.cell_size_m) for c in step.decision.actions])
            self._set_goals(step.decision.actions)
            self.crowded = [] if self.slots is None else self.slots.crowded(self.goals)
            self.crowded_cells += len(self.crowded)
        if step.state is not None:
            self._publish_state()
        if step.begin_round:
            if step.late_start:
                self.node.get_logger().warning("not every drone reported in time; starting anyway")
            self.begin_round()
        if step.end_round:
            self.end_round(now)
        if step.done:
            self.finish()
            if not self.done.done():
                self.done.set_result(True)

    def _publish_state(self) -> None:
        """Publish the current phase (also every HEARTBEAT_S: the drones' sign that the round clock is alive)."""
        self.pub_state.publish(message(StateRecord.from_dict(self.clock.state)))

    def begin_round(self) -> None:
        now = self._now()
        obs = self.env.begin_round()
        cells = self._cells()
        self._do(self.clock.begin_round(now, obs, cells, record={"positions_start": self.pos.tolist()}), now)

    def end_round(self, now: float) -> None:
        cfg, clock = self.cfg, self.clock
        cells = self._cells()
        decision = clock.decision
        outcome = self.env.end_round(cells, decision.actions)
        self.outcomes.append(outcome)
        extra = {"crowded_cells": self.crowded} if self.crowded else {}
        step = clock.complete_round(now, record={"positions_end": self.pos.tolist(), **extra})
        record = {"round": outcome.round, "observation": clock.obs.to_dict(),
                  "cells_start": [list(c) for c in clock.cells], "decision": decision.to_dict(),
                  "cells_end": [list(c) for c in cells], "outcome": outcome.to_dict(), "ros": clock.record}
        self.log.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.pub_metrics.publish(message(MetricsRecord.from_dict({
            **outcome.to_dict(), "counters": decision.counters, "cells_end": [list(c) for c in cells],
            "ros": clock.record})))
        m, totals = outcome.metrics, clock.round_counters
        coverage = "n/a" if m["coverage"] is None else f"{m['coverage']:.3f}"
        self.node.get_logger().info(
            f"progress round {outcome.round + 1}/{cfg.rounds}: active={m['active']} attended={m['attended']} "
            f"cleared={m['cleared']} coverage={coverage} net_reward={outcome.net_reward:.1f} "
            f"llm_calls={totals.get('llm_calls', 0)} fallbacks={totals.get('llm_fallbacks', 0)}")
        self._do(step, now)

    # ------------------------------------------------------------------ recording
    def sample(self) -> None:
        if self.clock.phase != "waiting" and not self.end.done:
            self.samples.append((self._now(), self.pos.copy(), self.targets.copy()))

    def publish_markers(self) -> None:
        cfg = self.cfg
        s = cfg.cell_size_m
        stamp = self.node.get_clock().now().to_msg()

        def marker(ns: str, mid: int, kind: int, **kw) -> Marker:
            m = Marker(ns=ns, id=mid, type=kind, action=Marker.ADD, **kw)
            m.header.frame_id, m.header.stamp = names.WORLD_FRAME, stamp
            m.pose.orientation.w = 1.0
            return m

        clear = Marker(action=Marker.DELETEALL)
        clear.header.frame_id, clear.header.stamp = names.WORLD_FRAME, stamp
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

    def _min_pair_distance(self) -> float | None:
        """The closest two drones came, from the samples."""
        pos = np.array([p for _, p, _ in self.samples]) if self.samples else np.empty((0, self.n, 2))
        mins = min_pair_distance_series(pos) if len(pos) else np.empty(0)
        return float(np.nanmin(mins)) if np.isfinite(mins).any() else None

    def finish(self) -> dict:
        """Write trajectories, summary and plot (once; also after Ctrl-C with the rounds completed so far): the run's
        end (``consensus.ros.supervisor.RunEnd``) with this scenario's judgement."""
        return self.end.conclude(self._judge)

    def _judge(self) -> tuple[dict, str]:
        self.log.close()
        cfg, raw = self.cfg, self.raw_cfg
        if self.samples:
            t0 = self.samples[0][0]
            write_trajectories(self.out / "trajectories.csv", np.array([t - t0 for t, _, _ in self.samples]),
                               np.array([p for _, p, _ in self.samples]), np.array([g for _, _, g in self.samples]))
        summary = metrics.summarize(self.outcomes, self.env.all_disasters(), self.env.round)
        summary.update(self.clock.round_counters)
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
        summary["llm_calls"] += self.clock.counters["late_llm_calls"]
        for key in COUNTERS:
            summary[key] = int(self.clock.counters[key])
        per_drone = [self.status.get(i, {}) for i in range(self.n)]
        # the fleet's figures (consensus.ros.supervisor): callback errors and dropped inputs of the whole run (drones'
        # status, other nodes' /health, the grid), positions refused as implausible, stale stops, the filter's
        # counters; the aggregator is counted by its /health record only
        summary.update(fleet_figures(per_drone, self.node_health.values(), self.health, "grid", self.avoid))
        summary["bad_messages"] += int(self.clock.counters["bad_messages"])    # the records the round clock refused
        summary["min_pair_distance_m"] = self._min_pair_distance()
        if self.avoid is not None:
            summary["crowded_cells"] = self.crowded_cells
        summary.update(runtime="ros", per_drone=per_drone, aggregator=self.aggregator_status)
        if len(self.outcomes) >= 1:
            title = (f"Disaster response through ROS 2: {summary['label']}, N={cfg.num_robots}, roles={cfg.roles}, "
                     f"volatility={cfg.volatility}, seed={cfg.seed}")
            plot_run(summary["series"], self.out / "coverage_deviation.png", title=title)
            summary["plots"] = ["coverage_deviation.png"]
        return summary, (f"{len(self.outcomes)} rounds, coverage_rate={summary['coverage_rate']} "
                         f"net_reward={summary['net_reward']}")


def main() -> int:
    return node_main("disaster_grid", DisasterGrid)
