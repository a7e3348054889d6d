"""Record LLM exchanges to a JSONL transcript and replay them without any network.

One JSON object per line::

    {"v": 1, "key": <ChatRequest.key()>, "tag": ..., "request": {messages, model, temperature,
     max_tokens, response_format, seed}, "response": <text> | null, "model": ..., "latency_s": ...,
     "prompt_tokens": ..., "completion_tokens": ..., "time": <unix s>, "error": <message>  (errors only),
     "tool_calls": [...] (tool-calling replies only), "server_timings": {prompt_n, cache_n, predicted_n, prompt_s,
     predicted_s} (llama.cpp servers only: the server's own count of evaluated, cached and generated tokens),
     "endpoint": <base_url> (endpoint pools only: the endpoint that answered, ``consensus.llm.pool``)}

Replay answers each request key with the records of that key in the order they were
written, errors included (a recorded failure is raised again as ``LLMError``), so a
run that sent identical prompts several times at temperature > 0 replays identically.
No API key is ever part of a record: requests hold only messages and sampling options.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import defaultdict, deque
from pathlib import Path

from consensus.errors import ConfigError
from consensus.jsonl import AppendFile, read_records
from consensus.llm.base import ChatRequest, ChatResponse, LLMClient, LLMError, ReplayMiss

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


def request_record(req: ChatRequest) -> dict:
    """The request part of a record (everything that enters ``ChatRequest.key``)."""
    record = {
        "messages": [dict(m) for m in req.messages],
        "model": req.model,
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "response_format": req.response_format,
        "seed": req.seed,
    }
    for name in ("tools", "tool_choice", "grammar"):
        value = getattr(req, name)
        if value is not None:
            record[name] = list(value) if name == "tools" else value
    return record


def reply_record(req: ChatRequest, resp: ChatResponse) -> dict:
    """The transcript record of a successful exchange (``endpoint``: the pool endpoint that answered, if any)."""
    return {
        "v": FORMAT_VERSION, "key": req.key(), "tag": req.tag, "request": request_record(req),
        "response": resp.text, "model": resp.model, "latency_s": resp.latency_s,
        "prompt_tokens": resp.prompt_tokens, "completion_tokens": resp.completion_tokens,
        "time": time.time(),
        **({"tool_calls": resp.tool_calls} if resp.tool_calls else {}),
        **({"server_timings": resp.meta["server_timings"]} if resp.meta.get("server_timings") else {}),
        **({"endpoint": resp.meta["endpoint"]} if resp.meta.get("endpoint") else {}),
    }


def error_record(req: ChatRequest, error: str, latency_s: float) -> dict:
    """The transcript record of a failed exchange."""
    return {
        "v": FORMAT_VERSION, "key": req.key(), "tag": req.tag, "request": request_record(req),
        "response": None, "model": req.model, "latency_s": latency_s, "prompt_tokens": None,
        "completion_tokens": None, "time": time.time(), "error": error,
    }


class MemoryStore:
    """The records a ``RecordingClient`` would write, kept in a list (a Ray worker sends them to the driver)."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self._lock = threading.Lock()

    @property
    def written(self) -> int:
        return len(self.records)

    def record_reply(self, req: ChatRequest, resp: ChatResponse) -> None:
        with self._lock:
            self.records.append(reply_record(req, resp))

    def record_error(self, req: ChatRequest, error: str, latency_s: float) -> None:
        with self._lock:
            self.records.append(error_record(req, error, latency_s))

    def close(self) -> None:
        """Nothing to release."""


class TranscriptStore:
    """Append-only, thread-safe JSONL transcript file: each record one whole line or nothing.

    Opening a file whose last line was cut short (a crash mid-write) first ends that
    line, so the next record is not glued onto the broken one.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fh = None
        self.written = 0
        self.skipped = 0   # malformed lines met by the last load()

    def _open(self):
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            needs_newline = False
            if self.path.exists() and self.path.stat().st_size > 0:
                with open(self.path, "rb") as f:
                    f.seek(-1, os.SEEK_END)
                    needs_newline = f.read(1) != b"\n"
            if needs_newline:
                log.warning("transcript %s ends with a partial line; starting a new line", self.path)
            self._fh = AppendFile(self.path)          # ends a partial last line itself
        return self._fh

    def append(self, record: dict) -> None:
        """Write one record as one line, whole or not at all (``consensus.jsonl.AppendFile``: one write, truncated
        back on a full disk; the error names the path and the free space left)."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            self._open().append(line + "\n")
            self.written += 1

    def record_reply(self, req: ChatRequest, resp: ChatResponse) -> None:
        """Append a successful exchange."""
        self.append(reply_record(req, resp))

    def record_error(self, req: ChatRequest, error: str, latency_s: float) -> None:
        """Append a failed exchange."""
        self.append(error_record(req, error, latency_s))

    def load(self) -> list[dict]:
        """All well-formed records in file order; malformed lines are skipped with a warning.

        A missing file, and one without a single valid record, is a ConfigError (replaying nothing is never what
        was meant: every request would fall back).
        """
        if not self.path.is_file():
            raise ConfigError(f"transcript file not found: {self.path}")
        records, bad = read_records(self.path, is_record)
        if not records:
            raise ConfigError(_no_record(self.path, len(bad)))
        self.skipped = len(bad)
        if bad:
            where = f"lines {bad[:10]}"
            log.warning("transcript %s: skipped %d malformed line(s): %s", self.path, len(bad), where)
        return records

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


