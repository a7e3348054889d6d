"""Paper-1 consensus-seeking studies (consensus.scenarios.aggregation.study): parameters, seeded trials with the
classical planners and their qualitative outcomes, the LLM path against a scripted OpenAI-compatible server,
and the reports."""
import json
import re

import numpy as np
import pytest
from support.fake_openai_server import FakeOpenAIServer

from consensus.errors import ConfigError
from consensus.experiments.study import Trial, TrialContext, TrialFailed
from consensus.llm.openai_client import OpenAIChatClient
from consensus.scenarios.aggregation.strategies import decode_labels
from consensus.registry import all_studies
from consensus.scenarios.aggregation import study as cs

STUDIES = {s.name: s for s in cs.STUDIES}


def make_trial(study: str, seed: int = 1, index: int = 0, **params) -> Trial:
    return Trial(key=f"t#{index}", index=index, seed=seed, params={**STUDIES[study].defaults, **params})


def run(study: str, seed: int = 1, ctx: TrialContext | None = None, **params) -> dict:
    return STUDIES[study].run_trial(make_trial(study, seed, **params), ctx or TrialContext())


def records(study: str, points: list[dict], trials: int = 3) -> list[dict]:
    out = []
    for point in points:
        for i in range(trials):
            t = make_trial(study, seed=100 + i, index=i, **point)
            out.append({"key": t.key, "index": i, "seed": t.seed, "params": t.params, "status": "ok", "reason": "",
                        "result": STUDIES[study].run_trial(t, TrialContext()), "elapsed_s": 0.0})
    return out


# --- registry and parameters -------------------------------------------------------------------------------------
def test_presets_are_registered_with_the_paper_sweeps():
    registered = all_studies()
    assert {"consensus-1d", "consensus-2d", "personalities", "topologies"} <= set(registered)
    fig4 = registered["consensus-1d"]
    assert fig4.default_sweep == {"num_agents": [2, 4, 6, 8], "llm_temperature": [0.0, 0.7]}
    assert fig4.default_trials == 300 and fig4.defaults["rounds"] == 10 and fig4.defaults["planner"] == "average"
    assert STUDIES["consensus-2d"].default_trials < 300 and STUDIES["consensus-2d"].defaults["dim"] == 2
    for study in cs.STUDIES:
        assert set(study.default_sweep) <= set(study.defaults)
        for axis, values in study.default_sweep.items():
            for v in values:
                study.validate({**study.defaults, axis: v})
        assert study.uses_llm({**study.defaults, "planner": "llm"}) and not study.uses_llm(study.defaults)


def test_the_parameters_are_the_config_class_fields_with_the_shared_names():
    """A trial's parameters are NegotiationConfig's fields (the run group and the LLM transport left out, derived);
    a concept shared with the other scenarios has their name: the agents' count, the LLM's temperature, the
    convergence tolerance of the aggregation run, keep_history, the planner and prompt style."""
    from dataclasses import fields

    from consensus.scenarios.aggregation.config import AggregationConfig, NegotiationConfig
    from consensus.settings import AgentsParams, LLMParams, RunParams

    assert issubclass(NegotiationConfig, (AgentsParams, LLMParams, RunParams))
    names = set(NegotiationConfig.field_names())
    transport = {f.name for f in fields(LLMParams)} - {"llm_temperature", "parse_retries", "prompt_style"}
    assert set(cs.DEFAULTS) == names - transport - {f.name for f in fields(RunParams)}
    assert {"num_agents", "llm_temperature", "converge_tol_m", "keep_history", "planner",
            "prompt_style"} <= set(cs.DEFAULTS) <= names
    assert {"converge_tol_m", "keep_history", "planner", "prompt_style"} <= set(AggregationConfig.field_names())
    docs = NegotiationConfig.field_docs()
    assert all(docs[k] for k in cs.DEFAULTS), [k for k in cs.DEFAULTS if not docs[k]]    # field comments = docs
    assert "as many as" in docs["num_agents"] and "state units" in docs["converge_tol_m"]
    for study in cs.STUDIES:
        assert set(study.defaults) == set(cs.DEFAULTS) and study.renamed == NegotiationConfig.RENAMED


@pytest.mark.parametrize("old, new, value", [("agents", "num_agents", 4), ("temperature", "llm_temperature", 0.0),
                                             ("converge_tol", "converge_tol_m", 1.0)])
