"""The seven multi-agent architectures of paper 3 (Lee et al., "Reliable Decision-Making for Multi-Agent
LLM Systems", Fig. 1), as one function: ``decide(architecture, proposers, kind=...)``.

Every architecture asks ``Proposer`` objects for proposals in *turns*. A turn asks every agent once
(``single`` asks agent 0 only), through ``map_fn(call, proposers, contexts)`` so a caller can run the
agents of one turn in parallel (``ThreadPoolExecutor.map``); results are used in agent order.

Failed proposals: a proposer returns ``None`` when it failed. Every ``None`` counts in
``DecisionOutcome.failures``. With ``failed_value`` given (paper 3: the all-zero allocation) the
``None`` is replaced by it *before* anything else sees the turn: votes, averages, coordinators,
agreement tests and the feedback shown to other agents all see the replacement, as in the paper
where "the proposed solution of that specific agent" is replaced. Without ``failed_value`` the ``None``
stays: ``majority_vote``/``average`` ignore it and it blocks agreement. ``proposals`` in the outcome
holds the turns after replacement.

Architectures (paper section "Multi-agent architectures"; ``max_turns`` = the paper's 5 feedback turns):

* ``single``: agent 0 proposes once; decision = its proposal.
* ``majority``: every agent proposes once; decision = ``majority_vote`` (whole proposals, tie rule in
  ``consensus.decision.voting``).
* ``averaging``: every agent proposes once; decision = ``average`` (labels: ``ConfigError``).
* ``decentralized``: "agents iteratively generate and refine responses until consensus is reached".
  Turn t >= 1 shows each agent only its OWN previous proposal (``ctx.own_previous``); it sees nothing
  of the others (``others_previous == ()``), matching the paper's prompt without feedback, which
  carries no previous plans. Consensus (``agree(turn)``) after any turn stops the loop; decision =
  the first agent's proposal of that turn. No consensus after ``max_turns`` turns: the average of
  the last turn for numeric/allocation proposals and grid cells (paper: "an averaged plan ... in the
  resource allocation problem"), a ``rng`` choice among the last turn's valid proposals for labels
  (paper: "randomly selected ... in the QA problem"); ``fallback`` says which ("average", "random").
* ``decentralized_feedback``: as ``decentralized``, but turn t >= 1 also shows every agent the
  other agents' proposals of turn t-1 (``ctx.others_previous``, agent order without itself) and
  all earlier turns (``ctx.history``: one tuple per earlier turn, all agents in agent order).
* ``spoke_wheel``: the spokes (all agents) propose once; the coordinator (wheel) merges them:
  ``coordinator.merge(turn_proposals, 0)``. A ``None`` plan is a coordinator failure: counted in
  ``coordinator_failures`` and replaced by ``average`` (numeric/allocation) or ``majority_vote``
  (categorical) of the proposals (``fallback``).
* ``spoke_wheel_feedback``: turn 0 as ``spoke_wheel`` gives plan_0. Turn t >= 1 shows each spoke the
  last plan (``ctx.coordinator_plan``) and its own previous proposal; the spokes re-propose. If
  ``agree([plan_{t-1}, *proposals_t])`` the loop stops (the spokes accept the plan); otherwise the
  coordinator merges the new proposals into plan_t (same failure rule). At most ``max_turns`` turns;
  decision = the last coordinator plan. A plan that is None even after the fallback (every proposal
  failed, no ``failed_value``) keeps the previous plan.

``agreed`` in the outcome: the last turn was unanimous per ``agree`` (for spoke & wheel with feedback:
unanimous with the plan it was shown). For the one-turn architectures it only describes the turn.
``agree`` receives the turn's proposals after replacement (``None`` possible); default:
``consensus.decision.voting.unanimous`` for ``kind``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from consensus.decision.voting import average, check_kind, default_agree, is_cell, majority_vote
from consensus.errors import ConfigError

ARCHITECTURES = ("single", "majority", "averaging", "decentralized", "decentralized_feedback",
                 "spoke_wheel", "spoke_wheel_feedback")

#: the paper's names (Table 2 columns), for reports and plots
ARCHITECTURE_LABELS = {
    "single": "Single Agent",
    "majority": "Majority Voting",
    "averaging": "Averaging",
    "decentralized": "Decentralized",
    "decentralized_feedback": "Feedback Decentralized",
    "spoke_wheel": "Spoke & Wheel",
    "spoke_wheel_feedback": "Feedback Spoke & Wheel",
}


@dataclass(frozen=True)
class ProposeContext:
    """What an agent is shown in one turn (see the module docstring for each architecture)."""
    agent: int
    turn: int                                  # 0-based
    own_previous: Any = None                   # this agent's proposal of turn-1 (after replacement)
    others_previous: tuple = ()                # the other agents' proposals of turn-1 (feedback only)
    coordinator_plan: Any = None               # the last coordinator plan (spoke & wheel with feedback)
    history: tuple = ()                        # all earlier turns, all agents (decentralized feedback only)


class Proposer(Protocol):
    def propose(self, ctx: ProposeContext) -> Any: ...          # None = this agent failed


class Coordinator(Protocol):
    def merge(self, proposals: Sequence[Any], turn: int) -> Any: ...   # None = the coordinator failed


@dataclass
class DecisionOutcome:
    architecture: str
    decision: Any
    turns: int
    agreed: bool
    proposals: list[list[Any]] = field(default_factory=list)   # per turn, agent order, after replacement
    coordinator_plans: list[Any] = field(default_factory=list)  # per merge (after the fallback)
    failures: int = 0
    coordinator_failures: int = 0
    fallback: str = ""


def _call(proposer: Proposer, ctx: ProposeContext) -> Any:
    return proposer.propose(ctx)


class _Session:
    """Runs turns, counts failures and replaces failed proposals."""

    def __init__(self, architecture: str, proposers: Sequence[Proposer], kind: str, failed_value: Any,
                 agree: Callable[[Sequence], bool], map_fn: Callable, rng: np.random.Generator | None,
                 vote_key: Callable[[Any], Any] | None = None) -> None:
        self.out = DecisionOutcome(architecture=architecture, decision=None, turns=0, agreed=False)
        self.proposers = proposers
        self.kind = kind
        self.failed_value = failed_value
        self.agree = agree
        self.map_fn = map_fn
        self.rng = rng
        self.vote_key = vote_key

    def turn(self, contexts: Sequence[ProposeContext]) -> list[Any]:
        raw = list(self.map_fn(_call, self.proposers[:len(contexts)], contexts))
        self.out.failures += sum(p is None for p in raw)
        props = [self.failed_value if p is None else p for p in raw]
        self.out.proposals.append(props)
        self.out.turns += 1
        return props

    def first_turn(self, n: int) -> list[Any]:
        return self.turn([ProposeContext(agent=i, turn=0) for i in range(n)])

    def merge(self, coordinator: Coordinator, props: list[Any], turn: int) -> Any:
        plan = coordinator.merge(props, turn)
        if plan is None:
            self.out.coordinator_failures += 1
            if self.kind == "categorical":
                plan, self.out.fallback = majority_vote(props, self.vote_key), "majority"
            else:
                plan, self.out.fallback = average(props, self.kind), "average"
        self.out.coordinator_plans.append(plan)
        return plan

    def no_consensus(self, props: list[Any]) -> Any:
        """Paper: averaged plan (numbers, allocations, cells) or a random choice (labels)."""
        valid = [p for p in props if p is not None]
        if self.kind != "categorical" or all(is_cell(p) for p in valid):
            self.out.fallback = "average"
            return average(props, self.kind)
        self.out.fallback = "random"
        if not valid:
            return None
        rng = self.rng if self.rng is not None else np.random.default_rng(0)
        return valid[int(rng.integers(len(valid)))]


def _decentralized(s: _Session, n: int, max_turns: int, feedback: bool) -> None:
    props = s.first_turn(n)
    s.out.agreed = s.agree(props)
    while not s.out.agreed and s.out.turns < max_turns:
        prev, history = props, tuple(tuple(p) for p in s.out.proposals)
        props = s.turn([ProposeContext(
            agent=i, turn=s.out.turns, own_previous=prev[i],
            others_previous=tuple(prev[:i] + prev[i + 1:]) if feedback else (),
            history=history if feedback else ()) for i in range(n)])
        s.out.agreed = s.agree(props)
    s.out.decision = props[0] if s.out.agreed else s.no_consensus(props)


def _spoke_wheel_feedback(s: _Session, n: int, coordinator: Coordinator, max_turns: int) -> None:
    props = s.first_turn(n)
    plan = s.merge(coordinator, props, 0)
    for t in range(1, max_turns):
        prev = props
        props = s.turn([ProposeContext(agent=i, turn=t, own_previous=prev[i], coordinator_plan=plan)
                        for i in range(n)])
        s.out.agreed = s.agree([plan, *props])
        if s.out.agreed:
            break
        new = s.merge(coordinator, props, t)
        plan = plan if new is None else new
    s.out.decision = plan


def decide(architecture: str, proposers: Sequence[Proposer], *, kind: str,
              coordinator: Coordinator | None = None, max_turns: int = 5, failed_value: Any = None,
              agree: Callable[[Sequence], bool] | None = None, map_fn: Callable = map,
              rng: np.random.Generator | None = None,
              vote_key: Callable[[Any], Any] | None = None) -> DecisionOutcome:
    """Run ``architecture`` over ``proposers`` and return the decision with its bookkeeping.

    ``rng`` is only used for the labels' random choice of the decentralized architectures
    (default ``np.random.default_rng(0)``). ``vote_key`` (categorical proposals): what two proposals must share to
    count as the same vote in ``majority`` and in spoke & wheel's coordinator fallback (default: the whole
    proposal); e.g. the normalised answer of a text reply.
    """
    if architecture not in ARCHITECTURES:
        raise ConfigError(f"architecture must be one of {', '.join(ARCHITECTURES)}; got {architecture!r}")
    check_kind(kind)
    n = len(proposers)
    if n < 1:
        raise ConfigError("aggregation needs at least one proposer")
    if max_turns < 1:
        raise ConfigError(f"max_turns must be >= 1 (got {max_turns})")
    if architecture.startswith("spoke_wheel") and coordinator is None:
        raise ConfigError(f"architecture {architecture!r} needs a coordinator")
    s = _Session(architecture, list(proposers), kind, failed_value, agree or default_agree(kind), map_fn, rng,
                 vote_key)
    if architecture in ("decentralized", "decentralized_feedback"):
        _decentralized(s, n, max_turns, feedback=architecture == "decentralized_feedback")
    elif architecture == "spoke_wheel_feedback":
        _spoke_wheel_feedback(s, n, coordinator, max_turns)
    else:
        props = s.first_turn(1 if architecture == "single" else n)
        s.out.agreed = s.agree(props)
        if architecture == "single":
            s.out.decision = props[0]
        elif architecture == "majority":
            s.out.decision = majority_vote(props, vote_key)
        elif architecture == "averaging":
            s.out.decision = average(props, kind)
        else:
            s.out.decision = s.merge(coordinator, props, 0)
    return s.out
