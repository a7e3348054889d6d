"""Prompt styles (paper / json / tools) against the fake OpenAI server, the paper style's answer grammar, paper 1's
full 1-D memory, the point-mass robot model, and paper 3's allocation prompt as written."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from consensus.control.kinematics import PointMassPID
from consensus.control.planner import PlanRequest
from consensus.control.safety import Geofence
from consensus.llm.base import ChatRequest
from consensus.llm.openai_client import OpenAIChatClient
from consensus.llm.parsing import parse_position
from consensus.llm.styles import tool_calls_in_text
from consensus.scenarios.aggregation.planners.llm import LLMPlanner
from consensus.scenarios.aggregation.prompts import FORMAT_PAPER, answer_grammar, answer_regex
from consensus.scenarios.allocation.agents import LLMAllocationAgent
from consensus.scenarios.allocation.model import AllocationProblem
from consensus.scenarios.allocation.prompts import allocation_messages, parse_allocation
from consensus.decision import ProposeContext

from support.fake_openai_server import FakeOpenAIServer, Reply

OWN, OTHERS = [0.0, 0.0], [[4.0, 0.0], [2.0, 6.0]]     # all-robot mean (2, 2); others' mean (3, 3)


def plan(srv, style, *, retries=1, fence=None, **kw):
    client = OpenAIChatClient(srv.base_url, "fake", **kw)
    planner = LLMPlanner(client, dim=2, robot_id=0, style=style, parse_retries=retries, geofence=fence)
    return planner, planner.plan(PlanRequest(robot_id=0, own=np.array(OWN), neighbors=[np.array(p) for p in OTHERS],
                                             round=0))


# --- the three styles on the wire -----------------------------------------------------------------------------------
def test_paper_style_sends_the_papers_format_and_no_schema_and_reads_free_reasoning():
    reply = "Reasoning: the mean of (0, 0), (4, 0) and (2, 6) is (6/3, 6/3).\nSo I go there.\nPosition: (2, 2)"
    with FakeOpenAIServer(default=reply) as srv:
        _, res = plan(srv, "paper")
        body = srv.requests[0]
    assert res.meeting_point.tolist() == [2.0, 2.0] and not res.fallback
    assert body["messages"][-1]["content"].endswith(FORMAT_PAPER)
    assert "response_format" not in body and "tools" not in body
    assert "grammar" not in body and "cache_prompt" not in body     # not a llama.cpp server: lenient parsing only


def test_paper_style_on_a_llama_cpp_server_sends_the_grammar_cache_and_pinned_slot():
    with FakeOpenAIServer(default="Reasoning: x. Position: (1, 1)") as srv:
        plan(srv, "paper", llama_cpp=True, slots=4)
        body = srv.requests[0]
    assert body["grammar"] == answer_grammar(2) and body["cache_prompt"] is True and body["id_slot"] == 0


def test_slots_pin_each_robot_to_its_own_slot_in_every_process():
    client = OpenAIChatClient("http://127.0.0.1:9/v1", "fake", llama_cpp=True, slots=4)
    assert [client.slot_for(f"robot_{i}/round_3") for i in range(6)] == [0, 1, 2, 3, 0, 1]
    assert client.slot_for("coordinator/round_1") == client.slot_for("coordinator/round_2")


def test_tools_style_on_a_llama_cpp_server_sends_one_call_grammar_with_the_tools_in_the_system_prompt():
    """llama.cpp refuses a grammar beside ``tools``: the client writes the tools into the system prompt as the chat
    template does and sends the grammar alone; the call comes back as text (issue 44: a few tokens, never prose)."""
    from consensus.scenarios.aggregation.prompts import tool_definitions, tool_grammar

    with FakeOpenAIServer(default='{"name": "move_to_centroid", "arguments": {"robots": ["robot_1", "robot_2"]}}'
                          ) as srv:
        _, res = plan(srv, "tools", llama_cpp=True, slots=4)
        body = srv.requests[0]
    assert res.meeting_point.tolist() == pytest.approx([3.0, 3.0]) and not res.fallback     # the others' centroid
    assert "tools" not in body and "tool_choice" not in body and body["grammar"] == tool_grammar(2, 2)
    system = body["messages"][0]
    assert system["role"] == "system" and "<tools>" in system["content"]
    for tool in tool_definitions(2):
        assert json.dumps(tool) in system["content"]
    names = re.search(r"robot ::= (.*)", body["grammar"]).group(1)
    assert names == '"\\"me\\"" | "\\"robot_1\\"" | "\\"robot_2\\""'    # only the robots the prompt names
    # the positions come last: the rest of the prompt is the same every round (a slot's cache keeps it)
    assert body["messages"][-1]["content"].endswith("robot_2 at (2, 6).")
    with FakeOpenAIServer(default='{"name": "move_to", "arguments": {"x": 1, "y": 1}}') as srv:
        plan(srv, "tools")                                          # not llama.cpp: the API's tools, no grammar
        body = srv.requests[0]
    assert "grammar" not in body and [t["function"]["name"] for t in body["tools"]][0] == "move_to_centroid"


def test_the_tools_style_warms_a_llama_cpp_slot_with_the_prompt_up_to_the_positions():
    """``warm_up`` (issue 44): before the run, the prompt's fixed part into the robot's slot; the first round then
    shares every token of it up to the positions (what a llama.cpp slot keeps and does not evaluate again)."""
    reply = '{"name": "move_to_centroid", "arguments": {"robots": ["robot_1", "robot_2"]}}'
    with FakeOpenAIServer(default=reply) as srv:
        client = OpenAIChatClient(srv.base_url, "fake", llama_cpp=True, slots=4)
        planner = LLMPlanner(client, dim=2, robot_id=2, style="tools", num_agents=3)
        assert planner.warm_up() is True
        planner.plan(PlanRequest(robot_id=2, own=np.array(OWN), neighbors=[np.array(p) for p in OTHERS], round=0))
        warm, first = srv.requests
    assert warm["max_tokens"] == 1 and warm["id_slot"] == first["id_slot"] == 2
    assert warm["messages"][0] == first["messages"][0]                   # system prompt with the tools
    fixed = first["messages"][-1]["content"].split("Your position is:")[0]
    assert fixed and warm["messages"][-1]["content"].startswith(fixed + "Your position is:")
    with FakeOpenAIServer(default=reply) as srv:                         # not llama.cpp, or another style: nothing
        assert not LLMPlanner(OpenAIChatClient(srv.base_url, "fake"), dim=2, robot_id=0, style="tools").warm_up()
        assert not LLMPlanner(OpenAIChatClient(srv.base_url, "fake", llama_cpp=True), dim=2, robot_id=0,
                              style="paper").warm_up()
        assert srv.requests == []


def test_json_style_sends_the_schema():
    with FakeOpenAIServer(default='{"reasoning": "mean", "position": [2, 2]}') as srv:
        _, res = plan(srv, "json")
        body = srv.requests[0]
    assert body["response_format"]["type"] == "json_schema" and res.meeting_point.tolist() == [2.0, 2.0]


def test_tools_style_answers_with_the_tool_result_computed_by_the_planner():
    script = [Reply("", tool_calls=[("distance_to", '{"robot": "robot_1"}')]),
              Reply("", tool_calls=[("move_to_centroid", '{"robots": ["me", "robot_1", "robot_2"]}')])]
    with FakeOpenAIServer(script) as srv:
        planner, res = plan(srv, "tools")
        bodies = srv.requests
    assert res.meeting_point.tolist() == pytest.approx([2.0, 2.0]) and not res.fallback and res.llm_calls == 2
    assert {t["function"]["name"] for t in bodies[0]["tools"]} == {"move_to_centroid", "distance_to", "move_toward",
                                                                   "move_to"}
    assert "robot_1 at (4, 0)" in bodies[0]["messages"][-1]["content"]
    assert bodies[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_0", "content": "4"}   # the distance
    assert planner.counters()["tool_errors"] == 0


def test_tools_style_reads_a_call_written_as_text_and_move_toward():
    text = '```json\n{"name": "move_toward", "arguments": {"robot": "robot_2", "fraction": 0.5}}\n```'
    with FakeOpenAIServer(default=text) as srv:
        _, res = plan(srv, "tools")
    assert res.meeting_point.tolist() == [1.0, 3.0]
    assert tool_calls_in_text("<tool_call>\n" + text[8:-4] + "\n</tool_call>", {"move_toward"})[0]["name"] == \
        "move_toward"


@pytest.mark.parametrize("name, arguments", [
    ("move_to", '{"x": NaN, "y": 1}'),                 # NaN (Python's json reads it)
    ("move_to", '{"x": 1e300, "y": 1}'),               # huge
    ("move_to", '{"x": "3", "y": [1]}'),               # wrong types
    ("move_toward", '{"robot": "robot_9", "fraction": 0.5}'),   # unknown robot
    ("move_toward", '{"robot": "robot_1", "fraction": 7}'),     # fraction outside [0, 1]
    ("move_to_centroid", '{"robots": "everyone"}'),     # not a list
    ("move_to", '{"x": 1, "y": '),                      # malformed JSON
    ("launch_missiles", '{}'),                          # a tool that does not exist
])
def test_hostile_tool_calls_are_refused_counted_and_the_robot_holds(name, arguments):
    with FakeOpenAIServer(default=Reply("", tool_calls=[(name, arguments)])) as srv:
        planner, res = plan(srv, "tools", retries=0)
        replies = [b["messages"][-1] for b in srv.requests[1:]]
    assert res.meeting_point is None and res.fallback and res.fallback_reason == "tool_error"
    c = planner.counters()
    assert c["tool_errors"] == res.llm_calls == 2 and c["fallbacks"] == {"tool_error": 1}
    assert replies[0]["role"] == "tool" and replies[0]["content"].startswith("error:")


def test_tools_answer_beyond_the_geofence_is_clamped_not_trusted():
    fence = Geofence.from_bounds([-5, 5, -5, 5])
    with FakeOpenAIServer(default=Reply("", tool_calls=[("move_to", '{"x": 900, "y": -2}')])) as srv:
        _, res = plan(srv, "tools", fence=fence)
    assert res.meeting_point.tolist() == [5.0, -2.0] and res.clamped


def test_tools_text_answer_without_a_call_is_parsed_like_the_paper_style():
    with FakeOpenAIServer(default="I will go to the middle. Position: (2, 2)") as srv:
        _, res = plan(srv, "tools")
    assert res.meeting_point.tolist() == [2.0, 2.0]


# --- the paper style's answer grammar -------------------------------------------------------------------------------
PAPER_FORMS_2D = ["Reasoning: the average is (2, 2). Position: (2, 2)", "Reasoning: a\nb\n\nPosition: (-3.5, 4.25)",
                  "Position: [1,2]", "Reasoning: x, Position: (10, -0.5)\n"]
OTHER_FORMS_2D = ["Position: 1, 2", "Position: (1, 2) because", "The answer is (1, 2)", "Position: (1; 2)",
                  '{"position": [1, 2]}', "Position: (nan, 2)", "Position: (1, 2, 3)"]
PAPER_FORMS_1D = ["Reasoning: (39 + 65 + 87) / 3 = 63.67, so 64. Position: 64", "Reasoning: r Position: 50.0",
                  "Position: (12)", "Position: [-7.25]"]
OTHER_FORMS_1D = ["Position: 64 units", "I choose 64", "Position: (1, 2)", "Position: sixty"]


@pytest.mark.parametrize("dim, good, bad", [(2, PAPER_FORMS_2D, OTHER_FORMS_2D), (1, PAPER_FORMS_1D, OTHER_FORMS_1D)])
def test_answer_grammar_forms_accepted_and_rejected(dim, good, bad):
    pattern = re.compile(answer_regex(dim))
    for text in good:
        assert pattern.fullmatch(text), text
        assert parse_position(text, dim).ok, text         # the lenient parser reads every allowed form
    for text in bad:
        assert not pattern.fullmatch(text), text


@pytest.mark.parametrize("dim", [1, 2])
def test_answer_grammar_text_is_the_regex_spelled_in_gbnf(dim):
    g = answer_grammar(dim)
    rules = dict(line.split(" ::= ", 1) for line in g.strip().splitlines())
    assert set(rules) == {"root", "free", "ws", "value", "num"}
    assert rules["root"] == 'free "Position:" " "? value ws'          # free text, then the answer line, then the end
    assert rules["free"] == r"[^\x00]*"                                 # no cap on the reasoning beyond max_tokens
    assert rules["num"] == '"-"? [0-9]{1,7} ("." [0-9]{1,6})?'
    forms = [f.strip() for f in rules["value"].split("|")]
    assert len(forms) == (3 if dim == 1 else 2) and all(f.count("num") == dim for f in forms)


# --- paper 1's 1-D memory -------------------------------------------------------------------------------------------
def test_full_1d_memory_survives_10_rounds_and_counts_truncation():
    with FakeOpenAIServer(default="Reasoning: closer to the mean. Position: 50") as srv:
        client = OpenAIChatClient(srv.base_url, "fake")
        planner = LLMPlanner(client, dim=1, robot_id=0, style="paper", memory=True)
        for rnd in range(10):
            planner.plan(PlanRequest(robot_id=0, own=np.array([40.0 + rnd]), neighbors=[np.array([60.0])],
                                     round=rnd))
        sizes = [len(b["messages"]) for b in srv.requests]
        last = srv.requests[-1]["messages"]
        assert sizes == [2 + 2 * k for k in range(10)]            # system + every earlier exchange + the new turn
        assert last[1]["content"].startswith("Another agent is present") and "40" in last[1]["content"]
        assert planner.counters()["history_truncated"] == 0
        small = LLMPlanner(client, dim=1, robot_id=1, style="paper", memory=True, context_tokens=400, max_tokens=160)
        for rnd in range(10):
            small.plan(PlanRequest(robot_id=1, own=np.array([1.0]), neighbors=[np.array([2.0])], round=rnd))
    assert small.counters()["history_truncated"] > 0 and len(small.history()) == 10   # remembered, left out, counted


# --- paper 1's 2-D robot --------------------------------------------------------------------------------------------
def test_point_mass_pid_matches_hand_computed_steps():
    m = PointMassPID(1, 2)
    # step 1: e = (1, 0), de/dt = 10 -> F = 1.2 + 60 = 61.2 N, clipped to 50; a = 50/15; v = a*0.1 = 1/3
    p1 = m.step(np.zeros((1, 2)), np.array([[1.0, 0.0]]), 0.1)
    a = 50 / 15
    assert p1[0, 0] == pytest.approx(a * 0.1 * 0.1 + 0.5 * a * 0.01) and p1[0, 1] == 0
    # step 2: e = 1 - x1, de = e - 1 (negative) -> F = 1.2 e + 60 (e - 1), under 50 N: no clipping
    e = 1 - p1[0, 0]
    f = 1.2 * e + 6 * (e - 1) / 0.1
    a2 = f / 15
    v2 = a * 0.1 + a2 * 0.1
    p2 = m.step(p1, np.array([[1.0, 0.0]]), 0.1)
    assert p2[0, 0] == pytest.approx(p1[0, 0] + v2 * 0.1 + 0.5 * a2 * 0.01)
    # speed limit 3 m/s and a derivative kick at a new target (prev_error is kept)
    far = PointMassPID(1, 2)
    pos = np.zeros((1, 2))
    for _ in range(200):
        pos = far.step(pos, np.array([[1000.0, 0.0]]), 0.1)
    assert np.linalg.norm(far.vel) == pytest.approx(3.0)
    before = far.prev_error.copy()
    far.step(pos, pos + [[0.0, 5.0]], 0.1)
    assert not np.allclose(far.prev_error, before)


def test_point_mass_pid_robots_aggregate_in_the_headless_loop():
    from consensus.scenarios.aggregation.config import AggregationConfig
    from consensus.scenarios.aggregation.headless import run_headless

    cfg = AggregationConfig(num_robots=3, planner="average", kinematics="point_mass_pid", planner_period_s=2.0,
                            control_period_s=0.1, duration_s=60.0, initial_positions=[0, 0, 4, 0, 2, 6])
    res = run_headless(cfg)
    assert res.positions.shape[0] == 30 * 20 + 1                         # 20 control steps a round
    final = res.positions[-1]
    assert np.ptp(final, axis=0).max() < 0.1 and res.summary["converged"]   # together (inertia moves the mean)
    assert np.abs(np.diff(res.positions, axis=0)).max() <= 3.0 * 0.1 + 0.5 * 50 / 15 * 0.01 + 1e-9   # speed limit


# --- paper 3's allocation prompt as written -------------------------------------------------------------------------
PROB = AllocationProblem(name="test", resources=("water", "food"), regions=("region1", "region2"),
                         totals=np.array([10.0, 6.0]), demand=np.array([[5.0, 5.0], [3.0, 3.0]]))


def test_allocation_paper_prompt_is_the_papers_python_dict_with_step_by_step():
    text = allocation_messages(PROB, style="paper")[0]["content"]
    assert "Available resources: {'water': 10, 'food': 6}." in text
    assert "{'water': {'region1': 1, 'region2': 5, 'region3': 1}, 'food':" in text
    assert "Think step-by-step" in text and text.endswith("do not respond with JSON format.")


def test_allocation_paper_reply_read_from_its_last_dict_and_off_template_is_a_counted_zero_plan():
    good = "Step 1: water 10 for {'region1': 5}.\nPlan: {'water': {'region1': 5, 'region2': 5}, " \
           "'food': {'region1': 3, 'region2': 3}}"
    plan_, err = parse_allocation(good, PROB, style="paper")
    assert err == "" and plan_.tolist() == [[5, 5], [3, 3]]
    for bad in ["I would give water to region 1.", "{'water': {'region1': 5}}", "{'water': 'lots'}"]:
        assert parse_allocation(bad, PROB, style="paper")[0] is None
    with FakeOpenAIServer(["Think: give everything to region1.", good]) as srv:
        agent = LLMAllocationAgent(OpenAIChatClient(srv.base_url, "fake"), PROB, agent_id=0, style="paper")
        ctx = ProposeContext(agent=0, turn=0)
        assert agent.propose(ctx) is None                              # off the template: the study's zero plan
        assert agent.propose(ProposeContext(agent=0, turn=1)).tolist() == [[5, 5], [3, 3]]
        body = srv.requests[0]
    assert agent.counters()["fallbacks"] == {"unparseable": 1} and "response_format" not in body


def test_chat_request_keys_without_the_new_fields_are_those_of_earlier_transcripts():
    import hashlib

    req = ChatRequest(messages=({"role": "user", "content": "x"},), model="m", seed=1)
    old = {"messages": [{"role": "user", "content": "x"}], "model": "m", "temperature": 0.7, "max_tokens": 256,
           "response_format": None, "seed": 1}                        # the key's content before tools and grammars
    blob = json.dumps(old, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert req.key() == hashlib.sha256(blob.encode("utf-8")).hexdigest()
    assert ChatRequest(messages=req.messages, model="m", seed=1, tools=({"type": "function"},)).key() != req.key()
    assert ChatRequest(messages=req.messages, model="m", seed=1, grammar="root ::= x").key() != req.key()


def test_a_closed_client_fails_with_llm_error_not_a_traceback():
    from consensus.llm.base import LLMError

    client = OpenAIChatClient("http://127.0.0.1:9/v1", "fake")
    client.close()
    with pytest.raises(LLMError, match="closed"):
        client.complete(ChatRequest(messages=({"role": "user", "content": "x"},)))
