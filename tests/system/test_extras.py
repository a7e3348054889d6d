"""The base install and the extras (consensus.extras, setup.py): what the base holds is enough for a ROS user of
aggregation, and a missing extra's package gives one line naming the `pip install 'consensus[<extra>]'` that adds
it (exit status 2, no traceback), at every import site."""
from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import consensus
from consensus import extras
from consensus.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "consensus"
PACKAGE_PARENT = str(Path(consensus.__file__).resolve().parents[1])      # the consensus these tests import


def _names(path: Path) -> list[str]:
    """The distribution names a requirements file pins."""
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            out.append(re.split(r"[<>=!~ \[]", line, maxsplit=1)[0].lower())
    return out


def _setup_kwargs() -> dict:
    """setup.py's arguments, without running setuptools."""
    import setuptools

    captured: dict = {}
    real = setuptools.setup
    setuptools.setup = lambda **kw: captured.update(kw)
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        exec(compile((ROOT / "setup.py").read_text(), "setup.py", "exec"), {"__name__": "__main__"})
    finally:
        setuptools.setup = real
        os.chdir(cwd)
    return captured


def _line(exc: ConfigError, extra: str) -> str:
    text = str(exc)
    assert "\n" not in text
    assert text.endswith(f"pip install 'consensus[{extra}]'"), text
    return text


# --- the one message --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("module", sorted(extras.EXTRAS))
def test_a_missing_package_names_its_extra_and_the_pip_install(module, monkeypatch):
    dist, extra = extras.EXTRAS[module]
    monkeypatch.setitem(sys.modules, module, None)          # as if it were not installed
    with pytest.raises(ConfigError) as exc:
        extras.require(module, "the thing")
    assert _line(exc.value, extra) == f"the thing needs {dist} (the '{extra}' extra): pip install 'consensus[{extra}]'"
    assert extras.optional(module) is None


def test_an_installed_package_that_does_not_import_says_why(tmp_path, monkeypatch):
    (tmp_path / "numba").mkdir()
    (tmp_path / "numba" / "__init__.py").write_text("raise ImportError('Numba needs NumPy 2.3 or less')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    with pytest.raises(ConfigError, match="installed but does not import: Numba needs NumPy 2.3 or less") as exc:
        extras.require("numba", "the naming game's simulation")
    _line(exc.value, "studies")


def test_only_the_packages_of_extras_are_required_through_it():
    with pytest.raises(KeyError, match="not the package of an extra"):
        extras.require("numpy", "everything")


def test_each_import_site_names_its_extra(monkeypatch, tmp_path):
    """rouge-score (paper 3's metric), networkx (paper 2's network), cryptography (the keystore), xllamacpp (the
    embedded server), foxglove-sdk (--foxglove), ray (--executor ray): each raises the one line where it is used."""
    from consensus.experiments.ray_executor import RayExecutor
    from consensus.llm.embedded import EmbeddedServer
    from consensus.runs import foxglove_live, security
    from consensus.scenarios.info_spread.config import InfoSpreadConfig
    from consensus.scenarios.info_spread.network import InfoNetwork
    from consensus.scenarios.nlp_tasks import scoring

    cases = [("rouge_score", "studies", lambda: scoring.rouge("a cat", "a cat sat")),
             ("networkx", "studies", lambda: InfoNetwork(InfoSpreadConfig(), seed=1)),
             ("cryptography", "security", lambda: security.create_keystore(tmp_path / "ks", 2)),
             ("xllamacpp", "embedded", lambda: EmbeddedServer(tmp_path / "m.gguf").start()),
             ("foxglove", "foxglove", foxglove_live.require_sdk),
             ("ray", "ray", lambda: RayExecutor().check(None))]
    for module, extra, call in cases:
        with monkeypatch.context() as m:
            m.setitem(sys.modules, module, None)
            for name in [k for k in sys.modules if k.startswith(module + ".")]:
                m.setitem(sys.modules, name, None)
            scoring._rouge_scorer.cache_clear()
            with pytest.raises(ConfigError) as exc:
                call()
            _line(exc.value, extra)
    scoring._rouge_scorer.cache_clear()


# --- numba: the naming game needs it, the collision filter does not ----------------------------------------------
def test_the_naming_game_simulation_imports_without_numba_and_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)
    path = SRC / "scenarios" / "naming_game" / "simulate.py"
    spec = importlib.util.spec_from_file_location("_simulate_without_numba", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)                           # a second copy: the real module keeps its kernels
    assert module.numba is None
    assert module.success_need(0.98, 50) == 49                # what needs no kernel still works
    with pytest.raises(ConfigError) as exc:
        module.simulate([0.5] * 63, 5, 10, 2, seed=1)
    assert _line(exc.value, "studies").startswith("the naming game's simulation needs numba")


