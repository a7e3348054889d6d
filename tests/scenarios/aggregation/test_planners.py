"""Classical planners (consensus on graphs via run_negotiation), the LLM planner with a scripted
fake client (no network), and the planner factory."""
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.control.safety import Geofence
from consensus.errors import ConfigError
from consensus.graphs.topology import make_graph
from consensus.llm.base import ChatRequest, ChatResponse, LLMError
from consensus.metrics.convergence import spread
from consensus.control.planner import PlanRequest
from consensus.scenarios.aggregation.planners.classical import AveragePlanner, StubbornPlanner, SuggestiblePlanner
from consensus.scenarios.aggregation.planners.factory import make_planner, planners_from_config
from consensus.scenarios.aggregation.planners.llm import LLMPlanner
from consensus.scenarios.aggregation.headless import run_negotiation


class ScriptedClient:
    """LLMClient fake: answers from a script (str, Exception or callable(ChatRequest) -> str); the
    last item repeats. Records every request."""

    model = "scripted"

    def __init__(self, *script):
        self.script = list(script)
        self.requests: list[ChatRequest] = []
        self._lock = threading.Lock()

    def complete(self, req: ChatRequest) -> ChatResponse:
        with self._lock:
            self.requests.append(req)
            item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, Exception):
            raise item
        return ChatResponse(text=item(req) if callable(item) else item, model=self.model)

    def status(self) -> dict:
        return {"state": "ok", "calls": len(self.requests), "errors": 0}

    def close(self) -> None:
        pass


def reply(x, y=None, reasoning="ok"):
    pos = [x] if y is None else [x, y]
    return json.dumps({"reasoning": reasoning, "position": pos})


def req(own, neighbors=(), round=0, robot_id=0):
    return PlanRequest(robot_id=robot_id, own=np.asarray(own, float),
                       neighbors=[np.asarray(n, float) for n in neighbors], round=round)


RNG_STATES = np.random.default_rng(7).uniform(0, 100, size=(6, 1))


# --- classical planners -------------------------------------------------------------------
def test_average_with_and_without_self():
    r = AveragePlanner(2).plan(req([0, 0], [[2, 4], [4, -4]]))
    assert np.allclose(r.meeting_point, [2, 0]) and not r.fallback and r.llm_calls == 0
    assert r.reasoning == "Average of 3 positions: (2, 0)"
    r = AveragePlanner(2, include_self=False).plan(req([0, 0], [[2, 4], [4, -4]]))
    assert np.allclose(r.meeting_point, [3, 0])
    alone = AveragePlanner(1, include_self=False).plan(req([5.0], []))
    assert alone.meeting_point.tolist() == [5.0] and not alone.fallback


def test_stubborn_and_suggestible():
    assert StubbornPlanner(2).plan(req([1, -1], [[5, 5]])).meeting_point.tolist() == [1, -1]
    s = SuggestiblePlanner(2, seed=0)
    assert s.plan(req([0, 0], [[5, 5], [1, 1], [-3, 0]])).meeting_point.tolist() == [1, 1]
    assert s.plan(req([0, 0], [])).meeting_point.tolist() == [0, 0]
    ties = {tuple(SuggestiblePlanner(1, seed=k).plan(req([0.0], [[1.0], [-1.0]])).meeting_point) for k in range(20)}
    assert ties == {(1.0,), (-1.0,)}           # a tie is broken by the seeded draw, both ways occur


def test_classical_planner_rejects_wrong_shapes_and_nan():
    with pytest.raises(ValueError, match="own state"):
        AveragePlanner(2).plan(req([1, 2, 3]))
    with pytest.raises(ValueError, match="neighbour 0"):
        AveragePlanner(2).plan(req([1, 2], [[np.nan, 0]]))


