"""The defenders of scenario 2: heuristic, random and LLM (``consensus.discussion.agents.DiscussionAgent``).

An action is a ``frozenset`` of at most R node ids to fact-check; ``own`` is unused (an agent without a usable
action checks nothing).

* ``HeuristicDefender`` (classical, no LLM): ranks candidate nodes by its role (``RANKINGS``: the reported nodes
  by degree for ``standard``; detections before rumours for ``reactive``; unreported neighbours of reported nodes by
  degree, the "firebreak", for ``proactive``; nodes by the number of reported neighbours for ``network_analyzer``;
  nodes reported now but not last round for ``rapid_responder``; last round's reported nodes for ``watcher``), fills
  up with the reported nodes by degree and then the highest-degree nodes, and skips the nodes proposed by
  lower-numbered defenders in its inbox (coordination by index, as the disaster drones do); with an empty inbox
  (first turn, no interaction) defender i takes the i-th block of R nodes of its ranking. Votes: its own top R
  at turn 0; later turns adopt the coordinator's plan when shown, else the previous turn's majority when shown,
  else its previous vote.
* ``RandomDefender`` (section 4.4's random strategy): R distinct uniform nodes from ``default_rng([seed, 7, id])``.
* ``LLMDefender``: the F.3 prompt (``prompts``), the JSON schema, ``parse_retries`` corrections, then a counted
  fallback (``consensus.discussion.agents.ask_llm``; reasons ``unknown_node``, ``too_many_nodes``, ``unparseable``,
  ``llm_error``, ``client_error``) whose action is ``fallback_policy``: ``idle`` (check nothing) or ``heuristic``.
* ``TallyCoordinator`` (spoke & wheel, every planner): the R nodes named in the most votes (ties: first named).
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from consensus.decision import majority_vote
from consensus.discussion import agents as discussion
from consensus.discussion.agents import DiscussionAgent
from consensus.discussion.replies import Reply
from consensus.errors import ConfigError
from consensus.llm.base import LLMClient
from consensus.scenarios.info_spread import prompts as P


def _by_degree(obs, nodes) -> list[int]:
    g = obs.graph
    return sorted(dict.fromkeys(nodes), key=lambda n: (-g.degree[n], n))


def _firebreak(obs) -> list[int]:
    reported = set(obs.reported)
    return _by_degree(obs, [v for n in obs.reported for v in obs.graph.neighbors(n) if v not in reported])


def _pressure(obs) -> list[int]:
    reported = set(obs.reported)
    g = obs.graph
    cand = set(reported) | {v for n in reported for v in g.neighbors(n)}
    score = {v: sum(u in reported for u in g.neighbors(v)) + (1 if v in reported else 0) for v in cand}
    return sorted(cand, key=lambda v: (-score[v], -g.degree[v], v))


RANKINGS = {
    "standard": lambda obs: _by_degree(obs, obs.reported),
    "reactive": lambda obs: (_by_degree(obs, [i.node for i in obs.report if i.kind == "detection"])
                             + _by_degree(obs, [n for n in obs.reported if n not in obs.cleared])),
    "proactive": _firebreak,
    "network_analyzer": _pressure,
    "rapid_responder": lambda obs: (_by_degree(obs, [n for n in obs.reported if n not in obs.previous_reported])
                                    + _by_degree(obs, obs.reported)),
    "watcher": lambda obs: _by_degree(obs, obs.previous_reported),
}


class DefenderAgent(DiscussionAgent):
    """A defender: a discussion agent whose actions are node sets."""


class HeuristicDefender(DefenderAgent):
    def ranking(self, obs) -> list[int]:
        ranked = RANKINGS.get(self.role.key, RANKINGS["standard"])(obs)
        everything = sorted(obs.graph.degree, key=lambda nd: (-nd[1], nd[0]))
        return list(dict.fromkeys([*ranked, *_by_degree(obs, obs.reported), *(n for n, _ in everything)]))

    def choose(self, obs, inbox) -> frozenset:
        ranked = self.ranking(obs)
        if not any(m.sender != self.agent_id for m in inbox):           # nobody heard yet: take the i-th block
            start = (self.agent_id * obs.checks) % max(len(ranked), 1)
            return frozenset((ranked[start:] + ranked[:start])[:obs.checks])
        claimed = {n for m in inbox if m.sender < self.agent_id and m.proposal for n in m.proposal}
        return frozenset([n for n in ranked if n not in claimed][:obs.checks])

    def _reply(self, nodes: frozenset, verb: str) -> Reply:
        return Reply(analysis=f"{self.role.title}: {P.fmt_nodes(nodes)}.", action=nodes,
                     message=f"{verb} {P.fmt_nodes(nodes)}.")

    def _discuss(self, obs, inbox, turn, own) -> Reply:
        return self._reply(self.choose(obs, inbox), "I propose to check")

    def _act(self, obs, inbox, own) -> Reply:
        return self._reply(self.choose(obs, inbox), "Checking")

    def _vote(self, obs, inbox, own, ctx, strategy) -> Reply:
        if ctx.turn > 0 and ctx.coordinator_plan is not None:
            nodes = frozenset(ctx.coordinator_plan)
        elif ctx.turn > 0 and ctx.history:
            nodes = majority_vote(ctx.history[-1]) or frozenset()
        elif ctx.turn > 0 and ctx.own_previous is not None:
            nodes = frozenset(ctx.own_previous)
        else:
            nodes = frozenset(self.ranking(obs)[:obs.checks])
        return self._reply(nodes, "I vote for")


class RandomDefender(DefenderAgent):
    def __init__(self, agent_id, role, cfg) -> None:
        super().__init__(agent_id, role, cfg)
        self.rng = np.random.default_rng([cfg.seed, 7, agent_id])

    def _random(self, obs) -> Reply:
        nodes = frozenset(int(n) for n in self.rng.choice(obs.nodes, size=min(obs.checks, obs.nodes), replace=False))
        return Reply(analysis="random choice", action=nodes)

    def _discuss(self, obs, inbox, turn, own) -> Reply:
        return self._random(obs)

    def _act(self, obs, inbox, own) -> Reply:
        return self._random(obs)

    def _vote(self, obs, inbox, own, ctx, strategy) -> Reply:
        return self._random(obs)


class LLMDefender(DefenderAgent):
    def __init__(self, client: LLMClient, agent_id, role, cfg) -> None:
        super().__init__(agent_id, role, cfg)
        self.client = client
        self._heuristic = HeuristicDefender(agent_id, role, cfg) if cfg.fallback_policy == "heuristic" else None

    def _ask(self, obs, inbox, phase: tuple[str, str], label: str) -> Reply:
        cfg = self.cfg
        others = [m for m in inbox if m.sender != self.agent_id]
        shown = discussion.shown_inbox(self.agent_id, inbox, cfg.num_agents, cfg.inbox_max_messages)
        messages = P.defender_messages(
            agent_id=self.agent_id, role=self.role, situation=P.situation_text(obs, cfg.message_max_chars),
            network=P.network_text(obs),
            messages=P.inbox_text(shown, total=len(others), tally=[m.proposal for m in others],
                                  max_chars=cfg.message_max_chars),
            phase=phase[0], action_item=phase[1], nodes=obs.nodes, r=obs.checks)
        reply = discussion.ask_llm(
            self.client, messages, cfg=cfg, parse=lambda text: P.parse_reply(text, obs.nodes, obs.checks),
            retry=lambda error: P.retry_message(error, obs.nodes, obs.checks),
            schema=P.response_schema(obs.nodes, obs.checks), tag=f"defender_{self.agent_id}/round_{obs.round}/{label}",
            seed=cfg.seed + self.agent_id)
        if reply.fallback:
            reply.action = self._heuristic.choose(obs, inbox) if self._heuristic is not None else frozenset()
        return reply

    def _discuss(self, obs, inbox, turn, own) -> Reply:
        text = P.DISCUSSION_PHASE.format(turn=turn + 1, turns=max(self.cfg.discussion_turns, turn + 1))
        return self._ask(obs, inbox, (text, P.DISCUSSION_ITEM), f"discuss_{turn}")

    def _act(self, obs, inbox, own) -> Reply:
        return self._ask(obs, inbox, (P.IMPLICIT_PHASE, P.IMPLICIT_ITEM), "act")

    def _vote(self, obs, inbox, own, ctx, strategy) -> Reply:
        return self._ask(obs, inbox, P.vote_phase(strategy, self.cfg.max_agreement_turns, ctx), f"vote_{ctx.turn}")


class TallyCoordinator:
    """Spoke & wheel: the R nodes named in the most votes (ties: the node named first)."""

    def __init__(self, r: int) -> None:
        self.r = r
        self.log: list[Reply] = []

    def prepare(self, obs, roles: Sequence[str] = ()) -> None:
        self.log = []

    def merge(self, proposals, turn: int) -> frozenset | None:
        votes = Counter(n for p in proposals if p is not None for n in sorted(p))
        if not votes:
            return None
        plan = frozenset(n for n, _ in votes.most_common(self.r))
        self.log.append(Reply(analysis="most voted nodes", action=plan))
        return plan


def make_defenders(cfg, client: LLMClient | None = None) -> list[DefenderAgent]:
    """The team of a baseline-resolved ``InfoSpreadConfig``."""
    team = []
    for i in range(cfg.num_agents):
        role = P.role_for(cfg.roles, i)
        if cfg.planner == "llm":
            if client is None:
                raise ConfigError("planner 'llm' needs an LLM client (llm_backend); none was given")
            team.append(LLMDefender(client, i, role, cfg))
        elif cfg.planner == "random":
            team.append(RandomDefender(i, role, cfg))
        else:
            team.append(HeuristicDefender(i, role, cfg))
    return team
