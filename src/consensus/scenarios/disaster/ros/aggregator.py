"""``aggregator``: the explicit-consensus vote of the disaster drones (paper 2 eq. 1, paper 3's architectures).

When the round clock (``/disaster/state``) enters ``decide`` in explicit mode, a worker thread runs the core's
``consensus.scenarios.disaster.rounds.explicit_decision(proxies, obs, cells, heard, strategy, coordinator=...,
max_turns=max_agreement_turns)`` — i.e. ``consensus.decision.decide`` — exactly as the headless round does,
with ``RemoteDrone`` proxies in place of the drones: a proxy's ``propose(ctx)`` publishes a vote request on
``/robot_<i>/disaster/vote_request`` (``VoteRequestRecord``) and waits for the drone's answer on ``/disaster/votes``
(``VoteRecord``; the records are ``consensus.scenarios.disaster.ros.protocol``'s, their schemas in
docs/disaster.md); the agents of one voting turn are asked in parallel (``map_fn`` = a thread pool's ``map``). A
drone that does not answer within ``round_timeout_s`` gives a failed vote (``None`` to the aggregation, a ``timeout``
fallback reply in the log). The spoke & wheel coordinator is the core's
(``make_coordinator``: the LLM coordinator for LLM teams, with its own client recording to the run's
transcripts, else the heuristic one) and runs here.

The result goes to the grid on ``/disaster/collective`` (``CollectiveRecord``), the node's status on
``/disaster/aggregator/status`` every second (``AggregatorStatusRecord``).

Health: a malformed ``/disaster/state`` record, a vote that does not decode (``VoteRecord``) and a vote whose reply is
malformed (e.g. an action off the grid; it becomes a ``bad_message`` fallback reply) are counted in the node's
``consensus.ros.health.Health`` (``bad_messages``), every other exception of a callback in ``callback_errors``; the
node's health record goes out on ``/health`` every second (``consensus.ros.health.publish_health``) and the same two
counts are in its status.
"""
from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from rclpy.node import Node
from std_msgs.msg import String

from consensus.decision import ProposeContext
from consensus.scenarios.disaster.rounds import explicit_decision
from consensus.llm.from_config import client_from_config
from consensus.scenarios.disaster.agents import DroneReply, make_coordinator
from consensus.scenarios.disaster.prompts import role_for
from consensus.ros import qos
from consensus.scenarios.disaster.round_clock import cell_list, timeout_reply
from consensus.scenarios.disaster.ros.agent import (cell_or_none, context_to_dict, declare_disaster_config,
                                                    inbox_from_dict, message, observation_from_dict, reply_from_dict)
from consensus.scenarios.disaster.ros import protocol
from consensus.scenarios.disaster.ros.protocol import (AggregatorStatusRecord, CollectiveRecord, StateRecord,
                                                       VoteRecord, VoteRequestRecord)
from consensus.ros.health import HEALTH, Health, guarded, publish_health
from consensus.ros.process import node_main, on_stop


class RemoteDrone:
    """A drone seen by the aggregation: ``consensus.decision.Proposer`` whose votes come over ROS.

    It offers what ``explicit_decision`` uses of a core drone: ``agent_id`` (= ``drone_id``), ``role``,
    ``prepare_vote``, ``propose`` and ``vote_log`` (the drone's reply of every voting turn)."""

    def __init__(self, hub: "Aggregator", drone_id: int, role) -> None:
        self.hub = hub
        self.agent_id = self.drone_id = drone_id
        self.role = role
        self.round = -1
        self.vote_log: list[DroneReply] = []

    def prepare_vote(self, obs, inbox, own_cell, strategy: str) -> None:
        """The drone prepares itself from the same ``decide`` state; here only the log is reset."""
        self.round = obs.round
        self.vote_log = []

    def propose(self, ctx: ProposeContext):
        reply = self.hub.ask(self.round, self.drone_id, ctx)
        self.vote_log.append(reply)
        return None if reply.fallback else reply.action


