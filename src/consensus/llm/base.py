"""LLM client interface: one chat-completions request in, one text reply out.

Every backend (OpenAI-compatible HTTP, embedded llama.cpp server, record/replay)
implements ``LLMClient``. Requests are plain data so that they can be hashed
(``ChatRequest.key``) for the transcript store.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from consensus.errors import ConsensusError


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[dict, ...]            # ({"role": ..., "content": ...}, ...)
    model: str = ""
    temperature: float = 0.7
    max_tokens: int = 256
    response_format: dict | None = None   # e.g. {"type": "json_schema", "json_schema": {...}}
    seed: int | None = None
    tag: str = ""                         # caller label (e.g. "robot_0/round_3"); not part of the key
    tools: tuple[dict, ...] | None = None  # OpenAI tool definitions ({"type": "function", "function": {...}})
    tool_choice: str | None = None        # "auto" | "required" | "none" (with ``tools``)
    grammar: str | None = None            # GBNF grammar: sent to llama.cpp servers only, ignored elsewhere

    def key(self) -> str:
        """SHA-256 of the canonical request (tag excluded; the tool and grammar fields only when set, so the keys
        of requests without them are those of earlier transcripts)."""
        d = asdict(self)
        d.pop("tag", None)
        for name in ("tools", "tool_choice", "grammar"):
            if d[name] is None:
                d.pop(name)
            elif name == "tools":
                d[name] = list(d[name])
        d["messages"] = list(d["messages"])
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class ChatResponse:
    text: str
    model: str = ""
    latency_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    from_replay: bool = False
    meta: dict[str, Any] = field(default_factory=dict)   # e.g. "server_timings": llama.cpp's own timings
    tool_calls: list[dict] = field(default_factory=list)  # [{"id", "name", "arguments": str}] (tools requests)


class LLMError(ConsensusError):
    """The request failed after the client's own retries (endpoint down, timeout, 5xx, refused)."""


class ReplayMiss(LLMError):
    """Replay mode: the transcript store has no answer for this request."""


class LLMClient(Protocol):
    model: str

    def complete(self, req: ChatRequest) -> ChatResponse: ...

    def status(self) -> dict: ...   # {"state": "ok"|"retrying"|"down", "calls": int, "errors": int, ...}

    def close(self) -> None: ...
