"""OpenAI-compatible chat client (OpenAI, the embedded llama.cpp server, or any local server).

Retries are done here, not by the ``openai`` package (its own ``max_retries`` is 0),
so the retry count in ``status()`` is exact. The API key is read once and kept only
inside the ``openai.OpenAI`` object; it never appears in logs, errors, ``repr`` or
``status()``.
"""
from __future__ import annotations

import json
import logging
import os
import random
import re
import threading
import time
from urllib.parse import urlsplit

import openai

from consensus.errors import ConfigError
from consensus.llm.base import ChatRequest, ChatResponse, LLMError
from consensus.llm.endpoint import is_local_url

log = logging.getLogger(__name__)

DUMMY_KEY = "not-needed"
_OPENAI_HOSTS = {"api.openai.com"}


def server_timings(timings: dict) -> dict:
    """llama.cpp's own timings of one request, compact: prompt tokens evaluated (``prompt_n``), prompt tokens taken
    from the slot's cache (``cache_n``), generated tokens (``predicted_n``) and their seconds."""
    def num(key: str) -> float:
        value = timings.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0

    return {"prompt_n": int(num("prompt_n")), "cache_n": int(num("cache_n")), "predicted_n": int(num("predicted_n")),
            "prompt_s": round(num("prompt_ms") / 1000, 4), "predicted_s": round(num("predicted_ms") / 1000, 4)}


#: the tools block of the Hermes / Qwen 2.5 chat templates (what llama.cpp's jinja template appends to the system
#: prompt for a request with ``tools``), for a request that sends a grammar instead (``tools_in_system``)
TOOLS_BLOCK = ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n"
               "</tools>\n\nFor each function call, return a json object with function name and arguments within "
               "<tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": "
               "<args-json-object>}}\n</tool_call>")


def tools_in_system(messages: list[dict], tools) -> list[dict]:
    """``messages`` with the tools written into the system prompt (``TOOLS_BLOCK``; a system message is added first
    when there is none)."""
    block = TOOLS_BLOCK.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0].get('content') or ''}{block}"
    else:
        out.insert(0, {"role": "system", "content": block.lstrip()})
    return out


