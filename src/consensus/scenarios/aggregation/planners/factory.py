"""Building planners by name (config key ``planner``) for the headless runner and the ROS nodes.

Kinds: ``llm``, ``average``, ``average_no_self``, ``stubborn``, ``suggestible``.

Personalities (``none``/``stubborn``/``suggestible``) are prompt texts for the ``llm`` kind. For a
classical kind a non-"none" personality selects the matching classical planner (``stubborn`` ->
``StubbornPlanner``, ``suggestible`` -> ``SuggestiblePlanner``), so a mixed-personality run has a
classical baseline instead of silently ignoring the personalities.
"""
from __future__ import annotations

from typing import Any

from consensus.scenarios.aggregation.config import PLANNERS, AggregationConfig
from consensus.control.safety import Geofence
from consensus.errors import ConfigError
from consensus.llm.base import LLMClient
from consensus.control.planner import Planner
from consensus.scenarios.aggregation.planners.classical import AveragePlanner, StubbornPlanner, SuggestiblePlanner
from consensus.scenarios.aggregation.planners.llm import LLMPlanner
from consensus.scenarios.aggregation.prompts import personality_text

PLANNER_KINDS = PLANNERS


def make_planner(kind: str, *, dim: int, robot_id: int, personality: str = "none", client: LLMClient | None = None,
                 geofence: Geofence | None = None, seed: int | None = None, **llm_kw: Any) -> Planner:
    """One robot's planner. ``llm_kw`` (model, temperature, memory, ...) go to ``LLMPlanner`` only."""
    if kind not in PLANNER_KINDS:
        raise ConfigError(f"unknown planner '{kind}'; valid: {', '.join(PLANNER_KINDS)}")
    personality_text(personality)     # ConfigError for an unknown personality
    if kind == "llm":
        if client is None:
            raise ConfigError("planner 'llm' needs an LLM client (llm_backend); none was given")
        # one request seed per robot: identical prompts of two robots then have different transcript keys, so a
        # replay hands every robot its own recorded answer even when their requests ran concurrently
        return LLMPlanner(client, dim=dim, robot_id=robot_id, personality=personality, geofence=geofence,
                          seed=None if seed is None else seed + robot_id, **llm_kw)
    effective = personality if personality != "none" else kind
    if effective == "stubborn":
        return StubbornPlanner(dim)
    if effective == "suggestible":
        return SuggestiblePlanner(dim, seed=None if seed is None else seed + robot_id)
    return AveragePlanner(dim, include_self=(effective == "average"))


def planners_from_config(cfg: AggregationConfig, client: LLMClient | None) -> list[Planner]:
    """One planner per robot: personalities from ``cfg.personality_of``, geofence from ``cfg.workspace``."""
    geofence = Geofence.from_bounds(cfg.workspace)
    llm_kw: dict[str, Any] = {}
    if cfg.planner == "llm":
        llm_kw = dict(memory=cfg.keep_history, model=cfg.llm_model, temperature=cfg.llm_temperature,
                      max_tokens=cfg.llm_max_tokens, parse_retries=cfg.parse_retries, num_agents=cfg.num_robots,
                      style=cfg.prompt_style, meeting_points=cfg.llm_shows_meeting_points())
    return [make_planner(cfg.planner, dim=cfg.dim, robot_id=i, personality=cfg.personality_of(i), client=client,
                         geofence=geofence, seed=cfg.seed, **llm_kw)
            for i in range(cfg.num_robots)]
