"""Naming game (paper 4): the SI prompt, q tables from scripted logprobs (fake OpenAI server), the on-disk cache and
resuming, the meta-prompting check, and (marker ``embedded``) a real H = 1 extraction from the embedded model."""
from __future__ import annotations

import json
import math
import re
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from consensus.errors import ConfigError
from consensus.llm.base import LLMError
from consensus.llm.openai_client import OpenAIChatClient
from consensus.llm.transcripts import ReplayClient, TranscriptStore
from consensus.scenarios.naming_game import prompts
from consensus.scenarios.naming_game.game import memory_space
from consensus.scenarios.naming_game.llm_policy import (
    FLOOR_LOGPROB,
    LogprobsUnavailable,
    answer_position,
    answer_value,
    comprehension_check,
    extract_policy,
    match_words,
    score_answer,
)
from support.fake_openai_server import FakeOpenAIServer, Reply, Status

WORDS = ("F", "J")
T = 0.5

# The SI's example system prompt ("Example Prompt: System Prompt"), with its placeholders i and SCORE filled in for
# the memory "01" (one round: Player 1 said F, Player 2 said J).
SI_SYSTEM = """Context: Player 1 is playing a multi-round partnership game with Player 2 for 100 rounds. At each round,
Player 1 and Player 2 simultaneously pick an action from the following values: [F, J]. The payoff that both players
get is determined by the following rule:
1. If Players play the SAME action as each other, they will both be REWARDED with payoff 100 points.
2. If Players play DIFFERENT actions to each other, they will both be PUNISHED with payoff -50 points.
The objective of each Player is to maximize their own accumulated point tally, conditional on the behavior of the
other player. This is the history of choices in past rounds:
{'round':1, 'Player 1': F, 'Player 2': J, 'payoff': -50}
It is now round 2. The current score of Player 1 is -50. You are an observer who answers questions about the game
using a single value. Please think step by step before making a decision. Remember, examining history explicitly is
important. Write your answer using the following format: {'value': <VALUE_OF_PLAYER_1>; 'reason': <YOUR_REASON>}."""
SI_USER = "Answer saying which action Player 1 should play."


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# -- prompts ---------------------------------------------------------------------------------------------------------

def test_prompt_matches_the_si_example():
    msgs = prompts.render("01", WORDS, 0)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert _norm(msgs[0]["content"]) == _norm(SI_SYSTEM)
    assert msgs[1]["content"] == SI_USER
    assert "{'round':1, 'Player 1': F, 'Player 2': J, 'payoff': -50}\n" in msgs[0]["content"]   # one line per round
    with_prefill = prompts.render("01", WORDS, 0, prefill=True)
    assert with_prefill[:2] == msgs and with_prefill[2] == {"role": "assistant", "content": "{'value': '"}


def test_prompt_memory_order_and_empty_state():
    text = prompts.system_prompt("001110", ("cat", "dog"), 1)
    assert "from the following values: [dog, cat]." in text                     # order 1 swaps the list only
    lines = [ln for ln in text.splitlines() if ln.startswith("{'round'")]
    assert lines == ["{'round':1, 'Player 1': cat, 'Player 2': cat, 'payoff': 100}",
                     "{'round':2, 'Player 1': dog, 'Player 2': dog, 'payoff': 100}",
                     "{'round':3, 'Player 1': dog, 'Player 2': cat, 'payoff': -50}"]
    assert "It is now round 4. The current score of Player 1 is 150." in text
    empty = prompts.system_prompt("", ("cat", "dog"), 0)
    assert "history of choices" not in empty and "It is now round 1. The current score of Player 1 is 0." in empty
    assert prompts.system_prompt("", ("cat", "dog"), 0) != prompts.system_prompt("", ("cat", "dog"), 1)
    with pytest.raises(ConfigError, match="memory state"):
        prompts.system_prompt("012", ("cat", "dog"), 0)
    with pytest.raises(ConfigError, match="order"):
        prompts.system_prompt("", ("cat", "dog"), 2)


@pytest.mark.parametrize("words", [
    ("F",), ("F", "J", "K"), "FJ", ("F", "F"), ("F'", "J"), ('say "x"', "J"), ("a\nb", "J"), ("x" * 33, "J"),
    ("", "J"), (" F", "J"), ("{F}", "J"), ("F;", "J"), ("F:", "J"), ("[F]", "J"), ("F\\", "J"), (1, "J"),
    ("tab\there", "J"),
])
def test_bad_words_are_refused(words, tmp_path):
    with pytest.raises(ConfigError):
        prompts.check_words(words)
    with pytest.raises(ConfigError):        # before any request is sent: no client needed to fail
        extract_policy(object(), words, 1, cache_dir=tmp_path, progress=False)


