"""``naming_matchmaker``: the matchmaker of the naming-game fleet. It announces the pairs, collects the two words,
publishes the outcomes and ends the run. The protocol is ``ros/protocol.py``.

The pairs come from ``fleet_game.PairSchedule`` and convergence from ``fleet_game.Tally``, as in
``fleet_game.play_headless``.
The matchmaker draws no word: the robots do. Phases:

* ``waiting``: until every robot's ``planner/status`` reports a position (at most ``READY_TIMEOUT_S``, else the run
  fails);
* ``playing``: one pair every ``interaction_period_s`` (the next one no earlier than the outcome of the last). An
  interaction whose words are not all in by its deadline (``answer_timeout_s``) is skipped and counted in
  ``timeouts`` for each robot that did not answer. At the end of every population round the tally is checked, and
  the game ends on convergence or after ``max_population_rounds`` rounds;
* ``arriving``: until every robot that has played is within its arrival radius of its point, by the positions
  in the robots' status, or ``arrival_timeout_s`` has passed. The radius is ``arrival_tolerance_m``; with collision
  avoidance it is ``arrival_radius`` (``consensus.metrics.convergence``): at least ``packing_radius(k, d_min)`` for
  the k robots whose last word names the same point (robots kept ``d_min`` apart pack around it);
* ``done``: writes ``summary.json``, prints ``RESULTS <dir>`` and exits.

``interactions.jsonl`` grows by one line per interaction as the game goes.

Collision avoidance (``collision_avoidance``: ``auto`` is ``cbf`` in a ROS run): every robot filters its command
(``consensus.ros.robot``) with the positions of the ``nearby`` relay (``consensus.ros.nearby.NearbyRelay``), which
this node hosts. ``d_min`` is the fleet's (``consensus.robots.map.fleet_avoidance``: footprints and margin, the
distance kept at rest; moving robots add each relayed position's age times their closing speed). The summary holds
``collision_avoidance``, ``clearance_m``, ``d_min_m``,
``collision`` (the robots' filter counters summed, ``avoidance.sum_collision``) and each robot's
``arrival_radius_m``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import numpy as np
import rclpy.task
from rclpy.node import Node
from std_msgs.msg import String

from consensus.metrics.convergence import arrival_radius
from consensus.robots.map import fleet_avoidance
from consensus.ros.nearby import NearbyRelay
from consensus.ros import qos
from consensus import names
from consensus.ros.health import guarded_record, HEALTH, Health, guarded, publish_health
from consensus.ros.supervisor import RunEnd, fleet_figures
from consensus.ros.process import node_main
from consensus.runs.rundir import default_run_dir, write_manifest
from consensus.scenarios.naming_game.fleet_game import (PairSchedule, Tally, controller_config, fleet_policy,
                                                    game_summary, interaction_record, play_headless, sequence)
from consensus.ros.records import HealthRecord, StatusRecord
from consensus.scenarios.naming_game.ros import protocol
from consensus.scenarios.naming_game.ros.protocol import (STATUS_PERIOD_S, GameStatusRecord, OutcomeRecord, PairRecord,
                                                          declare_game_config, message, parse_word)


TICK_S = 0.05
READY_TIMEOUT_S = 60.0

#: the fields the matchmaker reads (its parameters, ``declare_config(uses=...)``): the game's rules and timing, the
#: policy (the reference game it compares with) and those of the controller settings its nearby relay and arrival
#: radii need (``fleet_game.controller_config``); the others reach its manifest from the parameters file
USES = ("num_robots", "seed", "output_dir", "executor", "single_process", "memory", "words", "policy", "rendezvous",
        "max_population_rounds", "threshold", "window_factor", "interaction_period_s", "answer_timeout_s",
        "arrival_tolerance_m", "arrival_timeout_s", "control_period_s", "kinematics", "v_max", "w_max",
        "collision_avoidance", "footprint_radius_m", "safety_margin_m", "cbf_gamma")


class Matchmaker:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.cfg = cfg = declare_game_config(node, uses=USES)
        self.policy = fleet_policy(cfg)
        self.n = cfg.num_robots
        self.points = cfg.points()
        self.out = Path(cfg.output_dir) if cfg.output_dir else default_run_dir("naming_game")
        self.out.mkdir(parents=True, exist_ok=True)
        if not (self.out / "manifest.json").exists():
            write_manifest(self.out, scenario="naming_game", config=cfg.to_dict(), seed=cfg.seed, backend="none",
                           model="", mode="ros")
        self.schedule = PairSchedule(cfg.seed, self.n)
        self.tally = Tally(self.n, cfg.threshold, cfg.window_factor)
        self.played = [0] * self.n                # interactions each robot has played
        self.words: list[int | None] = [None] * self.n   # each robot's last word (its point)
        self.timeouts = [0] * self.n
        self.records: list[dict] = []
        self.current: dict | None = None
        self.phase = "waiting"
        self.round = 0
        self.next_at = 0.0
        self.phase_since = self._now()
        self.robot_status: dict[int, dict] = {}
        self.node_health: dict[str, dict] = {}
        self.counters = {"late_words": 0}
        self.health = Health(parent=HEALTH, logger=node.get_logger())
        self.wall0 = time.monotonic()
        self.log = (self.out / "interactions.jsonl").open("w", buffering=1)
        self.done = rclpy.task.Future()
        self.error = ""                            # why the run failed before the game started
        self.end = RunEnd(node, self.out)               # the run's end, once (consensus.ros.supervisor)

        for i in range(self.n):
            node.create_subscription(String, names.PLANNER_STATUS.of(i),
                                     self._guard(self._on_robot_status, "robot_status"),
                                     qos.profile(names.PLANNER_STATUS))
        ns = node.get_namespace()  # the run's shared channels sit under its namespace (names.Topic.in_run)
        node.create_subscription(String, protocol.NAMING_GAME_WORDS.in_run(ns), self._guard(self._on_word, "words"),
                                 qos.profile(protocol.NAMING_GAME_WORDS))
        node.create_subscription(String, names.HEALTH.name, self._guard(self._on_health, "health"),
                                 qos.profile(names.HEALTH))
        self.pub_pair, self.pub_outcome, self.pub_status = (
            node.create_publisher(String, topic.in_run(ns), qos.profile(topic))
            for topic in (protocol.NAMING_GAME_PAIRS, protocol.NAMING_GAME_OUTCOMES, protocol.NAMING_GAME_STATUS))
        publish_health(node, self.health)
        base, _ = controller_config(cfg)
        self.avoid = fleet_avoidance(base, ros=True)
        self.nearby = NearbyRelay(node, base, self.health) if self.avoid is not None else None
        node.create_timer(TICK_S, guarded(self.tick, "matchmaker.tick", self.health))
        node.create_timer(STATUS_PERIOD_S, guarded(self.publish_status, "matchmaker.status", self.health))

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _guard(self, fn: Callable[[String], None], what: str) -> Callable[[String], None]:
        return guarded_record(fn, f"matchmaker.{what}", self.health)

    # ------------------------------------------------------------------ inputs
    def _on_robot_status(self, msg: String) -> None:
        st = StatusRecord.decode(msg.data)
        if not 0 <= st.robot < self.n:
            raise ValueError(f"status of robot {st.robot!r}")
        self.robot_status[st.robot] = st.to_dict()

    def _on_health(self, msg: String) -> None:
        rec = HealthRecord.decode(msg.data)
        if rec.node != self.node.get_fully_qualified_name():     # its own counts are read directly
            self.node_health[rec.node] = rec.to_dict()

    def _on_word(self, msg: String) -> None:
        rec = parse_word(msg.data, self.n)
        cur = self.current
        if cur is None or rec.interaction != cur["interaction"]:
            self.counters["late_words"] += 1       # an interaction already resolved (or a replayed history)
            return
        robot = rec.robot
        if robot not in (cur["i"], cur["j"]):
            raise ValueError(f"robot {robot} answered interaction {cur['interaction']} of {cur['i']} and {cur['j']}")
        if robot in cur["words"]:
            if cur["words"][robot] != rec.word:
                raise ValueError(f"robot {robot} changed its word in interaction {cur['interaction']}")
            return
        cur["words"][robot] = rec.word
        cur["states"][robot] = rec.state
        if len(cur["words"]) == 2:
            self._resolve()

    # ------------------------------------------------------------------ the game
    def tick(self) -> None:
        now = self._now()
        if self.phase == "waiting":
            ready = [i for i in range(self.n) if self.robot_status.get(i, {}).get("position") is not None]
            if len(ready) == self.n:
                self._enter("playing")
                self.node.get_logger().info(f"progress: all {self.n} robots up, the game starts")
            elif time.monotonic() - self.wall0 > READY_TIMEOUT_S and not self.done.done():
                missing = sorted(set(range(self.n)) - set(ready))
                self.error = f"robots {missing} did not report a position within {READY_TIMEOUT_S:.0f} s"
                self.done.set_result(False)
        elif self.phase == "playing":
            if self.current is not None and now > self.current["deadline"]:
                self._resolve()
            if self.current is None and now >= self.next_at:
                self._announce(now)
        elif self.phase == "arriving":
            if self._all_arrived() or now - self.phase_since > self.cfg.arrival_timeout_s:
                self._enter("done")
                self.finish()
                self.done.set_result(True)

    def _enter(self, phase: str) -> None:
        self.phase = phase
        self.phase_since = self._now()
        self.publish_status()

    def _announce(self, now: float) -> None:
        k = self.schedule.k
        i, j = self.schedule.next()
        self.round = k // self.n + 1
        deadline = now + self.cfg.answer_timeout_s
        self.current = {"interaction": k, "round": self.round, "i": i, "j": j, "deadline": deadline, "words": {},
                        "states": {}}
        self.next_at = now + self.cfg.interaction_period_s
        self.pub_pair.publish(message(PairRecord(interaction=k, round=self.round, i=i, j=j, played_i=self.played[i],
                                                 played_j=self.played[j], deadline=deadline, stamp=now)))

    def _resolve(self) -> None:
        cur, self.current = self.current, None
        k, t, i, j = cur["interaction"], cur["round"], cur["i"], cur["j"]
        words, states = cur["words"], cur["states"]
        missing = [r for r in (i, j) if r not in words]
        now = self._now()
        if missing:
            for r in missing:
                self.timeouts[r] += 1
            rec = {"round": t, "interaction": k, "i": i, "j": j, "state_i": states.get(i), "state_j": states.get(j),
                   "word_i": None, "word_j": None, "success": False}
            self.node.get_logger().warning(f"interaction {k}: no word from robot(s) {missing} by the deadline; "
                                           "skipped")
        else:
            a, b = words[i], words[j]
            rec = interaction_record(t, k, i, j, states[i], states[j], a, b, self.points)
            self.tally.add(a, b)
            self.played[i] += 1
            self.played[j] += 1
            self.words[i], self.words[j] = a, b
        rec.update(skipped=bool(missing), missing=missing, stamp=now)
        self.records.append(rec)
        self.log.write(json.dumps(rec) + "\n")
        self.pub_outcome.publish(message(OutcomeRecord(
            interaction=k, round=t, i=i, j=j, word_i=rec["word_i"], word_j=rec["word_j"], success=rec["success"],
            skipped=bool(missing), missing=missing, stamp=now)))
        if (k + 1) % self.n == 0:
            converged = self.tally.end_round(t)
            self.node.get_logger().info(f"progress: round {t}/{self.cfg.max_population_rounds}, "
                                        f"{self.tally.window_successes()} of the last {len(self.tally.ring)} played "
                                        f"interactions succeeded")
            if converged or t >= self.cfg.max_population_rounds:
                self._enter("arriving")

    # ------------------------------------------------------------------ the end
    def _position(self, robot: int) -> np.ndarray | None:
        pos = self.robot_status.get(robot, {}).get("position")
        return None if pos is None else np.asarray(pos, dtype=float)

    def _distance(self, robot: int) -> float | None:
        word, pos = self.words[robot], self._position(robot)
        if word is None or pos is None:
            return None
        return float(np.linalg.norm(pos - self.points[word]))

    def _radius(self, robot: int) -> float:
        """How close robot ``robot`` must come to its point (module docstring)."""
        k = sum(w == self.words[robot] for w in self.words)
        return arrival_radius(self.cfg.arrival_tolerance_m, k, None if self.avoid is None else self.avoid.d_min_m)

    def _all_arrived(self) -> bool:
        for r in range(self.n):
            if self.words[r] is None:
                continue
            d = self._distance(r)
            if d is None or d > self._radius(r):
                return False
        return True

    def publish_status(self) -> None:
        self.pub_status.publish(message(GameStatusRecord(
            phase=self.phase, round=self.round, interactions=len(self.records), played=self.tally.played,
            skipped=sum(r["skipped"] for r in self.records), successes=self.tally.successes,
            converged=self.tally.converged, word=self.tally.word, stamp=self._now())))

    def finish(self) -> dict:
        """Write summary.json (once; also after an interrupted run) and print ``RESULTS <dir>``: the run's end
        (``consensus.ros.supervisor.RunEnd``) with this scenario's judgement; nothing before the game started
        (``error`` then says why)."""
        if self.phase == "waiting" and not self.end.done:
            return {}
        return self.end.conclude(self._judge)

    def _judge(self) -> tuple[dict, str]:
        self.log.close()
        cfg = self.cfg
        summary = game_summary(cfg, self.tally, self.round, len(self.records))
        reference = play_headless(cfg, self.policy)
        ros_seq, ref_seq = sequence([r for r in self.records if not r["skipped"]]), sequence(reference.records)
        mismatch = next((k for k, (a, b) in enumerate(zip(ros_seq, ref_seq)) if a != b), None)
        if mismatch is None and len(ros_seq) != len(ref_seq):
            mismatch = min(len(ros_seq), len(ref_seq))
        robots = []
        for r in range(self.n):
            st = self.robot_status.get(r, {})
            d = self._distance(r)
            robots.append({"robot": r, "word": self.words[r], "played": self.played[r], "timeouts": self.timeouts[r],
                           "point": None if self.words[r] is None else [float(v) for v in self.points[self.words[r]]],
                           "position": st.get("position"), "target": st.get("target"), "memory": st.get("memory"),
                           "distance": d, "arrival_radius_m": self._radius(r),
                           "arrived": d is not None and d <= self._radius(r)})
        per_robot = [self.robot_status.get(r, {}) for r in range(self.n)]
        words = self.policy.words
        summary.update(
            scenario="naming_game", runtime="ros", words=list(words), rendezvous=[[float(v) for v in p]
                                                                                  for p in self.points],
            word_name=words[self.tally.word] if self.tally.converged else None,
            skipped=sum(r["skipped"] for r in self.records), timeouts=self.timeouts,
            late_words=self.counters["late_words"], reference_match=mismatch is None, first_mismatch=mismatch,
            reference=reference.summary, robots=robots,
            arrived=all(rec["arrived"] for rec in robots if rec["word"] is not None),
            interaction_period_s=cfg.interaction_period_s, elapsed_s=round(time.monotonic() - self.wall0, 3))
        # the fleet's figures (consensus.ros.supervisor): health, implausible positions, stale stops, the filter
        summary.update(fleet_figures(per_robot, self.node_health.values(), self.health, "matchmaker", self.avoid))
        verdict = (f"converged on word {summary['word']} ({summary['word_name']}) at round {summary['consensus_time']}"
                   if self.tally.converged else f"not converged after {self.round} rounds")
        return summary, (f"{verdict}; {len(self.records)} interactions, {summary['skipped']} skipped, reference "
                         f"match {summary['reference_match']}")


def main() -> int:
    return node_main("matchmaker", Matchmaker)
