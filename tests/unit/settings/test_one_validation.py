"""One validation (issue 28, part 7): ``consensus run`` (flags, ``--set``, a params file), the launch arguments, the
studies (``consensus experiment``: params and the spec's ``llm`` block) and the nodes' parameter descriptors check a
value through the same field ranges (the fields' ``param(bounds=...)``, ``FlatParams.field_problem``). A bad value is
one clear ``ConfigError`` (exit 2) before any run folder exists; every duration has a finite upper bound; a float is
finite; a key given twice in a YAML file and a transcript with no valid record are refused before anything starts."""
from __future__ import annotations

import dataclasses
import json
import math
import types

import pytest
import yaml

from consensus import cli, registry
from consensus.errors import ConfigError
from consensus.scenarios.aggregation.config import NegotiationConfig
from consensus.settings import INT64, FlatParams, LLMParams, RobotBaseConfig, field_ranges, load_params_file, read_yaml


def config_classes() -> dict[str, type]:
    """Every config class a run, a node or a study reads: the registered scenarios', the kernel nodes' and the
    negotiation studies'."""
    out = {sc.name: sc.config_cls for sc in registry.scenarios().values()
           if dataclasses.is_dataclass(sc.config_cls) and issubclass(sc.config_cls, FlatParams)}
    out.update(RobotBaseConfig=RobotBaseConfig, NegotiationConfig=NegotiationConfig)
    assert {"aggregation", "disaster", "naming-game-robots"} <= set(out)
    return out


CLASSES = config_classes()


def refused(main_args: list[str], capsys) -> str:
    """Run ``consensus <main_args>`` in this process; it must exit 2 with one line and no traceback: that line."""
    assert cli.main(main_args) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def no_runner(monkeypatch):
    """A scenario's runner that fails the test: a refused value must never reach it (no ROS, no run folder)."""
    real = registry.scenario

    def scenario(name):
        def runner(*_a, **_k):
            raise AssertionError("the run started although its config is invalid")
        return dataclasses.replace(real(name), runner=runner)

    monkeypatch.setattr(registry, "scenario", scenario)


# --------------------------------------------------------------------------------------------- consensus run
#: (--set KEY=VALUE, what the one error line says): the issue's probes and every kind of bound
BAD = [
    ("link_delay_s=5000", "link_delay_s must be in [0, 1000] (got 5000.0)"),      # the nodes' limit, now the CLI's
    ("link_delay_s=inf", "link_delay_s must be in [0, 1000] (got inf)"),
    ("duration_s=1e300", "duration_s must be in [0.001, 1e+06] (got 1e+300)"),
    ("duration_s=nan", "duration_s must be in [0.001, 1e+06] (got nan)"),
    ("settle_s=inf", "settle_s must be in [0, 1e+06] (got inf)"),
    ("control_period_s=20", "control_period_s must be in [0.001, 10] (got 20.0)"),
    ("llm_timeout_s=1e9", "llm_timeout_s must be in [0.001, 3600] (got 1000000000.0)"),
    ("target_timeout_s=-inf", "target_timeout_s must be in [0.001, 86400] (got -inf)"),
    ("sim_rate_hz=1e300", "sim_rate_hz must be in [0.001, 1000] (got 1e+300)"),
    ("num_robots=5000", "num_robots must be in [1, 1000] (got 5000)"),
    ("seed=18446744073709551616", "seed must be in [0, 9223372036854775807]"),
    ("leader=99999999999999999999999", "leader must be a 64-bit integer"),       # an int without bounds
    ("init_radius=nan", "init_radius must be in [1e-06, 1e+06] (got nan)"),
    ("converge_tol_m=inf", "converge_tol_m must be in [1e-06, 1e+06] (got inf)"),
]