def test_good_words_are_accepted():
    assert prompts.check_words(["husband", "wife"]) == ("husband", "wife")
    assert prompts.check_words(("African American", "White")) == ("African American", "White")
    assert prompts.prompt_hash(WORDS) != prompts.prompt_hash(("F", "K"))


# -- token matching --------------------------------------------------------------------------------------------------

def test_token_matching_rule():
    assert match_words([("F", -0.7), (" J", -0.8), ("P", -7.0)], WORDS) == ([-0.7, -0.8], 0)
    lp, amb = match_words([("wi", -1.0), (" wife", -2.0), ("husband", -0.5), ("Wife", -4.0)], ("husband", "wife"))
    assert lp[0] == -0.5 and lp[1] == pytest.approx(math.log(math.exp(-1.0) + math.exp(-2.0))) and amb == 0
    assert match_words([("he", -1.0), ("her", -2.0), ("h", -3.0)], ("he", "her")) == ([-1.0, -2.0], 1)
    assert match_words([("F'", -0.2), ("Fo", -1.0), ("'J", -0.3)], WORDS) == ([-0.2, -0.3], 0)
    assert match_words([("X", -0.1)], WORDS) == ([None, None], 0)


def test_answer_position_with_and_without_prefill():
    assert answer_position(["F", "';", " '"]) == (0, "prefill")
    assert answer_position(["{'", "value", "':", " '", "J", "';"]) == (4, "parsed")
    assert answer_position(["{'value':", " 'J", "'"]) == (1, "parsed")
    assert answer_position(["Let", "'s", " think"], "parsed") == (None, "parsed")


# -- extraction against the fake server ----------------------------------------------------------------------------

def scripted_lp(key: str, order: int) -> dict[str, float]:
    """Logprobs of F and J for a state and order: distinct for every (state, order)."""
    i = memory_space(2).index[key]
    return {"F": -0.1 - 0.13 * i - 0.4 * order, "J": -0.2 - 0.07 * i + 0.1 * order}


def prompt_lookup(H: int) -> dict[str, tuple[str, int]]:
    return {prompts.system_prompt(k, WORDS, o): (k, o) for k in memory_space(H).keys for o in prompts.ORDERS}


class Script:
    """A fake endpoint with logprobs: ``prefill`` True acts like llama.cpp (continues the assistant turn), False like
    OpenAI (writes ``{'value': '...`` itself). ``missing``: states whose given word is left out of the top-k."""

    def __init__(self, H: int, prefill: bool = True, missing: dict | None = None, fail_at: int | None = None):
        self.lookup = prompt_lookup(H)
        self.prefill = prefill
        self.missing = missing or {}
        self.fail_at = fail_at
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict):
        with self._lock:
            self.calls += 1
            if self.fail_at is not None and self.calls == self.fail_at:
                return Status(400, message="scripted interruption")
        key, order = self.lookup[body["messages"][0]["content"]]
        lp = scripted_lp(key, order)
        top = [(w, v) for w, v in sorted(lp.items(), key=lambda kv: -kv[1]) if w not in self.missing.get(key, ())]
        top += [("P", -7.0), ("Player", -8.0)]
        tail = [[("';", -0.3)], [(" '", -0.01)], [("reason", -0.01)]]
        if self.prefill:
            positions = [top] + tail
            text = "{'value': '" + top[0][0] + "'; 'reason"
        else:
            positions = [[("{'", -0.1)], [("value", -0.01)], [("':", -0.01)], [(" '", -0.02)], top] + tail
            text = "{'value': '" + top[0][0] + "'; 'reason"
        return Reply(text, logprobs=positions[:body.get("max_tokens", 16)])


def expected_q(H: int, missing: dict | None = None) -> np.ndarray:
    """Eq. 9 at T = 0.5 per order, then the mean over the two orders, computed here independently."""
    out = []
    for key in memory_space(H).keys:
        ps = []
        for order in prompts.ORDERS:
            lp = scripted_lp(key, order)
            for w in (missing or {}).get(key, ()):
                lp[w] = FLOOR_LOGPROB
            ps.append(math.exp(lp["F"] / T) / (math.exp(lp["F"] / T) + math.exp(lp["J"] / T)))
        out.append(sum(ps) / 2)
    return np.array(out)


def client_for(srv: FakeOpenAIServer, **kw) -> OpenAIChatClient:
    kw.setdefault("max_retries", 0)
    return OpenAIChatClient(base_url=srv.base_url, model="fake-model", timeout_s=5, backoff_s=0.0, **kw)


