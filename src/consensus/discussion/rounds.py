"""One round of a discussion team (paper 2, section 3.1 and appendix C.4), shared by headless loops and ROS nodes.

A round, after the scenario has produced the observation ``obs``:

1. **Discussion** (K = ``discussion_turns`` in {0, 1, 2}): in turn t every agent ``discuss``-es, reading the messages
   of turn t-1 (turn 0 reads the previous round's last messages, so the dialogue carries over between rounds as in
   section 3.1, "transcripts of messages from other agents from previous rounds"). The agents of one turn are
   independent and may run in parallel (``map_fn``); results are used in agent order.
2. **Action phase**, reading the messages of the last discussion turn (nothing when K = 0: no interaction):

   * implicit: every agent ``act``-s and takes its own action (eq. 2); an agent without a usable action keeps
     ``owns[i]`` (its fallback policy has already been applied when it has one);
   * explicit: the agents vote through ``consensus.decision.decide(strategy, agents, kind=kind)`` and ALL adopt the
     decision (eq. 1, "agents do not use an individual interpret step"): agent i's action is
     ``adopt(collective, i)`` (default: the collective itself). Strategies are paper 3's architectures: majority,
     averaging, decentralized (re-vote until unanimous, at most ``max_agreement_turns`` votes), decentralized with
     feedback, spoke & wheel (a coordinator merges the votes) and spoke & wheel with feedback. A failed vote is
     ``None`` (ignored by votes and averages, counted). If every vote failed each agent keeps ``owns[i]``.

``run_round`` returns a ``RoundDecision`` with the actions, proposals, messages, every reply and the round's
counters (LLM calls, fallbacks by reason, tokens, message bounds, vote and coordinator failures). Agents need
``agent_id``, ``role.title``, ``discuss``, ``act``, ``prepare_vote``, ``propose`` and ``vote_log``
(``consensus.discussion.agents.DiscussionAgent``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from consensus.decision import DecisionOutcome, decide
from consensus.discussion.replies import InboxMessage, Reply, add_agent_counters, agent_counters, jsonable

MODES = ("implicit", "explicit")


@dataclass
class RoundDecision:
    round: int
    mode: str
    strategy: str                                   # "" in implicit mode
    actions: list[Any]                              # every agent's action
    proposals: list[Any]                            # implicit: own choices (None = fallback); explicit: first votes
    collective: Any = None                          # explicit: the adopted decision (None: every vote failed)
    discussion: list[list[Reply]] = field(default_factory=list)        # per turn, agent order
    messages: list[list[InboxMessage]] = field(default_factory=list)   # per turn, agent order
    action_replies: list[Reply] = field(default_factory=list)          # implicit, agent order
    votes: list[list[Reply]] = field(default_factory=list)             # explicit: per voting turn, agent order
    coordinator: list[Reply] = field(default_factory=list)             # spoke & wheel merges
    aggregation: DecisionOutcome | None = None
    final_messages: list[InboxMessage] = field(default_factory=list)   # what the next round's turn 0 reads
    counters: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        agg, j = self.aggregation, jsonable
        return {
            "round": self.round, "mode": self.mode, "strategy": self.strategy,
            "actions": [j(a) for a in self.actions], "proposals": [j(p) for p in self.proposals],
            "collective": j(self.collective),
            "messages": [[m.to_dict() for m in turn] for turn in self.messages],
            "discussion": [[r.to_dict() for r in turn] for turn in self.discussion],
            "action_replies": [r.to_dict() for r in self.action_replies],
            "votes": [[r.to_dict() for r in turn] for turn in self.votes],
            "coordinator": [r.to_dict() for r in self.coordinator],
            "aggregation": None if agg is None else {
                "architecture": agg.architecture, "decision": j(agg.decision), "turns": agg.turns,
                "agreed": agg.agreed, "failures": agg.failures, "coordinator_failures": agg.coordinator_failures,
                "fallback": agg.fallback, "proposals": [[j(c) for c in turn] for turn in agg.proposals],
                "coordinator_plans": [j(c) for c in agg.coordinator_plans]},
            "counters": self.counters,
        }


# --- pieces a ROS node calls for one agent ---------------------------------------------------------------------------
def message_of(agent, reply: Reply, turn: int) -> InboxMessage:
    """The message ``agent`` sends with ``reply`` (the proposal is the reply's validated action)."""
    return InboxMessage(sender=agent.agent_id, role=agent.role.title, text=reply.message, proposal=reply.action,
                        turn=turn)


def inbox_for(agent_id: int, messages: Sequence[InboxMessage]) -> list[InboxMessage]:
    """The messages agent ``agent_id`` reads: everybody else's."""
    return [m for m in messages if m.sender != agent_id]


def discussion_turn(agents: Sequence, obs, owns: Sequence[Any], heard: Sequence[InboxMessage], turn: int,
                    map_fn: Callable = map) -> list[Reply]:
    """Discussion turn ``turn``: every agent discusses after reading ``heard`` (the previous turn's messages)."""
    return list(map_fn(lambda i: agents[i].discuss(obs, inbox_for(agents[i].agent_id, heard), turn, owns[i]),
                       range(len(agents))))


def implicit_actions(agents: Sequence, obs, owns: Sequence[Any], heard: Sequence[InboxMessage],
                     map_fn: Callable = map) -> list[Reply]:
    """Implicit action phase: every agent decides its own action."""
    return list(map_fn(lambda i: agents[i].act(obs, inbox_for(agents[i].agent_id, heard), owns[i]),
                       range(len(agents))))


def explicit_decision(agents: Sequence, obs, owns: Sequence[Any], heard: Sequence[InboxMessage], strategy: str, *,
                      kind: str = "categorical", coordinator=None, max_turns: int = 5,
                      map_fn: Callable = map) -> DecisionOutcome:
    """Explicit action phase: the agents' votes aggregated by ``strategy`` (consensus.decision)."""
    for i, agent in enumerate(agents):
        agent.prepare_vote(obs, inbox_for(agent.agent_id, heard), owns[i], strategy)
    if coordinator is not None:
        coordinator.prepare(obs, [a.role.title for a in agents])
    return decide(strategy, agents, kind=kind, coordinator=coordinator, max_turns=max_turns, map_fn=map_fn)


# --- the whole round --------------------------------------------------------------------------------------------------
def run_round(agents: Sequence, obs, owns: Sequence[Any], *, mode: str = "implicit", strategy: str = "majority",
              discussion_turns: int = 1, coordinator=None, max_agreement_turns: int = 5,
              previous: Sequence[InboxMessage] = (), map_fn: Callable = map, kind: str = "categorical",
              normalize: Callable[[Any], Any] = lambda d: d,
              adopt: Callable[[Any, int], Any] = lambda collective, i: collective) -> RoundDecision:
    """One round (module docstring); ``previous`` = last round's ``final_messages``; ``normalize`` turns the
    aggregation's decision into the collective action (e.g. a cell of Python ints), ``adopt`` gives agent i's
    action under it."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if len(owns) != len(agents):
        raise ValueError(f"{len(agents)} agents but {len(owns)} own states")
    decision = RoundDecision(round=obs.round, mode=mode, strategy=strategy if mode == "explicit" else "",
                             actions=[], proposals=[])
    heard: list[InboxMessage] = list(previous) if discussion_turns > 0 else []
    for turn in range(discussion_turns):
        replies = discussion_turn(agents, obs, owns, heard, turn, map_fn)
        heard = [message_of(a, r, turn) for a, r in zip(agents, replies)]
        decision.discussion.append(replies)
        decision.messages.append(heard)
    if mode == "implicit":
        replies = implicit_actions(agents, obs, owns, heard, map_fn)
        decision.action_replies = replies
        decision.proposals = [None if r.fallback else r.action for r in replies]
        decision.actions = [r.action if r.action is not None else owns[i] for i, r in enumerate(replies)]
        last = replies
    else:
        out = explicit_decision(agents, obs, owns, heard, strategy, kind=kind, coordinator=coordinator,
                                max_turns=max_agreement_turns, map_fn=map_fn)
        decision.aggregation = out
        decision.votes = [[a.vote_log[t] for a in agents] for t in range(out.turns)]
        decision.coordinator = list(coordinator.log) if coordinator is not None else []
        decision.proposals = list(out.proposals[0])
        decision.collective = None if out.decision is None else normalize(out.decision)
        decision.actions = [adopt(decision.collective, i) if decision.collective is not None else own
                            for i, own in enumerate(owns)]
        last = decision.votes[-1]
    decision.final_messages = [message_of(a, r, -1) for a, r in zip(agents, last)]
    decision.counters = round_counters(decision)
    return decision


# --- counters ---------------------------------------------------------------------------------------------------------
def round_counters(decision: RoundDecision) -> dict:
    """LLM calls, fallbacks (total and by reason), tokens and message bounds over every reply of the round."""
    replies = [r for turn in decision.discussion for r in turn] + list(decision.action_replies)
    replies += [r for turn in decision.votes for r in turn] + list(decision.coordinator)
    total = agent_counters()
    for r in replies:
        add_agent_counters(total, r.counters())
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
