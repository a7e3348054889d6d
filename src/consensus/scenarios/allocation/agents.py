"""Agents and coordinators for paper 3's resource allocation (``consensus.decision`` Proposer/Coordinator).

LLM (``consensus.llm``):

* ``LLMAllocationAgent.propose(ctx)``: the paper's allocation prompt; with feedback (``ctx.coordinator_plan``
  in spoke & wheel with feedback, or ``ctx.others_previous`` in decentralized with feedback) the paper's
  feedback prompt listing those plans. Plain decentralized shows the agent nothing of earlier turns: the
  paper's prompt without feedback carries no previous plan, so each turn is an independent regeneration.
* ``LLMAllocationCoordinator.merge(proposals, turn)``: the wheel of spoke & wheel; our coordinator prompt
  (the paper gives none) listing the spokes' plans.

Both ask in the prompt ``style`` (``paper``: the paper's prompts as written, Python dict, no schema; ``json``: the
JSON adaptation with ``response_format`` = the problem's JSON schema) and parse with
``consensus.scenarios.allocation.prompts.parse_allocation`` in the same style. An unreadable or invalid reply is
followed by a correction turn up to ``parse_retries`` times (default 0: the paper retried nothing). A reply that is
still invalid, an ``LLMError`` (endpoint gave up) or any other client exception makes the call a *fallback*:
``None`` is returned (the aggregation layer counts it and, in the study, replaces it by the all-zero plan)
and ``counters()["fallbacks"][reason]`` is incremented ("unparseable", "llm_error", "client_error").
Counters use the LLM planner's layout (``consensus.scenarios.aggregation.planners.llm.new_counters``; "plans" =
requests for a
plan). Request seeds: ``seed + turn`` when a seed is given (distinct per agent when the seeds are), so
identical prompts of two agents or two turns are not forced to the same sampled answer.

Classical (no LLM), for tests and quick runs:

* ``ProportionalAgent``: always the proportional share (``proportional_allocation``).
* ``NoisyAgent``: a seeded toy model of an unreliable agent. Per call, in this order from its own ``rng``:
  fails (returns None) with probability ``fail_prob``; otherwise starts from a base plan (the mean of the
  plans it is shown as feedback, i.e. the coordinator plan or the other agents' previous plans, else the
  proportional share), multiplies each entry with probability ``noise`` by a factor drawn from
  U(0.5, 1.5), and rounds every entry to a whole unit (LLM plans are whole numbers, which also lets
  identical plans win a majority vote). A toy for exercising the architectures, not a model of an LLM.
* ``MedianCoordinator``: the element-wise median of the valid plans (None if there is none).
"""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from consensus.decision import ProposeContext
from consensus.errors import ConfigError
from consensus.llm.base import ChatRequest, LLMClient, LLMError
from consensus.llm.counters import new_counters
from consensus.scenarios.allocation.prompts import (allocation_messages, coordinator_messages, parse_allocation,
                                          response_schema, retry_message)
from consensus.llm.parsing import MAX_REASONING_CHARS
from consensus.scenarios.allocation.model import AllocationProblem, proportional_allocation

log = logging.getLogger(__name__)


class _AllocationAsker:
    """Send one allocation request, parse, retry with a correction turn, count; None on failure."""

    def __init__(self, client: LLMClient, prob: AllocationProblem, *, model: str, temperature: float,
                 max_tokens: int, parse_retries: int, seed: int | None, name: str, style: str = "json") -> None:
        if not 0 <= parse_retries <= 10:
            raise ConfigError(f"allocation agent: parse_retries must be in [0, 10] (got {parse_retries})")
        if max_tokens < 1:
            raise ConfigError(f"allocation agent: max_tokens must be >= 1 (got {max_tokens})")
        self.client = client
        self.prob = prob
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.parse_retries = parse_retries
        self.seed = seed
        self.name = name
        if style not in ("paper", "json"):
            raise ConfigError(f"allocation agent: prompt_style must be paper or json (got {style!r})")
        self.style = style
        self.schema = response_schema(prob) if style == "json" else None
        self._counters = new_counters()

    def counters(self) -> dict:
        return {**self._counters, "fallbacks": dict(self._counters["fallbacks"])}

    def ask(self, messages: list[dict], turn: int) -> np.ndarray | None:
        c = self._counters
        c["plans"] += 1
        seed = None if self.seed is None else (self.seed + turn) % 2**31
        tag = f"{self.name}/turn_{turn}"
        for attempt in range(self.parse_retries + 1):
            request = ChatRequest(messages=tuple(messages), model=self.model, temperature=self.temperature,
                                  max_tokens=self.max_tokens, response_format=self.schema, seed=seed,
                                  tag=tag if attempt == 0 else f"{tag}/retry_{attempt}")
            c["calls"] += 1
            try:
                reply = self.client.complete(request).text
            except LLMError as exc:
                log.warning("%s turn %d: LLM request failed: %s", self.name, turn, exc)
                return self._fail("llm_error")
            except Exception:  # a broken client must not take the study down: this agent failed
                log.exception("%s turn %d: LLM client raised", self.name, turn)
                return self._fail("client_error")
            plan, error = parse_allocation(reply, self.prob, self.style)
            if plan is not None:
                return plan
            c["parse_failures"] += 1
            log.info("%s turn %d: unusable reply (%s)", self.name, turn, error)
            messages = [*messages, {"role": "assistant", "content": str(reply)[:MAX_REASONING_CHARS]},
                        {"role": "user", "content": retry_message(error, self.style)}]
        return self._fail("unparseable")

    def _fail(self, reason: str) -> None:
        fallbacks = self._counters["fallbacks"]
        fallbacks[reason] = fallbacks.get(reason, 0) + 1
        return None