def test_softmax_at_half_temperature_and_order_average(tmp_path):
    with FakeOpenAIServer(Script(1)) as srv:
        res = extract_policy(client_for(srv), WORDS, 1, temperature=T, cache_dir=tmp_path, progress=False)
        bodies = srv.requests
    assert res.keys == ["", "00", "01", "10", "11"]
    np.testing.assert_allclose(res.q, expected_q(1), rtol=0, atol=1e-12)
    # one state by hand: "01", order 0: F -0.36, J -0.34; order 1: F -0.76, J -0.24
    p0 = 1 / (1 + math.exp((-0.34 + 0.36) / 0.5))
    p1 = 1 / (1 + math.exp((-0.24 + 0.76) / 0.5))
    assert res.q[2] == pytest.approx((p0 + p1) / 2, abs=1e-12)
    assert res.p_by_order[:, 2] == pytest.approx([p0, p1], abs=1e-12)
    assert res.meta["requests"] == 10 and res.meta["cached"] == 0 and res.meta["mode"] == "prefill"
    assert res.meta["missing_word"] == {"F": 0, "J": 0} and res.meta["no_word"] == 0
    assert len(bodies) == 10
    for b in bodies:
        assert b["logprobs"] is True and b["top_logprobs"] == 20 and b["temperature"] == T
        assert b["messages"][-1] == {"role": "assistant", "content": "{'value': '"}
    assert bodies[0]["max_tokens"] == 16 and {b["max_tokens"] for b in bodies[1:]} == {1}   # probe, then 1 token
    assert {(k, o) for k, o in (prompt_lookup(1)[b["messages"][0]["content"]] for b in bodies)} == \
        {(k, o) for k in res.keys for o in (0, 1)}
    d = res.as_dict()
    assert json.loads(json.dumps(d))["q"]["01"] == pytest.approx((p0 + p1) / 2)
    assert d["rewards"] == [-50, 100] and d["memory_size"] == 1 and d["temperature"] == T


def test_without_prefill_the_answer_position_is_parsed(tmp_path):
    with FakeOpenAIServer(Script(1, prefill=False)) as srv:
        res = extract_policy(client_for(srv), WORDS, 1, temperature=T, cache_dir=tmp_path, progress=False)
        bodies = srv.requests
    np.testing.assert_allclose(res.q, expected_q(1), atol=1e-12)
    assert res.meta["mode"] == "parsed" and "OpenAI" in res.meta["prefill"]
    assert {b["max_tokens"] for b in bodies} == {16}


def test_endpoint_without_logprobs_is_one_clear_error(tmp_path):
    with FakeOpenAIServer(default="{'value': 'F'; 'reason': 'x'}") as srv:
        with pytest.raises(LogprobsUnavailable) as exc:
            extract_policy(client_for(srv), WORDS, 1, cache_dir=tmp_path, progress=False)
        assert len(srv.requests) == 1                         # stops at the first reply
    msg = str(exc.value)
    assert isinstance(exc.value, LLMError) and "returned no logprobs" in msg
    for server in ("OpenAI", "top_logprobs", "vLLM", "llama.cpp", "n_probs"):
        assert server in msg


def test_word_missing_from_top_k_gets_the_counted_floor(tmp_path):
    missing = {"00": ("J",), "11": ("F",), "10": ("F", "J")}
    with FakeOpenAIServer(Script(1, missing=missing)) as srv:
        res = extract_policy(client_for(srv), WORDS, 1, temperature=T, cache_dir=tmp_path, progress=False)
    assert res.meta["missing_word"] == {"F": 2, "J": 2}          # "00" and "11": both orders each
    assert res.meta["no_word"] == 2                              # "10": neither word, both orders
    assert FLOOR_LOGPROB == pytest.approx(math.log(2.220446049250313e-16))
    exp = expected_q(1, {"00": ("J",), "11": ("F",)})
    exp[3] = 0.5
    np.testing.assert_allclose(res.q, exp, atol=1e-12)
    assert res.q[1] == pytest.approx(1.0) and res.q[4] == pytest.approx(0.0, abs=1e-30)