def test_old_parameter_names_are_refused_naming_the_new(old, new, value):
    from consensus.experiments.spec import apply_overrides, resolve_spec

    message = f"parameter '{old}' is now called '{new}'"
    studies = all_studies()
    with pytest.raises(ConfigError, match=f"params.{old}: {message}"):
        resolve_spec({"study": "consensus-1d", "params": {old: value}}, studies)
    with pytest.raises(ConfigError, match=f"sweep.{old}: {message}"):
        resolve_spec({"study": "consensus-2d", "sweep": {old: [value]}}, studies)
    for flag in ("sets", "sweeps"):
        with pytest.raises(ConfigError, match=message):
            apply_overrides({"study": "topologies"}, studies, **{flag: [f"{old}={value}"]})
    with pytest.raises(ConfigError, match=message):           # a caller without a spec: the config class says it
        run("consensus-1d", **{old: value})
    resolve_spec({"study": "consensus-1d", "params": {new: value}, "sweep": {}}, studies)    # the new name is taken


@pytest.mark.parametrize("change, message", [
    ({"planner": "oracle"}, "unknown planner 'oracle'"),
    ({"topology": "mesh"}, "unknown topology 'mesh'"),
    ({"personalities": "stubborn,angry"}, "bad entry 'angry'"),
    ({"personalities": "stubborn*0"}, "bad entry"),
    ({"personalities": "stubborn*100000000000"}, "bad entry"),
    ({"personalities": "none,stubborn*100", "num_agents": None}, "more than 100 agents"),
    ({"personalities": "stubborn,suggestible", "num_agents": 3}, "lists 2 agents but num_agents = 3"),
    ({"num_agents": None}, "num_agents is null"),
    ({"num_agents": 1}, r"num_agents must be in \[2, 100\]"),
    ({"num_agents": True}, "num_agents' has an invalid value True"),
    ({"rounds": 0}, r"rounds must be in \[1, 1000\]"),
    ({"dim": 3}, r"dim must be in \[1, 2\]"),
    ({"llm_temperature": 2.5}, r"llm_temperature must be in \[0, 2\]"),
    ({"init_low": 50.0, "init_high": 50.0}, "init_low must be below init_high"),
    ({"init_low": 0.2, "init_high": 0.8}, r"no integer in \[init_low, init_high\]"),
    ({"converge_tol_m": 0.0}, r"converge_tol_m must be a number in \(0"),
    ({"keep_history": "maybe"}, "keep_history' has an invalid value 'maybe'"),
    ({"prompt_style": "poetry"}, "unknown prompt_style 'poetry'"),
    ({"parse_retries": 11}, r"parse_retries must be in \[0, 10\]"),
])
def test_bad_parameters_are_config_errors(change, message):
    with pytest.raises(ConfigError, match=message):
        STUDIES["consensus-1d"].validate({**STUDIES["consensus-1d"].defaults, **change})
    with pytest.raises(ConfigError, match=message):      # run_trial checks too (a spec-less caller)
        run("consensus-1d", **change)


def test_personalities_notation():
    assert cs.parse_personalities("stubborn*7, suggestible*3", None) == ("stubborn",) * 7 + ("suggestible",) * 3
    assert cs.parse_personalities("suggestible", 4) == ("suggestible",) * 4
    assert cs.parse_personalities("none,stubborn", 2) == ("none", "stubborn")
    cfg = cs.negotiation_config({**STUDIES["personalities"].defaults, "personalities": "stubborn*2,none"})
    assert cfg.num_agents == 3 and cfg.agent_personalities() == ("stubborn", "stubborn", "none")


def test_initial_states_are_seeded_integers_in_range():
    cfg = cs.negotiation_config({**cs.DEFAULTS, "num_agents": 8, "dim": 2})
    a, b = cs.initial_states(cfg, 5), cs.initial_states(cfg, 5)
    assert a.shape == (8, 2) and np.array_equal(a, b)
    assert np.all(a == np.round(a)) and a.min() >= 0 and a.max() <= 100
    assert not np.array_equal(a, cs.initial_states(cfg, 6))
    reals = cs.initial_states(cs.negotiation_config({**cs.DEFAULTS, "init_integer": False, "init_low": 1.0,
                                                     "init_high": 2.0}), 5)
    assert np.all((reals >= 1.0) & (reals <= 2.0)) and not np.all(reals == np.round(reals))


