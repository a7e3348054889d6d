"""consensus.llm.slots.SharedPrefix: cold llama.cpp slots start from the first request's prompt cache."""
from __future__ import annotations

import importlib.util
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from consensus.llm.slots import FILE_NAME, SharedPrefix


class SlotServer:
    """A stand-in for llama.cpp's /slots/<id>?action=save|restore: records the actions in order."""

    def __init__(self, fail: str = "") -> None:
        self.actions: list[tuple[str, int]] = []
        self.fail = fail
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                url = urlsplit(self.path)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                slot = int(url.path.rsplit("/", 1)[1])
                action = parse_qs(url.query)["action"][0]
                assert body == {"filename": FILE_NAME}
                assert self.headers["Authorization"] == "Bearer secret"
                outer.actions.append((action, slot))
                if action == outer.fail:
                    self.send_response(500)
                    self.end_headers()
                    return
                key = "n_saved" if action == "save" else "n_restored"
                data = json.dumps({"id_slot": slot, key: 450}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    srv = SlotServer()
    yield srv
    srv.close()


def _request(shared: SharedPrefix, slot: int, log: list, ok: bool = True, work_s: float = 0.2) -> None:
    primer = shared.before(slot)
    log.append(("start", slot))
    time.sleep(work_s)                                  # the request itself
    log.append(("done", slot))
    if primer:
        shared.after(slot, ok)


def test_first_request_primes_the_others_restore_before_their_first_request(server):
    shared = SharedPrefix(server.url, "secret")
    log: list = []
    threads = [threading.Thread(target=_request, args=(shared, s, log)) for s in range(4)]
    threads[0].start()
    time.sleep(0.05)                                    # slot 0 asks first: the primer
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(10)
    # the others waited for the primer to complete and be saved, then were each restored once
    assert log[:2] == [("start", 0), ("done", 0)]
    assert server.actions[0] == ("save", 0)
    assert sorted(server.actions[1:]) == [("restore", 1), ("restore", 2), ("restore", 3)]
    # warm slots are never restored again (their own prompt cache is better)
    _request(shared, 2, log, work_s=0)
    _request(shared, 0, log, work_s=0)
    assert len(server.actions) == 4
    assert shared.status() == {"saves": 1, "restores": 3, "restored_tokens": 1350, "errors": 0, "enabled": True,
                               "warm_slots": 4}


def test_a_failed_primer_is_not_saved_and_the_next_cold_slot_primes(server):
    shared = SharedPrefix(server.url, "secret")
    log: list = []
    _request(shared, 0, log, ok=False, work_s=0)
    assert server.actions == []                         # nothing saved from a failed request
    _request(shared, 1, log, work_s=0)                  # slot 1 is the next primer
    _request(shared, 2, log, work_s=0)
    assert server.actions == [("save", 1), ("restore", 2)]


@pytest.mark.parametrize("fail", ["save", "restore"])
def test_a_failing_slot_action_switches_sharing_off_and_requests_go_on(fail, caplog):
    srv = SlotServer(fail=fail)
    try:
        shared = SharedPrefix(srv.url, "secret")
        log: list = []
        for slot in range(4):
            _request(shared, slot, log, work_s=0)
        assert [e for e in log if e[0] == "done"] == [("done", s) for s in range(4)]   # every request ran
        assert shared.status()["errors"] == 1 and shared.status()["enabled"] is False
        assert len(srv.actions) == 2 if fail == "restore" else len(srv.actions) == 1   # no action after the error
        assert sum("no longer shared" in r.message for r in caplog.records) == 1
    finally:
        srv.close()


def test_an_unreachable_server_is_a_counted_error_not_an_exception():
    shared = SharedPrefix("http://127.0.0.1:9", "secret", timeout_s=2)
    assert shared.before(0) is True
    shared.after(0, True)                               # the save cannot reach the server
    assert shared.before(1) is False
    assert shared.status()["errors"] == 1 and shared.status()["saves"] == 0


@pytest.mark.embedded
@pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None, reason="xllamacpp not installed (make install)")
def test_real_server_second_slot_starts_from_the_first_slots_prefix(shared_llm):
    from consensus.llm.base import ChatRequest

    system = "You are one robot of a fleet that must gather at one point in the plane. " * 12
    shared_llm.fresh()                                   # both slots cold, as on a server that just started
    client, close = shared_llm.client(timeout_s=300.0, max_retries=0, concurrency=2, n_parallel=2,
                                      share_prefix=True)
    try:
        replies = [client.complete(ChatRequest(
            messages=({"role": "system", "content": system},
                      {"role": "user", "content": f"You are robot {k} at ({k}, 1). Where do you go?"}),
            temperature=0.0, max_tokens=4, tag=f"robot_{k}/round_0")) for k in range(2)]
        status = client.status()
    finally:
        close()
    first, second = (r.meta["server_timings"] for r in replies)
    assert first["cache_n"] == 0                         # the primer evaluated everything
    assert second["cache_n"] >= 0.8 * first["prompt_n"]  # slot 1 started from slot 0's prompt
    assert second["prompt_n"] < 0.2 * first["prompt_n"]
    assert status["shared_prefix"]["restores"] == 1 and status["shared_prefix"]["errors"] == 0