@pytest.mark.parametrize("topology", ["complete", "ring", "line", "star"])
def test_average_reaches_consensus_on_connected_graphs(topology):
    planners = [AveragePlanner(1) for _ in range(6)]
    states, log = run_negotiation(planners, RNG_STATES, make_graph(topology, 6), rounds=300)
    assert spread(states[0]) > 10
    assert spread(states[-1]) < 1e-3
    assert len(log) == 300 * 6 and not any(e["fallback"] for e in log)


def test_average_without_self_converges_on_aperiodic_graphs_only():
    init = RNG_STATES[:5]
    for topology in ("complete", "ring"):          # a 5-ring is an odd cycle: aperiodic
        states, _ = run_negotiation([AveragePlanner(1, include_self=False) for _ in range(5)], init,
                                    make_graph(topology, 5), rounds=300)
        assert spread(states[-1]) < 1e-3, topology
    # on a bipartite graph (a line) the two sides swap forever, as the suggestible pair of Fig. 6(b)
    states, _ = run_negotiation([AveragePlanner(1, include_self=False) for _ in range(5)], init,
                                make_graph("line", 5), rounds=300)
    assert spread(states[-1]) > 1


def test_average_on_complete_graph_converges_to_initial_mean_in_one_round():
    states, _ = run_negotiation([AveragePlanner(1) for _ in range(6)], RNG_STATES, make_graph("complete", 6), 1)
    assert np.allclose(states[1], RNG_STATES.mean())


def test_leader_follower_converges_to_leader():
    graph = make_graph("leader_follower", 5, leader=2)
    init = np.array([[0.0, 0.0], [10.0, -4.0], [3.0, 7.0], [-8.0, 2.0], [5.0, 5.0]])
    states, _ = run_negotiation([AveragePlanner(2) for _ in range(5)], init, graph, rounds=40)
    assert np.allclose(states[:, 2], init[2])          # the leader hears nobody and stays
    assert np.allclose(states[-1], init[2], atol=1e-6)


def test_disconnected_groups_do_not_converge():
    adjacency = [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]]
    graph = make_graph("custom", 4, adjacency=adjacency)
    init = np.array([[0.0], [2.0], [50.0], [60.0]])
    states, _ = run_negotiation([AveragePlanner(1) for _ in range(4)], init, graph, rounds=50)
    assert np.allclose(states[-1], [[1.0], [1.0], [55.0], [55.0]])
    assert spread(states[-1]) > 50


def test_stubborn_agent_stays_and_pulls_the_group():
    graph = make_graph("complete", 3)
    planners = [StubbornPlanner(1), AveragePlanner(1), AveragePlanner(1)]
    init = np.array([[10.0], [40.0], [90.0]])
    states, _ = run_negotiation(planners, init, graph, rounds=60)
    assert np.all(states[:, 0] == 10.0)
    assert np.allclose(states[-1], 10.0, atol=1e-6)


def test_two_suggestible_agents_oscillate():
    """Paper Fig. 6(b): both choose the other's state every round."""
    init = np.array([[12.0], [50.0]])
    states, _ = run_negotiation([SuggestiblePlanner(1, seed=1), SuggestiblePlanner(1, seed=2)], init,
                                make_graph("complete", 2), rounds=5)
    assert states[1].tolist() == [[50.0], [12.0]] and states[2].tolist() == [[12.0], [50.0]]


def test_run_negotiation_bad_input():
    with pytest.raises(ConfigError, match="one planner per agent"):
        run_negotiation([AveragePlanner(1)], np.zeros((2, 1)), make_graph("complete", 2), 3)
    with pytest.raises(ConfigError, match="rounds"):
        run_negotiation([AveragePlanner(1)] * 2, np.zeros((2, 1)), make_graph("complete", 2), -1)


