"""Headless aggregation runner: motion, rounds, fallbacks, LLM planning with a scripted fake, determinism."""
import json
import re
import threading

import numpy as np
import pytest

from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.errors import ConfigError
from consensus.llm.base import ChatRequest, ChatResponse, LLMError
from consensus.metrics.convergence import spread
from consensus.control.kinematics import initial_positions
from consensus.scenarios.aggregation.headless import count_rounds, run_headless

_TUPLE = re.compile(r"\((-?\d+(?:\.\d+)?), (-?\d+(?:\.\d+)?)\)")


class FakeLLM:
    """LLMClient fake. Default: answers the average of every "(x, y)" in the last prompt, i.e. the
    robot's own position and those of the neighbours it was shown. ``fail_after`` calls -> LLMError."""

    model = "fake-average"

    def __init__(self, answer=None, fail_after: int | None = None, fail_from_start: bool = False):
        self.answer = answer
        self.fail_after = fail_after
        self.fail_from_start = fail_from_start
        self.calls = 0
        self.tags: list[str] = []
        self._lock = threading.Lock()

    def complete(self, req: ChatRequest) -> ChatResponse:
        with self._lock:
            self.calls += 1
            self.tags.append(req.tag)
            n = self.calls
        if self.fail_from_start or (self.fail_after is not None and n > self.fail_after):
            raise LLMError("fake endpoint down")
        if self.answer is not None:
            pos = self.answer
        else:
            points = np.array([[float(a), float(b)] for a, b in _TUPLE.findall(req.messages[-1]["content"])])
            pos = points.mean(axis=0).round(3).tolist()
        return ChatResponse(text=json.dumps({"reasoning": "average of the positions I know", "position": pos}))

    def status(self) -> dict:
        return {"state": "ok", "calls": self.calls, "errors": 0}

    def close(self) -> None:
        pass


def cfg_of(**kw) -> AggregationConfig:
    base = dict(num_robots=5, planner="average", duration_s=30.0, seed=3, llm_backend="openai")
    base.update(kw)
    return AggregationConfig(**base)


def test_average_planner_five_robots_converge_within_duration():
    cfg = cfg_of()
    res = run_headless(cfg)
    rounds = count_rounds(cfg)
    steps = round(cfg.planner_period_s / cfg.control_period_s)
    assert rounds == 15
    assert res.positions.shape == (rounds * steps + 1, 5, 2) == res.targets.shape
    assert res.times[-1] == pytest.approx(cfg.duration_s)
    assert spread(res.positions[0]) > 3.0
    assert spread(res.positions[-1]) < 0.1
    s = res.summary
    assert s["converged"] and s["time_to_converge_s"] < cfg.duration_s
    assert s["rounds"] == rounds and s["llm_calls"] == 0 and s["llm_fallbacks"] == 0
    assert len(res.plan_log) == rounds * 5
    assert res.plan_log[0]["reasoning"].startswith("Average of 5 positions")


def test_unsaturated_average_meets_at_initial_centroid():
    """Every robot heads for the same round-0 target (the centroid) at a speed proportional to its
    distance, so the centroid stays put; with saturation (the default v_max) it drifts."""
    assert run_headless(cfg_of(v_max=100.0)).summary["distance_consensus_to_initial_centroid_m"] < 0.02
    assert run_headless(cfg_of(v_max=0.3)).summary["distance_consensus_to_initial_centroid_m"] > 0.05


def test_speed_limit_and_targets_are_respected():
    cfg = cfg_of(v_max=0.5)
    res = run_headless(cfg)
    step = np.linalg.norm(np.diff(res.positions, axis=0), axis=2)
    assert step.max() <= cfg.v_max * cfg.control_period_s + 1e-9
    lo, hi = cfg.workspace_bounds()
    assert np.all(res.positions >= lo) and np.all(res.positions <= hi)
    assert np.all(np.isfinite(res.targets))


def test_initial_positions_seeded_given_and_clipped():
    a, b = initial_positions(cfg_of()), initial_positions(cfg_of())
    assert np.array_equal(a, b) and not np.array_equal(a, initial_positions(cfg_of(seed=4)))
    assert np.all(np.abs(a) <= 5.0)
    clipped = initial_positions(cfg_of(init_radius=50.0, workspace=[-1.0, 1.0, -2.0, 2.0]))
    assert np.all(np.abs(clipped[:, 0]) <= 1.0) and np.all(np.abs(clipped[:, 1]) <= 2.0)
    given = cfg_of(num_robots=2, initial_positions=[1.0, 2.0, -3.0, 4.0])
    assert np.array_equal(run_headless(given, rounds=1).positions[0], [[1, 2], [-3, 4]])


def test_round_count_sources():
    assert count_rounds(cfg_of(duration_s=7.0)) == 3
    assert count_rounds(cfg_of(max_rounds=4)) == 4
    assert count_rounds(cfg_of(max_rounds=4), rounds=2) == 2
    with pytest.raises(ConfigError, match="rounds"):
        count_rounds(cfg_of(), rounds=-1)
    res = run_headless(cfg_of(), rounds=0)
    assert res.positions.shape == (1, 5, 2) and np.all(np.isnan(res.targets))


def test_fake_llm_averaging_three_robots_converge():
    cfg = cfg_of(num_robots=3, planner="llm", llm_concurrency=3)
    client = FakeLLM()
    res = run_headless(cfg, client)
    rounds = count_rounds(cfg)
    assert spread(res.positions[-1]) < 0.1 and res.summary["converged"]
    assert client.calls == res.summary["llm_calls"] == 3 * rounds
    assert res.summary["llm_fallbacks"] == 0
    assert sorted(client.tags[:3]) == ["robot_0/round_0", "robot_1/round_0", "robot_2/round_0"]
    assert res.plan_log[0]["reasoning"] == "average of the positions I know"


