"""The naming game as a scenario: config, `consensus run naming-game` (run directory) and the paper-4 presets on the
experiment runner (small runs; the published tables are read from ../shared when present)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from consensus import cli
from consensus.errors import ConfigError
from consensus.experiments.study import Trial, TrialContext
from consensus.registry import all_studies, scenarios
from consensus.scenarios.naming_game import study
from consensus.scenarios.naming_game.config import NamingGameConfig, load_naming_game_config

ROOT = Path(__file__).resolve().parents[3]
TABLES = ROOT.parent / "shared" / "data" / "naming-game" / "q_tables.json"
needs_tables = pytest.mark.skipif(not TABLES.is_file(), reason=f"published q tables not found at {TABLES} "
                                                                  "(../shared is not on a user's machine)")


def test_registered_with_its_presets_and_packaged_config():
    assert "naming-game" in scenarios()
    names = set(all_studies())
    assert {"naming-game-trajectories", "naming-game-bias", "naming-game-size", "naming-game-time",
            "naming-game-meanfield"} <= names
    from consensus.settings import load_params_file
    assert NamingGameConfig.from_dict(load_params_file(ROOT / "config" / "naming_game.yaml")) == NamingGameConfig()


@pytest.mark.parametrize("key, value, message", [
    ("num_agents", 1, "num_agents .N. must be at least 2"), ("num_agents", 0, "num_agents"),
    ("max_population_rounds", 0, "max_population_rounds"), ("memory", 7, "memory"), ("memory", 0, "memory"),
    ("policy", "fixed_bias:1.5", "P in"), ("policy", "oracle", "unknown policy"), ("words", "a,a", "words"),
    ("threshold", 0.4, "threshold"), ("runs", 0, "runs"),
])
def test_config_rejects_bad_values(key, value, message):
    with pytest.raises(ConfigError, match=message):
        NamingGameConfig.from_dict({key: value})


def test_run_writes_a_reproducible_run_directory(tmp_path, capsys):
    argv = ["run", "naming-game", "--agents", "6", "--seed", "4", "--set", "policy=memory_invariant:0.7",
            "--set", "runs=200", "--set", "memory=2"]
    assert cli.main(argv + ["--out", str(tmp_path / "a")]) == 0
    assert cli.main(argv + ["--out", str(tmp_path / "b")]) == 0
    assert "collective bias toward" in capsys.readouterr().out
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in "ab")
    for key in ("collective_bias", "sem", "converged", "time_mode", "time_mean"):
        assert a[key] == b[key], key
    assert (tmp_path / "a" / "runs.jsonl").read_text() == (tmp_path / "b" / "runs.jsonl").read_text()
    assert a["converged"] == 200 and a["collective_bias"] > 0.5          # a bias toward word 0 is amplified
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["scenario"] == "naming_game" and manifest["policy"]["source"] == "memory_invariant"
    policy = json.loads((tmp_path / "a" / "policy.json").read_text())
    assert len(policy["tables"][0]["q"]) == 21                             # (4^3 - 1) / 3 states for H = 2
    assert (tmp_path / "a" / "word_use.png").is_file()


def test_a_table_policy_needs_a_file_and_a_choice(tmp_path, monkeypatch):
    monkeypatch.delenv(study.TABLES_ENV, raising=False)
    with pytest.raises(ConfigError, match="needs the q tables"):
        study.resolve_policy({**study.DEFAULTS, "policy": "table:0"})
    with pytest.raises(ConfigError, match="not found"):
        study.resolve_policy({**study.DEFAULTS, "policy": "table:0", "tables": str(tmp_path / "none.json")})
    with pytest.raises(ConfigError, match="unknown policy"):
        study.resolve_policy({**study.DEFAULTS, "policy": "oracle:1"})


@needs_tables
def test_a_published_table_trial_and_its_report(tmp_path):
    params = {**study.DEFAULTS, "policy": "table:gpt-4o/his,her", "tables": str(TABLES), "runs": 300,
              "trajectory": True}
    result = study.run_trial(Trial("k", 0, 11, params), TrialContext())
    assert result["label"] == "gpt-4o/his,her" and result["converged"] == 300
    assert result["individual_bias"] < 0.5 < result["collective_bias"]     # paper Fig. 2: GPT converges on 'his'
    assert sum(sum(h) for h in result["time_hist"].values()) == 300 and result["time_mode"] >= 3
    assert result["trajectories"]["0"]["examples"]
    again = study.run_trial(Trial("k", 0, 11, params), TrialContext())
    assert again["collective_bias"] == result["collective_bias"]           # seeded
    records = [{"status": "ok", "params": params, "result": result}]
    lines = study.report_trajectories(records, tmp_path)
    assert any("gpt-4o/his,her" in ln for ln in lines)
    assert (tmp_path / "trajectories.png").is_file() and (tmp_path / "bias.png").is_file()


@needs_tables
def test_the_experiment_command_runs_a_preset_end_to_end(tmp_path):
    code = cli.main(["experiment", "naming-game-time", "--set", f"tables={TABLES}", "--set", "runs=50",
                     "--sweep", "num_agents=6,24", "--out", str(tmp_path / "t"), "-q"])
    assert code == 0
    report = (tmp_path / "t" / "report.md").read_text()
    assert "consensus_time.png" in report and "| 24 |" in report


# ------------------------------------------------------------------------------ one meaning per word (issue 17)
RENAMED = [("num_robots", "num_agents"), ("max_rounds", "max_population_rounds")]


@pytest.mark.parametrize("old, new", RENAMED)
def test_old_names_are_refused_naming_the_new_one_in_a_params_file_and_in_set(old, new, tmp_path, capsys):
    bad = tmp_path / "old.yaml"
    bad.write_text(f"/**:\n  ros__parameters:\n    {old}: 12\n")
    with pytest.raises(ConfigError, match=f"parameter '{old}' is now called '{new}'"):
        load_naming_game_config(bad)
    for argv in (["--config", str(bad)], ["--set", f"{old}=12"]):
        code = cli.main(["run", "naming-game", *argv, "--out", str(tmp_path / "never")])
        err = capsys.readouterr().err
        assert code == 2 and f"is now called '{new}'" in err, err
    assert not (tmp_path / "never").exists()


def test_the_robots_flag_of_the_population_is_refused_naming_the_agents_flag(tmp_path, capsys):
    code = cli.main(["run", "naming-game", "--robots", "6", "--out", str(tmp_path / "never")])
    err = capsys.readouterr().err
    assert code == 2 and "--robots" in err and "--agents" in err and "num_agents" in err, err
    assert not (tmp_path / "never").exists()
    with pytest.raises(SystemExit):
        cli.main(["run", "naming-game", "--help"])
    shown = capsys.readouterr().out
    assert "--agents" in shown and "--robots" not in shown              # the help shows the new flag only
    with pytest.raises(SystemExit):
        cli.main(["run", "naming-game-robots", "--help"])
    shown = capsys.readouterr().out
    assert "--robots" in shown and "--agents" not in shown              # a fleet counts robots


def test_the_population_is_num_agents_and_the_cap_max_population_rounds(tmp_path):
    """The sim plays ``num_agents`` agents for at most ``max_population_rounds`` rounds (a cap of 1 round: no
    population of 6 can converge, the window of 3N interactions is not full yet)."""
    cfg = load_naming_game_config(None, num_agents=6, max_population_rounds=1, runs=5,
                                  policy="memory_invariant:1.0", memory=1)
    assert "num_robots" not in cfg.field_names() and "max_rounds" not in cfg.field_names()
    from consensus.scenarios.naming_game.runner import run

    summary = run(cfg, tmp_path / "r", echo=lambda s: None)
    assert summary["N"] == 6 and summary["converged"] == 0 and summary["interactions"] == 5 * 6
    again = run(cfg.replace(max_population_rounds=3), tmp_path / "s", echo=lambda s: None)
    assert again["converged"] == 5 and again["interactions"] == 5 * 3 * 6


@pytest.mark.parametrize("old, new", RENAMED + [("agents", "num_agents")])
def test_old_names_are_refused_in_an_experiment_spec_and_its_flags(old, new, tmp_path, capsys):
    from consensus.experiments.spec import apply_overrides, resolve_spec

    studies = all_studies()
    for section, value in (("params", 12), ("sweep", [12, 24])):
        with pytest.raises(ConfigError, match=f"'{old}' is now called '{new}' \\(study naming-game-bias"):
            resolve_spec({"study": "naming-game-bias", section: {old: value}}, studies, source="spec.yaml")
    for flag in ("--set", "--sweep"):
        with pytest.raises(ConfigError, match=f"{flag} {old}=12: parameter '{old}' is now called '{new}'"):
            apply_overrides({"study": "naming-game-bias"}, studies, **{flag[2:] + "s": [f"{old}=12"]})
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"study: naming-game-size\nparams:\n  {old}: 12\n")
    code = cli.main(["experiment", str(spec), "--out", str(tmp_path / "never"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and f"is now called '{new}'" in err, err
    code = cli.main(["experiment", "naming-game-time", "--set", f"{old}=12", "--out", str(tmp_path / "never"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and f"is now called '{new}'" in err, err
    assert not (tmp_path / "never").exists()


def test_the_study_checks_its_parameters_through_the_config_class_with_its_names():
    from consensus.experiments.spec import resolve_spec

    studies = all_studies()
    assert {"num_agents", "max_population_rounds"} <= set(studies["naming-game-bias"].defaults)
    with pytest.raises(ConfigError, match=r"num_agents \(N\) must be at least 2"):
        resolve_spec({"study": "naming-game-size", "sweep": {"num_agents": [1, 24]}}, studies)
    with pytest.raises(ConfigError, match="max_population_rounds must be in"):
        resolve_spec({"study": "naming-game-bias", "params": {"max_population_rounds": 0}}, studies)
    ok = resolve_spec({"study": "naming-game-time", "params": {"max_population_rounds": 50}}, studies)
    assert ok.params["max_population_rounds"] == 50 and ok.sweep["num_agents"] == [24, 96, 384, 1536]
