"""What every discussion agent shares, and the one LLM call with its fallback accounting.

``DiscussionAgent`` offers three steps, callable one agent at a time (a ROS node calls them for itself):

* ``discuss(obs, inbox, turn, own)``: a discussion turn: analysis, a *proposed* action and a message;
* ``act(obs, inbox, own)``: the implicit action phase: this agent's own action;
* ``vote(obs, inbox, own, ctx, strategy)``: a vote of an explicit strategy. ``propose(ctx)`` is the same vote
  behind ``consensus.decision``'s ``Proposer`` protocol, after ``prepare_vote(obs, inbox, own, strategy)`` stored
  the round's context; each vote reply is kept in ``vote_log``. A failed vote is ``None`` to the aggregation.

``own`` is what the scenario tells an agent about itself (a drone's cell; ``None`` elsewhere). Subclasses implement
``_discuss``/``_act``/``_vote``; every returned ``Reply`` is added to the agent's counters.

``ask_llm`` sends one request with the scenario's JSON schema, reads the reply with the scenario's parser, sends up to
``cfg.parse_retries`` correction turns and else returns a counted fallback (``action=None``, ``fallback=True``) with
the reason: ``llm_error`` (the client gave up after its own retries), ``client_error`` (any other client
exception), ``unparseable`` (no usable JSON / action), or the parser's own reason for a well-formed but invalid
action (e.g. ``off_grid``, ``unknown_node``, ``out_of_range``). The caller applies its fallback action.
"""
from __future__ import annotations

import copy
import logging
import threading
from typing import Any, Callable, Sequence

from consensus.decision import ProposeContext
from consensus.discussion.replies import InboxMessage, Reply, add_agent_counters, agent_counters
from consensus.discussion.roles import Role
from consensus.discussion.text import ANALYSIS_MAX_CHARS, clean_text, message_text
from consensus.llm.base import ChatRequest, LLMClient, LLMError

log = logging.getLogger(__name__)


class DiscussionAgent:
    """Identity, role, counters and the vote context of explicit strategies."""

    def __init__(self, agent_id: int, role: Role, cfg) -> None:
        self.agent_id = agent_id
        self.role = role
        self.cfg = cfg
        self._count_lock = threading.Lock()
        self._counters = agent_counters()
        self._vote_context: tuple | None = None
        self.vote_log: list[Reply] = []

    def discuss(self, obs, inbox: Sequence[InboxMessage], turn: int, own: Any = None) -> Reply:
        return self._counted(self._discuss(obs, inbox, turn, own))

    def act(self, obs, inbox: Sequence[InboxMessage], own: Any = None) -> Reply:
        return self._counted(self._act(obs, inbox, own))

    def vote(self, obs, inbox: Sequence[InboxMessage], own: Any, ctx: ProposeContext, strategy: str) -> Reply:
        return self._counted(self._vote(obs, inbox, own, ctx, strategy))

    # consensus.decision.Proposer
    def prepare_vote(self, obs, inbox: Sequence[InboxMessage], own: Any, strategy: str) -> None:
        self._vote_context = (obs, tuple(inbox), own, strategy)
        self.vote_log = []

    def propose(self, ctx: ProposeContext) -> Any:
        if self._vote_context is None:
            raise RuntimeError(f"agent {self.agent_id}: propose() before prepare_vote()")
        obs, inbox, own, strategy = self._vote_context
        reply = self.vote(obs, inbox, own, ctx, strategy)
        self.vote_log.append(reply)
        return None if reply.fallback else reply.action

    def counters(self) -> dict:
        with self._count_lock:
            return copy.deepcopy(self._counters)

    def _counted(self, reply: Reply) -> Reply:
        with self._count_lock:
            add_agent_counters(self._counters, reply.counters())
        return reply

    def _discuss(self, obs, inbox, turn, own) -> Reply:
        raise NotImplementedError

    def _act(self, obs, inbox, own) -> Reply:
        raise NotImplementedError

    def _vote(self, obs, inbox, own, ctx, strategy) -> Reply:
        raise NotImplementedError


def shown_inbox(agent_id: int, inbox: Sequence[InboxMessage], team_size: int, max_messages: int) -> list[InboxMessage]:
    """At most ``max_messages`` messages of the others: the senders following ``agent_id``, cyclically (so every
    message is read by some agent when the team is larger than the bound)."""
    n = max(team_size, 1)
    others = sorted((m for m in inbox if m.sender != agent_id), key=lambda m: ((m.sender - agent_id) % n, m.turn))
    return others[:max_messages]


def ask_llm(client: LLMClient, messages: list[dict], *, cfg, parse: Callable[[str], Any], retry: Callable[[str], str],
            schema: dict | None, tag: str, seed: int | None, with_message: bool = True) -> Reply:
    """One LLM decision (module docstring). ``parse(text)`` never raises and returns an object with ``action``
    (``None`` when unusable), ``analysis``, ``message``, ``error`` and ``reason`` ("" = unparseable)."""
    reply = Reply()
    reason = "unparseable"
    for attempt in range(cfg.parse_retries + 1):
        request = ChatRequest(messages=tuple(messages), model=cfg.llm_model, temperature=cfg.llm_temperature,
                              max_tokens=cfg.llm_max_tokens, response_format=schema if cfg.llm_structured else None,
                              seed=seed, tag=tag if attempt == 0 else f"{tag}/retry_{attempt}")
        reply.llm_calls += 1
        try:
            response = client.complete(request)
        except LLMError as exc:
            log.warning("%s: LLM request failed: %s", tag, exc)
            return failed(reply, "llm_error", f"LLM request failed: {exc}")
        except Exception as exc:  # noqa: BLE001 - a broken client must not take the agent down
            log.exception("%s: LLM client raised", tag)
            return failed(reply, "client_error", f"LLM client error: {type(exc).__name__}: {exc}")
        reply.prompt_tokens += response.prompt_tokens or 0
        reply.completion_tokens += response.completion_tokens or 0
        parsed = parse(response.text)
        if parsed.action is not None:
            reply.action, reply.analysis = parsed.action, parsed.analysis
            if with_message:
                set_message(reply, parsed.message, cfg.message_max_chars)
            return reply
        reply.parse_failures += 1
        reason = getattr(parsed, "reason", "") or "unparseable"
        reply.error = clean_text(parsed.error, 200)[0]
        log.info("%s: unusable reply (%s)", tag, reply.error)
        messages = [*messages, {"role": "assistant", "content": clean_text(response.text, ANALYSIS_MAX_CHARS)[0]},
                    {"role": "user", "content": retry(parsed.error)}]
    return failed(reply, reason, reply.error)


def failed(reply: Reply, reason: str, error: str) -> Reply:
    reply.fallback, reply.fallback_reason, reply.action = True, reason, None
    reply.error = clean_text(error, 200)[0]
    return reply


def set_message(reply: Reply, raw: Any, max_chars: int) -> None:
    reply.message, reply.message_truncated = message_text(raw, max_chars)
    reply.message_empty = not reply.message
