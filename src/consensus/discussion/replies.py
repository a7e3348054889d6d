"""One agent's answer (``Reply``), the messages agents read (``InboxMessage``) and their counters.

Counter layout (``agent_counters``): ``consensus.llm.counters.new_counters`` (plans = replies, calls = LLM requests,
parse failures, fallbacks by reason) plus prompt/completion tokens and the message bounds (``messages_truncated``,
``messages_empty``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from consensus.llm.counters import add_counters, new_counters

_EXTRA_COUNTERS = ("prompt_tokens", "completion_tokens", "messages_truncated", "messages_empty")


def agent_counters() -> dict:
    return {**new_counters(), **{k: 0 for k in _EXTRA_COUNTERS}}


def add_agent_counters(total: dict, part: dict) -> dict:
    """Add ``part`` into ``total`` (both ``agent_counters`` layout); returns ``total``."""
    add_counters(total, part)
    for key in _EXTRA_COUNTERS:
        total[key] += int(part.get(key, 0))
    return total


def jsonable(value: Any) -> Any:
    """An action as JSON: tuples and lists as lists, sets sorted, numpy scalars as Python numbers."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (set, frozenset)):
        return sorted(jsonable(v) for v in value)
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass(frozen=True)
class InboxMessage:
    """One other agent's message as an agent reads it (text already cleaned and bounded by its sender)."""
    sender: int
    role: str                  # the sender's role title
    text: str                  # "" = no message
    proposal: Any              # the action the sender proposed with it (validated) or None
    turn: int = 0              # discussion turn; -1 = the action phase of the previous round

    def to_dict(self) -> dict:
        d = asdict(self)
        d["proposal"] = jsonable(self.proposal)
        return d


@dataclass
class Reply:
    analysis: str = ""
    action: Any = None
    message: str = ""
    fallback: bool = False
    fallback_reason: str = ""      # "" | llm_error | client_error | unparseable | a scenario's invalid-action reason
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    parse_failures: int = 0
    message_truncated: bool = False
    message_empty: bool = False
    error: str = ""                # why the last unusable reply was rejected (bounded)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["action"] = jsonable(self.action)
        return d

    def counters(self) -> dict:
        """This reply in the ``agent_counters`` layout."""
        c = agent_counters()
        c.update(plans=1, calls=self.llm_calls, parse_failures=self.parse_failures,
                 prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
                 messages_truncated=int(self.message_truncated), messages_empty=int(self.message_empty))
        if self.fallback:
            c["fallbacks"] = {self.fallback_reason: 1}
        return c