# --- LLM planner --------------------------------------------------------------------------
def test_llm_valid_json_gives_target_and_request_details():
    client = ScriptedClient(reply(1.5, -2.0, "I go to the mean"))
    p = LLMPlanner(client, dim=2, robot_id=3, seed=11, model="m", temperature=0.2, max_tokens=99)
    r = p.plan(req([0, 0], [[3, -4]], round=4, robot_id=3))
    assert r.meeting_point.tolist() == [1.5, -2.0] and not r.fallback and r.llm_calls == 1
    assert r.reasoning == "I go to the mean"
    sent = client.requests[0]
    assert sent.tag == "robot_3/round_4"
    assert sent.response_format["json_schema"]["schema"]["properties"]["position"]["maxItems"] == 2
    assert (sent.model, sent.temperature, sent.max_tokens, sent.seed) == ("m", 0.2, 99, 11)
    assert [m["role"] for m in sent.messages] == ["system", "user"]
    assert p.counters() == {"plans": 1, "calls": 1, "parse_failures": 0, "fallbacks": {}, "clamped": 0,
                            "tool_errors": 0, "history_truncated": 0}


def test_llm_unstructured_request_has_no_response_format():
    client = ScriptedClient("Reasoning: average. Position: (-1, 2)")
    r = LLMPlanner(client, dim=2, robot_id=0, structured=False).plan(req([0, 0], [[1, 1]]))
    assert r.meeting_point.tolist() == [-1.0, 2.0]
    assert client.requests[0].response_format is None


def test_llm_garbage_then_valid_counts_one_retry():
    client = ScriptedClient("I am not sure.", reply(4.0, 5.0))
    p = LLMPlanner(client, dim=2, robot_id=0)
    r = p.plan(req([0, 0], [[8, 10]]))
    assert r.meeting_point.tolist() == [4.0, 5.0] and not r.fallback and r.llm_calls == 2
    assert p.counters()["parse_failures"] == 1 and p.counters()["calls"] == 2
    retry = client.requests[1]
    assert retry.key() != client.requests[0].key()           # a replay store would not repeat the bad answer
    assert retry.messages[-2] == {"role": "assistant", "content": "I am not sure."}
    assert "could not be read" in retry.messages[-1]["content"]
    assert retry.tag == "robot_0/round_0/retry_1"


@pytest.mark.parametrize("retries", [0, 2])
def test_llm_always_garbage_falls_back(retries):
    client = ScriptedClient("no idea")
    p = LLMPlanner(client, dim=2, robot_id=0, parse_retries=retries)
    r = p.plan(req([0, 0], [[8, 10]]))
    assert r.meeting_point is None and r.fallback and r.fallback_reason == "unparseable"
    assert len(client.requests) == retries + 1 == r.llm_calls
    c = p.counters()
    assert c["parse_failures"] == retries + 1 and c["fallbacks"] == {"unparseable": 1}


def test_llm_error_falls_back_without_parse_retry():
    client = ScriptedClient(LLMError("endpoint down"))
    p = LLMPlanner(client, dim=1, robot_id=0, parse_retries=2)
    r = p.plan(req([3.0], [[5.0]]))
    assert r.meeting_point is None and r.fallback and r.fallback_reason == "llm_error"
    assert len(client.requests) == 1
    assert p.counters()["fallbacks"] == {"llm_error": 1}


def test_unexpected_client_exception_is_a_counted_fallback():
    client = ScriptedClient(RuntimeError("bug in backend"))
    p = LLMPlanner(client, dim=1, robot_id=0)
    r = p.plan(req([3.0], [[5.0]]))
    assert r.meeting_point is None and r.fallback_reason == "client_error"
    assert p.counters()["fallbacks"] == {"client_error": 1}


def test_llm_target_outside_workspace_is_clamped():
    fence = Geofence.from_bounds([-10, 10, -5, 5])
    p = LLMPlanner(ScriptedClient(reply(50.0, -7.0)), dim=2, robot_id=0, geofence=fence)
    r = p.plan(req([0, 0], [[1, 1]]))
    assert r.meeting_point.tolist() == [10.0, -5.0] and r.clamped and not r.fallback
    assert fence.contains(r.meeting_point)
    assert p.counters()["clamped"] == 1


