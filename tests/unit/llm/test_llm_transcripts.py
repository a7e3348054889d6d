"""Transcript store, RecordingClient and ReplayClient: faithful, offline, crash-tolerant replay."""
from __future__ import annotations

import itertools
import json
import logging
import socket
import threading

import pytest

from consensus.errors import ConfigError
from consensus.llm.base import ChatRequest, ChatResponse, LLMError, ReplayMiss
from consensus.llm.openai_client import OpenAIChatClient
from consensus.llm.transcripts import RecordingClient, ReplayClient, TranscriptStore
from support.fake_openai_server import FakeOpenAIServer, Status

SECRET = "sk-test-transcript-SECRET-42"


def req(text: str, tag: str = "", **kw) -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": text},), tag=tag, **kw)


def record_session(path, monkeypatch) -> list:
    """Record A, B, A, A(error 400), A, C through the real client; return outcomes (text or 'ERR')."""
    monkeypatch.setenv("T_KEY", SECRET)
    counter = itertools.count()
    script = {3: Status(400, message="refused")}

    def reply(body: dict):
        i = next(counter)   # every reply differs, like sampling at temperature > 0
        return script.get(i, f"reply-{i} to {body['messages'][-1]['content']}")

    outcomes = []
    with FakeOpenAIServer(reply) as srv:
        inner = OpenAIChatClient(srv.base_url, "fake-model", api_key_env="T_KEY", max_retries=0)
        rec = RecordingClient(inner, TranscriptStore(path))
        for i, text in enumerate(["A", "B", "A", "A", "A", "C"]):
            try:
                outcomes.append(rec.complete(req(text, tag=f"robot_0/round_{i}")).text)
            except LLMError:
                outcomes.append("ERR")
        assert rec.status()["recorded"] == 6
        rec.close()
    return outcomes


def replay_session(client) -> list:
    outcomes = []
    for text in ["A", "B", "A", "A", "A", "C"]:
        try:
            r = client.complete(req(text, tag="anything"))   # the tag is not part of the key
            assert r.from_replay
            outcomes.append(r.text)
        except ReplayMiss:
            raise
        except LLMError:
            outcomes.append("ERR")
    return outcomes


def test_record_then_replay_is_identical_including_repeats_and_errors(tmp_path, monkeypatch):
    path = tmp_path / "run.jsonl"
    recorded = record_session(path, monkeypatch)
    assert recorded[3] == "ERR" and len(set(recorded)) == 6   # repeats of "A" got different replies
    replay = ReplayClient(path)
    assert replay_session(replay) == recorded
    st = replay.status()
    assert (st["calls"], st["errors"], st["remaining"], st["misses"]) == (6, 1, 0, 0)
    with pytest.raises(ReplayMiss, match="used"):
        replay.complete(req("A"))                           # strict: every recorded reply is used once
    with pytest.raises(ReplayMiss, match="never recorded"):
        replay.complete(req("never sent"))
    assert replay.status()["misses"] == 2


def test_non_strict_replay_repeats_the_last_outcome(tmp_path, monkeypatch):
    path = tmp_path / "run.jsonl"
    recorded = record_session(path, monkeypatch)
    replay = ReplayClient(path, strict=False)
    replay_session(replay)
    assert replay.complete(req("C")).text == recorded[5]
    assert replay.complete(req("C")).text == recorded[5]


def test_replay_distinguishes_sampling_options(tmp_path):
    store = TranscriptStore(tmp_path / "t.jsonl")
    store.record_reply(req("A", temperature=0.0), ChatResponse(text="cold"))
    store.record_reply(req("A", temperature=0.9), ChatResponse(text="hot"))
    store.close()
    replay = ReplayClient(store.path)
    assert replay.complete(req("A", temperature=0.9)).text == "hot"
    assert replay.complete(req("A", temperature=0.0)).text == "cold"


def test_replay_never_opens_a_socket(tmp_path, monkeypatch):
    path = tmp_path / "run.jsonl"
    recorded = record_session(path, monkeypatch)

    def no_network(*a, **k):
        raise AssertionError("replay opened a socket")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    assert replay_session(ReplayClient(str(path))) == recorded


def test_records_hold_the_request_and_no_api_key(tmp_path, monkeypatch):
    path = tmp_path / "run.jsonl"
    record_session(path, monkeypatch)
    text = path.read_text(encoding="utf-8")
    assert SECRET not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 6
    first, err = lines[0], lines[3]
    assert first["request"]["messages"] == [{"role": "user", "content": "A"}]
    assert first["tag"] == "robot_0/round_0" and first["key"] == req("A").key()
    assert first["response"].startswith("reply-0") and first["prompt_tokens"] == 1 and first["time"] > 0
    assert "error" not in first
    assert err["response"] is None and "HTTP 400" in err["error"]


def test_truncated_last_line_is_tolerated_and_appending_resumes(tmp_path, monkeypatch, caplog):
    path = tmp_path / "run.jsonl"
    recorded = record_session(path, monkeypatch)
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"v": 1, "key": "abc", "tag": "robot_1/ro')        # crash mid-write
    with caplog.at_level(logging.WARNING):
        replay = ReplayClient(path)
    assert "truncated" in caplog.text and replay.skipped == 1
    assert replay_session(replay) == recorded

    store = TranscriptStore(path)                                  # a later run appends to the same file
    store.record_reply(req("D"), ChatResponse(text="after crash"))
    store.close()
    replay2 = ReplayClient(path)
    assert replay2.skipped == 1
    assert replay2.complete(req("D")).text == "after crash"


def test_missing_transcript_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        ReplayClient(tmp_path / "nope.jsonl")


def test_concurrent_appends_produce_whole_lines(tmp_path):
    store = TranscriptStore(tmp_path / "t.jsonl")
    long_text = "x" * 5000

    def writer(w: int) -> None:
        for i in range(50):
            store.record_reply(req(f"{w}-{i}"), ChatResponse(text=long_text))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    records = TranscriptStore(store.path).load()
    assert len(records) == 200 and all(r["response"] == long_text for r in records)