# --- trials with classical planners ------------------------------------------------------------------------------
@pytest.mark.parametrize("study, params", [
    ("consensus-1d", {"num_agents": 6}),
    ("consensus-2d", {"num_agents": 4}),
    ("personalities", {"personalities": "suggestible*10"}),
    ("personalities", {"personalities": "stubborn*7,suggestible*3"}),
    ("topologies", {"topology": "chain"}),
])
def test_trials_are_seed_deterministic_and_json_able(study, params):
    first, again, other = run(study, 7, **params), run(study, 7, **params), run(study, 8, **params)
    assert first == again
    assert first["states"][0] != other["states"][0]
    assert json.loads(json.dumps(first)) == first


def test_average_planner_on_the_complete_graph_reaches_the_initial_mean():
    for agents in (2, 4, 6, 8):
        r = run("consensus-1d", seed=agents, num_agents=agents)
        states = np.asarray(r["states"])
        assert states.shape == (11, agents)
        assert r["initial_average"][0] == pytest.approx(states[0].mean())
        assert r["final_value"][0] == pytest.approx(r["initial_average"][0], abs=1e-9)
        assert r["bias"][0] == pytest.approx(0.0, abs=1e-9)
        assert r["converged"] and r["rounds_to_converge"] == 1 and r["final_spread"] < 1e-9
        assert r["labels"][0] == "W" * agents and set("".join(r["labels"][1:])) == {"="}
        assert not r["oscillation"] and not r["clustering"] and r["n_clusters"] == 1
        assert r["llm_calls"] == 0 and r["llm_fallbacks"] == {}


def test_average_planner_in_the_plane():
    r = run("consensus-2d", seed=3, num_agents=5)
    assert np.asarray(r["states"]).shape == (11, 5, 2)
    assert r["bias_norm"] == pytest.approx(0.0, abs=1e-9) and r["converged"]


def test_stubborn_and_suggestible_pair_meets_at_the_stubborn_agent():
    r = run("personalities", seed=4, personalities="stubborn,suggestible")
    states = np.asarray(r["states"])
    assert r["converged"] and r["final_value"][0] == states[0, 0]
    assert r["labels"][0] == "SG"


def test_two_suggestible_agents_swap_forever():
    r = run("personalities", seed=4, personalities="suggestible,suggestible")
    states = np.asarray(r["states"])
    assert np.array_equal(states[2], states[0]) and np.array_equal(states[1], states[0][::-1])
    assert r["oscillation"] and r["reversals"] == [9, 9]
    assert not r["converged"] and r["clustering"] and r["rounds_to_converge"] is None
    assert set("".join(r["labels"])) == {"G"}


def test_two_stubborn_agents_never_meet():
    r = run("personalities", seed=4, personalities="stubborn,stubborn")
    assert not r["converged"] and not r["oscillation"] and r["bias"] == [0.0]
    assert set("".join(r["labels"])) == {"S"}


def test_seven_stubborn_and_three_suggestible_agents_cluster():
    for seed in range(5):
        r = run("personalities", seed=seed, personalities="stubborn*7,suggestible*3")
        states = np.asarray(r["states"])
        assert r["n"] == 10 and r["personalities"][:7] == ["stubborn"] * 7
        assert np.array_equal(states[-1, :7], states[0, :7])             # the stubborn agents never move
        assert r["clustering"] and r["n_clusters"] >= 2 and not r["converged"]
        assert sum(r["cluster_sizes"]) == 10


def test_ten_suggestible_agents_only_ever_take_initial_states():
    r = run("personalities", seed=2, personalities="suggestible*10")
    states = np.asarray(r["states"])
    assert set(states[-1]) <= set(states[0])
    assert set("".join(r["labels"])) <= {"G", "="}


def test_topologies_leader_decides_and_sparse_graphs_converge_slower():
    seeds = range(6)
    complete = [run("topologies", s, topology="complete") for s in seeds]
    star = [run("topologies", s, topology="star") for s in seeds]
    leader = [run("topologies", s, topology="leader_follower") for s in seeds]
    chain = [run("topologies", s, topology="chain") for s in seeds]
    assert all(r["rounds_to_converge"] == 1 and r["root"] is None for r in complete)
    for r in leader + chain:
        assert r["root"] == 0 and r["root_initial"] == [r["states"][0][0]]
        assert abs(r["bias_to_root"][0]) <= 100 / 2 ** 8       # followers halve their gap each round
        assert set(r["labels"][0][0]) == {"S"}                  # the leader hears nobody and stays
    for sparse in (star, leader, chain):
        assert all(r["rounds_to_converge"] is None or r["rounds_to_converge"] > 1 for r in sparse)
    assert np.median([r["final_spread"] for r in chain]) > np.median([r["final_spread"] for r in leader])
    assert not any(r["oscillation"] for r in star)


