"""Paper 1, section 4: multi-robot aggregation with LLM (or classical) planners.

``config`` (AggregationConfig), ``prompts`` (the paper's appendix prompts), ``planners/`` (LLM and classical
planners), ``headless`` (the synchronous loop), ``runner`` (run directory, headless or ROS), ``processes`` (the ROS
processes), ``study`` and ``strategies`` (paper 1's consensus studies), ``ros/`` (topology, recorder, robot nodes).
"""
from __future__ import annotations

from consensus import names
from consensus.registry import Scenario, lazy, register
from consensus.scenarios.aggregation.config import GRAPH_FIELDS, PERSONALITIES, PLANNERS, AggregationConfig
from consensus.graphs.topology import TOPOLOGIES
from consensus.llm.styles import PROMPT_STYLES
from consensus.runs import foxglove_live


register(Scenario(
    name="aggregation",
    summary="multi-robot aggregation (paper 1, section 4)",
    description="Start sim, topology, robots and recorder as ROS 2 processes from one YAML (or run headless) and "
                "write a run directory.",
    config_cls=AggregationConfig,
    config_file="aggregation.yaml",
    cli_flags=(
        ("--topology", "topology", dict(choices=TOPOLOGIES)),
        ("--adjacency", "adjacency", dict(help="custom topology: adjacency as JSON, e.g. '[[0,1],[1,0]]'")),
        ("--directed", "directed", dict(action="store_true", default=None, help="directed ring/line/random/custom")),
        ("--planner", "planner", dict(choices=PLANNERS)),
        ("--prompt-style", "prompt_style", dict(choices=PROMPT_STYLES, help="how the LLM is asked (model card)")),
        ("--personality", "personalities", dict(action="append", choices=PERSONALITIES,
                                                help="one for all robots, or once per robot")),
        ("--duration", "duration_s", dict(type=float)),
        ("--settle", "settle_s", dict(type=float)),
        ("--rounds", "max_rounds", dict(type=int, help="stop planning after this many rounds (a ROS run ends "
                                                       "one planning period later)")),
        ("--robots-file", "robots_file", dict(help="YAML robots: map of real robots (docs/real-robots.md)")),
        ("--dry-run", "dry_run", dict(action="store_true", default=None,
                                      help="log the velocity commands (RUN/dry_run.jsonl) instead of publishing them")),
        *foxglove_live.CLI_FLAGS,
    ),
    runner=lazy("consensus.scenarios.aggregation.runner:run"),
    result_line=lazy("consensus.scenarios.aggregation.runner:result_line"),
    processes=lazy("consensus.scenarios.aggregation.processes:aggregation_processes"),
    prepare=lazy("consensus.scenarios.aggregation.runner:prepare_aggregation_run"),
    headless_world=True,
    launch_args=("topology", "planner", "duration_s", "settle_s", "max_rounds", "robots_file", "dry_run",
                 *foxglove_live.LAUNCH_ARGS),
    executables={
        "robot": "consensus.scenarios.aggregation.ros.robot",
        "topology": "consensus.scenarios.aggregation.ros.topology",
        "recorder": "consensus.scenarios.aggregation.ros.recorder",
    },
    studies=("consensus.scenarios.aggregation.study",),
    graph_node=names.TOPOLOGY_NODE,
    graph_fields=GRAPH_FIELDS,
))
