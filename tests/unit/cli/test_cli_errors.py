"""One error boundary for every command: each bad invocation below ends with a short message on stderr and a
non-zero exit status, never a Python traceback, and starts nothing."""
from __future__ import annotations

from pathlib import Path

import pytest

from consensus import cli

BAD_UTF8 = b"\xff\xfe not text"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "binary.yaml").write_bytes(BAD_UTF8)
    (tmp_path / "broken.yaml").write_text("/**: [unclosed\n")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "a_file").write_text("")
    run = tmp_path / "earlier_run"
    run.mkdir()
    (run / "summary.json").write_text("{}")
    return tmp_path


# (argv, expected exit status, a piece of the message); {d} is the test's temp dir
CASES = [
    # consensus run aggregation
    ("run aggregation --headless --robots 0", 2, "num_robots"),
    ("run aggregation --headless --robots 1", 2, "at least 2"),
    ("run aggregation --headless --set nonsense=1", 2, "unknown parameter 'nonsense'"),
    ("run aggregation --headless --set novalue", 2, "KEY=VALUE"),
    ("run aggregation --headless --set v_max=fast", 2, "v_max"),
    ("run aggregation --headless --set llm_concurrency=0", 2, "llm_concurrency"),
    ("run aggregation --headless --config {d}/missing.yaml", 2, "not found"),
    ("run aggregation --headless --config {d}/binary.yaml", 2, "not UTF-8"),
    ("run aggregation --headless --config {d}/broken.yaml", 2, "not valid YAML"),
    ("run aggregation --headless --config {d}/list.yaml", 2, "mapping"),
    ("run aggregation --headless --topology custom", 2, "adjacency"),
    ("run aggregation --headless --planner llm --replay {d}/missing.jsonl", 2, "missing.jsonl"),
    ("run aggregation --headless --planner llm --backend openai --model m --rounds 1 --out {d}/r1", 1, "API key"),
    ("run aggregation --headless --planner average --out {d}/a_file", 2, "cannot create"),
    ("run aggregation --headless --planner average --out {d}/earlier_run", 2, "already holds a run"),
    # consensus run disaster
    ("run disaster --headless --robots 0", 2, "num_robots"),
    ("run disaster --headless --set llm_temperature=9", 2, "llm_temperature"),
    ("run disaster --headless --set parse_retries=-3", 2, "parse_retries"),
    ("run disaster --headless --baseline random --mode explicit", 2, "implicit mode"),
    ("run disaster --headless --config {d}/binary.yaml", 2, "not UTF-8"),
    ("run disaster --headless --planner llm --backend openai --model m --rounds 1 --out {d}/r2", 1, "API key"),
    ("run disaster --headless --out {d}/earlier_run", 2, "already holds a run"),
    # consensus experiment / report
    ("experiment no-such-preset", 2, "neither a spec file nor a preset"),
    ("experiment {d}/binary.yaml", 2, "UTF-8"),
    ("experiment {d}/broken.yaml", 2, "YAML"),
    ("experiment consensus-1d --set nonsense=1 --out {d}/e1", 2, "nonsense"),
    ("experiment consensus-1d --set agents=3 --out {d}/e2", 2, "'agents' is now called 'num_agents'"),
    ("experiment consensus-1d --sweep temperature=0,1 --out {d}/e3", 2, "now called 'llm_temperature'"),
    ("experiment --resume {d}/missing", 2, "missing"),
    ("report {d}/missing", 2, "missing"),
]


@pytest.mark.parametrize("argv, status, message", CASES, ids=[c[0].split(" {")[0] for c in CASES])
def test_bad_invocation_is_one_clear_line(argv, status, message, files, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(files)                    # a run without --out would go to ./runs: here, not the checkout
    before = sorted(str(p.relative_to(files)) for p in files.rglob("*"))
    code = cli.main(argv.format(d=files).split())
    err = capsys.readouterr().err
    assert code == status, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("consensus")]
    assert len(lines) == 1 and message in lines[0], err
    if status == 2:                             # refused: nothing created, not even an empty runs/ folder
        assert sorted(str(p.relative_to(files)) for p in files.rglob("*")) == before