class RecordingClient:
    """Wraps an ``LLMClient`` and writes every reply (and every LLMError) to a TranscriptStore."""

    def __init__(self, inner: LLMClient, store: "TranscriptStore | MemoryStore") -> None:
        self.inner = inner
        self.store = store

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def llama_cpp(self) -> bool:
        """Whether the wrapped client talks to a llama.cpp server (its slots keep prompt prefixes)."""
        return bool(getattr(self.inner, "llama_cpp", False))

    def complete(self, req: ChatRequest) -> ChatResponse:
        t0 = time.monotonic()
        try:
            resp = self.inner.complete(req)
        except LLMError as exc:
            self.store.record_error(req, str(exc), time.monotonic() - t0)
            raise
        self.store.record_reply(req, resp)
        return resp

    def status(self) -> dict:
        return {**self.inner.status(), "recorded": self.store.written}

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.store.close()


def is_record(rec: object) -> bool:
    """Is this parsed line a transcript record (a mapping with a string ``key``)?"""
    return isinstance(rec, dict) and isinstance(rec.get("key"), str)


def _no_record(path: Path, bad: int) -> str:
    what = f"its {bad} non-empty line(s) are not records" if bad else "it is empty"
    return f"transcript {path} has no valid record ({what}): nothing to replay"


def check_replayable(path: str | os.PathLike) -> None:
    """Refuse (ConfigError), before anything starts, a transcript that replay could not answer from: a missing
    file, or one without a single valid record (what ``TranscriptStore.load`` would refuse). Reads only up to the
    first valid record."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"transcript file not found: {p}")
    bad = 0
    try:
        with open(p, "r", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    if is_record(json.loads(line)):
                        return
                except ValueError:
                    pass
                bad += 1
    except OSError as exc:
        raise ConfigError(f"transcript {p} cannot be read: {exc.strerror or exc}") from None
    raise ConfigError(_no_record(p, bad))


class ReplayClient:
    """Answers from a transcript, never touching the network.

    Each request key yields its recorded outcomes in order of occurrence. When they
    are used up, ``strict=True`` raises ReplayMiss; ``strict=False`` repeats the key's
    last outcome. A key that was never recorded always raises ReplayMiss.
    """

    def __init__(self, path_or_store: str | os.PathLike | TranscriptStore, strict: bool = True, *,
                 records: list[dict] | None = None) -> None:
        """``records``: answer from these (already loaded) records; ``path_or_store`` then only names them."""
        store = path_or_store if isinstance(path_or_store, TranscriptStore) else TranscriptStore(path_or_store)
        self.path = store.path
        self.strict = strict
        if records is None:
            records = store.load()
        self.skipped = store.skipped
        self._queues: dict[str, deque[dict]] = defaultdict(deque)
        self._last: dict[str, dict] = {}
        for rec in records:
            self._queues[rec["key"]].append(rec)
        models = [r.get("model") for r in records if r.get("model")]
        self.model = models[0] if models else "replay"
        self._lock = threading.Lock()
        self._calls = 0
        self._misses = 0
        self._errors = 0
        self._remaining = len(records)
        self._last_error = ""

    def complete(self, req: ChatRequest) -> ChatResponse:
        key = req.key()
        with self._lock:
            self._calls += 1
            queue = self._queues.get(key)
            if queue:
                rec = queue.popleft()
                self._last[key] = rec
                self._remaining -= 1
            elif not self.strict and key in self._last:
                rec = self._last[key]
            else:
                self._misses += 1
                why = "all its recorded replies were used" if key in self._last else "never recorded"
                self._last_error = f"no recorded reply for request {key[:12]} (tag {req.tag!r}): {why}"
                raise ReplayMiss(f"{self._last_error} in {self.path}")
            if rec.get("error") is not None:
                self._errors += 1
                self._last_error = str(rec["error"])
        if rec.get("error") is not None:
            raise LLMError(f"replayed error: {rec['error']}")
        return ChatResponse(
            text=rec.get("response") or "",
            model=rec.get("model") or self.model,
            latency_s=float(rec.get("latency_s") or 0.0),
            prompt_tokens=rec.get("prompt_tokens"),
            completion_tokens=rec.get("completion_tokens"),
            from_replay=True,
            meta={"recorded_tag": rec.get("tag", "")},
            tool_calls=[c for c in rec.get("tool_calls") or [] if isinstance(c, dict)],
        )

    def status(self) -> dict:
        with self._lock:
            return {
                "state": "ok",
                "calls": self._calls,
                "errors": self._errors,
                "retries": 0,
                "misses": self._misses,
                "remaining": self._remaining,
                "last_error": self._last_error,
                "last_latency_s": 0.0,
            }

    def close(self) -> None:
        """Nothing to release (the transcript was read at construction)."""
