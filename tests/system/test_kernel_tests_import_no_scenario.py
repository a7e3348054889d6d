"""Kernel tests import no scenario: the kernel's robot decisions are tested with the kernel's own config
(``support.kernel_config``: ``RobotBaseConfig`` and a mean planner), so a change to a scenario cannot break them and
they show what the kernel needs. Where a test of a kernel package does need a scenario (a simulator's processes for
a scenario's run, a scenario's config checks), it lives beside the scenario (tests/scenarios) or in tests/ros."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
#: the kernel packages whose tests are free of scenarios (docs/testing.md)
KERNEL_TEST_DIRS = ("unit/control",)
KERNEL_TEST_FILES: tuple[str, ...] = ()


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_the_kernel_tests_import_no_scenario():
    files = [p for d in KERNEL_TEST_DIRS for p in (TESTS / d).rglob("test_*.py")]
    files += [TESTS / f for f in KERNEL_TEST_FILES]
    assert len(files) >= 10
    offenders = {str(p.relative_to(TESTS)): sorted(m for m in _imports(p) if m.startswith("consensus.scenarios"))
                 for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_a_scenario_import(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("def f():\n    from consensus.scenarios.aggregation.config import load_config\n")
    assert _imports(probe) == {"consensus.scenarios.aggregation.config"}