@pytest.mark.parametrize("argv, message", [
    ("run aggregation --headless --replay {d}/missing.jsonl", "calls no LLM"),
    ("run aggregation --planner llm --replay {d}/missing.jsonl", "transcript file not found"),
    ("run disaster --headless --planner llm --replay {d}/missing.jsonl", "transcript file not found"),
    ("run naming-game --set policy=table:{d}/nope.zip#gpt-4o/his,her", "no q-tables file"),
    ("run naming-game --set policy=table:nope.zip#gpt-4o/his,her", "CONSENSUS_NAMING_TABLES"),
])
def test_a_refused_run_leaves_nothing_on_disk(argv, message, files, capsys, monkeypatch):
    """Refused before anything starts (no ROS node either): one line, exit 2, and no run folder in ./runs."""
    monkeypatch.chdir(files)
    monkeypatch.setenv("CONSENSUS_NAMING_TABLES", str(files / "tables"))
    (files / "tables").mkdir()
    code = cli.main(argv.format(d=files).split())
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (files / "runs").exists()


def test_a_run_refused_after_its_folder_was_made_removes_it(tmp_path, monkeypatch, capsys):
    """The boundary's safety net: a ConfigError raised by a runner once the run directory exists removes that
    directory and the parents the command created, and only those."""
    from consensus.errors import ConfigError
    import dataclasses

    from consensus import registry
    from consensus.runs.rundir import new_run_dir

    def refuse(cfg, out, **_):
        new_run_dir(out)
        (Path(out) / "params.yaml").write_text("x")
        raise ConfigError("refused late")
    sc = registry.scenario("aggregation")
    monkeypatch.setitem(registry._SCENARIOS, "aggregation", dataclasses.replace(sc, runner=refuse))
    keep = tmp_path / "kept"
    keep.mkdir()
    assert cli.main(["run", "aggregation", "--headless", "--out", str(keep / "a" / "b")]) == 2
    assert "refused late" in capsys.readouterr().err
    assert keep.exists() and list(keep.iterdir()) == []


def test_two_runs_in_one_second_get_two_default_folders(tmp_path, monkeypatch):
    """The default run folder is named by the second; a second run within that second gets ``-2`` (found by the
    docs test on an idle machine: two quick headless runs collided and the second was refused)."""
    import datetime as dt

    from consensus.runs import rundir

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return dt.datetime(2026, 11, 26, 13, 23, 50)
    monkeypatch.setattr(rundir._dt, "datetime", Frozen)
    first = rundir.new_run_dir(rundir.default_run_dir("disaster", tmp_path))
    (first / "summary.json").write_text("{}")
    second = rundir.default_run_dir("disaster", tmp_path)
    assert first.name == "disaster-20261126-132350" and second.name == "disaster-20261126-132350-2"
    assert rundir.new_run_dir(second) == second.resolve()


@pytest.mark.parametrize("argv", ["run", "run nosuchscenario", "run aggregation --robots many", "model fly",
                                  "run disaster --strategy single", "experiment --trials 0 consensus-1d"])
def test_argument_errors_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv.split())
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error:" in err


def test_an_unexpected_exception_is_one_line_with_exit_70(capsys, monkeypatch):
    monkeypatch.delenv("CONSENSUS_DEBUG", raising=False)

    def boom() -> int:
        raise RuntimeError("something broke")
    assert cli.error_boundary(boom, "consensus") == cli.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RuntimeError: something broke" in err and "Traceback" not in err


def test_os_errors_and_interrupts_map_to_their_exit_codes(capsys):
    def missing() -> int:
        raise FileNotFoundError(2, "No such file or directory", "/nowhere/x")

    def interrupted() -> int:
        raise KeyboardInterrupt
    assert cli.error_boundary(missing, "consensus") == cli.EXIT_FAILED
    assert cli.error_boundary(interrupted, "consensus") == cli.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert "/nowhere/x" in err and "interrupted" in err and "Traceback" not in err


@pytest.mark.ros
@pytest.mark.parametrize("exe, params, message", [
    ("sim", ["-p", "num_robots:=0"], "num_robots"),
    ("robot", ["-p", "topology:=hexagon"], "topology"),
    ("drone", ["-p", "llm_temperature:=9.0"], "llm_temperature"),
    ("disaster_grid", ["-p", "mode:=telepathy"], "mode"),
])
def test_a_node_main_with_bad_parameters_is_one_line_and_exit_2(exe, params, message, tmp_path):
    import subprocess

    from consensus.runs.ros_runner import executable_command

    cmd = executable_command(exe) + ["--ros-args", "-p", f"output_dir:={tmp_path}", *params]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith(f"[{exe}]") or ln.startswith("[")]
    assert any(message in ln for ln in lines), done.stderr
