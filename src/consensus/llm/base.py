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


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[dict, ...]            # ({"role": ..., "content": ...}, ...)
    model: str = ""
    temperature: float = 0.7
    max_tokens: int = 256
    response_format: dict | None = None   # e.g. {"type": "json_schema", "json_schema": {...}}
    seed: int | None = None
    tag: str = ""                         # caller label (e.g. "robot_0/round_3"); not part of the key

    def key(self) -> str:
        """SHA-256 of the canonical request (tag excluded)."""
        d = asdict(self)
        d.pop("tag", None)
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
    meta: dict[str, Any] = field(default_factory=dict)


class LLMError(Exception):
    """The request failed after the client's own retries (endpoint down, timeout, 5xx, refused)."""


class ReplayMiss(LLMError):
    """Replay mode: the transcript store has no answer for this request."""


class LLMClient(Protocol):
    model: str

    def complete(self, req: ChatRequest) -> ChatResponse: ...

    def status(self) -> dict: ...   # {"state": "ok"|"retrying"|"down", "calls": int, "errors": int, ...}

    def close(self) -> None: ...