class OpenAIChatClient:
    """``LLMClient`` for any OpenAI-compatible ``/v1/chat/completions`` endpoint.

    ``complete`` retries timeouts, connection errors, 5xx and 429 up to ``max_retries``
    times with exponential backoff and jitter; other 4xx fail at once. A final failure
    raises ``LLMError`` and puts ``status()["state"]`` to "down" until the next success.
    At most ``concurrency`` HTTP requests are in flight at once (across threads).

    ``llama_cpp=True`` (the embedded server, or any llama.cpp server) adds llama.cpp's own request fields:
    ``cache_prompt`` (reuse the slot's cached prompt prefix), ``grammar`` (a request's GBNF grammar; other
    endpoints never see it) and, with ``slots`` > 1, ``id_slot``: every agent (the first segment of a request's
    tag, e.g. "robot_2") is pinned to its own slot, so its prompt prefix stays warm between its calls.
    """

    def __init__(
        self,
        base_url: str | None,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 30.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        backoff_max_s: float = 8.0,
        concurrency: int = 4,
        *,
        api_key: str | None = None,
        llama_cpp: bool = False,
        slots: int = 0,
        share_prefix: bool = False,
    ) -> None:
        if not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
            raise ConfigError(f"llm timeout_s must be > 0, got {timeout_s!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"llm max_retries must be an integer >= 0, got {max_retries!r}")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"llm concurrency must be an integer >= 1, got {concurrency!r}")
        if backoff_s < 0 or backoff_max_s < 0:
            raise ConfigError(f"llm backoff_s/backoff_max_s must be >= 0, got {backoff_s!r}/{backoff_max_s!r}")
        base_url = base_url or None
        host = (urlsplit(base_url).hostname or "").lower() if base_url else "api.openai.com"
        if not model and (base_url is None or host in _OPENAI_HOSTS):
            raise ConfigError("llm model must be set for the OpenAI endpoint (e.g. model: gpt-4o-mini)")
        key = api_key or os.environ.get(api_key_env, "").strip()
        if not key:
            if base_url is None or host in _OPENAI_HOSTS:
                raise LLMError(
                    f"no API key: set the environment variable {api_key_env} "
                    "(or point base_url at a local OpenAI-compatible server)"
                )
            if not is_local_url(base_url):
                log.warning("no API key in %s for remote endpoint %s; sending a dummy key", api_key_env, base_url)
            key = DUMMY_KEY
        self._secret = key
        self.model = model
        self.base_url = base_url or "https://api.openai.com/v1"
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self.concurrency = concurrency
        self._client = openai.OpenAI(base_url=base_url, api_key=key, timeout=self.timeout_s, max_retries=0)
        # the package imports its chat resources and response types on first use (~30 ms holding the GIL): here, at
        # start-up, not in the first planning round beside a running control loop
        from openai.types.chat import ChatCompletion  # noqa: F401

        _ = self._client.chat.completions
        self._sem = threading.BoundedSemaphore(concurrency)
        self._lock = threading.Lock()
        self._state = "ok"
        self._calls = 0
        self._errors = 0
        self._retries = 0
        self._last_error = ""
        self._last_latency_s = 0.0
        self._rng = random.Random()
        self.llama_cpp = bool(llama_cpp)
        self.slots = max(int(slots), 0)
        self._slot_of: dict[str, int] = {}
        # cold slots start from the first request's prompt cache (consensus.llm.slots; the server needs
        # --slot-save-path, as the embedded one and the llm_server node have)
        self.shared_prefix = None
        if share_prefix and self.llama_cpp and self.slots > 1 and base_url:
            from consensus.llm.slots import SharedPrefix

            self.shared_prefix = SharedPrefix(base_url.rstrip("/").removesuffix("/v1"),
                                              "" if key == DUMMY_KEY else key, wait_s=self.timeout_s)
        self._closed = False

    def __repr__(self) -> str:
        return f"OpenAIChatClient(base_url={self.base_url!r}, model={self.model!r})"

    def _scrub(self, text: str) -> str:
        """Remove the API key from a message (defence in depth: servers may echo it)."""
        if self._secret and self._secret != DUMMY_KEY:
            text = text.replace(self._secret, "***")
        return text

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Delay before retry number ``attempt`` (1-based): exponential, jittered, capped."""
        base = min(self.backoff_max_s, self.backoff_s * (2 ** (attempt - 1)))
        delay = base * self._rng.uniform(0.5, 1.5)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.backoff_max_s)

    @staticmethod
    def _classify(exc: Exception) -> tuple[bool, str, float | None]:
        """(retryable, short description, Retry-After seconds) for an exception from openai."""
        if isinstance(exc, openai.APITimeoutError):
            return True, "timeout", None
        if isinstance(exc, openai.APIConnectionError):
            return True, f"connection error ({type(exc.__cause__).__name__ if exc.__cause__ else 'unknown'})", None
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            retry_after = None
            try:
                retry_after = float(exc.response.headers.get("retry-after", ""))
            except (TypeError, ValueError):
                pass
            detail = str(getattr(exc, "message", "") or "")[:300]
            return code == 429 or code >= 500, f"HTTP {code}: {detail}", retry_after
        return False, f"{type(exc).__name__}: {str(exc)[:300]}", None

    def _request_kwargs(self, req: ChatRequest) -> dict:
        kw: dict = {
            "messages": [dict(m) for m in req.messages],
            "model": req.model or self.model or "local",
            "temperature": req.temperature,
            "max_tokens": req.max_tokens,
        }
        if req.response_format is not None:
            kw["response_format"] = req.response_format
        if req.seed is not None:
            kw["seed"] = req.seed
        if req.tools:
            kw["tools"] = [dict(t) for t in req.tools]
            if req.tool_choice:
                kw["tool_choice"] = req.tool_choice
        if self.llama_cpp:
            extra: dict = {"cache_prompt": True}
            if req.grammar and req.tools:
                # llama.cpp refuses a grammar beside tools ("Cannot use custom grammar constraints with tools"): the
                # tools go into the system prompt as the chat template writes them, and the grammar (one call,
                # e.g. prompts.tool_grammar) goes alone; the call comes back as text (styles.tool_calls_in_text)
                kw["messages"] = tools_in_system(kw["messages"], req.tools)
                kw.pop("tools", None)
                kw.pop("tool_choice", None)
                extra["grammar"] = req.grammar
            elif req.grammar:
                extra["grammar"] = req.grammar
            if self.slots > 1:
                extra["id_slot"] = self.slot_for(req.tag)
            kw["extra_body"] = extra
        return kw

    def slot_for(self, tag: str) -> int:
        """The server slot of the agent that sent a request tagged ``tag`` (its first segment, e.g. "robot_2"): its
        number modulo the slots (the same in every process of a fleet), or for a name without a number the next
        slot in order of first request."""
        agent = (tag or "").split("/", 1)[0]
        number = re.search(r"(\d+)$", agent)
        if number:
            return int(number.group(1)[-6:]) % max(self.slots, 1)
        with self._lock:
            if agent not in self._slot_of:
                self._slot_of[agent] = len(self._slot_of) % max(self.slots, 1)
            return self._slot_of[agent]

    def complete(self, req: ChatRequest) -> ChatResponse:
        """Send one chat request; retry transient failures; raise LLMError when it fails."""
        if self._closed:     # a planner thread still asking while its run shuts down
            raise LLMError(f"LLM client for {self.base_url} is closed")
        kwargs = self._request_kwargs(req)
        with self._lock:
            self._calls += 1
        t0 = time.monotonic()
        slot = (kwargs.get("extra_body") or {}).get("id_slot")
        if self.shared_prefix is not None and slot is not None:
            primer = self.shared_prefix.before(slot)
            ok = False
            try:
                resp = self._complete(req, kwargs, t0)
                ok = True
                return resp
            finally:
                if primer:
                    self.shared_prefix.after(slot, ok)
        return self._complete(req, kwargs, t0)

    def _complete(self, req: ChatRequest, kwargs: dict, t0: float) -> ChatResponse:
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._sem:
                    resp = self._client.chat.completions.create(**kwargs)
                if getattr(resp, "choices", None):
                    return self._success(resp, req, t0, attempt)
                retryable, desc, retry_after = False, "reply has no choices", None
            except openai.OpenAIError as exc:
                retryable, desc, retry_after = self._classify(exc)
            desc = self._scrub(desc)
            if not retryable or attempt > self.max_retries:
                with self._lock:
                    self._errors += 1
                    self._state = "down"
                    self._last_error = desc
                    self._last_latency_s = time.monotonic() - t0
                what = "failed" if not retryable else f"failed after {attempt} attempts"
                log.warning("LLM request [%s] to %s %s: %s", req.tag, self.base_url, what, desc)
                raise LLMError(f"LLM request to {self.base_url} {what}: {desc}") from None
            delay = self._backoff(attempt, retry_after)
            if self._closed:
                raise LLMError(f"LLM client for {self.base_url} was closed during the request ({desc})")
            with self._lock:
                self._retries += 1
                self._state = "retrying"
                self._last_error = desc
            log.info("LLM request [%s]: %s; retry %d/%d in %.2fs", req.tag, desc, attempt, self.max_retries, delay)
            time.sleep(delay)

    def _success(self, resp, req: ChatRequest, t0: float, attempts: int) -> ChatResponse:
        latency = time.monotonic() - t0
        choice = resp.choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(resp, "usage", None)
        meta = {"attempts": attempts, "finish_reason": getattr(choice, "finish_reason", None)}
        timings = (getattr(resp, "model_extra", None) or {}).get("timings")
        if isinstance(timings, dict):   # llama.cpp server: cache_n/prompt_n/prompt_ms/predicted_n/predicted_ms
            meta["server_timings"] = server_timings(timings)
        tool_calls = []
        for call in getattr(choice.message, "tool_calls", None) or []:
            fn = getattr(call, "function", None)
            tool_calls.append({"id": str(getattr(call, "id", "") or ""), "name": str(getattr(fn, "name", "") or ""),
                               "arguments": str(getattr(fn, "arguments", "") or "")})
        with self._lock:
            self._state = "ok"
            self._last_latency_s = latency
        return ChatResponse(
            text=text,
            model=getattr(resp, "model", None) or req.model or self.model,
            latency_s=latency,
            prompt_tokens=getattr(usage, "prompt_tokens", None) if usage else None,
            completion_tokens=getattr(usage, "completion_tokens", None) if usage else None,
            meta=meta,
            tool_calls=tool_calls,
        )

    def status(self) -> dict:
        """Snapshot: state ("ok"|"retrying"|"down"), calls, errors, retries, last_error, last_latency_s."""
        with self._lock:
            return {
                "state": self._state,
                "calls": self._calls,
                "errors": self._errors,
                "retries": self._retries,
                "last_error": self._last_error,
                "last_latency_s": self._last_latency_s,
                "base_url": self.base_url,
                "model": self.model,
                **({"shared_prefix": self.shared_prefix.status()} if self.shared_prefix is not None else {}),
            }

    def close(self) -> None:
        """Close the HTTP connection pool; later requests fail with ``LLMError`` (no retry)."""
        self._closed = True
        self._client.close()
