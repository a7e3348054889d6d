"""A scriptable fake OpenAI chat-completions server for tests and benchmarks.

It listens on 127.0.0.1 (port 0 = a free port) in a background thread and answers
``POST /v1/chat/completions`` (also ``/chat/completions``), ``GET /v1/models`` and
``GET /health``. What each chat request gets is decided by the *script*:

* a list of actions, consumed one per request, then ``default`` for every later one;
* or a callable ``f(body: dict) -> action`` called for every request.

An action is one of:

* ``str``              — reply with this text as the assistant message;
* ``int``              — answer with this HTTP status (e.g. 500, 503, 429, 400) and an error body;
* ``Reply(text, delay_s=...)``, ``Status(code, delay_s=..., retry_after=...)`` — the same with a delay;
* ``Reply(text, tool_calls=[(name, arguments_json), ...])`` — an assistant message with OpenAI ``tool_calls``
  (``finish_reason`` "tool_calls"); the arguments text is sent as given, so it may be malformed;
* ``Reply(text, logprobs=[[(token, logprob), ...], ...])`` — also return ``choices[0].logprobs`` in the OpenAI
  format: one entry per generated token position, whose sampled token is the first pair and whose
  ``top_logprobs`` are all the pairs (what ``logprobs=true, top_logprobs=k`` asks for); without ``logprobs``
  the reply has no logprobs, like a server that does not support them;
* ``Close(delay_s=...)`` — close the connection without answering;
* ``Delay(seconds, then)`` — wait, then perform ``then``.

Every chat request body (parsed JSON) is kept in ``server.requests`` (headers in
``server.request_headers``, recorded before the script is asked); ``server.max_in_flight``
is the largest number of chat requests that were being handled at the same time.

Example (a slow endpoint, 1.5 s per reply)::

    with FakeOpenAIServer(default=Reply('{"position": [0, 0]}', delay_s=1.5)) as srv:
        client = OpenAIChatClient(base_url=srv.base_url, model="fake")
        ...
        assert srv.requests[0]["messages"][0]["role"] == "system"

Run as a program it serves a fixed reply with a fixed latency until interrupted::

    python tests/support/fake_openai_server.py --port 8011 --latency 1.5 --reply '{"position": [1, 2]}'
"""
from __future__ import annotations

import argparse
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Union

__all__ = ["Reply", "Status", "Close", "Delay", "FakeOpenAIServer", "Action"]


@dataclass(frozen=True)
class Reply:
    """Answer 200 with ``text`` as the assistant message, after ``delay_s`` seconds."""

    text: str
    delay_s: float = 0.0
    model: str = "fake-model"
    finish_reason: str = "stop"
    logprobs: Any = None      # [[(token, logprob), ...] per position] -> choices[0].logprobs (see module docstring)
    tool_calls: Any = None    # [(name, arguments JSON text), ...] -> choices[0].message.tool_calls


@dataclass(frozen=True)
class Status:
    """Answer with HTTP ``code`` and an OpenAI-style error body, after ``delay_s`` seconds."""

    code: int
    delay_s: float = 0.0
    message: str = "scripted error"
    retry_after: float | None = None