def test_the_collision_filter_solves_with_numpy_without_numba(monkeypatch):
    """The fleet's batched QP falls back to its numpy version (the same problems, more slowly) without numba."""
    from consensus.control import collision as c

    rng = np.random.default_rng(30)
    q, m = 60, 8
    a = rng.normal(size=(q, m, 2))
    b = rng.normal(0.2, 1.0, size=(q, m))
    u0 = rng.normal(0, 2.0, size=(q, 2))
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.setattr(c, "_COMPILED", [])
    assert c._compiled() is None
    got = c._active_set(a, b, u0)
    want = c._batch_active_set(a, b, u0)
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)
    c.warm_up()                                               # a fleet core's start: no numba, no error


# --- the CLI: one line, exit status 2 -----------------------------------------------------------------------------
def _blocked_env(tmp_path: Path, modules) -> dict:
    """An environment whose Python cannot import ``modules`` (a base-only install): a package of each name that
    raises ModuleNotFoundError, first on the path."""
    block = tmp_path / "blocked"
    for name in modules:
        (block / name).mkdir(parents=True, exist_ok=True)
        (block / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(block), PACKAGE_PARENT, env.get("PYTHONPATH", "")])
    env.pop("CONSENSUS_DEBUG", None)
    return env


@pytest.mark.parametrize("argv, extra", [
    (["security", "keystore", "{tmp}/ks", "--robots", "2"], "security"),
    (["run", "naming-game", "--agents", "10", "--set", "policy=fixed_bias:0.6", "--out", "{tmp}/ng"], "studies"),
    (["run", "aggregation", "--robots", "2", "--planner", "average", "--foxglove", "--out",
      "{tmp}/fg"], "foxglove"),
])
def test_the_cli_gives_one_line_and_exit_2(argv, extra, tmp_path):
    env = _blocked_env(tmp_path, extras.EXTRAS)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    out = subprocess.run([sys.executable, "-m", "consensus.cli", *argv], capture_output=True, text=True, env=env,
                         timeout=120, check=False)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith("consensus: error: ") and lines[0].endswith(f"pip install 'consensus[{extra}]'")


def test_a_base_only_install_runs_aggregation_and_imports_its_nodes(tmp_path):
    """Without any extra's package: a headless aggregation with the collision filter converges and writes its
    plots, and every ROS executable of aggregation imports (where rclpy is installed)."""
    env = _blocked_env(tmp_path, extras.EXTRAS)
    out = subprocess.run([sys.executable, "-m", "consensus.cli", "run", "aggregation", "--robots", "4", "--planner",
                          "average", "--headless", "--duration", "15", "--settle", "2", "--set",
                          "collision_avoidance=cbf", "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, env=env, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    import json

    assert json.loads((tmp_path / "run" / "summary.json").read_text())["converged"] is True
    assert (tmp_path / "run" / "paths.png").is_file()
    code = ("import importlib, sys\n"
            "from consensus.registry import executables, scenario\n"
            "from consensus.scenarios.aggregation.config import load_config\n"
            "cfg = load_config(None)\n"
            "wanted = {p.executable for p in scenario('aggregation').processes(cfg)}\n"
            "for name in sorted(wanted): importlib.import_module(executables()[name])\n"
            "print(sorted(wanted))\n")
    if importlib.util.find_spec("rclpy") is not None:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                             check=False)
        assert out.returncode == 0, out.stderr
        assert "robot" in out.stdout and "recorder" in out.stdout


# --- setup.py, requirements/*.txt, the Makefile and extras.EXTRAS agree --------------------------------------------
def test_setup_requirements_and_the_table_agree():
    kw = _setup_kwargs()
    base = [re.split(r"[<>=!~ ]", r, maxsplit=1)[0].lower() for r in kw["install_requires"]]
    assert sorted(base) == sorted(_names(ROOT / "requirements" / "base.txt"))      # the pins follow setup.py
    reqs = re.search(r"^REQS := (.*?)(?<!\\)\n", (ROOT / "Makefile").read_text(), re.M | re.S).group(1)
    for module, (dist, extra) in extras.EXTRAS.items():
        pinned = _names(ROOT / "requirements" / f"{extra}.txt")
        assert dist in pinned, (module, extra)
        assert [r.split("==")[0].lower() for r in kw["extras_require"][extra]] == pinned
        assert dist not in base, f"{dist} is in the base install and in the extra {extra}"
        assert f"requirements/{extra}.txt" in reqs, f"make setup does not install the extra {extra}"


def test_no_module_imports_an_extra_at_module_level():
    """An extra's package is imported where it is used (through consensus.extras), so every module still imports
    in a base install; ``if TYPE_CHECKING:`` and guarded imports are fine."""
    found = []
    for path in SRC.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(SRC)}: {n}" for n in names if n.split(".")[0] in extras.EXTRAS]
    assert not found