@pytest.mark.parametrize("headless", [True, False], ids=["headless", "ros"])
@pytest.mark.parametrize("item, message", BAD, ids=[b[0].split("=")[0] + "-" + b[0].split("=")[1] for b in BAD])
def test_consensus_run_refuses_a_bad_value_before_any_folder(tmp_path, capsys, no_runner, item, message, headless):
    out = tmp_path / "runs" / "run"
    err = refused(["run", "aggregation", *(["--headless"] if headless else []), "--set", item, "--out", str(out)],
                  capsys)
    assert message in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("item, message", [
    ("link_delay_s: 5000", "link_delay_s must be in [0, 1000] (got 5000.0)"),
    ("link_delay_s: .inf", "link_delay_s must be in [0, 1000] (got inf)"),
    ("duration_s: 1.0e+300", "duration_s must be in [0.001, 1e+06] (got 1e+300)"),
    ("duration_s: .nan", "duration_s must be in [0.001, 1e+06] (got nan)"),
    ("workspace: [-10.0, .inf, -10.0, 10.0]", "workspace must hold finite numbers (got inf)"),
    ("initial_positions: [0, 0, 1, 1, 2, 2, .nan, 3]", "initial_positions"),
])
def test_a_params_file_is_checked_by_the_same_ranges(tmp_path, capsys, no_runner, item, message):
    from consensus.scenarios.aggregation.config import AggregationConfig
    from consensus.settings import ros_names

    key, value = item.split(": ")
    # the file as the parameters are written now, nested by group (a flat name adds its deprecation warning)
    group, leaf = ros_names(AggregationConfig)[key].split(".", 1)
    path = tmp_path / "params.yaml"
    path.write_text(f"/**:\n  ros__parameters:\n    {group}:\n      {leaf}: {value}\n")
    err = refused(["run", "aggregation", "--headless", "--config", str(path), "--out", str(tmp_path / "run")], capsys)
    assert str(path) in err and message in err
    assert not (tmp_path / "run").exists()