def test_cache_makes_the_second_extraction_send_no_request(tmp_path):
    with FakeOpenAIServer(Script(2)) as srv:
        first = extract_policy(client_for(srv), WORDS, 2, temperature=T, cache_dir=tmp_path, progress=False)
        n = len(srv.requests)
        second = extract_policy(client_for(srv), WORDS, 2, temperature=T, cache_dir=tmp_path, progress=False)
        assert len(srv.requests) == n == 42
        other_t = extract_policy(client_for(srv), WORDS, 2, temperature=1.0, cache_dir=tmp_path, progress=False)
        assert len(srv.requests) == 84                           # T is part of the key
    assert second.meta["requests"] == 0 and second.meta["cached"] == 42
    np.testing.assert_array_equal(first.q, second.q)
    assert not np.allclose(other_t.q, first.q)
    files = sorted(tmp_path.glob("*.jsonl"))
    assert len(files) == 2
    lines = [json.loads(ln) for ln in files[0].read_text().splitlines()]   # plain JSON lines
    assert lines[0]["kind"] == "naming-game-logprobs" and len(lines) == 43


def test_interrupted_extraction_resumes_where_it_stopped(tmp_path):
    with FakeOpenAIServer(Script(2, fail_at=8)) as srv:
        with pytest.raises(LLMError, match="scripted interruption"):
            extract_policy(client_for(srv, concurrency=1), WORDS, 2, temperature=T, cache_dir=tmp_path,
                           progress=False)
        (cache,) = tmp_path.glob("*.jsonl")
        done = len(cache.read_text().splitlines()) - 1                 # minus the header line
        # the 7 answers before the failure, plus those a worker finished before the failure reached the caller
        assert 7 <= done < 42
        with open(cache, "a") as fh:
            fh.write('{"state": "01", "ord')                          # a killed writer's cut line
        before = len(srv.requests)
        res = extract_policy(client_for(srv, concurrency=1), WORDS, 2, temperature=T, cache_dir=tmp_path,
                             progress=False)
        assert len(srv.requests) - before == 42 - done
    assert res.meta["cached"] == done and res.meta["requests"] == 42 - done
    np.testing.assert_allclose(res.q, expected_q(2), atol=1e-12)
    with FakeOpenAIServer(Script(2)) as srv:                          # resume=False starts again
        res2 = extract_policy(client_for(srv), WORDS, 2, temperature=T, cache_dir=tmp_path, progress=False,
                              resume=False)
        assert len(srv.requests) == 42 and res2.meta["cached"] == 0


def test_requests_respect_the_client_concurrency(tmp_path):
    script = Script(2)

    def slow(body):
        time.sleep(0.03)
        return script(body)

    with FakeOpenAIServer(slow) as srv:
        res = extract_policy(client_for(srv, concurrency=3), WORDS, 2, temperature=T, cache_dir=tmp_path,
                             progress=True)
        assert 2 <= srv.max_in_flight <= 3
    np.testing.assert_allclose(res.q, expected_q(2), atol=1e-12)


def llm_settings(**kw) -> SimpleNamespace:
    base = dict(llm_backend="openai", llm_model="fake-model", llm_base_url="", llm_api_key_env="NG_TEST_NO_KEY",
                llm_timeout_s=5.0, llm_max_retries=0, llm_concurrency=2)
    return SimpleNamespace(**{**base, **kw})


def test_extraction_from_llm_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("NG_TEST_NO_KEY", raising=False)
    with FakeOpenAIServer(Script(1)) as srv:
        res = extract_policy(llm_settings(llm_base_url=srv.base_url), WORDS, 1, temperature=T, cache_dir=tmp_path,
                             progress=False)
        assert len(srv.requests) == 10 and {b["model"] for b in srv.requests} == {"fake-model"}
        assert res.model == "fake-model" and res.meta["endpoint"] == srv.base_url
    np.testing.assert_allclose(res.q, expected_q(1), atol=1e-12)
    with pytest.raises(ConfigError, match="replay"):
        extract_policy(llm_settings(llm_backend="replay"), WORDS, 1, cache_dir=tmp_path, progress=False)


def test_replay_and_other_clients_are_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    TranscriptStore(path).append({"v": 1, "key": "x", "response": "hi"})
    with pytest.raises(ConfigError, match="replay client has no logprobs"):
        extract_policy(ReplayClient(path), WORDS, 1, cache_dir=tmp_path, progress=False)
    with pytest.raises(ConfigError, match="temperature"):
        extract_policy(ReplayClient(path), WORDS, 1, temperature=-1, cache_dir=tmp_path, progress=False)


def test_result_converts_to_a_policy(tmp_path):
    policy_mod = pytest.importorskip("consensus.scenarios.naming_game.policy")
    with FakeOpenAIServer(Script(1)) as srv:
        res = extract_policy(client_for(srv), WORDS, 1, temperature=T, cache_dir=tmp_path, progress=False)
    pol = res.to_policy()
    assert isinstance(pol, policy_mod.Policy)
    np.testing.assert_allclose(np.asarray(pol.q), res.q)
    assert pol.H == 1 and tuple(pol.words) == WORDS