def test_fake_llm_sees_only_in_neighbours_in_headless_runs():
    """leader_follower: the leader hears nobody, so it keeps its own position; all follow it."""
    cfg = cfg_of(num_robots=3, planner="llm", topology="leader_follower", leader=1)
    res = run_headless(cfg, FakeLLM())
    leader = res.positions[0, 1]
    assert np.allclose(res.positions[:, 1], leader, atol=1e-2)
    assert np.allclose(res.positions[-1], leader, atol=0.05)


def test_seeded_runs_are_identical_and_parallel_equals_serial():
    a = run_headless(cfg_of(num_robots=4, planner="llm", llm_concurrency=1), FakeLLM())
    b = run_headless(cfg_of(num_robots=4, planner="llm", llm_concurrency=4), FakeLLM())
    assert np.array_equal(a.positions, b.positions) and np.array_equal(a.targets, b.targets)
    assert a.plan_log == b.plan_log and a.summary == b.summary
    c = run_headless(cfg_of(num_robots=4, planner="suggestible", seed=9))
    d = run_headless(cfg_of(num_robots=4, planner="suggestible", seed=9))
    assert np.array_equal(c.positions, d.positions)
    assert not np.array_equal(c.positions, run_headless(cfg_of(num_robots=4, planner="suggestible", seed=10)).positions)


def test_round0_llm_failure_holds_current_position():
    cfg = cfg_of(num_robots=3, planner="llm", max_rounds=3)
    res = run_headless(cfg, FakeLLM(fail_from_start=True))
    assert np.array_equal(res.positions[-1], res.positions[0])         # nobody moves, nobody is frozen on NaN
    assert np.array_equal(res.targets[0], res.positions[0])
    assert res.summary["llm_fallbacks"] == 9 and res.counters["fallbacks"] == {"llm_error": 9}
    assert all(e["fallback"] and e["fallback_reason"] == "llm_error" for e in res.plan_log)


def test_later_llm_failure_keeps_the_last_target():
    cfg = cfg_of(num_robots=3, planner="llm", max_rounds=4, llm_concurrency=1)
    res = run_headless(cfg, FakeLLM(fail_after=3))          # round 0 answered, then the endpoint is down
    first_targets = np.array([e["target"] for e in res.plan_log[:3]])
    assert np.allclose(first_targets, res.positions[0].mean(axis=0), atol=1e-2)
    later = res.plan_log[3:]
    assert all(e["fallback"] for e in later)
    assert np.allclose([e["target"] for e in later], np.tile(first_targets, (3, 1)))
    assert spread(res.positions[-1]) < 0.1


def test_out_of_workspace_answers_are_clamped_and_counted():
    cfg = cfg_of(num_robots=2, planner="llm", max_rounds=2, workspace=[-4.0, 4.0, -4.0, 4.0], init_radius=2.0)
    res = run_headless(cfg, FakeLLM(answer=[100.0, -100.0]))
    assert res.summary["clamped"] == 4 and all(e["clamped"] for e in res.plan_log)
    assert np.allclose(res.targets[-1], [[4.0, -4.0], [4.0, -4.0]])
    assert np.all(np.abs(res.positions) <= 4.0)


def test_one_dimensional_and_unicycle_runs_converge():
    one = run_headless(cfg_of(dim=1, workspace=[-10.0, 10.0]))
    assert one.positions.shape[2] == 1 and spread(one.positions[-1]) < 0.1
    uni = run_headless(cfg_of(kinematics="unicycle", duration_s=40.0))
    assert spread(uni.positions[-1]) < 0.1
    assert not np.array_equal(uni.positions, run_headless(cfg_of(duration_s=40.0)).positions)


def test_stubborn_robots_never_move():
    res = run_headless(cfg_of(planner="stubborn", max_rounds=3))
    assert np.array_equal(res.positions[-1], res.positions[0]) and not res.summary["converged"]


def test_progress_callback_and_missing_client():
    seen = []
    run_headless(cfg_of(max_rounds=3), progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    with pytest.raises(ConfigError, match="needs an LLM client"):
        run_headless(cfg_of(planner="llm"))


# ----------------------------------------------------------------------------------------------- settle: end early
def test_settled_run_ends_once_consensus_held_for_settle_s_and_says_why():
    full = run_headless(cfg_of(duration_s=120.0))
    early = run_headless(cfg_of(duration_s=120.0, settle_s=6.0))
    assert full.summary["end_reason"] == "duration" and full.times[-1] == pytest.approx(120.0)
    s = early.summary
    assert s["end_reason"] == "converged_and_settled" and s["converged"]
    ttc = s["time_to_converge_s"]
    # it ends in the first round whose end is settle_s past the moment the spread went below tol ...
    assert ttc + 6.0 <= early.times[-1] < ttc + 6.0 + cfg_of().planner_period_s + 1e-9
    assert early.times[-1] < 60.0
    # ... and until then it is the same run
    k = len(early.times)
    assert np.array_equal(early.positions, full.positions[:k]) and len(early.plan_log) == s["rounds"] * 5
    assert s["rounds"] < full.summary["rounds"]


def test_settle_does_not_end_a_run_that_never_agrees_and_max_rounds_is_its_own_reason():
    res = run_headless(cfg_of(planner="stubborn", settle_s=2.0))
    assert res.summary["end_reason"] == "duration" and not res.summary["converged"]
    assert res.times[-1] == pytest.approx(30.0)
    assert run_headless(cfg_of(max_rounds=3)).summary["end_reason"] == "max_rounds"


def test_negative_settle_is_refused():
    with pytest.raises(ConfigError, match=r"settle_s must be in \[0, 1e\+06\]"):
        cfg_of(settle_s=-1.0).validate()
