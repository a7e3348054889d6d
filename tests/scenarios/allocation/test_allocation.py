"""Paper 3's resource allocation: problem tables, satisfaction S(R), feasibility, prompts and the reply parser,
classical and LLM agents (against the fake OpenAI server), and the allocation-reliability study."""
import json

import numpy as np
import pytest

from consensus.decision import ProposeContext, decide
from consensus.errors import ConfigError
from consensus.experiments.study import Trial, TrialContext
from consensus.llm.openai_client import OpenAIChatClient
from consensus.scenarios.allocation.agents import (LLMAllocationAgent, LLMAllocationCoordinator, MedianCoordinator,
                                           NoisyAgent, ProportionalAgent)
from consensus.scenarios.allocation.prompts import (allocation_messages, coordinator_messages, format_plan,
                                                   parse_allocation, response_schema)
from consensus.scenarios.allocation.model import (SCALES, SETTINGS, best_allocation, fit_to_totals, problem,
                                            proportional_allocation, region_satisfaction, satisfaction)
from consensus.scenarios.allocation import study
from support.fake_openai_server import FakeOpenAIServer

SMALL_EQUAL = problem("small", "equal")
SMALL_LACK = problem("small", "lack")


def plan_json(prob, alloc) -> str:
    return json.dumps({r: {g: float(alloc[i, j]) for j, g in enumerate(prob.regions)}
                       for i, r in enumerate(prob.resources)})


# --- problems and satisfaction -------------------------------------------------------------------
def test_problem_tables_match_the_paper_appendix():
    assert SMALL_EQUAL.resources == ("water", "food") and SMALL_EQUAL.regions == ("region1", "region2", "region3")
    np.testing.assert_array_equal(SMALL_EQUAL.demand, [[8, 12, 6], [6, 7, 10]])
    large = problem("large", "excess")
    assert large.shape == (3, 9) and large.resources[2] == "medicine"
    np.testing.assert_array_equal(large.demand[:, 7], [9, 8, 7])          # region 8: (9, 8, 7)
    np.testing.assert_array_equal(large.totals, [80, 65, 50])
    np.testing.assert_array_equal(problem("medium", "lack").totals, [40, 30])
    for scale in SCALES:                                                   # equal = demand; lack < ; excess >
        eq, lack, exc = (problem(scale, s) for s in SETTINGS)
        np.testing.assert_array_equal(eq.totals, eq.demand.sum(axis=1))
        assert np.all(lack.totals < eq.totals) and np.all(exc.totals > eq.totals)
    with pytest.raises(ConfigError, match="scale"):
        problem("huge", "equal")
    with pytest.raises(ConfigError, match="setting"):
        problem("small", "plenty")


def test_satisfaction_hand_computed():
    half_water_r2 = np.array([[8, 6, 6], [6, 7, 10]], float)
    np.testing.assert_allclose(region_satisfaction(SMALL_EQUAL, half_water_r2), [1.0, 0.75, 1.0])
    assert satisfaction(SMALL_EQUAL, half_water_r2) == pytest.approx(11 / 12)
    capped = np.array([[16, 0, 10], [6, 7, 10]], float)     # region 1 gets twice its water: capped at 100 %
    np.testing.assert_allclose(region_satisfaction(SMALL_EQUAL, capped), [1.0, 0.5, 1.0])
    assert satisfaction(SMALL_EQUAL, SMALL_EQUAL.demand) == 1.0
    assert satisfaction(SMALL_EQUAL, SMALL_EQUAL.zeros()) == 0.0


