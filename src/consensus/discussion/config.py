"""``DiscussionParams``: the settings group of a discussion team (paper 2, sections 3.1, 4.3, 4.4, appendix C.4).

A scenario config composes it with ``consensus.settings``' ``FlatParams`` and ``RunParams``, a count group (the team
size: ``AgentsParams.num_agents`` for a team of agents, ``FleetParams.num_robots`` when the agents are robots, e.g. the
disaster drones; ``COUNT_FIELD`` names it) and adds its own fields (``FlatParams`` last, so that the groups' methods,
e.g. ``uses_llm``, win)::

    class InfoSpreadConfig(RunParams, AgentsParams, DiscussionParams, FlatParams): ...
    class DisasterConfig(RunParams, DiscussionParams, ControlParams, FleetParams, FlatParams):
        COUNT_FIELD = "num_robots"

It is the LLM group (``LLMParams``) with paper 2's defaults (appendix C: 256 tokens; one correction turn) and the
discussion agents' own LLM switch ``llm_structured``, declared here once. ``resolved()`` applies the configured
baseline (``consensus.discussion.baselines``). ``fallback_policy`` means the same in every discussion scenario:
``idle`` (the scenario's null action: a drone stays on its cell, a defender checks nothing, a contributor gives 0) or
``heuristic`` (what the scenario's heuristic agent would do).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from consensus.discussion.baselines import BASELINES, baseline_changes
from consensus.discussion.roles import ROLE_LEVELS
from consensus.discussion.rounds import MODES
from consensus.settings import LLMParams, need, param

PLANNERS = ("heuristic", "llm", "random")
VOLATILITIES = ("low", "moderate", "high")
FALLBACK_POLICIES = ("idle", "heuristic")
#: fallback words of earlier versions, refused with the word that replaced them
OLD_FALLBACK_WORDS = {"stay": "idle", "none": "idle", "zero": "idle"}


def explicit_strategies() -> tuple[str, ...]:
    """The explicit-consensus strategies: consensus.decision's architectures except "single"."""
    from consensus.decision import ARCHITECTURES

    return tuple(a for a in ARCHITECTURES if a != "single")


@dataclass
class DiscussionParams(LLMParams):
    """How a team discusses and decides (paper 2), and how its LLM agents are asked."""

    GROUP: ClassVar[str] = "discussion"     # its fields' ROS parameters: discussion.<name> (settings.ros_names)

    COUNT_FIELD: ClassVar[str] = "num_agents"      # the composing config's team-size field

    planner: str = param("heuristic", "heuristic | llm | random")
    mode: str = param("implicit", "implicit (each agent's own choice) | explicit (one collective choice)")
    strategy: str = param("majority", "explicit mode: one of consensus.decision's architectures except single")
    roles: str = param("medium", "diversity level: low | medium | high")
    volatility: str = param("moderate", "low | moderate | high")
    discussion_turns: int = param(1, "K: discussion turns per round before acting (0 = no discussion)")
    baseline: str = param("none", "none | single_llm | no_interaction | random | no_diversity")
    max_agreement_turns: int = param(5, "explicit decentralized / feedback strategies: at most this many votes")
    inbox_max_messages: int = param(10, "an LLM agent reads at most this many other agents' messages per turn")
    message_max_chars: int = param(300, "each agent message / report item is cut to this many characters")
    rounds: int = param(20, "T (paper: 20 or 30)")
    fallback_policy: str = param("idle", "an unusable LLM reply: the scenario's null action (idle) | heuristic")
    # the LLM group's settings with paper 2's defaults (appendix C), and the discussion agents' JSON switch
    llm_max_tokens: int = param(256)
    parse_retries: int = param(1)
    llm_structured: bool = param(True,
        "request the reply's JSON schema (response_format); off for endpoints without it")

    def _check_discussion(self) -> None:
        if self.fallback_policy in OLD_FALLBACK_WORDS:
            need(False, f"fallback_policy '{self.fallback_policy}' is now called "
                        f"'{OLD_FALLBACK_WORDS[self.fallback_policy]}' (one word in every scenario)")
        for name, valid in (("planner", PLANNERS), ("mode", MODES), ("roles", ROLE_LEVELS),
                            ("volatility", VOLATILITIES), ("baseline", BASELINES),
                            ("strategy", explicit_strategies()), ("fallback_policy", FALLBACK_POLICIES)):
            value = getattr(self, name)
            need(value in valid, f"unknown {name} '{value}'; valid: {', '.join(valid)}")
        need(not (self.baseline != "none" and self.mode == "explicit"),
             f"baseline '{self.baseline}' runs in implicit mode; drop mode 'explicit' (or use baseline 'none')")
        need(0 <= self.discussion_turns <= 2, f"discussion_turns must be 0, 1 or 2 (got {self.discussion_turns})")
        need(1 <= self.max_agreement_turns <= 20,
             f"max_agreement_turns must be in [1, 20] (got {self.max_agreement_turns})")
        need(1 <= self.inbox_max_messages <= 100,
             f"inbox_max_messages must be in [1, 100] (got {self.inbox_max_messages})")
        need(20 <= self.message_max_chars <= 2000,
             f"message_max_chars must be in [20, 2000] (got {self.message_max_chars})")
        need(1 <= self.rounds <= 10_000, f"rounds must be in [1, 10000] (got {self.rounds})")

    def team_size(self) -> int:
        """N, the number of agents of the team (the composing config's ``COUNT_FIELD``)."""
        return int(getattr(self, self.COUNT_FIELD))

    def resolved(self):
        """The settings the configured baseline means; ``self`` when none."""
        changes = baseline_changes(self.baseline, self.COUNT_FIELD)
        return dataclasses.replace(self, **changes) if changes else self

    def uses_llm(self) -> bool:
        return self.resolved().planner == "llm"

    def condition(self) -> str:
        return self.baseline if self.baseline != "none" else self.mode
