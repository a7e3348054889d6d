"""The scenario registry: what each scenario package offers to the kernel.

The kernel (CLI, experiment runner, launch helper, process runner) never imports a scenario by name. Every
package under ``consensus/scenarios/`` is imported once by ``scenarios()`` and calls ``register(Scenario(...))`` in
its ``__init__``; adding a scenario means adding a package there that registers itself.

A scenario may offer any of:

* ``run`` - the ``consensus run <name>`` subcommand: its config class (``consensus.settings.FlatParams``), the
  packaged params file, its own CLI flags (``cli_flags``: flag -> config field, on top of the common ones in
  ``consensus.cli``) and ``runner(cfg, out, headless=..., use_sim_time=..., echo=...) -> summary``;
* ``processes(cfg, use_sim_time) -> [ProcessSpec]`` - the ROS processes of a run, read by
  ``launch/<name>.launch.py`` (``consensus.runs.launch_file``) and by the pip runner; ``prepare(cfg, out)``
  writes the run directory's params file and manifest first (default ``consensus.runs.processes.prepare_run``);
* ``launch_args`` - its own config fields offered as launch arguments (their help is the field's doc; the common
  ones are the same in every launch file: ``config``, ``use_sim_time``, ``output_dir``, ``seed``, ``num_robots``,
  ``single_process``, ``llm_*``);
* ``executables`` - ROS executable -> module with ``main()`` (installed under ``lib/consensus/``);
* ``studies`` - modules that define ``STUDIES: list[consensus.experiments.study.Study]``.
"""
from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from consensus.loader import load  # the one loader of "module:attr" targets; also offered as registry.load

log = logging.getLogger(__name__)

SCENARIO_PACKAGE = "consensus.scenarios"

#: kernel ROS executables (any scenario may start them): executable -> module with main(); the simulators' own
#: (sim, turtlesim_bridge, mujoco_sim) are in their records (``consensus.control.motion.Simulator.executables``)
#: (``crazyflie_link``: a Crazyflie's link to crazyswarm2, ``consensus.robots.presets.Preset.link``)
KERNEL_EXECUTABLES = {"llm_server": "consensus.ros.llm_server", "bag_recorder": "consensus.ros.bag_recorder",
                      "crazyflie_link": "consensus.ros.crazyflie_link"}


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str                                   # one line, shown by --help
    config_cls: type | None = None                 # FlatParams subclass of `consensus run NAME`
    config_file: str = ""                          # packaged params file under share/consensus/config/
    description: str = ""                          # the `consensus run NAME --help` text
    cli_flags: tuple = ()                          # (flag, field, argparse kwargs) beyond the common flags
    runner: Callable[..., dict] | None = None      # runner(cfg, out, *, headless, use_sim_time, echo) -> summary
    result_line: Callable[[dict], str] | None = None   # the one-line result a run prints
    processes: Callable[..., list] | None = None   # processes(cfg, *, use_sim_time) -> [ProcessSpec]
    prepare: Callable | None = None                # prepare(cfg, out) -> (cfg, params file); default: prepare_run
    launch_args: tuple = ()                        # config fields offered as launch arguments
    headless_world: bool = False                   # its --headless loop moves bodies in a sim's world (sim: mujoco)
    executables: dict = field(default_factory=dict)    # executable -> module with main()
    studies: tuple = ()                            # modules defining STUDIES
    graph_node: str = ""                           # the node (relative) owning the run's communication graph
    graph_fields: tuple = ()                       # the config fields it switches at run time (consensus mcp's
                                                   # set_topology, ros2 param set)


_SCENARIOS: dict[str, Scenario] = {}
_LOADED = False


def lazy(target: str) -> Callable:
    """``"package.module:function"`` as a callable that imports the module on its first call, so that registering
    a scenario (``Scenario.runner=lazy("...runner:run")``) imports none of its heavy modules. The target is
    resolved by ``load`` (``consensus.loader``), the one loader of every registry."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return load(target)(*args, **kwargs)

    call.__qualname__ = call.__name__ = target
    return call


def register(scenario: Scenario) -> Scenario:
    """Called by a scenario package's ``__init__``."""
    _SCENARIOS[scenario.name] = scenario
    return scenario


def scenarios() -> dict[str, Scenario]:
    """Every registered scenario, importing each package under ``consensus/scenarios/`` once. A package that fails
    to import is skipped with a warning, so one broken scenario never hides the others."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        package = importlib.import_module(SCENARIO_PACKAGE)
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            if not info.ispkg:
                continue
            try:
                importlib.import_module(f"{SCENARIO_PACKAGE}.{info.name}")
            except Exception as exc:  # noqa: BLE001 - see docstring
                log.warning("scenario %s failed to import: %s", info.name, exc)
    return dict(_SCENARIOS)


def scenario(name: str) -> Scenario:
    from consensus.errors import ConfigError

    found = scenarios()
    if name not in found:
        raise ConfigError(f"unknown scenario '{name}'; registered: {', '.join(sorted(found))}")
    return found[name]


def executables() -> dict[str, str]:
    """Every ROS executable of the package: executable -> module with ``main()`` (the kernel's, the simulators',
    the scenarios')."""
    from consensus.control.motion import sim_names, sim_spec

    table = dict(KERNEL_EXECUTABLES)
    for name in sim_names():
        table.update(sim_spec(name).executables)
    for sc in scenarios().values():
        table.update(sc.executables)
    return table


def study_modules() -> list[str]:
    return [module for sc in scenarios().values() for module in sc.studies]


def all_studies() -> dict[str, Any]:
    """Named study presets for ``consensus experiment NAME`` (``consensus.experiments.study.Study``). A study module
    that fails to import is skipped with a warning."""
    studies = {}
    for name in study_modules():
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - one broken study must not hide the others
            log.warning("study module %s failed to import: %s", name, exc)
            continue
        for study in getattr(module, "STUDIES", ()):
            studies[study.name] = study
    return studies


def run_executable(name: str) -> int:
    """The body of every installed ROS executable ``lib/consensus/<name>``: import its module, run ``main()``."""
    module = executables().get(name)
    if module is None:
        print(f"consensus: no ROS executable '{name}' is registered", file=sys.stderr)
        return 2
    return importlib.import_module(module).main()