@pytest.mark.parametrize("bad", ['{"position": [NaN, 1]}', "Position: (inf, 0)", '{"position": [1e999, 0]}'])
def test_llm_nan_inf_never_get_through(bad):
    p = LLMPlanner(ScriptedClient(bad), dim=2, robot_id=0, parse_retries=1,
                   geofence=Geofence.from_bounds([-10, 10, -10, 10]))
    r = p.plan(req([0, 0], [[1, 1]]))
    assert r.meeting_point is None and r.fallback_reason == "unparseable"


def test_memory_keeps_first_exchange_and_bounded_recent_history():
    client = ScriptedClient(lambda rq: reply(float(len(rq.messages)), 0.0))
    p = LLMPlanner(client, dim=2, robot_id=0, memory=True, history_rounds=3)
    for rnd in range(6):
        p.plan(req([rnd, 0], [[9, 9]], round=rnd))
    sizes = [len(r.messages) for r in client.requests]
    assert sizes == [2, 4, 6, 8, 8, 8]            # system + min(rnd, 3) exchanges + user
    last = client.requests[-1].messages
    assert last[1]["content"].startswith("There are many") or last[1]["content"].startswith("Another robot")
    assert last[1]["content"] == client.requests[0].messages[1]["content"]   # round-0 exchange kept
    assert "(4, 0)" in last[5]["content"]                                   # most recent exchanges kept
    assert last[-1]["content"].startswith("You have moved to (5, 0)")
    assert len(p.history()) == 3
    p.reset()
    assert p.history() == []


def test_remembered_replies_are_bounded():
    long_reply = json.dumps({"reasoning": "r" * 10_000, "position": [1.0]})
    client = ScriptedClient(long_reply)
    p = LLMPlanner(client, dim=1, robot_id=0, memory=True)
    p.plan(req([0.0], [[2.0]], round=0))
    p.plan(req([1.0], [[2.0]], round=1))
    remembered = client.requests[1].messages[2]
    assert remembered["role"] == "assistant" and 0 < len(remembered["content"]) <= 2_000


def test_memory_off_sends_no_history_and_failures_are_not_remembered():
    client = ScriptedClient(reply(1.0), LLMError("down"), reply(2.0))
    p = LLMPlanner(client, dim=1, robot_id=0, memory=False)
    for rnd in range(3):
        p.plan(req([0.0], [[4.0]], round=rnd))
    assert all(len(r.messages) == 2 for r in client.requests)
    client = ScriptedClient(LLMError("down"), reply(2.0))
    p = LLMPlanner(client, dim=1, robot_id=0, memory=True)
    p.plan(req([0.0], [[4.0]], round=0))
    p.plan(req([0.0], [[4.0]], round=1))
    assert client.requests[1].messages[-1]["content"].startswith("Another agent is present")   # task restated


def test_prompt_contains_only_in_neighbour_positions():
    graph = make_graph("line", 4, directed=True)           # i hears only i-1
    init = np.array([[1.11, 2.22], [3.33, 4.44], [5.55, 6.66], [7.77, 8.88]])
    clients = [ScriptedClient(lambda rq: reply(0.0, 0.0)) for _ in range(4)]
    planners = [LLMPlanner(clients[i], dim=2, robot_id=i, num_agents=4) for i in range(4)]
    run_negotiation(planners, init, graph, rounds=1)
    texts = ["\n".join(m["content"] for m in c.requests[0].messages) for c in clients]
    shown = [[f"({x:.2f}, {y:.2f})" in t for (x, y) in init] for t in texts]
    assert shown == [[True, False, False, False],
                     [True, True, False, False],
                     [False, True, True, False],
                     [False, False, True, True]]
    assert "cannot see where they are" in texts[0]


