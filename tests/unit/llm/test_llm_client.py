"""OpenAIChatClient against the scripted fake server: replies, retries, failures, recovery, limits, secrecy."""
from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

from consensus.errors import ConfigError
from consensus.llm.base import ChatRequest, LLMError
from consensus.llm.factory import make_client
from consensus.llm.openai_client import OpenAIChatClient
from consensus.llm.transcripts import RecordingClient, ReplayClient
from support.fake_openai_server import Close, Delay, FakeOpenAIServer, Reply, Status

SECRET = "sk-test-VERY-SECRET-0123456789"


def req(text: str = "hello", **kw) -> ChatRequest:
    return ChatRequest(messages=({"role": "system", "content": "sys"}, {"role": "user", "content": text}), **kw)


def client(srv: FakeOpenAIServer, **kw) -> OpenAIChatClient:
    kw.setdefault("timeout_s", 2.0)
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return OpenAIChatClient(srv.base_url, "fake-model", **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_valid_reply_passes_all_request_fields():
    fmt = {"type": "json_schema", "json_schema": {"name": "plan", "schema": {"type": "object"}}}
    with FakeOpenAIServer(['{"position": [1, 2]}']) as srv:
        c = client(srv)
        r = c.complete(req("where?", temperature=0.3, max_tokens=77, response_format=fmt, seed=5))
        body = srv.requests[0]
    assert r.text == '{"position": [1, 2]}'
    assert r.model == "fake-model" and not r.from_replay
    assert (r.prompt_tokens, r.completion_tokens) == (2, 3)     # the fake counts words
    assert r.latency_s > 0 and r.meta["attempts"] == 1
    assert body["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "where?"}]
    assert (body["model"], body["temperature"], body["max_tokens"], body["seed"]) == ("fake-model", 0.3, 77, 5)
    assert body["response_format"] == fmt
    st = c.status()
    assert (st["state"], st["calls"], st["errors"], st["retries"]) == ("ok", 1, 0, 0)
    assert st["last_latency_s"] == pytest.approx(r.latency_s)


def test_optional_fields_are_omitted_when_unset():
    with FakeOpenAIServer(["x"]) as srv:
        client(srv).complete(req())
        body = srv.requests[0]
    assert "response_format" not in body and "seed" not in body


def test_malformed_reply_passes_through_as_text():
    junk = 'Reasoning: go left. Position: (1, oops'
    with FakeOpenAIServer([junk]) as srv:
        assert client(srv).complete(req()).text == junk


def test_slow_endpoint_times_out_retries_then_raises():
    with FakeOpenAIServer(default=Reply("late", delay_s=1.0)) as srv:
        c = client(srv, timeout_s=0.25, max_retries=2)
        t0 = time.monotonic()
        with pytest.raises(LLMError, match="after 3 attempts: timeout"):
            c.complete(req())
        elapsed = time.monotonic() - t0
        n_requests = len(srv.requests)
    assert n_requests == 3
    assert elapsed < 1.5          # three 0.25 s timeouts plus tiny backoffs, not the 1 s replies
    st = c.status()
    assert (st["state"], st["errors"], st["retries"]) == ("down", 1, 2)
    assert st["last_error"] == "timeout"


@pytest.mark.parametrize("failure", [500, 503, 429, Close(), Delay(0.05, 502)])
def test_transient_failure_then_success(failure):
    with FakeOpenAIServer([failure, "fine"]) as srv:
        c = client(srv)
        r = c.complete(req())
        assert len(srv.requests) == 2
    assert r.text == "fine" and r.meta["attempts"] == 2
    st = c.status()
    assert (st["state"], st["retries"], st["errors"]) == ("ok", 1, 0)


def test_retry_after_header_is_honoured_up_to_the_cap():
    with FakeOpenAIServer([Status(429, retry_after=0.3), "fine"]) as srv:
        c = client(srv, backoff_max_s=1.0)
        t0 = time.monotonic()
        assert c.complete(req()).text == "fine"
    assert time.monotonic() - t0 >= 0.3


def test_client_error_is_not_retried():
    with FakeOpenAIServer([400, "never"]) as srv:
        c = client(srv, max_retries=3)
        with pytest.raises(LLMError, match="HTTP 400"):
            c.complete(req())
        assert len(srv.requests) == 1
    st = c.status()
    assert (st["state"], st["retries"], st["errors"]) == ("down", 0, 1)


def test_endpoint_down_then_recovers():
    port = free_port()
    c = OpenAIChatClient(f"http://127.0.0.1:{port}/v1", "m", timeout_s=1.0, max_retries=1, backoff_s=0.01)
    with pytest.raises(LLMError, match="connection error"):
        c.complete(req())
    assert c.status()["state"] == "down"
    with FakeOpenAIServer(["back"], port=port):
        r = c.complete(req())
    assert r.text == "back"
    st = c.status()
    assert (st["state"], st["calls"], st["errors"]) == ("ok", 2, 1)


def test_concurrency_limit_is_honoured():
    with FakeOpenAIServer(default=Reply("ok", delay_s=0.15)) as srv:
        c = client(srv, concurrency=3)
        errors: list[Exception] = []

        def worker(i: int) -> None:
            try:
                c.complete(req(f"robot {i}"))
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak = srv.max_in_flight
    assert not errors
    assert peak == 3
    assert c.status()["calls"] == 8


def test_api_key_never_leaks(monkeypatch, caplog):
    monkeypatch.setenv("FAKE_LLM_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    holder: dict = {}

    def echo_auth(body: dict):
        # a hostile/buggy server that echoes the Authorization header in its error message
        return Status(400, message=f"rejected {holder['srv'].request_headers[-1].get('authorization')}")

    with FakeOpenAIServer(["ok"], default=Close()) as srv:
        holder["srv"] = srv
        c = client(srv, api_key_env="FAKE_LLM_KEY", max_retries=1)
        c.complete(req())
        with pytest.raises(LLMError) as closed:
            c.complete(req())
        srv._func = echo_auth
        with pytest.raises(LLMError) as echoed:
            c.complete(req())
        sent = srv.request_headers[0]["authorization"]
    assert sent == f"Bearer {SECRET}"                       # the key is really used
    assert "rejected Bearer ***" in str(echoed.value)       # and scrubbed from what comes back
    for text in (str(closed.value), str(echoed.value), repr(c), str(c.status()), caplog.text):
        assert SECRET not in text
    assert all(SECRET not in r.getMessage() for r in caplog.records)


def test_missing_key_for_openai_endpoint_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_ENV", raising=False)
    with pytest.raises(LLMError, match="NO_SUCH_KEY_ENV"):
        OpenAIChatClient(None, "gpt-4o-mini", api_key_env="NO_SUCH_KEY_ENV")


def test_local_endpoint_without_key_uses_dummy(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_ENV", raising=False)
    with FakeOpenAIServer(["ok"]) as srv:
        client(srv, api_key_env="NO_SUCH_KEY_ENV").complete(req())
        assert srv.request_headers[0]["authorization"] == "Bearer not-needed"


@pytest.mark.parametrize("kw, field", [({"concurrency": 0}, "concurrency"), ({"timeout_s": 0}, "timeout_s"),
                                       ({"max_retries": -1}, "max_retries")])
def test_bad_parameters_are_config_errors(kw, field):
    with pytest.raises(ConfigError, match=field):
        OpenAIChatClient("http://127.0.0.1:9/v1", "m", **kw)


def test_factory_rejects_unknown_backend():
    with pytest.raises(ConfigError, match="embedded, openai, replay.*'gpt'"):     # the registry's names, in order
        make_client("gpt")


def test_factory_openai_records_and_replay_reads(tmp_path):
    path = tmp_path / "t.jsonl"
    with FakeOpenAIServer(["one", "two"]) as srv:
        c, close = make_client("openai", model="fake-model", base_url=srv.base_url, transcripts_path=str(path),
                               timeout_s=2.0, max_retries=0, concurrency=2, replay_path=None)
        assert isinstance(c, RecordingClient)
        texts = [c.complete(req()).text, c.complete(req()).text]
        close()
    r, close_r = make_client("replay", replay_path=str(path), timeout_s=1.0, max_retries=0, concurrency=1,
                             transcripts_path=None)
    assert isinstance(r, ReplayClient)
    assert [r.complete(req()).text, r.complete(req()).text] == texts == ["one", "two"]
    close_r()


def test_factory_replay_needs_a_path():
    with pytest.raises(ConfigError, match="replay_path"):
        make_client("replay")
