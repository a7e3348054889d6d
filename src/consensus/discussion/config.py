"""``DiscussionParams``: the settings group of a discussion team (paper 2, sections 3.1, 4.3, 4.4, appendix C.4).

A scenario config composes it with ``consensus.settings``' ``FlatParams``, ``RunParams`` and ``LLMParams`` and adds
its own fields; ``resolved()`` applies the configured baseline (``consensus.discussion.baselines``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from consensus.discussion.baselines import BASELINES, baseline_changes
from consensus.discussion.roles import ROLE_LEVELS
from consensus.discussion.rounds import MODES
from consensus.settings import need

PLANNERS = ("heuristic", "llm", "random")
VOLATILITIES = ("low", "moderate", "high")


def explicit_strategies() -> tuple[str, ...]:
    """The explicit-consensus strategies: consensus.decision's architectures except "single"."""
    from consensus.decision import ARCHITECTURES

    return tuple(a for a in ARCHITECTURES if a != "single")


@dataclass
class DiscussionParams:
    num_agents: int = 5               # N
    planner: str = "heuristic"        # heuristic | llm | random
    mode: str = "implicit"            # implicit | explicit
    strategy: str = "majority"        # explicit mode: one of consensus.decision's architectures except single
    roles: str = "medium"             # diversity level: low | medium | high
    volatility: str = "moderate"      # low | moderate | high
    discussion_turns: int = 1         # K: discussion turns per round before acting (0 = no discussion)
    baseline: str = "none"            # none | single_llm | no_interaction | random | no_diversity
    max_agreement_turns: int = 5      # explicit decentralized / feedback strategies: at most this many votes
    inbox_max_messages: int = 10      # an LLM agent reads at most this many other agents' messages per turn
    message_max_chars: int = 300      # each agent message / report item is cut to this many characters
    rounds: int = 20                  # T (paper: 20 or 30)

    def _check_discussion(self) -> None:
        for name, valid in (("planner", PLANNERS), ("mode", MODES), ("roles", ROLE_LEVELS),
                            ("volatility", VOLATILITIES), ("baseline", BASELINES),
                            ("strategy", explicit_strategies())):
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

    def resolved(self):
        """The settings the configured baseline means; ``self`` when none."""
        changes = baseline_changes(self.baseline, "num_agents")
        return dataclasses.replace(self, **changes) if changes else self

    def uses_llm(self) -> bool:
        return self.resolved().planner == "llm"

    def condition(self) -> str:
        return self.baseline if self.baseline != "none" else self.mode
