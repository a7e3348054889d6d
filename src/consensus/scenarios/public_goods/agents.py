"""The contributors of scenario 3: heuristic, random and LLM (``consensus.discussion.agents.DiscussionAgent``).

An implicit action is the agent's own contribution x_i in [0, C_max]; a vote is a group total x_group in
[0, N·C_max] (explicit mode: everybody pays x_group/N). ``own`` is 0.0.

* ``HeuristicContributor``: a threshold belief θ̂ and a share of it by role (``PREFERENCES``: fair share θ̂/N of the
  official notice or the last known θ for ``standard`` and ``strategic``; 1.25 θ̂/N with θ̂ the highest claim for
  ``altruistic``; 0.8 θ/N ignoring reports for ``conservative``; the newest claim, +20 % after an unfunded round, for
  ``adaptive``; 1.5 × the highest claim for ``guarantor``; a quarter share for ``minimal``; the mean of the claims for
  ``moderate``). With the other contributors' proposals in the inbox, ``strategic`` covers the whole remaining gap
  to θ̂ and ``altruistic``/``guarantor`` half of it ("adjust contributions based on others' behavior"). Votes:
  N × its preference at turn 0; later turns adopt the coordinator's plan when shown, else the previous turn's mean
  when shown, else its previous vote.
* ``RandomContributor``: uniform in [0, C_max] (votes in [0, N·C_max]) from ``default_rng([seed, 7, id])``.
* ``LLMContributor``: the F.4 prompt; fallbacks counted by ``consensus.discussion.agents.ask_llm`` (``out_of_range``,
  ``unparseable``, ``llm_error``, ``client_error``), whose action is ``fallback_policy``: ``idle`` (contribute 0) or
  ``heuristic``.
* ``MedianCoordinator`` (spoke & wheel, every planner): the median of the valid votes.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from consensus.discussion import agents as discussion
from consensus.discussion.agents import DiscussionAgent
from consensus.discussion.replies import Reply
from consensus.errors import ConfigError
from consensus.llm.base import LLMClient
from consensus.scenarios.public_goods import prompts as P


def _official(obs) -> float:
    claims = obs.claims("threshold", "official")
    return claims[-1] if claims else obs.known_threshold


def _highest(obs) -> float:
    return max([obs.known_threshold, *obs.claims("threshold")])


def _newest(obs) -> float:
    claims = obs.claims("threshold")
    return claims[-1] if claims else obs.known_threshold


#: role -> (belief θ̂, factor of the fair share θ̂/N)
PREFERENCES = {
    "standard": lambda obs: (_official(obs), 1.0),
    "strategic": lambda obs: (_official(obs), 1.0),
    "altruistic": lambda obs: (_highest(obs), 1.25),
    "conservative": lambda obs: (obs.known_threshold, 0.8),
    "adaptive": lambda obs: (_newest(obs), 1.2 if obs.last_funded is False else 1.0),
    "guarantor": lambda obs: (_highest(obs), 1.5),
    "minimal": lambda obs: (obs.known_threshold, 0.25),
    "moderate": lambda obs: (float(np.mean([obs.known_threshold, *obs.claims("threshold")])), 1.0),
}
GAP_COVER = {"strategic": 1.0, "altruistic": 0.5, "guarantor": 0.5}


class ContributorAgent(DiscussionAgent):
    """A contributor: a discussion agent whose actions are amounts."""


class HeuristicContributor(ContributorAgent):
    def preference(self, obs) -> tuple[float, float]:
        """(θ̂, own contribution before coordination)."""
        belief, factor = PREFERENCES.get(self.role.key, PREFERENCES["standard"])(obs)
        return belief, float(np.clip(factor * belief / obs.num_agents, 0.0, obs.max_contribution))

    def choose(self, obs, inbox) -> float:
        belief, x = self.preference(obs)
        others = [float(m.proposal) for m in inbox if m.sender != self.agent_id and m.proposal is not None]
        if others and self.role.key in GAP_COVER:
            expected = sum(others) * (obs.num_agents - 1) / len(others)
            gap = belief - expected - x
            if gap > 0:
                x += GAP_COVER[self.role.key] * gap
        return float(np.clip(x, 0.0, obs.max_contribution))

    def _reply(self, x: float, verb: str) -> Reply:
        return Reply(analysis=f"{self.role.title}: {x:.1f}.", action=x, message=f"{verb} {x:.1f}.")

    def _discuss(self, obs, inbox, turn, own) -> Reply:
        return self._reply(self.choose(obs, inbox), "I plan to contribute")

    def _act(self, obs, inbox, own) -> Reply:
        return self._reply(self.choose(obs, inbox), "I contribute")

    def _vote(self, obs, inbox, own, ctx, strategy) -> Reply:
        if ctx.turn > 0 and ctx.coordinator_plan is not None:
            total = float(ctx.coordinator_plan)
        elif ctx.turn > 0 and ctx.history:
            total = float(np.mean([v for v in ctx.history[-1] if v is not None] or [0.0]))
        elif ctx.turn > 0 and ctx.own_previous is not None:
            total = float(ctx.own_previous)
        else:
            total = obs.num_agents * self.preference(obs)[1]
        return self._reply(total, "I vote for a team total of")


class RandomContributor(ContributorAgent):
    def __init__(self, agent_id, role, cfg) -> None:
        super().__init__(agent_id, role, cfg)
        self.rng = np.random.default_rng([cfg.seed, 7, agent_id])

    def _draw(self, upper: float) -> Reply:
        return Reply(analysis="random choice", action=float(self.rng.uniform(0.0, upper)))

    def _discuss(self, obs, inbox, turn, own) -> Reply:
        return self._draw(obs.max_contribution)

    def _act(self, obs, inbox, own) -> Reply:
        return self._draw(obs.max_contribution)

    def _vote(self, obs, inbox, own, ctx, strategy) -> Reply:
        return self._draw(obs.num_agents * obs.max_contribution)


class LLMContributor(ContributorAgent):
    def __init__(self, client: LLMClient, agent_id, role, cfg) -> None:
        super().__init__(agent_id, role, cfg)
        self.client = client
        self._heuristic = HeuristicContributor(agent_id, role, cfg) if cfg.fallback_policy == "heuristic" else None

    def _ask(self, obs, inbox, phase: tuple[str, str], label: str, upper: float, fallback) -> Reply:
        cfg = self.cfg
        others = [m for m in inbox if m.sender != self.agent_id]
        shown = discussion.shown_inbox(self.agent_id, inbox, cfg.num_agents, cfg.inbox_max_messages)
        messages = P.contributor_messages(
            agent_id=self.agent_id, role=self.role, situation=P.situation_text(obs, cfg.message_max_chars),
            previous=P.previous_text(obs), messages=P.inbox_text(shown, total=len(others),
                                                                 max_chars=cfg.message_max_chars),
            phase=phase[0], action_item=phase[1], upper=upper)
        reply = discussion.ask_llm(
            self.client, messages, cfg=cfg, parse=lambda text: P.parse_reply(text, upper),
            retry=lambda error: P.retry_message(error, upper), schema=P.response_schema(upper),
            tag=f"contributor_{self.agent_id}/round_{obs.round}/{label}", seed=cfg.seed + self.agent_id)
        if reply.fallback:
            reply.action = fallback()
        return reply

    def _own_fallback(self, obs, inbox) -> float:
        return self._heuristic.choose(obs, inbox) if self._heuristic is not None else 0.0

    def _discuss(self, obs, inbox, turn, own) -> Reply:
        text = P.DISCUSSION_PHASE.format(turn=turn + 1, turns=max(self.cfg.discussion_turns, turn + 1))
        return self._ask(obs, inbox, (text, P.DISCUSSION_ITEM), f"discuss_{turn}", obs.max_contribution,
                         lambda: self._own_fallback(obs, inbox))

    def _act(self, obs, inbox, own) -> Reply:
        return self._ask(obs, inbox, (P.IMPLICIT_PHASE, P.IMPLICIT_ITEM), "act", obs.max_contribution,
                         lambda: self._own_fallback(obs, inbox))

    def _vote(self, obs, inbox, own, ctx, strategy) -> Reply:
        phase = P.vote_phase(obs.num_agents, strategy, self.cfg.max_agreement_turns, ctx)
        return self._ask(obs, inbox, phase, f"vote_{ctx.turn}", obs.num_agents * obs.max_contribution,
                         lambda: None)


class MedianCoordinator:
    """Spoke & wheel: the median of the valid votes."""

    def __init__(self) -> None:
        self.log: list[Reply] = []

    def prepare(self, obs, roles: Sequence[str] = ()) -> None:
        self.log = []

    def merge(self, proposals, turn: int) -> float | None:
        valid = [float(p) for p in proposals if p is not None]
        if not valid:
            return None
        plan = float(np.median(valid))
        self.log.append(Reply(analysis="median vote", action=plan))
        return plan


def make_contributors(cfg, client: LLMClient | None = None) -> list[ContributorAgent]:
    team = []
    for i in range(cfg.num_agents):
        role = P.role_for(cfg.roles, i)
        if cfg.planner == "llm":
            if client is None:
                raise ConfigError("planner 'llm' needs an LLM client (llm_backend); none was given")
            team.append(LLMContributor(client, i, role, cfg))
        elif cfg.planner == "random":
            team.append(RandomContributor(i, role, cfg))
        else:
            team.append(HeuristicContributor(i, role, cfg))
    return team
