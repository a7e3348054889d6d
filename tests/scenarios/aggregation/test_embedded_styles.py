"""The demo's prompt style with the embedded model, end to end (slow: loads the 1.1 GB model; CI runs it).

One of the two tests that start their own model server the way a user's run does (here: a headless, in-process
run through ``make_client("embedded")``; the other tests of the real model share one server, tests/conftest.py).

3 agents negotiate for 2 rounds (paper 1's Algorithm 1, no motion) with the ``tools`` style, which ``make demo`` uses:
the group must close in (the measured card: the model answers with the centroid of what it sees). Then one ``paper``
style request through llama.cpp's grammar: the reply must end in the paper's answer line."""
from __future__ import annotations

import re
import urllib.error
import urllib.request

import numpy as np
import pytest

from consensus.control.planner import PlanRequest
from consensus.graphs.topology import make_graph
from consensus.llm.base import ChatRequest
from consensus.llm.factory import make_client
from consensus.scenarios.aggregation.headless import run_negotiation
from consensus.scenarios.aggregation.planners.llm import LLMPlanner
from consensus.scenarios.aggregation.prompts import answer_grammar, answer_regex, build_messages

pytestmark = pytest.mark.embedded


def test_demo_style_closes_in_and_the_paper_grammar_holds(embedded_model_installed):
    client, close = make_client("embedded", n_parallel=3, concurrency=3, timeout_s=600, n_ctx=8192)
    try:
        planners = [LLMPlanner(client, dim=2, robot_id=i, style="tools", temperature=0.0, max_tokens=160, seed=i,
                               num_agents=3) for i in range(3)]
        start = np.array([[-6.0, 2.0], [5.0, 4.0], [1.0, -7.0]])
        # one round, the fewest the check needs: each agent going to the centroid of the other two halves the
        # spread exactly (x_i' = (S - x_i) / 2, so every difference is halved); an agent that stays where it is or
        # answers off the centroid leaves more than 0.55 of it
        states, log = run_negotiation(planners, start, make_graph("complete", 3), 1, max_workers=3)
        spread = [np.ptp(s, axis=0).max() for s in states]
        assert sum(e["fallback"] for e in log) <= 1, log
        assert spread[-1] <= 0.55 * spread[0], spread
        # the paper's prompt, and a line asking for a short reply: on the paper's prompt alone this model reasons on
        # past 400 tokens (the grammar allows free text first), which left the grammar's answer line unchecked
        messages = [*build_messages(dim=2, own=[1, 2], neighbors=[[5, -3], [-2, 4]], round=0, style="paper"),
                    {"role": "user", "content": "Reply with your answer line only."}]
        reply = client.complete(ChatRequest(messages=tuple(messages), temperature=0.0, max_tokens=80,
                                            grammar=answer_grammar(2), tag="robot_0/grammar"))
        # the tools style's one-call grammar (issue 44) where the model looped before: a robot that sees nobody may
        # only name "me", once; the reply is the call and nothing else, far below the token cap
        alone = LLMPlanner(client, dim=2, robot_id=0, style="tools", temperature=0.7, max_tokens=160, seed=1)
        plan = alone.plan(PlanRequest(robot_id=0, own=np.array([1.0, 2.0]), neighbors=[], round=0))
    finally:
        close()
    with pytest.raises(urllib.error.URLError):               # the client's own server is gone after close()
        urllib.request.urlopen(client.base_url.removesuffix("/v1") + "/health", timeout=2)
    assert reply.meta.get("server_timings", {}).get("predicted_n", 0) > 0      # llama.cpp's own timings are kept
    assert reply.meta.get("finish_reason") == "stop", reply.meta             # the grammar's end, not max_tokens
    assert re.fullmatch(answer_regex(2), reply.text), reply.text
    assert not plan.fallback and plan.llm_calls == 1, plan          # one call, read at once
