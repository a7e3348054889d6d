"""One round of the disaster response team (paper 2, section 3.1 and appendix C.4), shared by the headless runner
and the ROS 2 nodes.

A round after ``DisasterEnv.begin_round()``:

1. **Discussion** (K = ``discussion_turns`` in {0, 1, 2}): in turn t every drone ``discuss``-es, reading the
   messages of turn t-1 (turn 0 reads the previous round's last messages, so the dialogue carries over between
   rounds as in section 3.1 "transcripts of messages from other agents from previous rounds"). The drones of one
   turn are independent and may run in parallel (``map_fn``); results are used in drone order.
2. **Action phase**, reading the messages of the last discussion turn (nothing when K = 0: no interaction):

   * implicit: every drone ``act``-s and moves to its own choice (eq. 2); a drone without a usable choice stays
     on its cell (its agent's fallback policy has already been applied);
   * explicit: the drones vote through ``consensus.decision.decide(strategy, drones, kind="categorical")``
     and ALL adopt the decision (eq. 1, "agents do not use an individual interpret step"). Strategies: majority
     (exact cell; tie -> the tied cell voted first, i.e. by the lowest drone index), averaging (rounded mean cell,
     half up per axis), decentralized (re-vote until unanimous, at most ``max_agreement_turns`` votes, else the
     rounded mean), decentralized_feedback (the same, seeing the others' previous votes), spoke_wheel (a
     coordinator merges the votes: the LLM coordinator for LLM teams, the classical ``HeuristicCoordinator``
     otherwise) and spoke_wheel_feedback (the coordinator's plan is shown back until the drones accept it). A
     failed vote is ``None`` (ignored by votes and averages, counted). If every vote failed the drones stay.

``run_round`` returns a ``RoundDecision`` with the actions (always on the grid when the drones' cells are),
proposals, messages, every reply and the round's counters (LLM calls, fallbacks by reason, tokens, message bounds,
vote and coordinator failures). A ROS drone node calls ``drone.discuss``/``drone.act``/``drone.propose`` for itself
with ``inbox_for``; an aggregator node calls ``explicit_decision`` with proposers that forward to the drones.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from consensus.decision import DecisionOutcome, decide
from consensus.scenarios.disaster.config import MODES
from consensus.scenarios.disaster.agents import Cell, DroneReply, InboxMessage, add_drone_counters, drone_counters


@dataclass
class RoundDecision:
    round: int
    mode: str
    strategy: str                                   # "" in implicit mode
    actions: list[Cell]                             # the cell every drone moves to
    proposals: list[Cell | None]                    # implicit: own choices (None = fallback); explicit: first votes
    collective: Cell | None = None                  # explicit: the adopted cell (None: every vote failed)
    discussion: list[list[DroneReply]] = field(default_factory=list)   # per turn, drone order
    messages: list[list[InboxMessage]] = field(default_factory=list)   # per turn, drone order
    action_replies: list[DroneReply] = field(default_factory=list)     # implicit, drone order
    votes: list[list[DroneReply]] = field(default_factory=list)        # explicit: per voting turn, drone order
    coordinator: list[DroneReply] = field(default_factory=list)        # spoke & wheel merges
    aggregation: DecisionOutcome | None = None
    final_messages: list[InboxMessage] = field(default_factory=list)   # what the next round's turn 0 reads
    counters: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cell = lambda c: None if c is None else [int(c[0]), int(c[1])]   # noqa: E731
        agg = self.aggregation
        return {
            "round": self.round, "mode": self.mode, "strategy": self.strategy,
            "actions": [cell(c) for c in self.actions], "proposals": [cell(c) for c in self.proposals],
            "collective": cell(self.collective),
            "messages": [[m.to_dict() for m in turn] for turn in self.messages],
            "discussion": [[r.to_dict() for r in turn] for turn in self.discussion],
            "action_replies": [r.to_dict() for r in self.action_replies],
            "votes": [[r.to_dict() for r in turn] for turn in self.votes],
            "coordinator": [r.to_dict() for r in self.coordinator],
            "aggregation": None if agg is None else {
                "architecture": agg.architecture, "decision": cell(agg.decision), "turns": agg.turns,
                "agreed": agg.agreed, "failures": agg.failures, "coordinator_failures": agg.coordinator_failures,
                "fallback": agg.fallback, "proposals": [[cell(c) for c in turn] for turn in agg.proposals],
                "coordinator_plans": [cell(c) for c in agg.coordinator_plans]},
            "counters": self.counters,
        }


# --- pieces a ROS node calls for one drone ---------------------------------------------------------------------------
def message_of(drone, reply: DroneReply, turn: int) -> InboxMessage:
    """The message ``drone`` sends with ``reply`` (the proposal is the reply's validated action)."""
    return InboxMessage(sender=drone.drone_id, role=drone.role.title, text=reply.message, proposal=reply.action,
                        turn=turn)


def inbox_for(drone_id: int, messages: Sequence[InboxMessage]) -> list[InboxMessage]:
    """The messages drone ``drone_id`` reads: everybody else's."""
    return [m for m in messages if m.sender != drone_id]


def discussion_turn(drones: Sequence, obs, cells: Sequence[Cell | None], heard: Sequence[InboxMessage], turn: int,
                    map_fn: Callable = map) -> list[DroneReply]:
    """Discussion turn ``turn``: every drone discusses after reading ``heard`` (the previous turn's messages)."""
    return list(map_fn(lambda i: drones[i].discuss(obs, inbox_for(drones[i].drone_id, heard), turn, cells[i]),
                       range(len(drones))))


def implicit_actions(drones: Sequence, obs, cells: Sequence[Cell | None], heard: Sequence[InboxMessage],
                     map_fn: Callable = map) -> list[DroneReply]:
    """Implicit action phase: every drone decides its own cell."""
    return list(map_fn(lambda i: drones[i].act(obs, inbox_for(drones[i].drone_id, heard), cells[i]),
                       range(len(drones))))


def explicit_decision(drones: Sequence, obs, cells: Sequence[Cell | None], heard: Sequence[InboxMessage],
                      strategy: str, *, coordinator=None, max_turns: int = 5,
                      map_fn: Callable = map) -> DecisionOutcome:
    """Explicit action phase: the drones' votes aggregated by ``strategy`` (consensus.decision)."""
    for i, drone in enumerate(drones):
        drone.prepare_vote(obs, inbox_for(drone.drone_id, heard), cells[i], strategy)
    if coordinator is not None:
        coordinator.prepare(obs, [d.role.title for d in drones])
    return decide(strategy, drones, kind="categorical", coordinator=coordinator, max_turns=max_turns,
                     map_fn=map_fn)


# --- the whole round --------------------------------------------------------------------------------------------------
def run_round(drones: Sequence, obs, cells: Sequence[Cell | None], *, mode: str = "implicit",
              strategy: str = "majority", discussion_turns: int = 1, coordinator=None, max_agreement_turns: int = 5,
              previous: Sequence[InboxMessage] = (), map_fn: Callable = map) -> RoundDecision:
    """One round for ``drones`` at ``cells`` (drone order); ``previous`` = last round's ``final_messages``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if len(cells) != len(drones):
        raise ValueError(f"{len(drones)} drones but {len(cells)} cells")
    decision = RoundDecision(round=obs.round, mode=mode, strategy=strategy if mode == "explicit" else "",
                             actions=[], proposals=[])
    heard: list[InboxMessage] = list(previous) if discussion_turns > 0 else []
    for turn in range(discussion_turns):
        replies = discussion_turn(drones, obs, cells, heard, turn, map_fn)
        heard = [message_of(d, r, turn) for d, r in zip(drones, replies)]
        decision.discussion.append(replies)
        decision.messages.append(heard)
    if mode == "implicit":
        replies = implicit_actions(drones, obs, cells, heard, map_fn)
        decision.action_replies = replies
        decision.proposals = [None if r.fallback else r.action for r in replies]
        decision.actions = [r.action if r.action is not None else cells[i] for i, r in enumerate(replies)]
        last = replies
    else:
        out = explicit_decision(drones, obs, cells, heard, strategy, coordinator=coordinator,
                                max_turns=max_agreement_turns, map_fn=map_fn)
        decision.aggregation = out
        decision.votes = [[d.vote_log[t] for d in drones] for t in range(out.turns)]
        decision.coordinator = list(coordinator.log) if coordinator is not None else []
        decision.proposals = list(out.proposals[0])
        decision.collective = None if out.decision is None else (int(out.decision[0]), int(out.decision[1]))
        decision.actions = [decision.collective if decision.collective is not None else c for c in cells]
        last = decision.votes[-1]
    decision.final_messages = [message_of(d, r, -1) for d, r in zip(drones, last)]
    decision.counters = round_counters(decision)
    return decision


# --- counters ---------------------------------------------------------------------------------------------------------
def round_counters(decision: RoundDecision) -> dict:
    """LLM calls, fallbacks (total and by reason), tokens and message bounds over every reply of the round."""
    replies = [r for turn in decision.discussion for r in turn] + list(decision.action_replies)
    replies += [r for turn in decision.votes for r in turn] + list(decision.coordinator)
    total = drone_counters()
    for r in replies:
        add_drone_counters(total, r.counters())
    agg = decision.aggregation
    return {
        "replies": total["plans"], "llm_calls": total["calls"], "parse_failures": total["parse_failures"],
        "llm_fallbacks": sum(total["fallbacks"].values()), "llm_fallbacks_by_reason": dict(total["fallbacks"]),
        "prompt_tokens": total["prompt_tokens"], "completion_tokens": total["completion_tokens"],
        "messages_truncated": total["messages_truncated"], "messages_empty": total["messages_empty"],
        "vote_failures": agg.failures if agg else 0, "coordinator_failures": agg.coordinator_failures if agg else 0,
        "vote_turns": agg.turns if agg else 0,
        "no_decision": int(agg is not None and agg.decision is None),
    }


def add_round_counters(total: dict, part: dict) -> dict:
    """Sum ``part`` into ``total`` (numbers add, the by-reason mapping merges); returns ``total``."""
    for key, value in part.items():
        if isinstance(value, dict):
            bucket = total.setdefault(key, {})
            for reason, count in value.items():
                bucket[reason] = bucket.get(reason, 0) + count
        else:
            total[key] = total.get(key, 0) + value
    return total