def _feedback(ctx: ProposeContext) -> list[tuple[str, np.ndarray]]:
    """(label, plan) pairs shown to the agent: the coordinator's plan or the other agents' previous plans."""
    if ctx.coordinator_plan is not None:
        return [("Coordinator", ctx.coordinator_plan)]
    others = [j for j in range(len(ctx.others_previous) + 1) if j != ctx.agent]
    return [(f"Planner {j + 1}", plan) for j, plan in zip(others, ctx.others_previous) if plan is not None]


class LLMAllocationAgent:
    """One LLM planner of the allocation task (a ``Proposer``)."""

    def __init__(self, client: LLMClient, prob: AllocationProblem, *, agent_id: int, model: str = "",
                 temperature: float = 1.0, max_tokens: int = 400, parse_retries: int = 0,
                 seed: int | None = None, style: str = "json") -> None:
        self.agent_id = agent_id
        self.prob = prob
        self._asker = _AllocationAsker(client, prob, model=model, temperature=temperature, max_tokens=max_tokens,
                                       parse_retries=parse_retries, seed=seed, name=f"agent_{agent_id}",
                                       style=style)

    def counters(self) -> dict:
        return self._asker.counters()

    def propose(self, ctx: ProposeContext) -> np.ndarray | None:
        return self._asker.ask(allocation_messages(self.prob, _feedback(ctx), self._asker.style), ctx.turn)


class LLMAllocationCoordinator:
    """The central agent of spoke & wheel (a ``Coordinator``): merges the spokes' plans with an LLM."""

    def __init__(self, client: LLMClient, prob: AllocationProblem, *, model: str = "", temperature: float = 1.0,
                 max_tokens: int = 400, parse_retries: int = 0, seed: int | None = None,
                 style: str = "json") -> None:
        self.prob = prob
        self._asker = _AllocationAsker(client, prob, model=model, temperature=temperature, max_tokens=max_tokens,
                                       parse_retries=parse_retries, seed=seed, name="coordinator", style=style)

    def counters(self) -> dict:
        return self._asker.counters()

    def merge(self, proposals: Sequence[np.ndarray | None], turn: int) -> np.ndarray | None:
        return self._asker.ask(coordinator_messages(self.prob, proposals, self._asker.style), turn)


class ProportionalAgent:
    """Always proposes the proportional share (deterministic, never fails)."""

    def __init__(self, prob: AllocationProblem) -> None:
        self.plan = proportional_allocation(prob)

    def propose(self, ctx: ProposeContext) -> np.ndarray:
        return self.plan.copy()


class NoisyAgent:
    """Seeded unreliable agent (see the module docstring for the exact draws)."""

    def __init__(self, prob: AllocationProblem, rng: np.random.Generator, *, noise: float = 0.2,
                 fail_prob: float = 0.1) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ConfigError(f"noisy agent: noise must be in [0, 1] (got {noise})")
        if not 0.0 <= fail_prob <= 1.0:
            raise ConfigError(f"noisy agent: fail_prob must be in [0, 1] (got {fail_prob})")
        self.base = proportional_allocation(prob)
        self.rng = rng
        self.noise = noise
        self.fail_prob = fail_prob

    def propose(self, ctx: ProposeContext) -> np.ndarray | None:
        failed = self.rng.random() < self.fail_prob
        perturb = self.rng.random(self.base.shape) < self.noise
        factor = self.rng.uniform(0.5, 1.5, self.base.shape)
        if failed:
            return None
        shown = [plan for _, plan in _feedback(ctx)]
        base = np.mean(shown, axis=0) if shown else self.base
        return np.round(np.where(perturb, base * factor, base))


class MedianCoordinator:
    """Element-wise median of the valid plans (a ``Coordinator`` that only fails when every spoke did)."""

    def merge(self, proposals: Sequence[np.ndarray | None], turn: int) -> np.ndarray | None:
        valid = [p for p in proposals if p is not None]
        return np.median(valid, axis=0) if valid else None