def test_over_allocation_is_scaled_down_per_resource():
    alloc, over = fit_to_totals(SMALL_LACK, SMALL_LACK.demand)            # asks 26 water / 23 food of 20 / 15
    assert over == 2
    np.testing.assert_allclose(alloc.sum(axis=1), [20, 15])
    assert satisfaction(SMALL_LACK, SMALL_LACK.demand) == pytest.approx((20 / 26 + 15 / 23) / 2)
    exact = np.array([[8, 6, 6], [6, 7, 2]], float)                       # exactly the totals: untouched
    assert fit_to_totals(SMALL_LACK, exact)[1] == 0
    excess = problem("small", "excess")
    all_to_one = np.array([[40, 0, 0], [35, 0, 0]], float)
    assert fit_to_totals(excess, all_to_one)[1] == 0
    np.testing.assert_allclose(region_satisfaction(excess, all_to_one), [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="shape"):
        satisfaction(SMALL_LACK, np.zeros((3, 2)))
    with pytest.raises(ValueError, match=">= 0"):
        satisfaction(SMALL_LACK, -np.ones((2, 3)))


def test_reference_plans():
    assert satisfaction(SMALL_LACK, proportional_allocation(SMALL_LACK)) == pytest.approx((20 / 26 + 15 / 23) / 2)
    # optimum: water 6 + 8 in full, 6 of 12 -> 2.5; food 6 + 7 in full, 2 of 10 -> 2.2; (2.5 + 2.2) / 6
    assert satisfaction(SMALL_LACK, best_allocation(SMALL_LACK)) == pytest.approx(4.7 / 6)
    for scale in SCALES:
        for setting in SETTINGS:
            prob = problem(scale, setting)
            best = satisfaction(prob, best_allocation(prob))
            assert fit_to_totals(prob, best_allocation(prob))[1] == 0
            assert best >= satisfaction(prob, proportional_allocation(prob)) - 1e-12
            assert (best == 1.0) == (setting != "lack")


# --- prompts and parser --------------------------------------------------------------------------
def test_prompts_carry_the_problem_and_feedback():
    text = allocation_messages(SMALL_LACK)[0]["content"]
    assert text.startswith('Available resources: {"water": 20, "food": 15}. Regions and their demands: '
                           '{"region1": {"water": 8, "food": 6}, "region2": {"water": 12, "food": 7}')
    assert "Do not hallucinate additional regions or resources" in text and "previous rounds" not in text
    plan = np.array([[6.5, 8, 5.5], [4, 5, 6]])
    fb = allocation_messages(SMALL_LACK, [("Planner 2", plan)])[0]["content"]
    assert "proposed plans from other planners in previous rounds" in fb
    assert 'Planner 2: {"water": {"region1": 6.5, "region2": 8, "region3": 5.5}, "food": {"region1": 4' in fb
    co = coordinator_messages(SMALL_LACK, [plan, None, plan])[0]["content"]
    assert "plans proposed by 2 planners" in co and "Planner 1:" in co and "Planner 3:" in co
    assert "Planner 2:" not in co
    schema = response_schema(problem("large", "equal"))["json_schema"]["schema"]
    assert schema["required"] == ["water", "food", "medicine"]
    assert schema["properties"]["food"]["required"] == [f"region{i}" for i in range(1, 10)]


def test_parser_reads_json_fenced_paper_format_and_loose_region_keys():
    plan = np.array([[6, 8, 6], [4, 5, 6]], float)
    alloc, err = parse_allocation(format_plan(SMALL_LACK, plan), SMALL_LACK)
    assert err == "" and np.array_equal(alloc, plan)
    fenced = "Here you go:\n```json\n" + plan_json(SMALL_LACK, plan) + "\n```"
    assert np.array_equal(parse_allocation(fenced, SMALL_LACK)[0], plan)
    paper = "{'water': {'region1': 6, 'region2': 8, 'region3': 6}, 'food': {'region1': 4, 'region2': 5, 'region3': 6}}"
    assert np.array_equal(parse_allocation(paper, SMALL_LACK)[0], plan)
    loose = '{"Water": {"Region 1": 6, "region_2": 8, "3": 6}, "FOOD": {"region1": 4, "region2": 5, "region3": 6.5}}'
    np.testing.assert_array_equal(parse_allocation(loose, SMALL_LACK)[0], [[6, 8, 6], [4, 5, 6.5]])


@pytest.mark.parametrize("reply,why", [
    ('{"water": {"region1": 6, "region2": 8, "region3": 6}, "food": {"region1": 4, "region2": 5',
     "missing resource(s): water, food"),                      # truncated: only an inner object decodes
    ("I would give everyone an equal share.", "no object"),
    ('{"water": {"region1": -1, "region2": 8, "region3": 6}, "food": {"region1": 4, "region2": 5, "region3": 6}}',
     ">= 0"),
    ('{"water": {"region1": 1e400, "region2": 8, "region3": 6}, "food": {"region1": 4, "region2": 5, "region3": 6}}',
     ">= 0"),
    ('{"water": {"region1": 21, "region2": 8, "region3": 6}, "food": {"region1": 4, "region2": 5, "region3": 6}}',
     "exceeds the available total 20"),
    ('{"water": {"region1": ' + "9" * 400 + ', "region2": 8, "region3": 6}, '
     '"food": {"region1": 4, "region2": 5, "region3": 6}}', "too large"),
    ('{"water": {"region1": 6, "region2": 8}, "food": {"region1": 4, "region2": 5, "region3": 6}}',
     "missing region(s): region3"),
    ('{"water": {"region1": 6, "region2": 8, "region3": 6, "region4": 1}, '
     '"food": {"region1": 4, "region2": 5, "region3": 6}}', "unknown region(s): region4"),
    ('{"water": {"region1": 6, "region2": 8, "region3": 6}, "food": {"region1": 4, "region2": 5, "region3": 6}, '
     '"medicine": {"region1": 1, "region2": 1, "region3": 1}}', "unknown resource(s): medicine"),
    ('{"water": {"region1": 6, "region2": 8, "region3": 6}}', "missing resource(s): food"),
    ('{"water": {"region1": "6", "region2": 8, "region3": 6}, "food": {"region1": 4, "region2": 5, "region3": 6}}',
     "not a number"),
    ('{"water": {"region1": true, "region2": 8, "region3": 6}, "food": {"region1": 4, "region2": 5, "region3": 6}}',
     "not a number"),
    ('{"water": {"region1": 1, "Region 1": 2, "region2": 8, "region3": 6}, '
     '"food": {"region1": 4, "region2": 5, "region3": 6}}', "given twice"),
    ('{"water": [6, 8, 6], "food": {"region1": 4, "region2": 5, "region3": 6}}', "object of region amounts"),
    (None, "not text"),
])
def test_parser_rejects_bad_replies(reply, why):
    alloc, err = parse_allocation(reply, SMALL_LACK)
    assert alloc is None and why in err


def test_parser_is_bounded_on_adversarial_input():
    import time
    t0 = time.perf_counter()
    deep = '{"a": ' * 5_000 + "1" + "}" * 5_000
    assert parse_allocation(deep, SMALL_LACK) == (None, "no readable JSON object")
    assert parse_allocation("{" * 100_000, SMALL_LACK)[0] is None
    assert time.perf_counter() - t0 < 2.0


# --- classical agents ----------------------------------------------------------------------------
def test_classical_agents_and_median_coordinator():
    ctx = ProposeContext(agent=0, turn=0)
    np.testing.assert_allclose(ProportionalAgent(SMALL_LACK).propose(ctx), proportional_allocation(SMALL_LACK))
    a = NoisyAgent(SMALL_EQUAL, np.random.default_rng(5), noise=0.5, fail_prob=0.3)
    b = NoisyAgent(SMALL_EQUAL, np.random.default_rng(5), noise=0.5, fail_prob=0.3)
    plans_a = [a.propose(ctx) for _ in range(30)]
    plans_b = [b.propose(ctx) for _ in range(30)]
    assert all((x is None and y is None) or np.array_equal(x, y) for x, y in zip(plans_a, plans_b))
    valid = [p for p in plans_a if p is not None]
    assert 0 < len(valid) < 30 and all(np.array_equal(p, np.round(p)) and p.min() >= 0 for p in valid)
    exact = NoisyAgent(SMALL_EQUAL, np.random.default_rng(0), noise=0.0, fail_prob=0.0)
    np.testing.assert_array_equal(exact.propose(ctx), SMALL_EQUAL.demand)
    shown = ProposeContext(agent=1, turn=1, others_previous=(np.full((2, 3), 2.0), np.full((2, 3), 4.0)))
    np.testing.assert_array_equal(exact.propose(shown), np.full((2, 3), 3.0))    # mean of the shown plans
    med = MedianCoordinator().merge([np.ones((2, 3)), None, np.full((2, 3), 5.0), np.full((2, 3), 2.0)], 0)
    np.testing.assert_array_equal(med, np.full((2, 3), 2.0))
    assert MedianCoordinator().merge([None, None], 0) is None
    with pytest.raises(ConfigError, match="fail_prob"):
        NoisyAgent(SMALL_EQUAL, np.random.default_rng(0), fail_prob=1.5)


# --- LLM agents against the fake OpenAI server ---------------------------------------------------
def _client(srv):
    return OpenAIChatClient(srv.base_url, "fake-model", timeout_s=2.0, max_retries=0, backoff_s=0.01,
                            api_key="test")


def test_llm_agent_good_reply_and_feedback_prompt():
    plan = np.array([[6, 8, 6], [4, 5, 6]], float)
    with FakeOpenAIServer(default=plan_json(SMALL_LACK, plan)) as srv:
        agent = LLMAllocationAgent(_client(srv), SMALL_LACK, agent_id=1, temperature=0.5, seed=100)
        got0 = agent.propose(ProposeContext(agent=1, turn=0))
        other = np.array([[5, 9, 6], [5, 5, 5]], float)
        got1 = agent.propose(ProposeContext(agent=1, turn=1, own_previous=plan,
                                            others_previous=(other, SMALL_LACK.zeros())))
        bodies = srv.requests
    assert np.array_equal(got0, plan) and np.array_equal(got1, plan)
    assert bodies[0]["response_format"] == response_schema(SMALL_LACK)
    assert (bodies[0]["temperature"], bodies[0]["seed"], bodies[1]["seed"]) == (0.5, 100, 101)
    fb = bodies[1]["messages"][-1]["content"]
    assert "Planner 1: {" in fb and "Planner 3: {\"water\": {\"region1\": 0" in fb and "Planner 2:" not in fb
    assert agent.counters() == {"plans": 2, "calls": 2, "parse_failures": 0, "fallbacks": {}, "clamped": 0,
                                "tool_errors": 0, "history_truncated": 0}


def test_llm_agent_malformed_reply_fails_and_is_counted():
    good = plan_json(SMALL_LACK, np.array([[6, 8, 6], [4, 5, 6]], float))
    with FakeOpenAIServer(["{'water': oops", '{"water": {"region1": 6}}', good, 500]) as srv:
        client = _client(srv)
        agent = LLMAllocationAgent(client, SMALL_LACK, agent_id=0)
        assert agent.propose(ProposeContext(agent=0, turn=0)) is None              # paper: no retry
        retrying = LLMAllocationAgent(client, SMALL_LACK, agent_id=1, parse_retries=1)
        assert retrying.propose(ProposeContext(agent=1, turn=0)) is not None        # retry after a bad reply
        assert agent.propose(ProposeContext(agent=0, turn=1)) is None               # HTTP 500 -> llm_error
        retry_turn = srv.requests[2]["messages"]
    assert agent.counters()["fallbacks"] == {"unparseable": 1, "llm_error": 1}
    assert retrying.counters()["parse_failures"] == 1 and retrying.counters()["calls"] == 2
    assert retry_turn[-1]["role"] == "user" and "missing resource(s): food" in retry_turn[-1]["content"]


def test_llm_spoke_wheel_with_a_failing_coordinator_falls_back_to_the_average():
    a = np.array([[6, 8, 6], [4, 5, 6]], float)
    b = np.array([[8, 6, 6], [6, 5, 4]], float)

    def script(body):
        text = body["messages"][-1]["content"]
        if "central coordinator" in text:
            return "I cannot decide."
        return plan_json(SMALL_LACK, a if body["seed"] == 1 else b)
    with FakeOpenAIServer(script) as srv:
        client = _client(srv)
        agents = [LLMAllocationAgent(client, SMALL_LACK, agent_id=i, seed=i + 1) for i in range(2)]
        coordinator = LLMAllocationCoordinator(client, SMALL_LACK, seed=9)
        out = decide("spoke_wheel", agents, kind="allocation", coordinator=coordinator,
                        failed_value=SMALL_LACK.zeros())
    assert (out.coordinator_failures, out.fallback) == (1, "average")
    np.testing.assert_allclose(out.decision, (a + b) / 2)
    assert coordinator.counters()["fallbacks"] == {"unparseable": 1}


# --- the study -----------------------------------------------------------------------------------
def _trial(seed=11, **params):
    p = {**study.DEFAULTS, "planner": "noisy", **params}
    return Trial(key="k#0", index=0, seed=seed, params=p)


def test_study_is_registered_with_the_paper_sweep():
    from consensus.registry import all_studies
    s = all_studies()["allocation-reliability"]
    assert s.default_trials == 30 and len(s.default_sweep["architecture"]) == 7
    assert s.uses_llm(dict(study.DEFAULTS)) and not s.uses_llm(dict(study.DEFAULTS, planner="noisy"))


@pytest.mark.parametrize("architecture", study.ARCHITECTURES)
def test_run_trial_with_classical_agents_is_seeded_deterministic(architecture):
    t = _trial(architecture=architecture, scale="small", setting="lack", fail_prob=0.3)
    first, again = study.run_trial(t, TrialContext()), study.run_trial(t, TrialContext())
    assert first == again
    json.dumps(first)
    assert 0.0 <= first["score"] <= 1.0 and first["llm_calls"] == 0
    assert first["score"] == pytest.approx(np.mean(first["region_satisfaction"]))
    others = [study.run_trial(_trial(seed=s, architecture=architecture, scale="small", setting="lack",
                                     fail_prob=0.3), TrialContext())["decision"] for s in range(12, 20)]
    assert any(d != first["decision"] for d in others)


def test_run_trial_proportional_scores_the_proportional_share():
    r = study.run_trial(_trial(planner="proportional", scale="small", setting="lack", architecture="decentralized"),
                        TrialContext())
    assert (r["turns"], r["agreed"], r["failures"]) == (1, True, 0)
    assert r["score"] == pytest.approx((20 / 26 + 15 / 23) / 2)


def test_run_trial_counts_failed_agents_as_zero_plans():
    r = study.run_trial(_trial(architecture="single", fail_prob=1.0), TrialContext())
    assert (r["score"], r["failures"]) == (0.0, 1)


def test_run_trial_with_llm_agents_on_the_fake_server():
    prob = problem("small", "equal")
    with FakeOpenAIServer(default=plan_json(prob, prob.demand)) as srv:
        r = study.run_trial(_trial(planner="llm", scale="small", setting="equal", architecture="spoke_wheel_feedback"),
                            TrialContext(llm=_client(srv)))
    assert (r["score"], r["turns"], r["agreed"], r["llm_calls"]) == (1.0, 2, True, 3 + 1 + 3)
    with pytest.raises(ConfigError, match="needs an LLM client"):
        study.run_trial(_trial(planner="llm"), TrialContext())


@pytest.mark.parametrize("architecture", study.ARCHITECTURES)
def test_llm_call_estimate_is_reached_when_agents_never_agree(architecture):
    """The up-front estimate (Study.llm_calls) is the exact count when every feedback turn is used."""
    prob = problem("small", "equal")

    def script(body):                        # a different plan for every request seed: nobody ever agrees
        return plan_json(prob, prob.demand * ((body["seed"] % 97) + 1) / 100)
    params = dict(planner="llm", scale="small", setting="equal", architecture=architecture, max_turns=3)
    with FakeOpenAIServer(script) as srv:
        r = study.run_trial(_trial(**params), TrialContext(llm=_client(srv)))
    bound = study.STUDIES[0].llm_calls(_trial(**params).params)
    assert r["llm_calls"] == bound == {"single": 1, "majority": 3, "averaging": 3, "decentralized": 9,
                                       "decentralized_feedback": 9, "spoke_wheel": 4,
                                       "spoke_wheel_feedback": 12}[architecture]
    assert study.STUDIES[0].llm_calls(dict(params, planner="noisy")) == 0


@pytest.mark.parametrize("key,value,msg", [("scale", "tiny", "scale"), ("num_agents", 0, "num_agents"),
                                           ("noise", 2.0, "noise"), ("max_turns", 1.5, "max_turns"),
                                           ("planner", "gpt", "planner"), ("llm_temperature", 2.5, "llm_temperature"),
                                           ("llm_max_tokens", 8, "llm_max_tokens")])
def test_validate_rejects_bad_params(key, value, msg):
    with pytest.raises(ConfigError, match=msg):
        study.validate(dict(study.DEFAULTS, **{key: value}))


@pytest.mark.parametrize("old, new, value", [("agents", "num_agents", 4), ("temperature", "llm_temperature", 0.0),
                                             ("max_tokens", "llm_max_tokens", 200)])
def test_old_parameter_names_are_refused_naming_the_new(old, new, value, tmp_path, capsys):
    from consensus import cli
    from consensus.experiments.spec import apply_overrides, resolve_spec
    from consensus.registry import all_studies

    message = f"parameter '{old}' is now called '{new}' \\(study allocation-reliability"
    studies = all_studies()
    assert old not in study.DEFAULTS and new in study.DEFAULTS
    for section, given in (("params", value), ("sweep", [value])):
        with pytest.raises(ConfigError, match=f"{section}.{old}: {message}"):
            resolve_spec({"study": "allocation-reliability", section: {old: given}}, studies)
    for flag in ("sets", "sweeps"):
        with pytest.raises(ConfigError, match=message):
            apply_overrides({"study": "allocation-reliability"}, studies, **{flag: [f"{old}={value}"]})
    code = cli.main(["experiment", "allocation-reliability", "--set", f"{old}={value}", "--out",
                     str(tmp_path / "never"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and f"is now called '{new}'" in err, err
    assert not (tmp_path / "never").exists()
    resolve_spec({"study": "allocation-reliability", "params": {new: value}}, studies)    # the new name is taken


def test_llm_settings_reach_the_requests():
    """``llm_temperature`` and ``llm_max_tokens`` are the LLM's sampling temperature and reply cap of every request."""
    prob = problem("small", "equal")
    with FakeOpenAIServer(lambda body: plan_json(prob, prob.demand)) as srv:
        study.run_trial(_trial(planner="llm", scale="small", setting="equal", architecture="single",
                               llm_temperature=0.3, llm_max_tokens=123), TrialContext(llm=_client(srv)))
        bodies = srv.requests
    assert [(b["temperature"], b["max_tokens"]) for b in bodies] == [(0.3, 123)]


def test_report_table_figures_and_failed_trials(tmp_path):
    records = []
    for arch in study.ARCHITECTURES:
        for i in range(4):
            t = _trial(seed=i, architecture=arch, scale="medium", setting="lack")
            records.append({"params": t.params, "status": "ok", "result": study.run_trial(t, TrialContext())})
    failed = dict(records[4], status="failed", result=None, reason="boom")          # one majority trial failed
    records[4] = failed
    lines = study.report(records, tmp_path)
    text = "\n".join(lines)
    assert (tmp_path / "reliability_medium_lack.png").stat().st_size > 0
    assert (tmp_path / "reliability_medium_lack.svg").exists()
    header = next(line for line in lines if line.startswith("| Scale |"))
    assert header.split(" | ")[2:9] == ["Single Agent", "Majority Voting", "Averaging", "Decentralized",
                                        "Feedback Decentralized", "Spoke & Wheel", "Feedback Spoke & Wheel"]
    row = next(line for line in lines if line.startswith("| Medium | Lack |"))
    scores = [0.0] + [r["result"]["score"] for r in records[5:8]]
    assert f"{np.mean(scores):.3f}" in row.split(" | ")[3] and "(1/4 failed)" in row
    assert "| Medium | Lack | 0.689 | **0.691** |" in text                            # the paper's row
    assert "| Majority Voting | 3/4 |" in text


def test_agent_failures_do_not_fail_the_trial_in_the_runner():
    from consensus.experiments.runner import execute
    prob = problem("small", "equal")
    good = plan_json(prob, prob.demand)
    with FakeOpenAIServer(["not a plan", good, good]) as srv:
        t = _trial(planner="llm", scale="small", setting="equal", architecture="majority")
        outcome = execute(study.STUDIES[0], t, TrialContext(llm=_client(srv)))
    record = json.loads(outcome.line)
    assert record["status"] == "ok"
    assert record["result"]["agent_fallbacks"] == {"unparseable": 1} and record["result"]["failures"] == 1
    assert record["result"]["score"] == 1.0                                # two equal plans outvote the zero plan
