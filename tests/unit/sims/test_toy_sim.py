"""A simulator is one folder plus one registration: a toy simulator written into a temporary folder (its record,
its process factory, nothing else: ``TOY``) and registered by its ``"module:attr"`` string (one ``register_sim``
line) is a ``sim`` that the registry lists, the configs accept and every scenario's process list starts; the kernel
is used as installed, nothing of it patched but the registry copied (issue 42, item 4; docs/architecture.md, "How to
add a simulator")."""
from __future__ import annotations

import sys
from dataclasses import dataclass
import pytest

from consensus.control import motion
from consensus.settings import FlatParams, RobotBaseConfig, SimParams, load_flat
from consensus.sims import SIMULATORS, check_run, prepare_sim, sim_processes

TOY = {
    "__init__.py": '''\
from consensus.control.motion import Simulator

SIM = Simulator("toy", "a toy world: one process per robot", "toy_sim.processes:processes",
                prepare="toy_sim.processes:prepare", executables={"toy_sim": "toy_sim.node"})
''',
    "processes.py": '''\
from consensus.runs.processes import ProcessSpec


def processes(cfg, params, *, use_sim_time=False):
    return [ProcessSpec("toy_sim", f"toy_{i}", params={**params, "robot": i}) for i in range(cfg.num_robots)]


def prepare(cfg, **options):
    return cfg, {"toy": [None, "ready"]}
''',
}


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy's one folder, on the path, registered by one line into a copy of the registry."""
    folder = tmp_path / "toy_sim"
    folder.mkdir()
    for name, text in TOY.items():
        (folder / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in [m for m in sys.modules if m == "toy_sim" or m.startswith("toy_sim.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(motion, "_SIMS", motion._SIMS.copy())
    motion.register_sim("toy_sim:SIM")                         # the one registration line
    yield
    for module in [m for m in sys.modules if m == "toy_sim" or m.startswith("toy_sim.")]:
        sys.modules.pop(module)


def test_the_toy_is_a_simulator_by_its_folder_and_one_line(toy):
    assert motion.sim_names()[: len(SIMULATORS)] == tuple(t.partition(":")[0].rpartition(".")[2]
                                                          for t in SIMULATORS)   # the listed ones stay first
    assert motion.sim_names()[-1] == "toy"
    assert motion.sim_spec("toy").summary.startswith("a toy world")


def test_the_configs_accept_the_toy(toy):
    @dataclass
    class OnlySim(SimParams, FlatParams):
        pass

    assert load_flat(OnlySim, sim="toy").sim == "toy"
    cfg = load_flat(RobotBaseConfig, sim="toy", num_robots=3)
    assert cfg.sim == "toy"
    with pytest.raises(ValueError, match="unknown sim 'toys'.*toy"):
        load_flat(OnlySim, sim="toys")


def test_the_toy_starts_its_processes_and_its_checks(toy):
    from consensus.registry import executables

    cfg = load_flat(RobotBaseConfig, sim="toy", num_robots=3)
    specs = sim_processes(cfg, {"workspace": [0.0, 1.0, 0.0, 1.0]})
    assert [(s.executable, s.name, s.params["robot"]) for s in specs] == [("toy_sim", f"toy_{i}", i)
                                                                            for i in range(3)]
    assert prepare_sim(cfg) == (cfg, {"toy": [None, "ready"]})
    check_run(cfg, headless=True)                                      # headless by default: no world of its own
    assert executables()["toy_sim"] == "toy_sim.node"


def test_a_scenario_runs_the_toy(toy):
    """A scenario that moves robots (the aggregation) takes the toy through its process list like any simulator."""
    from consensus import cli, registry

    sc = registry.scenario("aggregation")
    cfg = cli.config_from_args(sc, cli.build_parser().parse_args(["run", "aggregation", "--sim", "toy",
                                                                  "--robots", "2"]))
    names = [s.name for s in sc.processes(cfg)]
    assert {"toy_0", "toy_1"} <= set(names) and "sim" not in names