@dataclass(frozen=True)
class Close:
    """Close the connection without sending a response, after ``delay_s`` seconds."""

    delay_s: float = 0.0


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` and then perform ``then``."""

    seconds: float
    then: "Action"


Action = Union[str, int, Reply, Status, Close, Delay]


def _normalize(action: Action) -> tuple[float, Reply | Status | Close]:
    """Flatten an action into (total delay, terminal action)."""
    delay = 0.0
    while isinstance(action, Delay):
        delay += action.seconds
        action = action.then
    if isinstance(action, str):
        action = Reply(action)
    elif isinstance(action, int) and not isinstance(action, bool):
        action = Status(action)
    if not isinstance(action, (Reply, Status, Close)):
        raise TypeError(f"unknown fake-server action: {action!r}")
    return delay + action.delay_s, action


class FakeOpenAIServer:
    """Local OpenAI-compatible HTTP server with scripted behaviour (see module docstring)."""

    def __init__(
        self,
        script: Iterable[Action] | Callable[[dict], Action] | None = None,
        *,
        default: Action = "ok",
        port: int = 0,
    ) -> None:
        self._lock = threading.Lock()
        self._queue: list[Action] = []
        self._func: Callable[[dict], Action] | None = None
        if callable(script):
            self._func = script
        elif script is not None:
            self._queue = list(script)
        self.default = default
        self._requested_port = port
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._requests: list[dict] = []
        self._headers: list[dict[str, str]] = []
        self._in_flight = 0
        self.max_in_flight = 0

    # -- scripting ---------------------------------------------------------
    def push(self, *actions: Action) -> None:
        """Append actions to the queue (used before ``default``)."""
        with self._lock:
            self._queue.extend(actions)

    def _next_action(self, body: dict) -> Action:
        if self._func is not None:
            return self._func(body)
        with self._lock:
            return self._queue.pop(0) if self._queue else self.default

    @property
    def requests(self) -> list[dict]:
        """Copy of the parsed JSON bodies of all chat requests received so far."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """Copy of the HTTP headers (lower-case names) of all chat requests, in arrival order."""
        with self._lock:
            return [dict(h) for h in self._headers]

    # -- lifecycle ---------------------------------------------------------
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL, e.g. ``http://127.0.0.1:41234/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "FakeOpenAIServer":
        """Bind 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._stop.clear()
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", self._requested_port), handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut short any scripted delays, and release the port."""
        if self._httpd is None:
            return
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- used by the handler -----------------------------------------------
    def _enter(self, body: dict, headers: dict[str, str]) -> None:
        with self._lock:
            self._requests.append(body)
            self._headers.append(headers)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True   # headers and body go out in separate writes: avoid 40 ms delayed-ACK stalls

    def log_message(self, format: str, *args: Any) -> None:  # silence the default stderr logging
        pass

    def _send_json(self, code: int, obj: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode("utf-8")
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (e.g. its timeout)
            self.close_connection = True

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/health", "/v1/health"):
            self._send_json(200, {"status": "ok"})
        elif self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "not_found", "code": 404}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, {"error": {"message": "not found", "type": "not_found", "code": 404}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "invalid JSON", "type": "invalid_request_error", "code": 400}})
            return
        fake = self.fake
        fake._enter(body, {k.lower(): v for k, v in self.headers.items()})
        try:
            delay, action = _normalize(fake._next_action(body))
            if delay > 0 and fake._stop.wait(delay):
                action = Close()
        finally:
            # done before the answer goes out: a client that has it may send its next request at once, and this
            # thread could still be between its write and here (max_in_flight then counted one request too many)
            fake._leave()
        if isinstance(action, Close):
            self._abort()
        elif isinstance(action, Status):
            headers = {"Retry-After": str(action.retry_after)} if action.retry_after is not None else None
            self._send_json(action.code, {"error": {"message": action.message, "type": "scripted",
                                                    "code": action.code}}, headers)
        else:
            self._send_json(200, _completion(body, action))

    def _abort(self) -> None:
        """Reset the connection (RST) so the client sees it closed with no response."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


_counter = iter(range(1, 1 << 62))


def _completion(body: dict, reply: Reply) -> dict:
    """An OpenAI chat.completion object for ``reply`` (token counts are word counts)."""
    prompt_words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    completion_words = len(reply.text.split())
    choice: dict = {"index": 0, "message": {"role": "assistant", "content": reply.text},
                    "finish_reason": reply.finish_reason}
    if reply.tool_calls:
        choice["message"]["tool_calls"] = [
            {"id": f"call_{k}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for k, (name, arguments) in enumerate(reply.tool_calls)]
        choice["finish_reason"] = "tool_calls"
    if reply.logprobs is not None:
        choice["logprobs"] = _logprobs(reply.logprobs)
    return {
        "id": f"chatcmpl-fake-{next(_counter)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model,
        "choices": [choice],
        "usage": {"prompt_tokens": prompt_words, "completion_tokens": completion_words,
                  "total_tokens": prompt_words + completion_words},
    }


def _logprobs(positions) -> dict:
    """OpenAI ``choices[0].logprobs`` for scripted positions ``[[(token, logprob), ...], ...]``."""
    def entry(token: str, logprob: float) -> dict:
        return {"token": token, "logprob": float(logprob), "bytes": list(token.encode("utf-8"))}

    return {"content": [{**entry(*pairs[0]), "top_logprobs": [entry(*p) for p in pairs]} for pairs in positions],
            "refusal": None}


def main(argv: list[str] | None = None) -> int:
    """Serve a fixed reply with a fixed latency on 127.0.0.1 until interrupted (or --seconds pass)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any free port)")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    ap.add_argument("--reply", default='{"reasoning": "move to the centroid", "position": [0.0, 0.0]}',
                    help="assistant text returned for every request")
    ap.add_argument("--seconds", type=float, default=0.0, help="stop after this many seconds (0 = never)")
    args = ap.parse_args(argv)
    srv = FakeOpenAIServer(default=Reply(args.reply, delay_s=args.latency), port=args.port).start()
    print(f"fake OpenAI server on {srv.base_url} (latency {args.latency}s)", flush=True)
    return serve(srv, args.seconds)


def serve(srv: "FakeOpenAIServer", seconds: float = 0.0) -> int:
    """Keep a started server up for ``seconds`` (0: until Ctrl-C), then stop it; the exit status of a script."""
    try:
        if seconds > 0:
            time.sleep(seconds)
        else:
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
