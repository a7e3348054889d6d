"""The LLM endpoint pool (consensus.llm.pool) and ``llm.endpoints`` of a sweep, with the local executor.

Two fake endpoints share the load within their own in-flight limits; one dying mid-sweep costs nothing (its
requests go to the other, the records equal those of a run on the survivor alone); the transcript says which
endpoint answered; the spec and the CLI refuse a bad pool with one message.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time

import pytest

from support import experiment_fixtures as fx
from support.fake_openai_server import FakeOpenAIServer, Reply

from consensus.errors import ConfigError
from consensus.experiments import cli
from consensus.experiments.runner import RESULTS_FILE, TRANSCRIPTS_FILE, read_results, run_experiment
from consensus.experiments.spec import apply_overrides, resolve_spec
from consensus.llm.base import ChatRequest, LLMError
from consensus.llm.pool import Endpoint, PooledClient, SlotBroker


def seeded_reply(body: dict, delay_s: float = 0.02) -> Reply:
    digest = hashlib.sha256(str(body.get("seed")).encode()).digest()
    return Reply(json.dumps({"reasoning": "r", "position": [float(digest[0] % 23)]}), delay_s=delay_s)


def pool_spec(urls_and_limits, **raw):
    return resolve_spec({"study": "toy-llm", "trials": 6, "workers": 1,
                         "llm": {"backend": "openai", "model": "fake", "max_retries": 0,
                                 "endpoints": [{"base_url": u, "concurrency": c} for u, c in urls_and_limits]},
                         **raw}, fx.STUDIES)


def without_time(records: dict) -> dict:
    return {k: {f: v for f, v in r.items() if f != "elapsed_s"} for k, r in records.items()}


# ---------------------------------------------------------------------------------------------
def test_broker_prefers_the_least_loaded_endpoint_and_never_exceeds_a_limit():
    broker = SlotBroker([1, 2])
    taken = [broker.acquire() for _ in range(3)]
    assert sorted(taken) == [0, 1, 1] and broker.in_flight == [1, 2]
    got = []
    waiter = threading.Thread(target=lambda: got.append(broker.acquire()))
    waiter.start()
    time.sleep(0.1)
    assert got == []                                   # all three slots busy: it waits
    broker.release(1, ok=True)
    waiter.join(timeout=5)
    assert got == [1] and broker.in_flight == [1, 2]


def test_broker_backs_a_failing_endpoint_off_and_a_success_brings_it_back():
    now = [100.0]
    broker = SlotBroker([4, 4], backoff_s=1.0, backoff_max_s=8.0, clock=lambda: now[0])
    i = broker.acquire()
    broker.release(i, ok=False, error="connection refused")
    assert [broker.acquire() for _ in range(4)] == [1 - i] * 4      # the other one only, while i is down
    for _ in range(4):
        broker.release(1 - i, ok=True)
    now[0] += 1.01
    assert broker.acquire() == i                       # back-off over: tried again
    broker.release(i, ok=False)                        # second failure in a row: 2 s
    now[0] += 1.5
    assert broker.status()[i]["state"] == "down"
    now[0] += 0.6
    assert broker.status()[i]["state"] == "ok" and broker.status()[i]["failed"] == 2
    with pytest.raises(ConfigError):
        SlotBroker([2, 0])


def test_pooled_client_fails_over_and_names_the_endpoint_that_answered():
    with FakeOpenAIServer(default=Reply("fine")) as good, FakeOpenAIServer(default=503) as bad:
        client = PooledClient([Endpoint(bad.base_url, "m-bad", 1), Endpoint(good.base_url, "m-good", 1)],
                              SlotBroker([1, 1]), model="m", max_retries=0)
        resp = client.complete(ChatRequest(messages=({"role": "user", "content": "hi"},), model="m"))
        assert resp.text == "fine" and resp.meta["endpoint"] == good.base_url
        assert [r["model"] for r in good.requests] == ["m-good"]            # the endpoint's own model name
        assert client.status()["endpoints"][0]["state"] == "down"
    with FakeOpenAIServer(default=500) as a, FakeOpenAIServer(default=502) as b:
        client = PooledClient([Endpoint(a.base_url), Endpoint(b.base_url)], SlotBroker([1, 1], backoff_s=0.01),
                              model="m", max_retries=1)
        with pytest.raises(LLMError, match="failed at every endpoint") as err:
            client.complete(ChatRequest(messages=({"role": "user", "content": "hi"},)))
        assert len(a.requests) == len(b.requests) == 2 and "HTTP 502" in str(err.value)


def test_two_endpoints_share_a_sweep_within_their_limits(tmp_path):
    with FakeOpenAIServer(lambda b: seeded_reply(b, 0.05)) as a, FakeOpenAIServer(lambda b: seeded_reply(b, 0.05)) as b:
        spec = pool_spec([(a.base_url, 2), (b.base_url, 3)])
        assert spec.llm["concurrency"] == 5
        result = run_experiment(spec, fx.STUDIES["toy-llm"], tmp_path / "pool", progress=False)
        assert result.ok == 12 and a.max_in_flight <= 2 and b.max_in_flight <= 3
        assert len(a.requests) > 0 and len(b.requests) > 0
        answered = [json.loads(x)["endpoint"] for x in (tmp_path / "pool" / TRANSCRIPTS_FILE).read_text().splitlines()]
        assert answered.count(a.base_url) == len(a.requests) and answered.count(b.base_url) == len(b.requests)


def test_an_endpoint_dying_mid_sweep_is_survived_with_the_same_records(tmp_path):
    with FakeOpenAIServer(seeded_reply) as a:
        b = FakeOpenAIServer(seeded_reply).start()
        url_b = b.base_url
        try:
            spec = pool_spec([(a.base_url, 2), (b.base_url, 2)])

            def kill_b():
                path = tmp_path / "pool" / TRANSCRIPTS_FILE
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and (not path.is_file() or len(path.read_text().splitlines()) < 10):
                    time.sleep(0.01)
                b.stop()

            killer = threading.Thread(target=kill_b)
            killer.start()
            result = run_experiment(spec, fx.STUDIES["toy-llm"], tmp_path / "pool", progress=False)
            killer.join()
        finally:
            b.stop()
        alone = resolve_spec({**spec.to_dict(), "llm": {**{k: v for k, v in spec.llm.items()
                                                          if k not in ("endpoints", "concurrency")},
                                                       "base_url": a.base_url, "concurrency": 2}}, fx.STUDIES)
        single = run_experiment(alone, fx.STUDIES["toy-llm"], tmp_path / "single", progress=False)
    assert result.ok == single.ok == 12 and result.failed == 0
    assert without_time(read_results(tmp_path / "pool" / RESULTS_FILE)) == \
        without_time(read_results(tmp_path / "single" / RESULTS_FILE))
    answered = [json.loads(x)["endpoint"] for x in (tmp_path / "pool" / TRANSCRIPTS_FILE).read_text().splitlines()]
    first_after = max(i for i, u in enumerate(answered) if u == url_b) + 1
    assert answered.count(url_b) >= 3 and first_after < len(answered)          # b answered, then a alone


@pytest.mark.parametrize("llm, message", [
    ({"endpoints": [{"base_url": "ftp://x"}]}, "base_url must be an http(s):// URL"),
    ({"endpoints": [{"base_url": "http://a/v1", "weight": 2}]}, "unknown key(s) 'weight'"),
    ({"endpoints": ["http://a/v1"]}, "must be a mapping"),
    ({"endpoints": [{"base_url": "http://a/v1"}, {"base_url": "http://a/v1"}]}, "lists an endpoint twice"),
    ({"endpoints": [{"base_url": "http://a/v1", "concurrency": 0}]}, "concurrency must be an integer in [1, 256]"),
    ({"endpoints": [{"base_url": "http://a/v1"}], "base_url": "http://b/v1"}, "either base_url or endpoints"),
    ({"endpoints": [{"base_url": "http://a/v1", "concurrency": 2}], "concurrency": 5}, "is the sum of the endpoints'"),
])
def test_bad_pools_are_one_config_error(llm, message):
    with pytest.raises(ConfigError) as err:
        resolve_spec({"study": "toy-llm", "llm": {"backend": "openai", **llm}}, fx.STUDIES)
    assert message in str(err.value)


def test_base_url_given_several_times_is_a_pool_with_concurrency_each(tmp_path):
    parser = argparse.ArgumentParser(prog="consensus")
    cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["experiment", "toy-llm", "--backend", "openai", "--model", "m", "--base-url",
                              "http://h1:8000/v1", "--base-url", "http://h2:8000/v1", "--concurrency", "3"])
    spec, _ = cli._plan(args, fx.STUDIES)
    assert spec.llm["endpoints"] == [{"base_url": "http://h1:8000/v1", "model": "m", "concurrency": 3},
                                     {"base_url": "http://h2:8000/v1", "model": "m", "concurrency": 3}]
    assert spec.llm["concurrency"] == 6 and spec.llm["base_url"] == ""
    assert "endpoints" not in spec.identity()["llm"]                        # the pool is execution, not identity
    # resuming with one --base-url replaces the pool
    one = resolve_spec(apply_overrides(spec.to_dict(), fx.STUDIES, llm={"base_url": "http://h3/v1"}), fx.STUDIES)
    assert one.llm["endpoints"] == [] and one.llm["base_url"] == "http://h3/v1"
