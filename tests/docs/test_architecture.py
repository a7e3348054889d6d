"""docs/architecture.md is the true map of the code: its module map names every module of src/consensus and no
module that does not exist; its "How to add a scenario" example, run as written, gives a working scenario."""
from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
SRC = ROOT / "src" / "consensus"


def _map_block() -> list[str]:
    text = DOC.read_text()
    section = text[text.index("## Map"):text.index("### Kernel packages")]
    block = section[section.index("```\nsrc/consensus/") + 4:]
    return block[:block.index("```")].splitlines()


def _strip_notes(text: str) -> str:
    """``a (note, with commas), b`` -> ``a, b`` (nested parentheses too)."""
    while True:
        new = re.sub(r"\([^()]*\)", "", text)
        if new == text:
            return new
        text = new


def documented_modules() -> set[str]:
    """Dotted module paths (relative to consensus) the map names."""
    entries: list[tuple[int, str]] = []                 # (indent, text) with continuation lines joined
    for line in _map_block()[1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if entries and indent > 6 and not re.match(r"^\s{2,4}\S", line):
            entries[-1] = (entries[-1][0], entries[-1][1] + " " + line.strip())
        else:
            entries.append((indent, line.strip()))
    out: set[str] = set()
    parent = ""
    for indent, text in entries:
        head, _, rest = text.partition(" ")
        if head.startswith(("scripts/", "config/", "launch/", "tools/")):
            continue                                    # the repository's other folders
        if head.endswith(".py"):                        # a top-level module
            out.add(head[:-3])
            continue
        if not head.endswith("/") or head.startswith(("scripts", "config", "launch", "tools")):
            continue
        pkg = head[:-1]
        if pkg == "scenarios":
            parent = "scenarios."
            continue
        prefix = (parent if indent > 2 else "") + pkg
        if indent <= 2:
            parent = ""
        modules_text = rest.split(" — ")[0]
        # subpackages: "sub/ (a, b)" -> sub.a, sub.b
        for sub, inner in re.findall(r"(\w+)/ \(([^()]*)\)", modules_text):
            for name in inner.split(","):
                out.add(f"{prefix}.{sub}.{_strip_notes(name).strip()}")
        modules_text = re.sub(r"\w+/ \([^()]*\)", "", modules_text)
        for name in _strip_notes(modules_text).split(","):
            name = name.strip()
            if name:
                out.add(f"{prefix}.{name}")
    return out


def existing_modules() -> set[str]:
    return {".".join(p.relative_to(SRC).with_suffix("").parts) for p in SRC.rglob("*.py")
            if p.name != "__init__.py" and "__pycache__" not in p.parts}


def test_the_module_map_names_every_module_and_no_other():
    documented, existing = documented_modules(), existing_modules()
    assert len(existing) > 100                        # the scan sees the package
    missing = sorted(existing - documented)
    assert not missing, f"modules missing from docs/architecture.md's map: {missing}"
    assert not documented - existing, f"the map names modules that do not exist: {sorted(documented - existing)}"


# ----------------------------------------------------------------------------------------------- add a scenario
def _example_blocks() -> dict[str, str]:
    """The "How to add a scenario" section's python blocks, by the file their first comment line names."""
    return _blocks_of("How to add a scenario")


def _formation(tmp_path, monkeypatch, **more: str) -> None:
    """The doc's example files (and ``more``: file name -> code) written as they are into a throwaway scenario
    package ``formation``, registered in a throwaway copy of the scenario table."""
    import consensus.scenarios
    from consensus import registry

    blocks = {**_example_blocks(), **more}
    assert {"formation/__init__.py", "formation/config.py", "formation/runner.py"} <= set(blocks), sorted(blocks)
    pkg = tmp_path / "scenarios_extra" / "formation"
    pkg.mkdir(parents=True)
    for name, code in blocks.items():
        (pkg.parent / name).write_text(code)
    registry.scenarios()      # the real table loaded first: monkeypatch then restores it whole (a scenario imported
    #                           while the throwaway table is in place would register there only, and be lost)
    monkeypatch.setattr(consensus.scenarios, "__path__", [*consensus.scenarios.__path__, str(pkg.parent)])
    monkeypatch.setattr(registry, "_LOADED", False)
    monkeypatch.setattr(registry, "_SCENARIOS", {})
    for mod in [m for m in sys.modules if m.startswith("consensus.scenarios.formation")]:
        monkeypatch.delitem(sys.modules, mod)


def _forget_formation() -> None:
    for mod in [m for m in sys.modules if m.startswith("consensus.scenarios.formation")]:
        sys.modules.pop(mod, None)


def test_the_add_a_scenario_example_is_what_the_code_does(tmp_path, monkeypatch):
    """The doc's example files, written as they are into a throwaway scenario package, register a scenario that
    `consensus run formation --headless` runs to a summary; its config is refused on bad input like every config."""
    from consensus import cli, registry
    from consensus.errors import ConfigError

    _formation(tmp_path, monkeypatch)
    try:
        assert "formation" in registry.scenarios()
        out = tmp_path / "run"
        assert cli.main(["run", "formation", "--headless", "--robots", "5", "--set", "spacing_m=2.0",
                         "--out", str(out), "-q"]) == 0
        summary = (out / "summary.json").read_text()
        assert '"num_robots": 5' in summary and '"spacing_m": 2.0' in summary
        from consensus.scenarios.formation.config import FormationConfig

        with pytest.raises(ConfigError, match="spacing_m"):
            FormationConfig().replace(spacing_m=-1.0)
        assert cli.main(["run", "formation", "--headless", "--set", "spacing_m=-1", "--out",
                         str(tmp_path / "bad"), "-q"]) == 2
        assert not (tmp_path / "bad").exists()
    finally:
        _forget_formation()


#: the ROS part of the example (step 4's "A ROS scenario adds ..."): its processes and its registration
ROS_FORMATION = {
    "formation/processes.py": textwrap.dedent("""\
        from consensus.runs.processes import ProcessSpec, robot_specs
        from consensus.sims import sim_processes


        def formation_processes(cfg, *, use_sim_time=False):
            return [*sim_processes(cfg, {"use_sim_time": False}), *robot_specs("formation_robot", cfg, {}),
                    ProcessSpec("formation_judge", "judge", ends_run=True)]
        """),
    "formation/__init__.py": textwrap.dedent("""\
        from consensus.registry import Scenario, lazy, register
        from consensus.scenarios.formation.config import FormationConfig

        register(Scenario(
            name="formation", summary="robots in a line (an example scenario)", config_cls=FormationConfig,
            runner=lazy("consensus.scenarios.formation.runner:run"), config_file="formation.yaml",
            processes=lazy("consensus.scenarios.formation.processes:formation_processes"),
            launch_args=("spacing_m",),
        ))
        """),
}


def test_a_ros_scenario_is_its_folder_plus_its_launch_and_config_files(tmp_path, monkeypatch):
    """Issue 42: a scenario that runs under ``ros2 launch`` is its package folder plus its launch file and its
    parameters file (its own group nested: ``formation.spacing_m``), nothing else: the doc's formation package with
    processes, launched by the real ``launch`` from a throwaway share folder."""
    import yaml
    from support.ros2_tools import launch_actions, need_launch, node_info

    need_launch()                       # (a machine without ROS 2 launch skips, saying how to get it)
    import consensus.runs.ament as ament
    from consensus import registry
    from consensus.settings import params_file_fields

    _formation(tmp_path, monkeypatch, **ROS_FORMATION)
    share = tmp_path / "share"
    try:
        from consensus.scenarios.formation.config import FormationConfig

        (share / "config").mkdir(parents=True)
        (share / "config" / "formation.yaml").write_text(FormationConfig().to_ros_params_yaml())
        (share / "launch").mkdir()
        (share / "launch" / "formation.launch.py").write_text(
            "from consensus.runs.launch_file import launch_description\n\n\n"
            "def generate_launch_description():\n    return launch_description(\"formation\")\n")
        monkeypatch.setattr(ament, "package_share", lambda _pkg: str(share))
        assert "formation" in registry.scenarios()
        from launch_ros.actions import Node

        actions = launch_actions(share / "launch" / "formation.launch.py", monkeypatch, num_robots=3,
                                 spacing_m=2.5, output_dir=tmp_path / "run")
        nodes = [node_info(a) for a in actions if isinstance(a, Node)]
        assert [n["executable"] for n in nodes] == ["sim", "formation_robot", "formation_judge"]
        params_file = nodes[0]["params_file"]
        assert yaml.safe_load(open(params_file))["/**"]["ros__parameters"]["formation"] == {"spacing_m": 2.5}
        assert params_file_fields(params_file, FormationConfig)["num_robots"] == 3
    finally:
        _forget_formation()


# ----------------------------------------------------------------------------------------- add a backend / simulator
def _blocks_of(title: str) -> dict[str, str]:
    """The python blocks of section ``title``, by the file their first comment line names (``# llm/fixed.py``)."""
    text = DOC.read_text()
    section = text[text.index(f"## {title}"):]
    section = section[:section.index("\n## ", 5)]
    blocks = {}
    for code in re.findall(r"```python\n(.*?)```", section, flags=re.S):
        code = textwrap.dedent(code)
        m = re.match(r"# ([\w/]+\.py)[^\n]*\n", code)
        if m:
            blocks[m.group(1)] = code
    return blocks


def _add_module(monkeypatch, tmp_path, package, code: str, name: str) -> None:
    """``code`` as module ``name`` of ``package`` (written into a throwaway folder on the package's path)."""
    folder = tmp_path / package.__name__.replace(".", "_")
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(code)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    monkeypatch.delitem(sys.modules, f"{package.__name__}.{name}", raising=False)


def test_the_add_an_llm_backend_example_is_what_the_code_does(tmp_path, monkeypatch):
    """The doc's backend module and registration, added as written, give a backend that every list of backends
    offers and that `consensus run aggregation --headless --planner llm --backend fixed` plans with."""
    import json

    import consensus.llm
    from consensus import cli
    from consensus.experiments.spec import LLM_BACKENDS  # noqa: F401 - imported before: still sees the new one
    from consensus.llm import backends
    from consensus.runs.launch_file import launch_arguments

    blocks = _blocks_of("How to add an LLM backend")
    assert set(blocks) == {"llm/fixed.py", "llm/backends.py"}, sorted(blocks)
    _add_module(monkeypatch, tmp_path, consensus.llm, blocks["llm/fixed.py"], "fixed")
    monkeypatch.setattr(backends, "_BACKENDS", backends._BACKENDS.copy())
    exec(blocks["llm/backends.py"], vars(backends).copy())          # the lines added at the end of backends.py
    assert "fixed" in backends.names() and not backends.backend_spec("fixed").local_server
    assert "fixed" in launch_arguments("aggregation")["llm_backend"]
    out = tmp_path / "run"
    assert cli.main(["run", "aggregation", "--headless", "--planner", "llm", "--backend", "fixed", "--robots", "3",
                     "--duration", "20", "--out", str(out), "-q"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["llm_calls"] > 0 and summary["llm_fallbacks"] == 0
    assert summary["consensus_point"] == pytest.approx([0.0, 0.0], abs=0.1)    # the fixed reply's position
    assert (out / "transcripts.jsonl").read_text().count("\n") == summary["llm_calls"]    # recorded
    assert json.loads((out / "manifest.json").read_text())["backend"] == "fixed"


def test_the_add_a_simulator_example_is_what_the_code_does(tmp_path, monkeypatch):
    """The doc's simulator package (one folder) and its one line in ``SIMULATORS``, added as written, give a `sim`
    that the CLI, the launch arguments and the process lists of the aggregation, the disaster drones and the
    naming-game fleet take."""
    import ast

    import consensus.sims
    from consensus import cli, registry
    from consensus.control import motion
    from consensus.loader import Registry
    from consensus.runs.launch_file import launch_arguments

    blocks = _blocks_of("How to add a simulator")
    assert set(blocks) == {"sims/coarse/__init__.py", "sims/coarse/processes.py", "sims/__init__.py"}, sorted(blocks)
    folder = tmp_path / "sims" / "coarse"                   # the simulator's one folder, on consensus.sims' path
    folder.mkdir(parents=True)
    for name in ("__init__.py", "processes.py"):
        (folder / name).write_text(blocks[f"sims/coarse/{name}"])
    monkeypatch.setattr(consensus.sims, "__path__", [*consensus.sims.__path__, str(folder.parent)])
    for module in ("consensus.sims.coarse", "consensus.sims.coarse.processes"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    line = ast.literal_eval(blocks["sims/__init__.py"].split("\n", 1)[1].strip().rstrip(","))
    monkeypatch.setattr(consensus.sims, "SIMULATORS", (*consensus.sims.SIMULATORS, line))    # the one line
    monkeypatch.setattr(motion, "_SIMS", Registry("sim"))    # empty: loads SIMULATORS again on its first use
    try:
        assert motion.sim_names()[-1] == "coarse"
        for name in ("aggregation", "disaster", "naming-game-robots"):
            sc = registry.scenario(name)
            assert "coarse" in launch_arguments(name)["sim"]
            args = cli.build_parser().parse_args(["run", name, "--sim", "coarse", "--robots", "3"])
            cfg = cli.config_from_args(sc, args)
            assert cfg.sim == "coarse"
            sims = [s for s in sc.processes(cfg) if s.executable == "sim"]
            assert len(sims) == 1 and sims[0].params["sim_rate_hz"] == 5.0, name
        assert cli.main(["run", "disaster", "--set", "sim=nowhere", "--out", str(tmp_path / "bad")]) == 2
        assert not (tmp_path / "bad").exists()
    finally:
        for module in ("consensus.sims.coarse", "consensus.sims.coarse.processes"):
            sys.modules.pop(module, None)
