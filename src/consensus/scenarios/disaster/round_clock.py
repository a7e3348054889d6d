"""The round clock of the disaster scenario over ROS: phases, deadlines, timeouts and recorded replies, without ROS.

The ``disaster_grid`` node (``consensus.scenarios.disaster.ros.grid``) runs the round protocol of
``consensus.scenarios.disaster.rounds`` with every drone (and, in explicit mode, the aggregator) as a node of its
own. ``RoundClock`` is that protocol as a state machine. It never reads a clock and knows no ROS type: the node
passes the time (``now``, seconds on the node clock, so ``use_sim_time`` works), the decoded JSON records it
receives, whether the drones are ready or have arrived, and then does what the returned ``Step`` says — publish a
``/disaster/state`` record, begin a round (step the environment), fly to the decided cells, score the round, end
the run.

Phases (``RoundClock.phase``; each published one gets a new ``seq`` in its state record, whose schema is in
``consensus.scenarios.disaster.ros.protocol.StateRecord``)::

    waiting -> [discuss turn 0 .. K-1 -> decide -> flight -> scoring -> between] x rounds -> done

(``scoring``: the node scores the round; ``between``: the next round is to begin; neither is published.)

* ``waiting``: until the node reports every drone ready (in explicit mode the aggregator too), at the latest
  ``start_timeout_s`` after the clock was made (a late start, ``Step.late_start``); then round 0 begins.
* A round begins with the environment's observation and the drones' cells (``begin_round``). Its first phase is
  discussion turn 0 (K = ``discussion_turns`` > 0), else ``decide``. Turn 0 hears the previous round's final
  messages (nothing without discussion), turn t > 0 and ``decide`` hear the messages of the turn before.
* ``discuss`` turn t ends when every drone has sent its message for (round, t), at the latest ``round_timeout_s``
  after it began.
* ``decide`` ends, implicit mode, when every drone has sent its decision, at the latest ``round_timeout_s`` after
  it began; explicit mode, when the aggregator's collective record arrives, at the latest ``(2 max_agreement_turns
  + 1) round_timeout_s`` after it began (each vote and coordinator merge has its own ``round_timeout_s`` in the
  aggregator). The round is then assembled by ``rounds.run_round`` over ``RecordedDrone``-s (each step returns the
  reply that drone sent for it, else the timeout reply; the ``RecordedCoordinator`` returns the aggregator's
  merges), so heard messages, proposals, fallback actions, the explicit aggregation (re-computed from the recorded
  votes and checked against the aggregator's decision: ``replay_mismatches``), ``final_messages`` and the round
  counters come from the same code as headless. ``Step.decision`` carries the ``RoundDecision``.
* ``flight`` (the state carries every drone's action): ``motion: kinematic`` lasts exactly ``round_time_s`` (a
  far cell may take more than one round, as headless); ``motion: teleport`` ends when the node reports every
  drone arrived, at the latest at the flight deadline ``flight_deadline_s`` after it began (then counted in
  ``flight_timeouts`` and in the round's ``timeouts`` as ``flight: 1``; the node scores the drones where they are).
  The deadline is computed from the round's cells, not from ``round_timeout_s`` (which bounds the drones' answers
  and is long for LLM teams): ``flight_time_factor`` x the longest straight flight of the round, from the centre of
  a drone's cell at the round's start to the centre of its chosen cell, at ``v_max``, plus ``flight_slack_s``.
  The node then scores the round and calls ``complete_round``: the next round begins, or after ``rounds`` rounds the
  state goes to ``done`` (``Step.done``) and the run is over.

No phase waits without a bound: ``waiting`` ends after ``start_timeout_s``, ``discuss`` and ``decide`` after
``round_timeout_s`` (explicit: ``(2 max_agreement_turns + 1) round_timeout_s``), ``flight`` after ``round_time_s``
(kinematic) or its flight deadline (teleport), all finite by the config's checks; ``scoring`` and ``between`` are
the node's own work, done at once.

Deadlines and timeouts: a phase closes at the first ``tick`` at or after its deadline (``deadline_s`` of the state
record; ``None`` = no deadline). A record counts when it arrives while its phase is open. Every drone (or the
collective record) missing when a phase closes is a timeout: counted in ``phase_timeouts`` and per phase in the
round's record (``timeouts``: ``discuss_<t>``, ``decide``, ``collective``, ``vote_<t>`` for the votes the
aggregator gave up on), and the drone gets the core's failure reply with reason ``timeout`` (``timeout_reply``:
``DroneReply(fallback=True)``, counted in ``llm_fallbacks_by_reason`` by ``run_round``). The round goes on.

Ignored records: a reply for another round, phase or turn, or a second one from the same drone, is dropped and
counted (``late_replies``; its LLM calls in ``late_llm_calls``); such a collective record is counted in
``late_collectives``. A record that is not a JSON object or names no drone of the team is counted in
``bad_messages`` and dropped; a reply that ``parse_reply`` refuses (e.g. an action off the grid) is counted in
``bad_messages`` and becomes a failed reply (reason ``bad_message``): the drone stays, as after any failed reply.

Recorded: ``record`` is the ``ros`` part of the round's record (``rounds.jsonl``, ``disaster/metrics``): the
node's extras (positions) plus ``durations_s`` (seconds per phase: ``discuss_<t>``, ``decide``, ``flight``),
``flight_deadline_s`` (how long the flight could last) and ``timeouts``; ``counters`` holds the run's protocol
counters (``COUNTERS``) and ``round_counters`` the sum of the completed rounds' ``RoundDecision.counters``.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from consensus.scenarios.disaster.agents import Cell, DroneReply, InboxMessage
from consensus.scenarios.disaster.prompts import role_for
from consensus.scenarios.disaster.rounds import RoundDecision, add_round_counters, message_of, run_round

START_TIMEOUT_S = 60.0
#: the run's protocol counters (``RoundClock.counters``; every one is a field of the run's summary)
COUNTERS = ("phase_timeouts", "flight_timeouts", "late_replies", "late_llm_calls", "late_collectives",
            "bad_messages", "replay_mismatches")


def timeout_reply(what: str) -> DroneReply:
    """The reply of a drone that did not answer a phase in time: a counted fallback (reason ``timeout``)."""
    return DroneReply(fallback=True, fallback_reason="timeout", error=f"no {what} within round_timeout_s")


def flight_deadline_s(cfg, starts: Sequence[Cell], goals: Sequence[Cell]) -> float:
    """How long a ``motion: teleport`` flight of ``cfg`` may last over ROS (module docstring): ``flight_time_factor``
    x the longest straight line from the centre of a drone's cell at the round's start (``starts``) to the centre of
    its chosen cell (``goals``), in metres (``cell_size_m``), over ``v_max``, plus ``flight_slack_s``."""
    longest = max((math.dist(a, b) for a, b in zip(starts, goals) if a is not None and b is not None), default=0.0)
    return cfg.flight_time_factor * longest * cfg.cell_size_m / cfg.v_max + cfg.flight_slack_s


def cell_list(cell) -> list[int] | None:
    """A cell as JSON (a list of two ints), None as None."""
    return None if cell is None else [int(cell[0]), int(cell[1])]


class RecordedDrone:
    """A drone for ``run_round`` whose replies were received over the wire: each step returns the reply this
    drone sent for it, else the timeout reply."""

    def __init__(self, drone_id: int, role) -> None:
        self.agent_id = self.drone_id = drone_id
        self.role = role
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


@dataclass
class Step:
    """What the node does after a call of the clock, in this order (fields left at their default: nothing)."""
    decision: RoundDecision | None = None   # the action phase ended: every drone flies to ``decision.actions``
    mismatch: tuple | None = None           # (the aggregator's decision, the replayed one) when they differ
    state: dict | None = None               # a new phase: publish this ``/disaster/state`` record
    begin_round: bool = False               # step the environment, then call ``RoundClock.begin_round``
    late_start: bool = False                # (round 0 begins although not every drone reported ready)
    end_round: bool = False                 # the flight is over: score the round, then ``complete_round``
    done: bool = False                      # the last round is complete: write the results, end the run


class RoundClock:
    """The round protocol of one ROS run of ``cfg`` (a resolved ``DisasterConfig``), see the module docstring.

    ``now`` is the time the clock is made (the start timeout counts from it); ``parse_reply`` turns the ``reply``
    object of a drone's record into a ``DroneReply`` and raises ValueError, KeyError or TypeError for a malformed one.
    """

    def __init__(self, cfg, now: float, *, parse_reply: Callable[[Any], DroneReply],
                 start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.cfg = cfg
        self.n = cfg.num_robots
        self.parse_reply = parse_reply
        self.start_timeout_s = start_timeout_s
        self.t_created = now
        self.drones = [RecordedDrone(i, role_for(cfg.roles, i)) for i in range(self.n)]
        self.seq = 0
        self.phase = "waiting"
        self.turn = -1
        self.deadline = math.inf
        self.phase_t0 = now
        self.state: dict = {}
        self.obs = None
        self.cells: list = []                   # the drones' cells at the round's start
        self.heard: list[InboxMessage] = []     # what the current phase hears
        self.previous: list[InboxMessage] = []  # the last round's final messages
        self.collective: dict | None = None
        self.decision: RoundDecision | None = None
        self.record: dict = {}
        self.rounds_done = 0
        self.counters: Counter = Counter()
        self.round_counters: dict = {}
        self._set_phase("waiting", now)

    # ------------------------------------------------------------------ time
    def tick(self, now: float, *, ready: bool = False, arrived: bool = False) -> Step | None:
        """Advance to ``now``: ``ready`` = every drone (and the aggregator) is up, ``arrived`` = every drone is on
        its chosen cell (in a teleport flight, arriving at the deadline is arriving). None when nothing changes."""
        if self.phase == "waiting":
            if ready or now - self.t_created > self.start_timeout_s:
                return Step(begin_round=True, late_start=not ready)
        elif self.phase == "discuss":
            if self.answered() or now >= self.deadline:
                return self._end_discussion_turn(now)
        elif self.phase == "decide":
            if self.answered() or now >= self.deadline:
                return self._end_decision(now)
        elif self.phase == "flight":
            if self.cfg.motion == "teleport" and arrived:
                return self._end_flight(now)
            if now >= self.deadline:
                if self.cfg.motion == "teleport":
                    self.counters["flight_timeouts"] += 1
                    self.record.setdefault("timeouts", {})["flight"] = 1
                return self._end_flight(now)
        return None

    def answered(self) -> bool:
        """Has every answer the current phase waits for arrived?"""
        if self.phase == "discuss":
            return all(self.turn in d.discussion for d in self.drones)
        if self.phase == "decide":
            if self.cfg.mode == "explicit":
                return self.collective is not None
            return all(d.action is not None for d in self.drones)
        return False

    @property
    def done(self) -> bool:
        return self.phase == "done"

    # ------------------------------------------------------------------ rounds
    def begin_round(self, now: float, obs, cells: Sequence[Cell], record: dict | None = None) -> Step:
        """Round ``obs.round`` begins with the drones at ``cells``; ``record`` starts the round's ``ros`` record."""
        if self.phase not in ("waiting", "between"):
            raise RuntimeError(f"a round cannot begin in phase {self.phase!r}")
        self.obs, self.cells = obs, list(cells)
        for d in self.drones:
            d.reset()
        self.collective, self.decision = None, None
        self.record = dict(record or {})
        k = self.cfg.discussion_turns
        self.heard = list(self.previous) if k > 0 else []
        if k > 0:
            self._set_phase("discuss", now, turn=0, timeout=self.cfg.round_timeout_s)
        else:
            self._begin_decision(now)
        return Step(state=self.state)

    def complete_round(self, now: float, record: dict | None = None) -> Step:
        """The node has scored the round (after ``Step.end_round``); ``record`` adds to its ``ros`` record. The
        next round begins (``Step.begin_round``) or the run is done."""
        if self.phase != "scoring":
            raise RuntimeError(f"no round to complete in phase {self.phase!r}")
        self.record.update(record or {})
        add_round_counters(self.round_counters, self.decision.counters)
        self.previous = self.decision.final_messages
        self.rounds_done += 1
        if self.rounds_done >= self.cfg.rounds:
            self._set_phase("done", now)
            return Step(state=self.state, done=True)
        self.phase = "between"
        return Step(begin_round=True)

    # ------------------------------------------------------------------ records received
    def on_discussion(self, rec: Any) -> bool:
        """A drone's discussion record ``{"round", "turn", "drone", "reply", ...}``; True when recorded."""
        i = self._drone_of(rec)
        if i is None:
            return False
        if not self._expects(rec, "discuss") or self.turn in self.drones[i].discussion:
            self._late(rec)
            return False
        self.drones[i].discussion[self.turn] = self._reply(rec)
        return True

    def on_decision(self, rec: Any) -> bool:
        """A drone's implicit decision record ``{"round", "drone", "reply", ...}``; True when recorded."""
        i = self._drone_of(rec)
        if i is None:
            return False
        if not self._expects(rec, "decide") or self.cfg.mode != "implicit" or self.drones[i].action is not None:
            self._late(rec)
            return False
        self.drones[i].action = self._reply(rec)
        return True

    def on_collective(self, rec: Any) -> bool:
        """The aggregator's collective record (schema in ``ros.aggregator``); True when recorded."""
        if not isinstance(rec, dict):
            self.counters["bad_messages"] += 1
            return False
        if not self._expects(rec, "decide") or self.cfg.mode != "explicit" or self.collective is not None:
            self.counters["late_collectives"] += 1
            return False
        self.collective = rec
        return True

    def _drone_of(self, rec: Any) -> int | None:
        i = rec.get("drone") if isinstance(rec, dict) else None
        if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.n:
            return i
        self.counters["bad_messages"] += 1
        return None

    def _expects(self, rec: dict, phase: str) -> bool:
        """Is ``rec`` an answer to the phase running now?"""
        return (self.phase == phase and self.obs is not None and rec.get("round") == self.obs.round
                and (phase != "discuss" or rec.get("turn") == self.turn))

    def _late(self, rec: dict) -> None:
        self.counters["late_replies"] += 1
        reply = rec.get("reply")
        if isinstance(reply, dict) and isinstance(reply.get("llm_calls"), int):
            self.counters["late_llm_calls"] += reply["llm_calls"]

    def _reply(self, rec: dict) -> DroneReply:
        try:
            return self.parse_reply(rec["reply"])
        except (ValueError, KeyError, TypeError) as exc:
            self.counters["bad_messages"] += 1
            return DroneReply(fallback=True, fallback_reason="bad_message", error=str(exc)[:200])

    def _replies(self, dicts) -> list[DroneReply]:
        return [self._reply({"reply": d}) for d in (dicts if isinstance(dicts, list) else [])]

    # ------------------------------------------------------------------ phase changes
    def _set_phase(self, phase: str, now: float, *, turn: int = -1, timeout: float = math.inf,
                   actions: list | None = None) -> None:
        if self.phase in ("discuss", "decide", "flight"):
            self._close_phase(now)
        self.phase, self.turn, self.phase_t0 = phase, turn, now
        self.deadline = now + timeout
        self.seq += 1
        cfg, obs = self.cfg, self.obs
        talk = phase in ("discuss", "decide")
        self.state = {
            "seq": self.seq, "round": obs.round if obs is not None else -1, "rounds": cfg.rounds,
            "phase": phase, "turn": turn, "mode": cfg.mode, "strategy": cfg.strategy if cfg.mode == "explicit" else "",
            "deadline_s": None if math.isinf(self.deadline) else self.deadline,
            "observation": obs.to_dict() if obs is not None and talk else None,
            "cells": [cell_list(c) for c in self.cells] if talk else None,
            "heard": [m.to_dict() for m in self.heard] if talk else None,
            "actions": [cell_list(c) for c in actions] if actions is not None else None,
            "stamp": now}

    def _close_phase(self, now: float) -> None:
        """Record how long the phase that ends now took (``durations_s``)."""
        key = self.phase if self.phase != "discuss" else f"discuss_{self.turn}"
        self.record.setdefault("durations_s", {})[key] = round(now - self.phase_t0, 3)

    def _count_timeouts(self, what: str, missing: int) -> None:
        if missing:
            self.counters["phase_timeouts"] += missing
            self.record.setdefault("timeouts", {})[what] = missing

    def _end_discussion_turn(self, now: float) -> Step:
        replies = [d.discuss(self.obs, (), self.turn) for d in self.drones]     # received, else the timeout reply
        self._count_timeouts(f"discuss_{self.turn}", sum(self.turn not in d.discussion for d in self.drones))
        self.heard = [message_of(d, r, self.turn) for d, r in zip(self.drones, replies)]
        if self.turn + 1 < self.cfg.discussion_turns:
            self._set_phase("discuss", now, turn=self.turn + 1, timeout=self.cfg.round_timeout_s)
        else:
            self._begin_decision(now)
        return Step(state=self.state)

    def _begin_decision(self, now: float) -> None:
        cfg = self.cfg
        timeout = cfg.round_timeout_s * (2 * cfg.max_agreement_turns + 1 if cfg.mode == "explicit" else 1)
        self._set_phase("decide", now, timeout=timeout)

    def _end_decision(self, now: float) -> Step:
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
        decision = run_round(self.drones, self.obs, self.cells, mode=cfg.mode, strategy=cfg.strategy,
                             discussion_turns=cfg.discussion_turns, coordinator=coordinator,
                             max_agreement_turns=cfg.max_agreement_turns, previous=self.previous)
        self.decision = decision
        mismatch = None
        if self.collective is not None and cell_list(decision.collective) != self.collective.get("decision"):
            self.counters["replay_mismatches"] += 1
            mismatch = (self.collective.get("decision"), cell_list(decision.collective))
        flight = cfg.round_time_s if cfg.motion == "kinematic" else flight_deadline_s(cfg, self.cells,
                                                                                        decision.actions)
        self._set_phase("flight", now, timeout=flight, actions=decision.actions)
        self.record["flight_deadline_s"] = round(flight, 3)
        return Step(decision=decision, mismatch=mismatch, state=self.state)

    def _load_votes(self, rec: dict) -> None:
        turns = rec.get("votes", [])
        for t, turn in enumerate(turns if isinstance(turns, list) else []):
            replies = self._replies(turn)
            for d, reply in zip(self.drones, replies):
                d.votes.append(reply)
            self._count_timeouts(f"vote_{t}", sum(r.fallback_reason == "timeout" for r in replies))

    def _end_flight(self, now: float) -> Step:
        self._close_phase(now)
        self.phase = "scoring"
        return Step(end_round=True)
