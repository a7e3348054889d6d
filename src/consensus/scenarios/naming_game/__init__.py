"""Paper 4: the LLM naming game at any group size (policies, simulation at scale, mean-field theory).

``game`` (memory states, shift function, payoffs), ``policy`` (q tables: published, baselines, importers),
``llm_policy`` (q tables from an LLM's logprobs), ``simulate`` (many seeded runs at once), ``meanfield`` (the rate
equation, fixed points, stability), ``study`` (the paper's figures and Table S1).
"""
from __future__ import annotations

from consensus.registry import Scenario, lazy, register
from consensus.scenarios.naming_game.config import NamingGameConfig
from consensus.scenarios.naming_game.fleet_game import RobotsGameConfig


register(Scenario(
    name="naming-game",
    summary="the LLM naming game at any group size (paper 4)",
    description="Many seeded populations of N agents playing the naming game with a q-table policy (published, "
                "minimal-model or extracted from an LLM); writes a run directory.",
    config_cls=NamingGameConfig,
    config_file="naming_game.yaml",
    runner=lazy("consensus.scenarios.naming_game.runner:run"),
    result_line=lazy("consensus.scenarios.naming_game.runner:result_line"),
    studies=("consensus.scenarios.naming_game.study",),
))


register(Scenario(
    name="naming-game-robots",
    summary="the naming game played by a robot fleet through ROS 2 (paper 4, 'With robots')",
    description="Robots meeting pairwise agree on one of two rendezvous points with a naming-game policy and drive "
                "there; the ROS run says the same words as the headless reference of the same seed.",
    config_cls=RobotsGameConfig,
    config_file="naming_game_robots.yaml",
    runner=lazy("consensus.scenarios.naming_game.fleet_game:run"),
    result_line=lazy("consensus.scenarios.naming_game.fleet_game:result_line"),
    processes=lazy("consensus.scenarios.naming_game.fleet_game:robot_processes"),
    launch_args=("memory", "policy", "max_population_rounds", "interaction_period_s", "answer_timeout_s",
                 "rendezvous", "arrival_timeout_s"),
    executables={"naming_robot": "consensus.scenarios.naming_game.ros.robot",
                 "naming_matchmaker": "consensus.scenarios.naming_game.ros.matchmaker"},
))
