""".importlinter's module lists are complete: a kernel package or a scenario added under src/consensus is named by
every contract it belongs to (the lists are kept by hand; `nlp_tasks` was once missing from two of them).

What "complete" means, per contract:

* ``kernel-never-imports-a-scenario``: its sources are exactly the kernel's top-level modules (every module or
  package of ``consensus`` but ``scenarios``);
* ``rclpy-only-in-ros``: its sources cover every kernel top-level module but ``ros`` and every scenario, and what it
  ignores is imported by ``ros`` modules only (a scenario's ``ros/``, a simulator's ``ros``);
* ``launch-only-...`` and ``ament-index-...``: their sources cover every kernel module and every scenario;
* ``layers``: every kernel top-level module sits in exactly one layer, and no scenario does;
* ``no-cycles-in-the-kernel``: ``consensus`` is one of its ancestors;
* ``no-cycles-between-simulators``: ``consensus.sims`` is one of its ancestors;
* ``no-cycles-in-a-scenario`` and ``scenarios-are-independent``: exactly the scenarios.

A contract this test does not know fails it too, so that a new one gets its rule here. The simulators are listed
once, in ``consensus.sims.SIMULATORS``: every simulator package under ``src/consensus/sims`` is there.
"""
from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / ".importlinter"
SRC = ROOT / "src" / "consensus"