@pytest.mark.parametrize("name", ["consensus-1d", "consensus-2d", "personalities", "topologies"])
def test_every_preset_runs_its_default_sweep_headless(name, tmp_path):
    """The presets with their defaults and the paper's sweep (one trial a point, the classical planners) run
    through the experiment runner and report every grid point."""
    from consensus.experiments.runner import read_results, run_experiment
    from consensus.experiments.spec import resolve_spec

    spec = resolve_spec({"study": name, "trials": 1, "workers": 1}, all_studies())
    result = run_experiment(spec, STUDIES[name], tmp_path / "run", progress=False)
    points = int(np.prod([len(v) for v in STUDIES[name].default_sweep.values()]))
    assert (result.ok, result.failed) == (points, 0)
    recs = list(read_results(tmp_path / "run" / "results.jsonl").values())
    assert all(r["params"]["planner"] == "average" and r["result"]["llm_calls"] == 0 for r in recs)
    if name == "personalities":                       # num_agents null: as many agents as listed
        assert sorted(r["result"]["n"] for r in recs) == [2, 2, 2, 10, 10]
    lines = STUDIES[name].report(recs, tmp_path / "run")
    assert f"Study `{name}`: {points} trials ok, 0 failed, {points} groups" in lines[0]


# --- the LLM path (scripted OpenAI-compatible server) ------------------------------------------------------------
def averaging_reply(body: dict) -> str:
    """A well-behaved agent: the mean of the numbers in the last prompt (own state and neighbours)."""
    numbers = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", body["messages"][-1]["content"])]
    return json.dumps({"reasoning": "the average of all positions", "position": [sum(numbers) / len(numbers)]})


def llm_ctx(srv: FakeOpenAIServer) -> TrialContext:
    client = OpenAIChatClient(srv.base_url, "fake", max_retries=0, timeout_s=10)
    return TrialContext(llm=client, llm_settings={"backend": "openai", "max_tokens": 90})


def test_llm_trial_asks_every_agent_every_round_and_labels_the_replies():
    with FakeOpenAIServer(averaging_reply) as srv:
        r = run("consensus-1d", seed=11, ctx=llm_ctx(srv), planner="llm", num_agents=3, rounds=3, llm_temperature=0.0,
                personalities="stubborn,none,suggestible")
        requests = srv.requests
    assert len(requests) == 9 and r["llm_calls"] == 9 and r["llm_fallbacks"] == {}
    assert {q["temperature"] for q in requests} == {0.0} and {q["max_tokens"] for q in requests} == {90}
    # the paper style by default: the paper's format line, no JSON schema, no grammar (not a llama.cpp server)
    assert all("response_format" not in q and "grammar" not in q for q in requests)
    assert all(q["messages"][-1]["content"].endswith("'Reasoning:..., Position:...' format") for q in requests)
    systems = {q["seed"] - 11: q["messages"][0]["content"] for q in requests}       # request seed = seed + agent
    assert "extremely stubborn" in systems[0] and "extremely suggestible" in systems[2]
    assert systems[1] == "You are an agent moving in a one-dimensional space."
    assert max(len(q["messages"]) for q in requests) > 2                           # memory: chat history sent
    assert r["labels"][0] == "WWW" and r["converged"] and abs(r["bias"][0]) < 0.01


def test_llm_trial_with_fallbacks_is_complete_and_counts_them():
    def agent0_unreadable(body):
        return "I cannot decide." if body["seed"] == 11 else averaging_reply(body)

    with FakeOpenAIServer(agent0_unreadable) as srv:
        r = run("consensus-1d", seed=11, ctx=llm_ctx(srv), planner="llm", num_agents=3, rounds=2, parse_retries=1)
    assert r["llm_fallbacks"] == {"unparseable": 2}
    assert r["llm_calls"] == 2 * (2 + 1 + 1) and r["parse_failures"] == 4
    labels = decode_labels(r["labels"])
    assert [row[0] for row in labels] == ["fallback", "fallback"]
    assert len({row[0] for row in r["states"]}) == 1                                 # agent 0 held its state


def test_llm_trial_without_any_answer_fails():
    with FakeOpenAIServer(default=500) as srv:
        with pytest.raises(TrialFailed, match="no usable reply in any of the 4 plans"):
            run("consensus-1d", seed=11, ctx=llm_ctx(srv), planner="llm", num_agents=2, rounds=2)


