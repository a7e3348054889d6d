"""Paper 2, scenario 1: drones respond to a closed-loop dynamic disaster environment (implicit vs explicit consensus).

Submodules:

- ``environment``: grid, disasters, volatility presets, containment, rewards and penalties (``DisasterEnv``);
- ``reports``: the seeded textual situation report of every round, with contradictory/incomplete items;
- ``metrics``: coverage rate, misallocation penalty, response delay, net reward and action deviation;
- ``config`` (DisasterConfig), ``prompts`` (appendix F.2), ``agents`` (LLM, heuristic and random drones,
  coordinators), ``rounds`` (the round protocol), ``round_clock`` (its ROS-free clock: phases, deadlines),
  ``headless`` (the synchronous loop), ``study`` (Tables 1-2, Figs. 3 and 5), ``plots``, ``processes`` and
  ``runner`` (ROS runs), ``cli`` (``consensus run disaster``), ``ros/`` (grid, drone and aggregator nodes).

The exact rules and formulas are in each module docstring and in ``docs/disaster.md``.
"""
from __future__ import annotations

from consensus.registry import Scenario, lazy, register
from consensus.scenarios.disaster import commands as _cli
from consensus.scenarios.disaster.config import DisasterConfig


register(Scenario(
    name="disaster",
    summary="dynamic disaster response drones (paper 2, scenario 1)",
    description="LLM-piloted (or heuristic/random) drones respond to evolving disasters on a grid, with implicit or "
                "explicit consensus; writes a run directory.",
    config_cls=DisasterConfig,
    config_file="disaster.yaml",
    cli_flags=_cli.cli_flags(),
    runner=_cli.run,
    result_line=_cli.result_line,
    processes=lazy("consensus.scenarios.disaster.processes:disaster_processes"),
    prepare=lazy("consensus.scenarios.disaster.runner:prepare_disaster_run"),
    launch_args=("planner", "mode", "strategy", "roles", "baseline", "volatility", "rounds", "motion"),
    executables={
        "drone": "consensus.scenarios.disaster.ros.drone",
        "aggregator": "consensus.scenarios.disaster.ros.aggregator",
        "disaster_grid": "consensus.scenarios.disaster.ros.grid",
    },
    studies=("consensus.scenarios.disaster.study",),
))
