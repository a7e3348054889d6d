"""Agents and coordinators of the NLP tasks (``consensus.decision``'s ``Proposer`` / ``Coordinator``).

LLM (``consensus.llm``): ``LLMTextAgent.propose(ctx)`` sends the task's prompt for the turn (``Task.messages``) and
parses the reply (``Task.parse``); ``LLMTextCoordinator.merge(proposals, turn)`` sends the wheel's prompt. A reply
the parser rejects is followed by a correction turn up to ``parse_retries`` times (default 0: the paper asked once);
a reply still unusable, an ``LLMError`` or any other client exception returns None (a failed agent, counted by the
architecture) and is counted in ``counters()["fallbacks"][kind]`` (``prompts.FALLBACK_KINDS``, "llm_error",
"client_error"). Request tags: ``item_<k>/agent_<i>/turn_<t>`` (``coordinator`` for the wheel), distinct within a
trial as the runner needs for exact replay. ``counters()`` also holds ``llm_seconds`` (the sum of the replies'
latencies: recorded in transcripts, so a replay gives the same figure), ``truncated``, ``near_miss`` and ``models`` (the
model names the endpoint reported, also recorded).

Heuristic (no LLM): ``HeuristicAgent`` (seeded, its own ``rng``; per call, in this order: fails with probability
``fail_prob``, answers wrong with probability ``noise``): its answer is the task's heuristic, or when it is shown
earlier answers (feedback) the most common of them by the task's key, counting its own previous answer first (ties:
its own, then agent order; the coordinator's answer alone when it is shown one); a wrong answer is ``Task.wrong``.
``HeuristicCoordinator``: the most common valid proposal by key; ties (e.g. every summary different) go to the
medoid, the proposal with the highest summed token F1 to the others, then to the earliest.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from consensus.decision import ProposeContext
from consensus.llm.base import ChatRequest, LLMClient, LLMError
from consensus.llm.counters import new_counters
from consensus.scenarios.nlp_tasks.data import Item
from consensus.scenarios.nlp_tasks.scoring import token_f1
from consensus.scenarios.nlp_tasks.tasks import Task

log = logging.getLogger(__name__)

RETRY_MESSAGE = {"qa": "Your reply could not be used ({kind}). Answer again: the answer in brackets [], then what "
                       "the Additional Instruction asks.",
                 "classification": "Your reply could not be used ({kind}). Respond with only the topic name: World, "
                                   "Sports, Business or Science/Technology.",
                 "summarization": "Your reply could not be used ({kind}). Respond with one short summary sentence."}


def text_counters() -> dict:
    return {**new_counters(), "llm_seconds": 0.0, "truncated": 0, "near_miss": 0, "models": []}


def add_text_counters(total: dict, part: dict) -> dict:
    for key in ("plans", "calls", "parse_failures", "truncated", "near_miss"):
        total[key] = total.get(key, 0) + int(part.get(key, 0))
    total["llm_seconds"] = total.get("llm_seconds", 0.0) + float(part.get("llm_seconds", 0.0))
    for reason, count in part.get("fallbacks", {}).items():
        total["fallbacks"][reason] = total["fallbacks"].get(reason, 0) + int(count)
    total["models"] = sorted(set(total.get("models", [])) | set(part.get("models", [])))
    return total


class _Asker:
    def __init__(self, client: LLMClient, task: Task, cfg, *, name: str, seed: int | None) -> None:
        self.client, self.task, self.cfg, self.name, self.seed = client, task, cfg, name, seed
        self._c = text_counters()

    def counters(self) -> dict:
        return {**self._c, "fallbacks": dict(self._c["fallbacks"]), "models": sorted(self._c["models"])}

    def ask(self, messages: list[dict], tag: str, turn: int) -> Any:
        c, cfg = self._c, self.cfg
        c["plans"] += 1
        seed = None if self.seed is None else (self.seed + turn) % 2**31
        kind = ""
        for attempt in range(cfg.parse_retries + 1):
            request = ChatRequest(messages=tuple(messages), model=cfg.llm_model, temperature=cfg.llm_temperature,
                                  max_tokens=cfg.llm_max_tokens, seed=seed,
                                  tag=tag if attempt == 0 else f"{tag}/retry_{attempt}")
            c["calls"] += 1
            try:
                response = self.client.complete(request)
            except LLMError as exc:
                log.warning("%s: LLM request failed: %s", tag, exc)
                return self._fail("llm_error")
            except Exception:  # noqa: BLE001 - a broken client must not take the trial down: this agent failed
                log.exception("%s: LLM client raised", tag)
                return self._fail("client_error")
            c["llm_seconds"] += float(response.latency_s or 0.0)
            if response.model and response.model not in c["models"]:
                c["models"].append(str(response.model)[:100])
            parsed = self.task.parse(response.text)
            c["truncated"] += parsed.truncated
            c["near_miss"] += parsed.near_miss
            if parsed.value is not None:
                return parsed.value
            kind = parsed.kind
            c["parse_failures"] += 1
            log.info("%s: unusable reply (%s)", tag, kind)
            messages = [*messages, {"role": "assistant", "content": str(response.text)[:2000]},
                        {"role": "user", "content": RETRY_MESSAGE[self.task.name].format(kind=kind)}]
        return self._fail(kind)

    def _fail(self, kind: str) -> None:
        self._c["fallbacks"][kind] = self._c["fallbacks"].get(kind, 0) + 1
        return None


class LLMTextAgent:
    """One LLM agent answering one item (a ``Proposer``)."""

    def __init__(self, client: LLMClient, task: Task, item: Item, cfg, *, agent_id: int, item_index: int,
                 seed: int | None = None) -> None:
        self.task, self.item, self.cfg, self.agent_id, self.item_index = task, item, cfg, agent_id, item_index
        self._asker = _Asker(client, task, cfg, name=f"agent_{agent_id}", seed=seed)

    def counters(self) -> dict:
        return self._asker.counters()

    def propose(self, ctx: ProposeContext) -> Any:
        return self._asker.ask(self.task.messages(self.item, ctx, self.cfg),
                               f"item_{self.item_index}/agent_{self.agent_id}/turn_{ctx.turn}", ctx.turn)


class LLMTextCoordinator:
    """The wheel of spoke & wheel: merges the spokes' answers with an LLM (a ``Coordinator``)."""

    def __init__(self, client: LLMClient, task: Task, item: Item, cfg, *, item_index: int,
                 seed: int | None = None) -> None:
        self.task, self.item, self.cfg, self.item_index = task, item, cfg, item_index
        self._asker = _Asker(client, task, cfg, name="coordinator", seed=seed)

    def counters(self) -> dict:
        return self._asker.counters()

    def merge(self, proposals: Sequence[Any], turn: int) -> Any:
        return self._asker.ask(self.task.coordinator_messages(self.item, proposals, self.cfg),
                               f"item_{self.item_index}/coordinator/turn_{turn}", turn)