#: the fields the aggregator reads (its parameters, ``declare_config(uses=...)``): the team's and the vote's, the grid's
#: size (cells on the wire), and for a spoke-and-wheel coordinator the LLM client's and its requests'
USES = ("num_robots", "seed", "output_dir", "executor", "single_process", "planner", "baseline", "mode", "strategy",
        "roles",
        "max_agreement_turns", "round_timeout_s", "sensor_readings", "message_max_chars", "width", "height",
        "llm_backend", "llm_model", "llm_base_url", "llm_api_key_env", "llm_timeout_s", "llm_max_retries",
        "llm_concurrency", "replay_path", "llm_temperature", "llm_max_tokens", "llm_structured", "parse_retries")


class Aggregator:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.cfg = cfg = declare_disaster_config(node, USES).resolved()
        transcripts = Path(cfg.output_dir) / "transcripts.jsonl" if cfg.output_dir else None
        if transcripts is not None:
            os.makedirs(transcripts.parent, exist_ok=True)
        client, self._close_client = (client_from_config(cfg, transcripts) if cfg.strategy.startswith("spoke_wheel")
                                      else (None, lambda: None))
        self.client = client
        self.coordinator = make_coordinator(cfg, client)
        self.drones = [RemoteDrone(self, i, role_for(cfg.roles, i)) for i in range(cfg.num_robots)]
        self.rounds = ThreadPoolExecutor(1, thread_name_prefix="round")                 # one vote at a time
        self.voters = ThreadPoolExecutor(cfg.num_robots, thread_name_prefix="vote")     # one waiter per drone
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._waiting: dict[int, tuple[threading.Event, list]] = {}   # request id -> (event, [reply dict])
        self._outbox: list[VoteRequestRecord] = []
        self._stopping = False
        self.started_round = -1
        self.job: tuple[int, Future] | None = None
        self.counters = {"requests": 0, "replies": 0, "timeouts": 0, "late_votes": 0}   # + self.health's counts
        self.health = Health(parent=HEALTH, logger=node.get_logger())
        g = lambda fn, what: guarded(fn, what, self.health)             # noqa: E731
        ns = node.get_namespace()  # the run's shared channels sit under its namespace (names.Topic.in_run)
        node.create_subscription(String, protocol.DISASTER_STATE.in_run(ns), g(self._on_state, "aggregator.state"),
                                 qos.profile(protocol.DISASTER_STATE))
        node.create_subscription(String, protocol.DISASTER_VOTES.in_run(ns), g(self._on_vote, "aggregator.votes"),
                                 qos.profile(protocol.DISASTER_VOTES))
        self.pub_requests = [node.create_publisher(String, protocol.DISASTER_VOTE_REQUEST.of(i),
                                                   qos.profile(protocol.DISASTER_VOTE_REQUEST))
                             for i in range(cfg.num_robots)]
        self.pub_collective = node.create_publisher(String, protocol.DISASTER_COLLECTIVE.in_run(ns),
                                                    qos.profile(protocol.DISASTER_COLLECTIVE))
        self.pub_status = node.create_publisher(String, protocol.DISASTER_AGGREGATOR_STATUS.in_run(ns),
                                                qos.profile(protocol.DISASTER_AGGREGATOR_STATUS))
        node.create_timer(0.05, g(self.tick, "aggregator.tick"))
        node.create_timer(1.0, g(self.publish_status, "aggregator.status"))
        self.publish_health = publish_health(node, self.health)

    # ------------------------------------------------------------------ executor thread
    def _on_state(self, msg: String) -> None:
        try:
            st = StateRecord.decode(msg.data)
            if st.phase != "decide" or st.mode != "explicit" or st.round <= self.started_round:
                return
            cfg = self.cfg
            obs = observation_from_dict(st.observation)
            cells = [cell_or_none(c, cfg.width, cfg.height) for c in st.cells]
            heard = [inbox_from_dict(m) for m in st.heard]
        except (ValueError, LookupError, TypeError) as exc:
            self.health.count_bad_message("aggregator.state")
            self.node.get_logger().warning(f"aggregator: bad state record: {exc}")
            return
        self.started_round = obs.round
        self.job = (obs.round, self.rounds.submit(self._vote, obs, cells, heard))

    def _on_vote(self, msg: String) -> None:
        try:
            vote = VoteRecord.decode(msg.data)
        except ValueError as exc:                                   # RecordError: not a vote
            self.health.count_bad_message("aggregator.votes")
            self.node.get_logger().warning(f"aggregator: bad vote record: {exc}")
            return
        rid = vote.id
        with self._lock:
            waiter = self._waiting.pop(rid, None)
            if waiter is None:                        # answered after its timeout
                self.counters["late_votes"] += 1
                return
        waiter[1].append(vote.reply)
        waiter[0].set()

    def tick(self) -> None:
        with self._lock:
            out, self._outbox = self._outbox, []
        for req in out:
            self.pub_requests[req.agent].publish(message(req))
        if self.job is not None and self.job[1].done():
            rnd, fut = self.job
            self.job = None
            self.pub_collective.publish(message(self._record(rnd, fut.result())))

    def _record(self, rnd: int, out) -> CollectiveRecord:
        votes = [[d.vote_log[t].to_dict() for d in self.drones] for t in range(out.turns)]
        coordinator = [r.to_dict() for r in self.coordinator.log] if self.coordinator is not None else []
        return CollectiveRecord(
            round=rnd, decision=cell_list(out.decision), votes=votes, coordinator=coordinator,
            aggregation={
                "architecture": out.architecture, "decision": cell_list(out.decision), "turns": out.turns,
                "agreed": out.agreed, "failures": out.failures,
                "coordinator_failures": out.coordinator_failures, "fallback": out.fallback,
                "proposals": [[cell_list(c) for c in turn] for turn in out.proposals],
                "coordinator_plans": [cell_list(c) for c in out.coordinator_plans]},
            stamp=self.node.get_clock().now().nanoseconds * 1e-9)

    def publish_status(self) -> None:
        st = AggregatorStatusRecord(state="voting" if self.job is not None else "idle", round=self.started_round,
                                    **self.counters, **self.health.counts(),
                                    llm=self.client.status() if self.client is not None else None)
        self.pub_status.publish(message(st))

    # ------------------------------------------------------------------ worker threads
    def _vote(self, obs, cells, heard):
        cfg = self.cfg
        return explicit_decision(self.drones, obs, cells, heard, cfg.strategy, coordinator=self.coordinator,
                                 max_turns=cfg.max_agreement_turns, map_fn=self.voters.map)

    def ask(self, rnd: int, drone: int, ctx: ProposeContext) -> DroneReply:
        """One vote of ``drone`` (blocks this worker thread until the answer or ``round_timeout_s``)."""
        event, box = threading.Event(), []
        with self._lock:
            rid = next(self._ids)
            self._waiting[rid] = (event, box)
            self._outbox.append(VoteRequestRecord(round=rnd, id=rid, agent=drone, turn=ctx.turn,
                                                  context=context_to_dict(ctx)))
            self.counters["requests"] += 1
        answered = event.wait(self.cfg.round_timeout_s) and not self._stopping
        with self._lock:
            self._waiting.pop(rid, None)
        if not answered or not box:
            reply, outcome = timeout_reply("vote"), "timeouts"
        else:
            try:
                reply, outcome = reply_from_dict(box[0], self.cfg.width, self.cfg.height), "replies"
            except (ValueError, TypeError) as exc:
                reply = DroneReply(fallback=True, fallback_reason="bad_message", error=str(exc)[:200])
                outcome = None
        if outcome is None:
            self.health.count_bad_message("aggregator.vote_reply")
        else:
            with self._lock:
                self.counters[outcome] += 1
        return reply

    def close(self) -> None:
        self._stopping = True
        with self._lock:
            for event, _ in self._waiting.values():
                event.set()
        self.rounds.shutdown(wait=False, cancel_futures=True)
        self.voters.shutdown(wait=False, cancel_futures=True)
        self._close_client()


def _aggregator(node: Node) -> "Aggregator":
    agg = Aggregator(node)
    on_stop(agg.close)
    node.get_logger().info(f"aggregator up: strategy={agg.cfg.strategy}, {agg.cfg.num_robots} drones")
    return agg


def main() -> int:
    return node_main("aggregator", _aggregator)
