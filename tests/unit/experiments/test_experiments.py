"""The experiment runner: spec validation and expansion, seeds, failures, resume, LLM record/replay, report, CLI.

Studies used here are the tiny ones in tests/support/experiment_fixtures.py (``toy``, ``toy-llm``).
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import experiment_fixtures as fx
from support.fake_openai_server import FakeOpenAIServer, Reply

from consensus.errors import ConfigError
from consensus.experiments import cli
from consensus.experiments.report import ReportFailed, write_report
from consensus.experiments.runner import (LOG_FILE, RESULTS_FILE, TRANSCRIPTS_FILE, call_seed, prune_transcripts,
                                          read_results, replay_spec, run_experiment)
from consensus.experiments.spec import apply_overrides, expand, load_spec_file, resolve_spec
from consensus.experiments.study import Study

ROOT = Path(__file__).resolve().parents[3]


def spec_of(**raw):
    return resolve_spec({"study": "toy", **raw}, fx.STUDIES)


def run(spec, out, **kw):
    return run_experiment(spec, fx.STUDIES[spec.study], out, progress=False, **kw)


def without_time(records: dict) -> dict:
    return {k: {f: v for f, v in r.items() if f != "elapsed_s"} for k, r in records.items()}


def parse_cli(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="consensus")
    cli.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# spec: expansion, seeds, validation
def test_expansion_keys_params_and_seeds_follow_the_documented_rule():
    spec = spec_of(trials=2, seed=5, params={"scale": 2}, sweep={"x": [1, 3], "mode": ["ok", "fail"]})
    trials = expand(spec)
    assert [t.key for t in trials] == ["x=1,mode=ok#0", "x=1,mode=ok#1", "x=1,mode=fail#0", "x=1,mode=fail#1",
                                       "x=3,mode=ok#0", "x=3,mode=ok#1", "x=3,mode=fail#0", "x=3,mode=fail#1"]
    t = trials[2]
    assert t.params == {"x": 1, "mode": "fail", "scale": 2.0, "sleep_s": 0.0, "note": None}
    assert isinstance(t.params["scale"], float)                      # normalised to the default's type
    blob = '5\n{"mode":"fail","note":null,"scale":2.0,"sleep_s":0.0,"x":1}\n0'
    assert t.seed == int.from_bytes(hashlib.sha256(blob.encode()).digest()[:8], "big") >> 1
    assert len({t.seed for t in trials}) == len(trials)


def test_seeds_depend_only_on_spec_seed_params_and_index():
    a = {t.key: t.seed for t in expand(spec_of(trials=3, seed=1, workers=1))}
    b = {t.key: t.seed for t in expand(spec_of(trials=5, seed=1, workers=2))}        # more trials, other workers
    assert all(b[k] == v for k, v in a.items())
    c = {t.key: t.seed for t in expand(spec_of(trials=3, seed=2))}
    assert not set(a.values()) & set(c.values())
    d = {t.key: t.seed for t in expand(spec_of(trials=3, seed=1, params={"scale": 1.0 + 1e-9}))}
    assert a["x=0#0"] != d["x=0#0"]


def test_numbers_are_normalised_so_equal_values_give_equal_keys():
    a = expand(spec_of(trials=1, sweep={"x": [1.0, 2]}, params={"scale": 3}))
    b = expand(spec_of(trials=1, sweep={"x": [1, 2.0]}, params={"scale": 3.0}))
    assert [(t.key, t.seed) for t in a] == [(t.key, t.seed) for t in b] and a[0].key == "x=1#0"


BAD_SPECS = [
    ({"study": "nope"}, "unknown study 'nope'"),
    ({}, "study must name a study"),
    ({"study": "toy", "triels": 3}, "unknown key(s) 'triels'"),
    ({"study": "toy", "params": {"scal": 2}}, "params: unknown key(s) 'scal'"),
    ({"study": "toy", "sweep": {"y": [1, 2]}}, "sweep: unknown key(s) 'y'"),
    ({"study": "toy", "sweep": {"x": []}}, "sweep.x is an empty list"),
    ({"study": "toy", "sweep": {"x": 4}}, "sweep.x must be a list"),
    ({"study": "toy", "sweep": {"x": [1, 1]}}, "sweep.x repeats value(s) 1"),
    ({"study": "toy", "sweep": {"x": [1, "a"]}}, "sweep.x[1] must be an integer"),
    ({"study": "toy", "trials": 0}, "trials must be an integer >= 1"),
    ({"study": "toy", "trials": "many"}, "trials must be an integer >= 1"),
    ({"study": "toy", "seed": -1}, "seed must be an integer >= 0"),
    ({"study": "toy", "workers": 1.5}, "workers must be an integer in [1, 256]"),
    ({"study": "toy", "workers": 10**20}, "workers must be an integer in [1, 256]"),
    ({"study": "toy", "trials": 10**9}, "is more than 1,000,000 trials"),
    ({"study": "toy", "params": {"scale": float("nan")}}, "params.scale must be a finite number"),
    ({"study": "toy", "sweep": {"scale": [1.0, float("inf")]}}, "sweep.scale[1] must be a finite number"),
    ({"study": "toy", "params": [1]}, "params must be a mapping"),
    ({"study": "toy", "params": {"scale": "big"}}, "params.scale must be a finite number"),
    ({"study": "toy", "params": {"mode": True}}, "params.mode must be a string"),
    ({"study": "toy", "params": {"x": 1}}, "x given both in params and in sweep"),
    ({"study": "toy", "params": {"scale": -1}}, "toy: scale must be >= 0"),              # Study.validate
    ({"study": "toy", "sweep": {"mode": ["ok", "weird"]}}, "unknown mode 'weird'"),        # per grid point
    ({"study": "toy-llm", "llm": {"backend": "gpt"}}, "llm.backend must be one of"),
    ({"study": "toy-llm", "llm": {"modle": "x"}}, "llm: unknown key(s) 'modle'"),
    ({"study": "toy-llm", "llm": {"concurrency": 0}}, "llm.concurrency must be in [1, 256]"),
]


@pytest.mark.parametrize("raw, message", BAD_SPECS, ids=[m for _, m in BAD_SPECS])
def test_bad_specs_raise_one_clear_config_error(raw, message):
    with pytest.raises(ConfigError) as err:
        resolve_spec(raw, fx.STUDIES)
    assert message in str(err.value)


def test_spec_file_errors(tmp_path):
    (tmp_path / "bad.yaml").write_text("study: toy\nsweep: {x: [1, 2\n")
    (tmp_path / "list.yaml").write_text("- study\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_spec_file(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_spec_file(tmp_path / "list.yaml")
    with pytest.raises(ConfigError, match="not found"):
        load_spec_file(tmp_path / "missing.yaml")
    (tmp_path / "binary.yaml").write_bytes(b"\x00\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_spec_file(tmp_path / "binary.yaml")
    with pytest.raises(ConfigError, match=r"not valid YAML at line 3, column 1: expected") as err:
        load_spec_file(tmp_path / "bad.yaml")
    assert "\n" not in str(err.value)                     # one line, not PyYAML's multi-line dump


def test_cli_overrides_set_sweep_and_llm_flags():
    raw = apply_overrides({"study": "toy"}, fx.STUDIES, trials=4, sets=["x=7", "mode=fail"],
                          sweeps=["scale=0.5,2", "sleep_s=[0, 0.001]"])
    spec = resolve_spec(raw, fx.STUDIES)
    assert spec.trials == 4 and spec.params["x"] == 7 and spec.params["mode"] == "fail"
    assert spec.sweep == {"scale": [0.5, 2.0], "sleep_s": [0.0, 0.001]}          # --set x dropped the x axis
    llm = resolve_spec(apply_overrides({"study": "toy-llm"}, fx.STUDIES,
                                       llm={"backend": "openai", "model": "m", "concurrency": 3, "base_url": None}),
                       fx.STUDIES).llm
    assert (llm["backend"], llm["model"], llm["concurrency"]) == ("openai", "m", 3)
    with pytest.raises(ConfigError, match="has no parameter 'planner'"):
        apply_overrides({"study": "toy"}, fx.STUDIES, planner="llm")
    with pytest.raises(ConfigError, match="expects KEY=VALUE"):
        apply_overrides({"study": "toy"}, fx.STUDIES, sets=["x"])


def test_llm_block_is_kept_only_when_a_trial_uses_an_llm():
    assert resolve_spec({"study": "toy-llm", "params": {"planner": "average"}}, fx.STUDIES).llm == {}
    assert resolve_spec({"study": "toy-llm"}, fx.STUDIES).llm["concurrency"] >= 1


# ---------------------------------------------------------------------------------------------
# running, failures, resume
@pytest.mark.parametrize("workers", [1, 2])
def test_failed_trials_are_recorded_with_reasons_never_dropped(tmp_path, workers):
    spec = spec_of(trials=4, workers=workers, sweep={"mode": ["ok", "fail", "crash", "badjson"]})
    result = run(spec, tmp_path / "run")
    records = read_results(tmp_path / "run" / RESULTS_FILE)
    assert len(records) == 16 and result.ok == 8 and result.failed == 8
    assert result.mode == ("processes" if workers == 2 else "in-process")
    by_mode = {m: [r for r in records.values() if r["params"]["mode"] == m] for m in ("ok", "fail", "crash")}
    assert all(r["status"] == "ok" and r["result"]["value"] >= 0 for r in by_mode["ok"])
    assert sorted(r["reason"] for r in by_mode["fail"]) == ["", "", "odd index 1", "odd index 3"]
    crashed = [r for r in by_mode["crash"] if r["status"] == "failed"]
    assert [r["reason"] for r in crashed] == ["ValueError: boom"] * 2 and all(r["result"] is None for r in crashed)
    assert all(r["status"] == "failed" and r["reason"].startswith("result is not JSON-serialisable")
               for r in records.values() if r["params"]["mode"] == "badjson")
    log_text = (tmp_path / "run" / LOG_FILE).read_text()
    assert "Traceback" in log_text and 'raise ValueError("boom")' in log_text
    assert "Traceback" not in (tmp_path / "run" / RESULTS_FILE).read_text()


def test_run_is_deterministic_across_worker_counts(tmp_path):
    a = read_results(run(spec_of(trials=20, workers=1), tmp_path / "a").out_dir / RESULTS_FILE)
    b = read_results(run(spec_of(trials=20, workers=2), tmp_path / "b").out_dir / RESULTS_FILE)
    assert without_time(a) == without_time(b) and len(a) == 40


def test_interrupt_after_k_trials_then_resume_gives_the_same_records(tmp_path):
    flag = tmp_path / "interrupted-once"
    spec = spec_of(trials=5, workers=1, params={"mode": "interrupt", "note": str(flag)})
    with pytest.raises(KeyboardInterrupt):
        run(spec, tmp_path / "run")
    assert [r["key"] for r in read_results(tmp_path / "run" / RESULTS_FILE).values()] == ["x=0#0", "x=0#1"]
    result = run(spec, tmp_path / "run")
    assert (result.skipped, result.ok) == (2, 8)
    clean = run(spec, tmp_path / "clean")
    assert clean.ok == 10
    assert without_time(read_results(tmp_path / "run" / RESULTS_FILE)) == \
        without_time(read_results(tmp_path / "clean" / RESULTS_FILE))


def test_resume_tolerates_a_cut_short_last_line(tmp_path):
    spec = spec_of(trials=3)
    run(spec, tmp_path / "run")
    path = tmp_path / "run" / RESULTS_FILE
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:3]) + "\n" + lines[3][:25])       # killed mid-write of the 4th record
    assert len(read_results(path)) == 3
    result = run(spec, tmp_path / "run")
    assert (result.skipped, result.ok) == (3, 3)
    assert all(json.loads(line) for line in path.read_text().splitlines()) and len(read_results(path)) == 6


def _cli_subprocess(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])}
    return subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "experiment_fixtures.py"), "experiment",
                             *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=fx.default_signals)


@pytest.mark.parametrize("workers, sig", [(1, signal.SIGKILL), (2, signal.SIGINT)])
def test_killed_sweep_resumes_to_the_records_of_an_uninterrupted_one(tmp_path, workers, sig):
    # the x = 1 trials are held until the gate file exists (experiment_fixtures, mode "gated"): the interrupt comes
    # when the 30 x = 0 records are in and before any of the x = 1 ones, however fast or slow the machine is; every
    # worker then waits at the gate, none is writing a result (a worker killed in the middle of writing one can leave
    # Pool.terminate() waiting for ever: the closing note of 2026-11-29 names this race)
    gate = tmp_path / "gate"
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"study: toy\ntrials: 30\nworkers: {workers}\n"
                    f"params: {{sleep_s: 0.02, mode: gated, note: '{gate}'}}\nsweep: {{x: [0, 1]}}\n")
    out = tmp_path / "run"
    proc = _cli_subprocess([str(spec), "--out", str(out), "-q", "--no-report"])
    try:
        deadline = time.monotonic() + 600          # a bound for a broken runner only: nothing races it
        while time.monotonic() < deadline and (not (out / RESULTS_FILE).is_file()
                                               or len((out / RESULTS_FILE).read_text().splitlines()) < 30):
            time.sleep(0.02)
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=180)   # a bound for a stuck runner: seconds, also in a loaded suite
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    gate.touch()                                   # the resume and the uninterrupted run go through
    done = read_results(out / RESULTS_FILE)
    assert len(done) == 30
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and f"--resume {out}" in err
    finish = _cli_subprocess(["--resume", str(out), "-q"])
    stdout, err = finish.communicate(timeout=120)
    assert finish.returncode == 0, err
    assert f"{len(done)} already recorded" in stdout and (out / "report.md").is_file()
    clean = run(resolve_spec(load_spec_file(spec), fx.STUDIES), tmp_path / "clean")
    assert clean.ok == 60
    assert without_time(read_results(out / RESULTS_FILE)) == without_time(read_results(tmp_path / "clean" /
                                                                                       RESULTS_FILE))


def test_a_different_spec_in_the_run_dir_is_refused_unless_forced(tmp_path):
    out = tmp_path / "run"
    run(spec_of(trials=2), out)
    with pytest.raises(ConfigError, match=r"different spec \(params.scale: 1.0 -> 2.0\)"):
        run(spec_of(trials=2, params={"scale": 2}), out)
    assert run(spec_of(trials=4, workers=1), out).skipped == 4      # more trials / other workers: a resume
    result = run(spec_of(trials=2, params={"scale": 2}), out, force=True)
    assert result.skipped == 0 and result.ok == 4
    old = [p for p in out.iterdir() if p.name.startswith("old-")]
    assert len(old) == 1 and len(read_results(old[0] / RESULTS_FILE)) == 8
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not an experiment run directory"):
        run(spec_of(), tmp_path / "other")


def test_retry_failed_reruns_only_failed_trials(tmp_path):
    out = tmp_path / "run"
    run(spec_of(trials=4, params={"mode": "fail"}), out)
    result = run(spec_of(trials=4, params={"mode": "fail"}), out, retry_failed=True)
    assert (result.skipped, result.failed) == (4, 4)
    assert len(read_results(out / RESULTS_FILE)) == 8


def test_2400_trivial_trials_have_small_runner_overhead(tmp_path):
    studies = {"dummy": Study(name="dummy", description="", defaults={"agents": 2, "temperature": 0.0},
                              default_sweep={"agents": [2, 4, 6, 8], "temperature": [0.0, 0.7]},
                              default_trials=300, run_trial=lambda t, ctx: {"v": t.seed % 7},
                              report=lambda records, out: [])}
    for workers in (1, 2):
        spec = resolve_spec({"study": "dummy", "workers": workers}, studies)
        t0 = time.perf_counter()
        result = run_experiment(spec, studies["dummy"], tmp_path / f"w{workers}", progress=False)
        assert result.ok == 2400 and time.perf_counter() - t0 < 8.0


# ---------------------------------------------------------------------------------------------
# LLM sweeps: fallbacks, record -> replay
def _varying_replies():
    """Each reply differs (a counter), so identical prompts get different answers: replay must match per request."""
    counter = itertools.count()
    return lambda body: Reply(json.dumps({"reasoning": "r", "position": [float(next(counter) % 23)]}))


def _llm_spec(base_url: str, **raw):
    return resolve_spec({"study": "toy-llm", "trials": 3, "workers": 1,
                         "llm": {"backend": "openai", "base_url": base_url, "model": "fake", "concurrency": 4,
                                 "max_retries": 0}, **raw}, fx.STUDIES)


def test_replay_reproduces_a_recorded_llm_sweep_exactly_without_network(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAIServer(_varying_replies()) as srv:
        result = run(_llm_spec(srv.base_url), out)
        sent = srv.requests
    assert result.ok == 6 and len(sent) == 3 * (2 * 2 + 3 * 2)
    exchanges = [json.loads(line) for line in (out / TRANSCRIPTS_FILE).read_text().splitlines()]
    assert len({x["key"] for x in exchanges}) == len(exchanges) == len(sent)   # every request key unique
    # identical prompts (same start states in every trial) were told apart by their per-call seeds only
    first_prompts = [x for x in exchanges if x["tag"].endswith("|robot_0/round_0") and "agents=2#" in x["tag"]]
    assert len({json.dumps(x["request"]["messages"]) for x in first_prompts}) == 1
    assert len({x["request"]["seed"] for x in first_prompts}) == 3
    trial = next(t for t in expand(_llm_spec("http://x")) if t.key == "agents=2#1")
    x = next(x for x in exchanges if x["tag"] == "agents=2#1|robot_0/round_1")
    assert x["request"]["seed"] == call_seed(trial.seed, "robot_0/round_1", 0, 7)   # planner seed 7 (+ robot 0)

    spec = replay_spec(out, fx.STUDIES)                     # the server is stopped: any network use would fail
    assert spec.llm["backend"] == "replay"
    replayed = run(spec, tmp_path / "replay")
    assert replayed.ok == 6
    original = without_time(read_results(out / RESULTS_FILE))
    assert original == without_time(read_results(tmp_path / "replay" / RESULTS_FILE))
    assert {r["result"]["states"][-1][0] for r in original.values()} != {0.0}       # replies were used


def test_llm_fallbacks_and_errors_mark_trials_failed(tmp_path):
    with FakeOpenAIServer(lambda body: "no position here") as srv:
        result = run(_llm_spec(srv.base_url, trials=1, sweep={"agents": [2]}), tmp_path / "garbage")
    rec = next(iter(read_results(tmp_path / "garbage" / RESULTS_FILE).values()))
    assert result.failed == 1 and rec["reason"] == "LLM fallback (unparseable)" and rec["result"]["calls"] == 4
    with FakeOpenAIServer(default=500) as srv:
        run(_llm_spec(srv.base_url, trials=1, sweep={"agents": [2]}), tmp_path / "down")
    rec = next(iter(read_results(tmp_path / "down" / RESULTS_FILE).values()))
    assert rec["status"] == "failed" and rec["reason"] == "LLM fallback (llm_error)"
    assert rec["llm"] == {"calls": 4, "errors": 4}


def test_resume_drops_transcripts_of_unrecorded_trials(tmp_path):
    path = tmp_path / TRANSCRIPTS_FILE
    rows = [{"key": "k1", "tag": "agents=2#0|robot_0/round_0"}, {"key": "k2", "tag": "agents=2#1|robot_0/round_0"},
            {"key": "k3", "tag": "a|b=c#0|robot_1/round_0"}, {"key": "k4", "tag": "untagged"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"key": "k5", "ta')
    assert prune_transcripts(path, {"agents=2#0", "a|b=c#0"}) == 2
    assert [json.loads(line)["key"] for line in path.read_text().splitlines()] == ["k1", "k3", "k4"]


# ---------------------------------------------------------------------------------------------
# report and CLI
def test_report_has_counts_reasons_manifest_and_the_study_section(tmp_path):
    out = tmp_path / "run"
    run(spec_of(trials=4, params={"mode": "crash"}), out)
    report = write_report(out, fx.STUDIES).read_text()
    assert "**Trials:** 8 planned (2 grid point(s) x 4): **4 ok**, **4 failed**, 0 not run yet." in report
    assert "| 4 | ValueError: boom |" in report
    assert "- git_revision: `" in report and "study: toy" in report
    assert "ok values: 4, mean" in report
    assert (out / "trials.png").stat().st_size > 0 and (out / "toy_values.png").stat().st_size > 0


def test_report_of_an_interrupted_sweep_counts_missing_trials_and_survives_a_broken_study_report(tmp_path):
    out = tmp_path / "run"
    run(spec_of(trials=3), out)
    lines = (out / RESULTS_FILE).read_text().splitlines()
    (out / RESULTS_FILE).write_text("\n".join(lines[:4]) + "\n")
    broken = {"toy": Study(**{**fx.TOY.__dict__, "report": lambda records, d: 1 / 0})}
    with pytest.raises(ReportFailed, match="ZeroDivisionError"):
        write_report(out, broken)
    text = (out / "report.md").read_text()
    assert "**4 ok**, **0 failed**, 2 not run yet." in text and "The study's report failed" in text
    assert "ZeroDivisionError" in (out / LOG_FILE).read_text()


def test_cli_preset_run_writes_the_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    rc = cli.run(parse_cli(["experiment", "toy", "--trials", "2", "--sweep", "x=1,2,3", "--set", "scale=0.5",
                            "--workers", "1", "--out", str(out), "-q"]), studies=fx.STUDIES)
    assert rc == 0
    assert {"manifest.json", "results.jsonl", "report.md", "spec.yaml", "trials.png", "toy_values.png"} <= \
        {p.name for p in out.iterdir()}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["study"] == "toy" and manifest["seed"] == 0 and manifest["config"]["sweep"] == {"x": [1, 2, 3]}
    assert "6 trials: 6 ok, 0 failed" in capsys.readouterr().out
    assert cli.run(parse_cli(["report", str(out)]), studies=fx.STUDIES) == 0


def test_cli_out_that_is_a_file_is_a_config_error(tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    assert cli.run(parse_cli(["experiment", "toy", "--out", str(target)]), studies=fx.STUDIES) == 2
    assert "is not a directory" in capsys.readouterr().err and target.read_text() == "mine"


def test_llm_estimate_counts_requests_and_warns_about_the_embedded_model():
    spec = resolve_spec({"study": "toy-llm", "llm": {"backend": "embedded"}}, fx.STUDIES)
    text = cli.llm_estimate(spec, fx.STUDIES["toy-llm"])
    assert text.startswith("up to 20 LLM requests")            # 2 trials x (2 agents + 3 agents) x 2 rounds
    assert "about 1 min to 2 min" in text                       # 20 x 4-9 s / 1.2 (two slots) = 67-150 s
    one_slot = resolve_spec({"study": "toy-llm", "llm": {"backend": "embedded", "n_parallel": 1}}, fx.STUDIES)
    assert "about 1 min to 3 min" in cli.llm_estimate(one_slot, fx.STUDIES["toy-llm"])     # 80-180 s
    remote = resolve_spec({"study": "toy-llm", "llm": {"backend": "openai"}}, fx.STUDIES)
    assert "embedded" not in cli.llm_estimate(remote, fx.STUDIES["toy-llm"])
    assert cli.llm_estimate(resolve_spec({"study": "toy"}, fx.STUDIES), fx.TOY) == ""


def test_cli_list_prints_the_presets(capsys):
    assert cli.run(parse_cli(["experiment", "--list"]), studies=fx.STUDIES) == 0
    text = capsys.readouterr().out
    assert "toy-llm" in text and "2 point(s) x 3 trials" in text


@pytest.mark.parametrize("argv, message", [
    (["experiment", "nope"], "neither a spec file nor a preset"),
    (["experiment", "toy", "--set", "y=1"], "has no parameter 'y'"),
    (["experiment", "toy", "--sweep", "x="], "sweep.x is an empty list"),
    (["experiment", "toy", "--planner", "llm"], "has no parameter 'planner'"),
    (["experiment", "--replay", "somewhere", "--trials", "3"], "cannot be combined with --trials"),
    (["experiment", "--resume", "nowhere"], "not an experiment run directory"),
    (["report", "nowhere"], "not an experiment run directory"),
])
def test_cli_bad_input_exits_2_before_anything_runs(tmp_path, capsys, argv, message):
    out = tmp_path / "run"
    assert cli.run(parse_cli([*argv, *(["--out", str(out)] if argv[0] == "experiment" and "--resume" not in argv
                                       else [])]), studies=fx.STUDIES) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_list_shows_long_sweeps_compactly():
    from consensus.experiments.cli import compact_values

    assert compact_values([2, 4, 6]) == "[2, 4, 6]"
    tables = [f"table:{k}" for k in range(44)] + [f"memory_invariant:{k / 20}" for k in range(21)]
    assert compact_values(tables) == ("44 table values (table:0 .. table:43) + 21 memory_invariant values "
                                      "(memory_invariant:0.0 .. memory_invariant:1.0)")
    assert compact_values(list(range(2, 24))) == "22 values (2 .. 23)"