# -- meta-prompting ----------------------------------------------------------------------------------------------

def test_answer_value_and_scoring():
    assert answer_value("{'value': -50; 'reason': 'the rules'}") == "-50"
    assert answer_value("-50 points; 'reason': x") == "-50 points"
    assert answer_value("{'value': 'F'; 'reason") == "'F'"
    assert answer_value("{'value': [F, J]; 'reason': ...") == "[F, J]"
    assert score_answer("min", -50, "-50 points", WORDS) and not score_answer("max", 100, "'F'", WORDS)
    assert score_answer("action_i", "F", "'F'", WORDS) and not score_answer("action_i", "F", "F or J", WORDS)
    assert score_answer("actions", list(WORDS), "[J, F]", WORDS) and not score_answer("actions", WORDS, "F", WORDS)


def test_comprehension_check_scores_against_the_memory():
    """A fake model that reads the round and the score off the prompt and knows the rules, but answers 'banana' to
    everything else: those question types score 1, the others 0."""
    def answer(body):
        system, question = body["messages"][0]["content"], body["messages"][1]["content"]
        assert body["messages"][2] == {"role": "assistant", "content": "{'value': "}
        rnd = re.search(r"It is now round (\d+)", system).group(1)
        score = re.search(r"current score of Player 1 is (-?\d+)", system).group(1)
        value = {"lowest": "-50", "highest": "100", "all the action": "[F, J]", "current round": rnd,
                 "current total": score}
        for cue, v in value.items():
            if cue in question:
                return f"{{'value': {v}; 'reason': 'read it'}}"
        return "{'value': 'banana'; 'reason': 'no idea'}"

    with FakeOpenAIServer(answer) as srv:
        out = comprehension_check(client_for(srv, concurrency=4), WORDS, 5, n=20, seed=3)
        assert len(srv.requests) == 20 * 9
    assert out["asked"] == {q: 20 for q in out["asked"]}
    assert out["accuracy"] == {"min": 1.0, "max": 1.0, "actions": 1.0, "payoff": 0.0, "round": 1.0,
                               "action_i": 0.0, "points_i": 0.0, "n_actions": 0.0, "n_points": 1.0}
    assert out["by_group"] == {"rules": 0.75, "time": pytest.approx(1 / 3), "state": 0.5}
    assert out["errors"] == 0
    rec = next(r for r in out["records"] if r["type"] == "n_points")
    assert rec["truth"] == sum(100 if rec["state"][i] == rec["state"][i + 1] else -50
                               for i in range(0, len(rec["state"]), 2))
    again = comprehension_check(ReplayClientLike(out["records"]), WORDS, 5, n=20, seed=3)
    assert again["accuracy"] == out["accuracy"]                       # same seed → the same memories and questions


class ReplayClientLike:
    """Answers each question with the answer recorded for it (checks that the seed fixes the questions)."""

    def __init__(self, records):
        self.answers = {(prompts.system_prompt(r["state"], WORDS, r["order"]), r["question"]): r["answer"]
                        for r in records}
        self.model = "replay"

    def complete(self, req):
        from consensus.llm.base import ChatResponse

        return ChatResponse(text=self.answers[(req.messages[0]["content"], req.messages[1]["content"])])


# -- the real embedded model -------------------------------------------------------------------------------------

@pytest.mark.embedded
def test_embedded_model_h1_table(shared_llm, tmp_path):
    """On the session's shared model server (tests/conftest.py)."""
    client = OpenAIChatClient(shared_llm.base_url, shared_llm.model, timeout_s=300, max_retries=0, concurrency=1)
    try:
        t0 = time.monotonic()
        res = extract_policy(client, WORDS, 1, temperature=T, cache_dir=tmp_path, progress=False)
        seconds = time.monotonic() - t0
    finally:
        client.close()
    assert res.q.shape == (5,) and np.all(np.isfinite(res.q)) and np.all((res.q >= 0) & (res.q <= 1))
    assert res.meta["mode"] == "prefill" and res.meta["requests"] == 10
    print(f"\nH=1 q table of {res.model} for {WORDS} at T={T} ({seconds:.1f} s for 10 requests, "
          f"~{seconds / 10 * 2730 / 3600:.1f} h estimated for H=5):")
    for key, q, p in zip(res.keys, res.q, res.p_by_order.T):
        print(f"  {key or '(empty)':8s} q={q:.4f}  orders={p[0]:.4f},{p[1]:.4f}")
    print("  meta:", {k: res.meta[k] for k in ("missing_word", "no_word", "ambiguous_tokens", "seconds")})
