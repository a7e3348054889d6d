"""The baselines of paper 2, section 4.4, and the study *conditions* (the columns of its tables).

``baseline_changes(baseline)`` gives the plain settings a baseline means; a scenario config applies them in its
``resolved()``:

============== ===========================================================================================
baseline       what runs
============== ===========================================================================================
none           the configured mode (implicit or explicit consensus)
single_llm     "A single LLM agent performs the task alone": ONE agent, no discussion
no_interaction implicit consensus without the discussion phase (discussion_turns = 0)
random         every agent picks a uniformly random action (seeded), no discussion
no_diversity   implicit consensus with the low-diversity roles (one shared role prompt)
============== ===========================================================================================

A baseline always runs in implicit mode. A study's ``condition`` parameter names a table column and sets mode and
baseline together: ``implicit`` / ``explicit`` (baseline none) or one of the baselines (implicit mode).
"""
from __future__ import annotations

from typing import Any

from consensus.errors import ConfigError

BASELINES = ("none", "single_llm", "no_interaction", "random", "no_diversity")
CONDITIONS = ("implicit", "explicit", "no_diversity", "no_interaction", "random", "single_llm")
CONDITION_LABELS = {"implicit": "Implicit Consensus", "explicit": "Explicit Consensus",
                    "no_diversity": "No Diversity", "no_interaction": "No Interaction",
                    "random": "Random Strategy", "single_llm": "Single LLM"}


def baseline_changes(baseline: str, size_field: str = "num_robots") -> dict[str, Any]:
    """Settings that ``baseline`` overrides (table in the module docstring); ``size_field`` is the team size N."""
    try:
        return {
            "none": {},
            "single_llm": {size_field: 1, "discussion_turns": 0, "mode": "implicit"},
            "no_interaction": {"discussion_turns": 0, "mode": "implicit"},
            "random": {"planner": "random", "discussion_turns": 0, "mode": "implicit"},
            "no_diversity": {"roles": "low", "mode": "implicit"},
        }[baseline]
    except KeyError:
        raise ConfigError(f"unknown baseline '{baseline}'; valid: {', '.join(BASELINES)}") from None


def apply_condition(data: dict, condition: str) -> dict:
    """``data`` with mode and baseline set from a study ``condition`` ("" keeps them)."""
    if not condition:
        return data
    if condition not in CONDITIONS:
        raise ConfigError(f"unknown condition '{condition}'; valid: {', '.join(CONDITIONS)} (or \"\")")
    return {**data, "mode": "explicit" if condition == "explicit" else "implicit",
            "baseline": condition if condition not in ("implicit", "explicit") else "none"}


def trial_config(cls, params: dict, seed: int = 0, llm_settings: dict | None = None, *, source: str):
    """The validated config ``cls`` of one study trial: the sweep's ``params`` with their ``condition`` applied
    (``strict_llm`` is the study's, not the config's), the spec's LLM temperature and max_tokens, and ``seed``."""
    data = apply_condition({k: v for k, v in params.items() if k not in ("condition", "strict_llm")},
                           params.get("condition", ""))
    llm = llm_settings or {}
    for key, name in (("temperature", "llm_temperature"), ("max_tokens", "llm_max_tokens")):
        if llm.get(key) is not None:
            data[name] = llm[key]
    return cls.from_dict({**data, "seed": seed}, source=source)


def condition_of(baseline: str, mode: str) -> str:
    return baseline if baseline != "none" else mode