def test_llm_sweep_through_the_runner_and_report(tmp_path):
    runner = pytest.importorskip("consensus.experiments.runner")
    from consensus.experiments.spec import resolve_spec

    with FakeOpenAIServer(averaging_reply) as srv:
        spec = resolve_spec({"study": "consensus-1d", "trials": 2, "workers": 1,
                             "params": {"planner": "llm", "rounds": 2},
                             "sweep": {"num_agents": [2, 3]},
                             "llm": {"backend": "openai", "base_url": srv.base_url, "model": "fake",
                                     "concurrency": 2, "max_retries": 0}}, all_studies())
        result = runner.run_experiment(spec, STUDIES["consensus-1d"], tmp_path / "run", progress=False)
    assert result.ok == 4 and result.failed == 0
    recs = list(runner.read_results(tmp_path / "run" / "results.jsonl").values())
    assert all(r["result"]["llm_calls"] == r["params"]["num_agents"] * 2 for r in recs)
    lines = STUDIES["consensus-1d"].report(recs, tmp_path / "run")
    assert (tmp_path / "run" / "fig4_bias_vs_agents.png").is_file()
    assert any(line.startswith("| num_agents=3 | 2 / 0 | 100 % |") for line in lines)


# --- reports -----------------------------------------------------------------------------------------------------
def test_consensus_report_writes_figures_and_tables(tmp_path):
    recs = records("consensus-1d", [{"num_agents": a, "llm_temperature": t} for a in (2, 4) for t in (0.0, 0.7)])
    recs.append({**recs[0], "key": "failed#9", "index": 9, "status": "failed", "reason": "boom", "result": None})
    recs.append({**recs[1], "key": "failed#10", "index": 10, "status": "failed", "reason": "LLM fallback",
                 "result": {**recs[1]["result"], "llm_calls": 20, "llm_fallbacks": {"unparseable": 3}}})
    lines = STUDIES["consensus-1d"].report(recs, tmp_path)
    for name in ("fig4_bias_vs_agents", "bias_spread_vs_agents", "strategy_shares"):
        assert (tmp_path / f"{name}.png").stat().st_size > 0 and (tmp_path / f"{name}.svg").is_file()
        assert f"![{name}.png]({name}.png)" in lines
    rows = [line for line in lines if line.startswith("| num_agents=")]
    assert len(rows) == 8                                        # 4 groups x (outcomes, label shares)
    assert rows[0].startswith("| num_agents=2, llm_temperature=0.0 | 3 / 2 | 100 % | 1 (1 to 1) |")
    assert rows[0].endswith("| 20 | 3 |")                        # failed trials' LLM use is still counted
    assert "| 100.0 % | 0.0 % |" in rows[4]                      # label shares: all average-with-self


def test_fig4_figure_is_readable_on_its_own():
    recs = records("consensus-1d", [{"num_agents": a} for a in (2, 4)], trials=4)
    varying, groups = cs.group_records(recs)
    fig = cs.bias_box_figure(groups, varying, "Fig. 4")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "number of agents N"
    assert "initial average" in ax.get_ylabel() and "[state units]" in ax.get_ylabel()
    assert "planner=average" in ax.get_title() and "rounds=10" in ax.get_title()
    assert [t.get_text() for t in ax.texts] == ["n=4", "n=4"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4"]


def test_personalities_and_topologies_reports(tmp_path):
    mixes = ("stubborn,suggestible", "stubborn*7,suggestible*3")
    recs = records("personalities", [{"personalities": p} for p in mixes],
                   trials=2)
    lines = STUDIES["personalities"].report(recs, tmp_path / "p")
    for name in ("personalities_stubborn_suggestible", "personalities_stubborn_7_suggestible_3",
                 "personalities_outcomes", "strategy_shares"):
        assert (tmp_path / "p" / f"{name}.png").is_file()
    cells = next(line for line in lines if line.startswith("| personalities=stubborn*7")).split(" | ")
    assert cells[2] == "0 %" and cells[8] == "100 %"             # converged, clustering

    recs = records("topologies", [{"topology": t} for t in ("complete", "leader_follower")], trials=2)
    lines = STUDIES["topologies"].report(recs, tmp_path / "t")
    for name in ("topologies_spread", "topology_complete", "topology_leader_follower", "strategy_shares"):
        assert (tmp_path / "t" / f"{name}.png").is_file()
    assert any(line.startswith("| topology=leader_follower | 2 / 0 | 100 % |") for line in lines)


def test_report_of_no_trials():
    assert STUDIES["topologies"].report([], "/nonexistent") == ["Study `topologies`: no trials."]