def most_common(task: Task, values: Sequence[Any]) -> Any:
    """The most common valid value by ``task.key``; ties: the medoid by token F1, then the earliest (None if none)."""
    valid = [v for v in values if v is not None]
    if not valid:
        return None
    keys = [task.key(v) for v in valid]
    counts = [keys.count(k) for k in keys]
    top = max(counts)
    tied = [i for i, n in enumerate(counts) if n == top]
    if len({keys[i] for i in tied}) == 1:
        return valid[tied[0]]
    texts = [str(v) for v in valid]
    closeness = [sum(token_f1(texts[i], texts[j]) for j in range(len(valid)) if j != i) for i in tied]
    return valid[tied[int(np.argmax(closeness))]]


class HeuristicAgent:
    """Seeded rule-based agent (module docstring)."""

    def __init__(self, task: Task, item: Item, rng: np.random.Generator, *, noise: float = 0.2,
                 fail_prob: float = 0.05) -> None:
        self.task, self.item, self.rng, self.noise, self.fail_prob = task, item, rng, noise, fail_prob
        self.base = task.heuristic(item)

    def propose(self, ctx: ProposeContext) -> Any:
        failed = self.rng.random() < self.fail_prob
        wrong = self.rng.random() < self.noise
        if ctx.coordinator_plan is not None:
            base = ctx.coordinator_plan
        elif ctx.others_previous:
            base = most_common(self.task, [ctx.own_previous, *ctx.others_previous])
        else:
            base = None
        base = self.base if base is None else base
        value = self.task.wrong(self.item, base, self.rng) if wrong else base
        return None if failed else value


class HeuristicCoordinator:
    def __init__(self, task: Task) -> None:
        self.task = task

    def merge(self, proposals: Sequence[Any], turn: int) -> Any:
        return most_common(self.task, proposals)