def _kernel() -> set[str]:
    """``consensus.<name>`` of every top-level module and package of consensus but ``scenarios``."""
    names = {p.stem for p in SRC.glob("*.py") if p.name != "__init__.py"}
    names |= {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    return {f"consensus.{n}" for n in names - {"scenarios"}}


def _scenarios() -> set[str]:
    return {f"consensus.scenarios.{p.name}" for p in (SRC / "scenarios").iterdir() if (p / "__init__.py").is_file()}


def _contracts() -> dict[str, configparser.SectionProxy]:
    parser = configparser.ConfigParser()
    assert parser.read(CONFIG), f"{CONFIG} not found"
    prefix = "importlinter:contract:"
    return {name[len(prefix):]: parser[name] for name in parser.sections() if name.startswith(prefix)}


def _list(contract: configparser.SectionProxy, key: str) -> list[str]:
    return [line.strip() for line in contract.get(key, "").splitlines() if line.strip()]


def _covers(expressions: list[str], module: str) -> bool:
    """Does one of ``expressions`` (import-linter's: ``*`` one segment, ``**`` one or more), taken as a package,
    name ``module`` or an ancestor of it?"""
    parts = module.split(".")
    candidates = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    for expr in expressions:
        pattern = re.escape(expr).replace(r"\*\*", r"[^.]+(?:\.[^.]+)*").replace(r"\*", r"[^.]+")
        if any(re.fullmatch(pattern, c) for c in candidates):
            return True
    return False


def test_the_scan_sees_the_package():
    kernel, scenarios = _kernel(), _scenarios()
    assert {"consensus.ros", "consensus.settings", "consensus.names"} <= kernel and len(kernel) > 10
    assert {"consensus.scenarios.aggregation", "consensus.scenarios.nlp_tasks"} <= scenarios


def test_every_contract_has_a_completeness_rule():
    assert set(_contracts()) == set(RULES), "a contract of .importlinter without a rule here (or a rule without " \
                                            "its contract): add what 'complete' means for it to RULES"


def _kernel_never_imports_a_scenario(c):
    sources = set(_list(c, "source_modules"))
    assert sources == _kernel(), (f"missing: {sorted(_kernel() - sources)}; "
                                  f"not a kernel module: {sorted(sources - _kernel())}")
    assert _list(c, "forbidden_modules") == ["consensus.scenarios"]


def _rclpy_only_in_ros(c):
    sources = _list(c, "source_modules")
    assert not _covers(sources, "consensus.ros"), "the kernel's ros package is where rclpy belongs"
    missing = sorted(m for m in (_kernel() - {"consensus.ros"}) | _scenarios() if not _covers(sources, m))
    assert not missing, f"not covered: {missing}"
    importers = [line.split("->")[0].strip() for line in _list(c, "ignore_imports")]
    assert importers and all("ros" in i.split(".") for i in importers), f"an importer that is not ros: {importers}"


def _whole_package(c):
    sources = _list(c, "source_modules")
    missing = sorted(m for m in _kernel() | _scenarios() if not _covers(sources, m))
    assert not missing, f"not covered: {missing}"


def _layers(c):
    named = [m.strip() for layer in _list(c, "layers") for m in re.split(r"[:|]", layer) if m.strip()]
    named = [re.sub(r"^\((.*)\)$", r"\1", m) for m in named]          # an optional layer: (name)
    twice = sorted({m for m in named if named.count(m) > 1})
    assert not twice, f"in more than one layer: {twice}"
    assert not [m for m in named if m.startswith("consensus.scenarios")], "a scenario is no kernel layer"
    assert not _kernel() - set(named), f"in no layer: {sorted(_kernel() - set(named))}"
    assert not set(named) - _kernel(), f"not a kernel module: {sorted(set(named) - _kernel())}"


def _no_cycles_in_the_kernel(c):
    assert "consensus" in _list(c, "ancestors")


def _simulators_acyclic(c):
    assert "consensus.sims" in _list(c, "ancestors")


def _every_scenario(key):
    def check(c):
        listed = set(_list(c, key))
        assert listed == _scenarios(), (f"missing: {sorted(_scenarios() - listed)}; "
                                        f"not a scenario: {sorted(listed - _scenarios())}")
    return check


RULES = {
    "kernel-never-imports-a-scenario": _kernel_never_imports_a_scenario,
    "rclpy-only-in-ros": _rclpy_only_in_ros,
    "launch-only-where-launch-files-are-built": _whole_package,
    "ament-index-in-one-place": _whole_package,
    "layers": _layers,
    "no-cycles-in-the-kernel": _no_cycles_in_the_kernel,
    "no-cycles-between-simulators": _simulators_acyclic,
    "no-cycles-in-a-scenario": _every_scenario("ancestors"),
    "scenarios-are-independent": _every_scenario("modules"),
}


@pytest.mark.parametrize("name", sorted(RULES))
def test_the_contract_names_every_module_it_covers(name):
    contracts = _contracts()
    assert name in contracts, f"contract {name} is not in .importlinter"
    RULES[name](contracts[name])


def test_the_wildcards_match_as_import_linter_does():
    assert _covers(["consensus.scenarios.*.ros.**"], "consensus.scenarios.disaster.ros.grid")
    assert not _covers(["consensus.scenarios.*.ros.**"], "consensus.scenarios.disaster.ros")
    assert _covers(["consensus.scenarios.*"], "consensus.scenarios.disaster.config")
    assert not _covers(["consensus.scenarios.*.*"], "consensus.scenarios.disaster")
    assert not _covers(["consensus.rosx"], "consensus.ros")


def test_every_simulator_package_is_registered():
    """Each folder of ``src/consensus/sims`` is a simulator, registered by its one line of ``SIMULATORS`` under its
    own name (``consensus.sims.<name>:SIM``), and a simulator's node is its ``ros`` module."""
    from consensus.control.motion import sim_spec
    from consensus.sims import SIMULATORS

    folders = {p.name for p in (SRC / "sims").iterdir() if (p / "__init__.py").is_file()}
    listed = [re.fullmatch(r"consensus\.sims\.(\w+):SIM", t) for t in SIMULATORS]
    assert all(listed), f"not of the form consensus.sims.<name>:SIM: {SIMULATORS}"
    names = [m.group(1) for m in listed]
    assert sorted(names) == sorted(folders), f"folders: {sorted(folders)}; SIMULATORS: {names}"
    for name in names:
        assert sim_spec(name).name == name
        assert all(module == f"consensus.sims.{name}.ros" for module in sim_spec(name).executables.values()), name