def test_planner_checks_its_robot_and_inputs():
    p = LLMPlanner(ScriptedClient(reply(0.0)), dim=1, robot_id=1)
    with pytest.raises(ValueError, match="robot 1"):
        p.plan(req([0.0], robot_id=2))
    with pytest.raises(ValueError, match="neighbour 0"):
        p.plan(req([0.0], [[np.inf]], robot_id=1))
    with pytest.raises(ConfigError, match="personality"):
        LLMPlanner(ScriptedClient("x"), dim=1, robot_id=0, personality="angry")
    with pytest.raises(ConfigError, match="geofence"):
        LLMPlanner(ScriptedClient("x"), dim=1, robot_id=0, geofence=Geofence.from_bounds([0, 1, 0, 1]))


def test_planners_on_worker_threads_keep_counts_consistent():
    client = ScriptedClient(lambda rq: "garbage" if rq.tag.endswith("round_0") else reply(1.0, 1.0))
    planners = [LLMPlanner(client, dim=2, robot_id=i) for i in range(8)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: planners[i].plan(req([i, 0], [[0, 0]], robot_id=i)), range(8)))
    assert all(r.meeting_point.tolist() == [1.0, 1.0] and r.llm_calls == 2 for r in results)
    assert sum(p.counters()["calls"] for p in planners) == len(client.requests) == 16


# --- factory ------------------------------------------------------------------------------
def test_make_planner_kinds():
    assert isinstance(make_planner("average", dim=2, robot_id=0), AveragePlanner)
    assert make_planner("average_no_self", dim=2, robot_id=0).include_self is False
    assert isinstance(make_planner("stubborn", dim=1, robot_id=0), StubbornPlanner)
    assert isinstance(make_planner("suggestible", dim=1, robot_id=0, seed=3), SuggestiblePlanner)
    llm = make_planner("llm", dim=2, robot_id=4, client=ScriptedClient("x"), personality="stubborn", memory=True)
    assert isinstance(llm, LLMPlanner) and llm.robot_id == 4 and llm.memory and llm.personality == "stubborn"
    # a personality on a classical kind selects the classical analogue
    assert isinstance(make_planner("average", dim=1, robot_id=0, personality="stubborn"), StubbornPlanner)


def test_llm_planners_get_one_request_seed_per_robot():
    """Two robots with the same prompt must not share a transcript key (replay of concurrent requests)."""
    client = ScriptedClient('{"reasoning": "r", "position": [1, 1]}')
    planners = [make_planner("llm", dim=2, robot_id=i, client=client, seed=40) for i in range(2)]
    for p in planners:
        p.plan(req([0, 0], [[0, 0]], robot_id=p.robot_id))
    assert [r.seed for r in client.requests] == [40, 41]
    assert client.requests[0].key() != client.requests[1].key()


def test_make_planner_errors():
    with pytest.raises(ConfigError, match="valid: llm, average, average_no_self, stubborn, suggestible"):
        make_planner("magic", dim=2, robot_id=0)
    with pytest.raises(ConfigError, match="needs an LLM client"):
        make_planner("llm", dim=2, robot_id=0)
    with pytest.raises(ConfigError, match="personality"):
        make_planner("average", dim=2, robot_id=0, personality="lazy")


def test_planners_from_config():
    cfg = AggregationConfig(num_robots=3, planner="llm", personalities=["stubborn", "none", "suggestible"],
                            keep_history=True, llm_temperature=0.3, llm_max_tokens=77, parse_retries=1, llm_model="q",
                            workspace=[-2.0, 2.0, -3.0, 3.0], llm_backend="openai")
    planners = planners_from_config(cfg, ScriptedClient("x"))
    assert [p.personality for p in planners] == ["stubborn", "none", "suggestible"]
    p = planners[1]
    assert (p.robot_id, p.memory, p.temperature, p.max_tokens, p.parse_retries, p.model, p.num_agents) == \
        (1, True, 0.3, 77, 1, "q", 3)
    assert p.geofence == Geofence.from_bounds([-2.0, 2.0, -3.0, 3.0])
    classical = planners_from_config(cfg.replace(planner="average"), None)
    assert [type(p) for p in classical] == [StubbornPlanner, AveragePlanner, SuggestiblePlanner]