def test_a_good_value_still_runs(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["run", "aggregation", "--headless", "--planner", "average", "--set", "link_delay_s=1000",
                     "--set", "duration_s=6", "--out", str(out), "-q"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_spread_m"] >= 0 and json.loads((out / "manifest.json").read_text())["config"][
        "link_delay_s"] == 1000.0


# --------------------------------------------------------------------------------------------- launch arguments
@pytest.mark.needs("ros2_launch")
@pytest.mark.parametrize("key, value, message", [("num_robots", "5000", "num_robots must be in [1, 1000]"),
                                                 ("duration_s", "1e300", "duration_s must be in [0.001, 1e+06]")])
def test_launch_arguments_are_checked_by_the_same_ranges(monkeypatch, tmp_path, key, value, message):
    from support.ros2_tools import launch_actions

    with pytest.raises(ConfigError) as err:
        launch_actions("aggregation.launch.py", monkeypatch, **{key: value}, output_dir=tmp_path / "run")
    assert message in str(err.value)
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------------------------- studies
@pytest.mark.parametrize("args, message", [
    (["disaster", "--set", "round_time_s=1e300"], "round_time_s must be in [0.001, 3600] (got 1e+300)"),
    (["disaster", "--set", "target_timeout_s=.inf"], "target_timeout_s must be a finite number"),
    (["disaster", "--sweep", "round_time_s=5,4000"], "round_time_s must be in [0.001, 3600] (got 4000.0)"),
    (["consensus-1d", "--set", "llm_temperature=5"], "llm_temperature must be in [0, 2] (got 5.0)"),
    (["consensus-1d", "--set", "parse_retries=11"], "parse_retries must be in [0, 10] (got 11)"),
])
def test_a_study_checks_its_parameters_through_the_config_ranges(tmp_path, capsys, args, message):
    out = tmp_path / "sweeps" / "exp"
    err = refused(["experiment", *args, "--trials", "1", "--out", str(out)], capsys)
    assert message in err
    assert not (tmp_path / "sweeps").exists()


def test_a_sweeps_llm_block_is_checked_by_the_llm_groups_ranges(tmp_path, capsys):
    from consensus.experiments.spec import _LLM_RANGES

    ranges = field_ranges(LLMParams)
    for key in ("temperature", "max_tokens", "timeout_s", "max_retries", "concurrency"):
        assert _LLM_RANGES[key] == ranges[f"llm_{key}"], key
    spec = tmp_path / "spec.yaml"
    spec.write_text("study: consensus-1d\ntrials: 1\nparams: {planner: llm}\n"
                    "llm: {backend: openai, base_url: 'http://127.0.0.1:9/v1', model: m, timeout_s: 1.0e+9}\n")
    err = refused(["experiment", str(spec), "--out", str(tmp_path / "exp")], capsys)
    assert "llm.timeout_s must be in [0.001, 3600.0]" in err and not (tmp_path / "exp").exists()


# --------------------------------------------------------------------------------------------- the nodes
def _samples(lo, hi) -> list:
    if isinstance(lo, int) and isinstance(hi, int):
        return [lo, hi, (lo + hi) // 2] + [v for v in (lo - 1, hi + 1) if INT64[0] <= v <= INT64[1]]
    span = max(1.0, abs(hi - lo))
    return [float(lo), float(hi), (lo + hi) / 2, hi + 1e-3 * span, lo - 1e-3 * span, hi * 10 + 1, math.inf,
            -math.inf, math.nan]


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_the_node_descriptors_are_the_settings_ranges_and_refuse_what_the_cli_refuses(name):
    """Each field's ROS descriptor (what a node declares) has exactly the field's range, and ROS's own range check
    accepts a value exactly when the settings' check does, for every ranged field of every config: a value
    ``consensus run`` accepted is never refused by a node."""
    pytest.importorskip("rclpy")
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from consensus.ros.params import config_descriptors

    cls = CLASSES[name]
    ranges, field_types = cls.field_ranges(), cls.field_types()
    ros = types.SimpleNamespace(PARAM_REL_TOL=Node.PARAM_REL_TOL)     # what the range checks read of the node
    descriptors = config_descriptors(cls)
    assert set(descriptors) == set(cls.field_names())
    for field, desc in descriptors.items():
        kind = field_types[field]
        if field not in ranges or kind not in (int, float):
            assert not desc.floating_point_range and not desc.integer_range, (name, field)
            continue
        lo, hi = ranges[field]
        if kind is float:
            assert not desc.integer_range and len(desc.floating_point_range) == 1, (name, field)
            rng = desc.floating_point_range[0]
            assert (rng.from_value, rng.to_value, rng.step) == (float(lo), float(hi), 0.0), (name, field)
            check = Node._apply_floating_point_range
        else:
            assert not desc.floating_point_range and len(desc.integer_range) == 1, (name, field)
            rng = desc.integer_range[0]
            assert (rng.from_value, rng.to_value, rng.step) == (lo, hi, 1), (name, field)
            check = Node._apply_integer_range
        for value in _samples(lo, hi):
            value = kind(value) if kind is int else float(value)
            ros_ok = check(ros, Parameter(field, value=value), rng).successful
            assert ros_ok == (cls.field_problem(field, value) is None), (name, field, value)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_ranged_field_is_checked_by_validate(name):
    """``validate`` (``consensus run``, a params file, a launch argument, a study's trial and a node's declared
    parameters all go through it) refuses each ranged field just outside its range, naming the field."""
    cls = CLASSES[name]
    base = cls().to_dict()
    for field, (lo, hi) in cls.field_ranges().items():
        kind = cls.field_types()[field]
        beyond = [hi + 1 if kind is int else hi + 1e-3 * max(1.0, abs(hi))]
        beyond += [lo - 1 if kind is int else lo - 1e-3 * max(1.0, abs(lo))]
        for value in beyond:
            with pytest.raises(ConfigError) as err:
                cls.from_dict({**base, field: value})
            assert field in str(err.value), (name, field, value, str(err.value))


# --------------------------------------------------------------------------------------------- the rules
@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_duration_and_rate_has_a_finite_range_that_holds_its_default(name):
    cls = CLASSES[name]
    ranges, defaults = cls.field_ranges(), cls().to_dict()
    timed = [f for f, kind in cls.field_types().items() if kind is float and f.endswith(("_s", "_hz"))]
    for field in timed:
        assert field in ranges, (name, field)
        lo, hi = ranges[field]
        assert 0 <= lo <= defaults[field] <= hi < math.inf, (name, field)
    cls().validate()


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_no_float_field_takes_inf_or_nan(name):
    """No field documents .inf or .nan today (none is ``param(nonfinite=True)``), so every float field refuses them,
    naming the field, and so does every list of floats."""
    cls = CLASSES[name]
    base = cls().to_dict()
    for field, kind in cls.field_types().items():
        if field in cls._field_rules()[1]:
            continue
        if kind is float:
            bad = [math.inf, -math.inf, math.nan]
        elif kind == list[float] and base[field]:
            bad = [[math.inf] + base[field][1:], [math.nan] + base[field][1:]]
        else:
            continue
        for value in bad:
            with pytest.raises(ConfigError) as err:
                cls.from_dict({**base, field: value})
            assert field in str(err.value), (name, field, value, str(err.value))


@pytest.mark.parametrize("name", ["aggregation", "disaster", "naming-game", "naming-game-robots"])
def test_the_packaged_params_files_pass_the_ranges(name):
    from consensus.cli import _default_config

    sc = registry.scenario(name)
    path = _default_config(sc.config_file)
    assert path is not None
    sc.config_cls.from_dict(load_params_file(path), source=str(path))


# --------------------------------------------------------------------------------------------- duplicate keys
def test_a_key_given_twice_is_an_error_naming_the_key_and_its_lines(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("/**:\n  ros__parameters:\n    num_robots: 3\n    seed: 1\n    num_robots: 5\n")
    with pytest.raises(ConfigError) as err:
        load_params_file(path)
    assert str(path) in str(err.value) and "'num_robots'" in str(err.value) and "lines 3 and 5" in str(err.value)
    top = tmp_path / "top.yaml"
    top.write_text("/**:\n  ros__parameters: {seed: 1}\n/**:\n  ros__parameters: {seed: 2}\n")
    with pytest.raises(ConfigError, match=r"'/\*\*' is given twice .*lines 1 and 3"):
        read_yaml(top, "config file")


def test_the_same_key_in_two_mappings_and_merge_keys_are_fine(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("a: {x: 1}\nb: {x: 2}\nbase: &b {seed: 1, num_robots: 3}\nrun:\n  <<: *b\n  seed: 7\n")
    assert read_yaml(path, "file") == {"a": {"x": 1}, "b": {"x": 2}, "base": {"seed": 1, "num_robots": 3},
                                       "run": {"seed": 7, "num_robots": 3}}
    assert yaml.safe_load(path.read_text())["run"]["seed"] == 7


def test_a_duplicate_key_stops_consensus_run_and_a_sweep_spec(tmp_path, capsys, no_runner):
    params = tmp_path / "params.yaml"
    params.write_text("/**:\n  ros__parameters:\n    link_delay_s: 0.1\n    link_delay_s: 0.2\n")
    err = refused(["run", "aggregation", "--headless", "--config", str(params), "--out", str(tmp_path / "run")],
                  capsys)
    assert "'link_delay_s' is given twice" in err and "lines 3 and 4" in err and not (tmp_path / "run").exists()
    spec = tmp_path / "spec.yaml"
    spec.write_text("study: consensus-1d\ntrials: 2\ntrials: 3\n")
    err = refused(["experiment", str(spec), "--out", str(tmp_path / "exp")], capsys)
    assert "'trials' is given twice" in err and "lines 2 and 3" in err and not (tmp_path / "exp").exists()


# --------------------------------------------------------------------------------------------- replay
def _garbage(path):
    path.write_text('not json\n{"v": 1, "tag": "no key"}\n[1, 2]\n\n{"key": 12}\n')
    return path


def test_a_transcript_with_no_valid_record_is_refused(tmp_path):
    from consensus.llm.transcripts import ReplayClient, TranscriptStore, check_replayable

    bad = _garbage(tmp_path / "bad.jsonl")
    for load in (check_replayable, ReplayClient, lambda p: TranscriptStore(p).load()):
        with pytest.raises(ConfigError, match=r"has no valid record \(its 4 non-empty line\(s\) are not records\)"):
            load(bad)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match=r"has no valid record \(it is empty\)"):
        check_replayable(empty)
    with pytest.raises(ConfigError, match="transcript file not found"):
        check_replayable(tmp_path / "nope.jsonl")
    good = _garbage(tmp_path / "good.jsonl")
    with open(good, "a") as fh:
        fh.write(json.dumps({"v": 1, "key": "k", "response": "hi"}) + "\n")
    check_replayable(good)
    assert [r["key"] for r in TranscriptStore(good).load()] == ["k"]


@pytest.mark.parametrize("headless", [True, False], ids=["headless", "ros"])
def test_consensus_run_refuses_replaying_a_transcript_with_no_valid_record(tmp_path, capsys, no_runner, headless):
    bad = _garbage(tmp_path / "transcripts.jsonl")
    out = tmp_path / "runs" / "run"
    err = refused(["run", "aggregation", *(["--headless"] if headless else []), "--planner", "llm", "--replay",
                   str(bad), "--out", str(out)], capsys)
    assert f"transcript {bad} has no valid record" in err and not (tmp_path / "runs").exists()


def test_a_sweep_replay_of_a_transcript_with_no_valid_record_is_refused(tmp_path, capsys):
    from consensus.experiments.spec import dump_spec, resolve_spec

    run = tmp_path / "c1d"
    run.mkdir()
    spec = resolve_spec({"study": "consensus-1d", "trials": 1, "params": {"planner": "llm"},
                         "llm": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}},
                        registry.all_studies())
    (run / "spec.yaml").write_text(dump_spec(spec))
    _garbage(run / "transcripts.jsonl")
    err = refused(["experiment", "--replay", str(run), "--out", str(tmp_path / "again")], capsys)
    assert "has no valid record" in err and not (tmp_path / "again").exists()
