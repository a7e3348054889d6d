"""Paper 2 appendix D model (consensus.scenarios.theory.model) and its study preset
(consensus.scenarios.theory.study)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from consensus.errors import ConfigError
from consensus.experiments.study import Trial, TrialContext, TrialFailed
from consensus.scenarios.theory.model import TheoryParams, simulate, simulate_batch, tracking_metrics
from consensus.registry import all_studies
from consensus.scenarios.theory.study import DEFAULT_SWEEP, STUDIES, report, settings_from_records

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
STUDY = STUDIES[0]


def quiet(**kw) -> TheoryParams:
    """No noise, no shocks unless asked."""
    return TheoryParams(**{"beta": 0.0, "shock_freq": 0.0, **kw})


# ---------------------------------------------------------------- dynamics

def test_two_agents_reach_consensus_at_rate_one_minus_alpha():
    run = simulate(quiet(alpha=0.3, gamma=0.0, num_agents=2, rounds=3), seed=1, x0=np.array([1.0, -1.0]))
    # mean 0 is conserved; deviations shrink by (1 - alpha) = 0.7 per round
    expected = np.array([[1.0, -1.0], [0.7, -0.7], [0.49, -0.49], [0.343, -0.343]])
    assert run.x == pytest.approx(expected)
    assert run.d_bar == pytest.approx((0.7 + 0.49 + 0.343) / 3)
    assert run.d_opt == pytest.approx((0.7 + 0.49 + 0.343) / 3)   # a* = 0 = the consensus value here


def test_no_noise_no_pull_converges_to_the_initial_mean():
    run = simulate(quiet(alpha=0.2, gamma=0.0, num_agents=5, rounds=200), seed=4)
    assert np.ptp(run.x[-1]) < 1e-12
    assert run.x[-1] == pytest.approx(np.full(5, run.x[0].mean()))
    spread = np.ptp(run.x, axis=1)
    assert spread[1:] == pytest.approx(0.8 * spread[:-1])


def test_single_step_by_hand():
    # x(0) = [2, 0], mu = 1, a* = 0: x_i(1) = 0.5 x + 0.5 * 1 + 0.2 (0 - x)
    run = simulate(quiet(alpha=0.5, gamma=0.2, num_agents=2, rounds=1), seed=0, x0=np.array([2.0, 0.0]))
    assert run.x[1] == pytest.approx([1.1, 0.5])
    assert run.d_opt == pytest.approx(0.8)       # (|1.1| + |0.5|) / 2
    assert run.d_bar == pytest.approx(0.3)       # mean 0.8
    assert run.perf_score == pytest.approx(0.2)


def test_noise_and_shocks_follow_the_documented_stream_and_order():
    p = TheoryParams(alpha=0.5, beta=0.3, gamma=0.2, shock_freq=1.0, shock_size=2.0, num_agents=2, rounds=1)
    rng = np.random.default_rng(9)
    x0 = rng.uniform(-1, 1, 2)
    rng.random(1)
    jump = rng.uniform(-2.0, 2.0, 1)[0]
    eps = rng.standard_normal((1, 2))[0]
    run = simulate(p, seed=9)
    assert run.x[0] == pytest.approx(x0)
    # the update uses a*(0) = 0; the shock moves a* afterwards and x(1) is scored against a*(1)
    assert run.x[1] == pytest.approx(0.5 * x0 + 0.5 * x0.mean() + 0.2 * (0.0 - x0) + 0.3 * eps)
    assert run.a_star == pytest.approx([0.0, jump])
    assert run.d_opt == pytest.approx(np.abs(run.x[1] - jump).mean())


def test_agents_see_a_shock_one_round_late():
    p = quiet(alpha=0.0, gamma=1.0, shock_freq=1.0, num_agents=3, rounds=4)
    run = simulate(p, seed=2, x0=np.zeros(3))
    for t in range(4):
        assert run.x[t + 1] == pytest.approx(np.full(3, run.a_star[t]))   # gamma = 1 jumps onto a*(t)
    assert run.d_opt == pytest.approx(np.abs(np.diff(run.a_star)).mean())


def test_shocks_off_keep_the_optimum_constant():
    for p in (TheoryParams(shock_freq=0.0, beta=0.5), TheoryParams(shock_freq=1.0, shock_size=0.0, beta=0.5)):
        assert np.all(simulate(p, seed=3).a_star == 0.0)
    run = simulate(TheoryParams(shock_freq=1.0, shock_size=0.5, rounds=50), seed=3)
    jumps = np.diff(run.a_star)
    assert np.all(jumps != 0.0) and np.all(np.abs(jumps) <= 0.5)


def test_seeded_runs_are_reproducible_and_batches_equal_single_runs():
    p = TheoryParams(alpha=0.5, beta=0.4, gamma=0.3, shock_freq=0.5, num_agents=7, rounds=30)
    a, b, c = simulate(p, 11), simulate(p, 11), simulate(p, 12)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.a_star, b.a_star) and a.d_opt == b.d_opt
    assert not np.allclose(a.x, c.x)
    batch = simulate_batch(p, [11, 12])
    assert batch.x[0] == pytest.approx(a.x, abs=1e-12) and batch.x[1] == pytest.approx(c.x, abs=1e-12)
    assert batch.d_opt == pytest.approx([a.d_opt, c.d_opt])


def test_matches_a_plain_loop_of_the_update_equation():
    p = TheoryParams(alpha=0.5, beta=0.7, gamma=0.3, shock_freq=0.5, num_agents=4, rounds=40)
    run = simulate(p, seed=5)
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, 4)
    shock = rng.random(40) < 0.5
    jumps = rng.uniform(-1, 1, 40) * shock
    eps = rng.standard_normal((40, 4))
    a_star = 0.0
    for t in range(40):
        x = (1 - p.alpha) * x + p.alpha * x.mean() + p.gamma * (a_star - x) + p.beta * eps[t]
        a_star += jumps[t]
        assert run.x[t + 1] == pytest.approx(x, abs=1e-12)
        assert run.a_star[t + 1] == pytest.approx(a_star)


def test_noise_never_helps_in_expectation_even_with_strong_pull_and_small_shocks():
    # the paper's candidate region for an optimal beta: gamma large relative to the shock amplitude
    seeds = range(400)
    means = [simulate_batch(TheoryParams(alpha=0.5, gamma=1.0, shock_freq=0.5, shock_size=0.2, num_agents=10,
                                         rounds=50, beta=beta), seeds).d_opt.mean()
             for beta in (0.0, 0.02, 0.05, 0.1)]
    assert np.all(np.diff(means) > 0)


# ---------------------------------------------------------------- metrics and validation

def test_metrics_of_a_hand_built_trajectory():
    x = np.array([[1.0, 3.0], [0.0, 0.0]])          # scored rounds t = 1, 2
    a_star = np.array([1.0, 1.0])
    d_opt, d_bar = tracking_metrics(x, a_star)
    assert d_opt == pytest.approx((1.0 + 1.0) / 2)   # round 1: (0 + 2) / 2, round 2: (1 + 1) / 2
    assert d_bar == pytest.approx((1.0 + 0.0) / 2)   # round 1: mean 2, |-1|, |1|; round 2: 0


@pytest.mark.parametrize("bad, word", [
    ({"alpha": -0.1}, "alpha"), ({"alpha": 1.5}, "alpha"), ({"beta": -1.0}, "beta"), ({"gamma": -0.2}, "gamma"),
    ({"shock_freq": 1.2}, "shock_freq"), ({"shock_size": -1.0}, "shock_size"), ({"num_agents": 0}, "num_agents"),
    ({"num_agents": 2.5}, "num_agents"), ({"rounds": 0}, "rounds"), ({"rounds": True}, "rounds"),
    ({"beta": float("nan")}, "beta"), ({"gamma": "0.1"}, "gamma"),
])
def test_invalid_parameters_raise_config_error(bad, word):
    with pytest.raises(ConfigError, match=word):
        TheoryParams(**bad)
    with pytest.raises(ConfigError, match=word):
        STUDY.validate({**STUDY.defaults, **bad})


# ---------------------------------------------------------------- study

def test_study_is_registered_with_a_fig6_sweep():
    assert all_studies()["theory-model"] is STUDY
    assert set(DEFAULT_SWEEP) <= set(STUDY.defaults)
    assert DEFAULT_SWEEP["num_agents"] == [3, 10, 50, 100] and DEFAULT_SWEEP["beta"][0] == 0.0
    assert STUDY.defaults["rounds"] == 100 and not STUDY.uses_llm(STUDY.defaults)


def _records(sweep: dict, trials: int, **fixed) -> list[dict]:
    recs = []
    keys = list(sweep)
    for combo in np.array(np.meshgrid(*sweep.values(), indexing="ij")).reshape(len(keys), -1).T:
        point = {k: (int(v) if k == "num_agents" else float(v)) for k, v in zip(keys, combo)}
        params = {**STUDY.defaults, **fixed, **point}
        for i in range(trials):
            trial = Trial(key=f"{combo}#{i}", index=i, seed=1000 * i + len(recs), params=params)
            recs.append({"key": trial.key, "index": i, "seed": trial.seed, "params": params, "status": "ok",
                         "reason": "", "result": STUDY.run_trial(trial, TrialContext()), "elapsed_s": 0.0})
    return recs


def test_run_trial_returns_the_metrics_and_fails_when_unstable():
    params = {**STUDY.defaults, "rounds": 10, "beta": 0.2}
    result = STUDY.run_trial(Trial("k", 0, 3, params), TrialContext())
    run = simulate(TheoryParams(**params), 3)
    assert result == {"d_opt": run.d_opt, "d_bar": run.d_bar, "perf_score": run.perf_score}
    with pytest.raises(TrialFailed, match="unstable"):
        STUDY.run_trial(Trial("k", 0, 3, {**STUDY.defaults, "alpha": 1.0, "gamma": 1e200, "rounds": 5}),
                        TrialContext())


def test_report_on_a_tiny_sweep(tmp_path):
    recs = _records({"beta": [0.0, 0.5], "num_agents": [2, 3], "alpha": [0.1, 0.5]}, trials=3, rounds=10)
    recs.append({**recs[0], "key": "x#9", "status": "failed", "reason": "boom", "result": None})
    lines = report(recs, tmp_path)
    text = "\n".join(lines)
    assert "boom" not in text                      # failures are the runner header's business
    for name in ("perf_vs_beta_gamma0.1", "perf_vs_dbar"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == PNG_MAGIC
        assert (tmp_path / f"{name}.svg").read_text().lstrip().startswith("<?xml")
        assert f"]({name}.png)" in text
    table = [ln for ln in lines if ln.startswith("| ") and not ln.startswith("| α")]
    assert len(table) == 4                         # one row per (alpha, N); the other parameters are fixed
    assert "Settings: 4." in text and "Paper (appendix D)" in text


def test_perf_vs_beta_panels_lines_and_bands():
    from consensus.scenarios.theory.study import perf_vs_beta_figure
    settings = settings_from_records(_records({"beta": [0.0, 0.3, 0.6], "num_agents": [2, 5], "shock_freq": [0.1, 0.4],
                                               "alpha": [0.5]}, trials=2, rounds=8))
    fig = perf_vs_beta_figure(settings, "title")
    assert len(fig.axes) == 2                                  # shock_freq rows x alpha columns
    ax = fig.axes[0]
    assert ax.get_title() == "shock_freq=0.1, α=0.5" and ax.get_ylabel().startswith("perf_score")
    first = next(s for s in settings if s.get("shock_freq") == 0.1 and s.get("num_agents") == 2)
    assert ax.get_lines()[0].get_ydata() == pytest.approx([pt.perf_mean for pt in first.points])
    assert len(ax.collections) == 2                            # one mean +- std band per N
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["N=2", "N=5"]


def _synthetic(perf_by_beta: dict[float, list[float]]) -> list[dict]:
    params = dict(STUDY.defaults)
    return [{"params": {**params, "beta": b}, "status": "ok", "result": {"perf_score": v, "d_bar": b, "d_opt": 1 - v}}
            for b, values in perf_by_beta.items() for v in values]


@pytest.mark.parametrize("perf, verdict", [
    ({0.0: [0.50, 0.51, 0.49], 0.5: [0.70, 0.71, 0.69], 1.0: [0.1, 0.1, 0.1]}, "yes"),    # clear interior peak
    ({0.0: [0.2, 0.8, 0.5], 0.5: [0.3, 0.9, 0.6], 1.0: [0.1, 0.1, 0.1]}, "noise"),        # within the noise
    ({0.0: [0.9, 0.9, 0.9], 0.5: [0.5, 0.5, 0.5], 1.0: [0.1, 0.1, 0.1]}, "no"),           # monotone decline
])
def test_interior_optimum_is_judged_against_the_noise(tmp_path, perf, verdict):
    lines = report(_synthetic(perf), tmp_path)
    row = next(ln for ln in lines if ln.startswith("| 10 |"))  # N is the only table column here
    assert row.rstrip(" |").endswith(verdict)
    text = "\n".join(lines)
    assert ("Settings with a significant interior optimum" in text) == (verdict == "yes")
    best = settings_from_records(_synthetic(perf))[0].best()
    assert math.isclose(best.beta, max(perf, key=lambda b: np.mean(perf[b])))


def test_the_former_agents_parameter_is_refused_naming_num_agents(tmp_path, capsys):
    from consensus import cli
    from consensus.experiments.spec import apply_overrides, resolve_spec

    message = "parameter 'agents' is now called 'num_agents' \\(study theory-model"
    studies = all_studies()
    assert "agents" not in STUDY.defaults and STUDY.defaults["num_agents"] == TheoryParams().num_agents == 10
    for section, value in (("params", 5), ("sweep", [5, 10])):
        with pytest.raises(ConfigError, match=f"{section}.agents: {message}"):
            resolve_spec({"study": "theory-model", section: {"agents": value}}, studies)
    for flag in ("sets", "sweeps"):
        with pytest.raises(ConfigError, match=message):
            apply_overrides({"study": "theory-model"}, studies, **{flag: ["agents=5"]})
    code = cli.main(["experiment", "theory-model", "--sweep", "agents=3,10", "--out", str(tmp_path / "never"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "is now called 'num_agents'" in err, err
    assert not (tmp_path / "never").exists()
    with pytest.raises(TypeError):                 # the model itself has one name for N
        TheoryParams(agents=5)
