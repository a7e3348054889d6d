"""Role prompts and diversity levels (paper 2, sections 3.1 and 4.3).

*Low* diversity: every agent gets the one shared role. *Medium*: 2-3 distinct cooperative roles, agent i gets
``medium[i % len(medium)]``. *High*: more distinct roles, some with conflicting heuristics, agent i gets
``high[i % len(high)]`` (a scenario may override ``RoleSet.role_for`` to make every role unique).
"""
from __future__ import annotations

from dataclasses import dataclass

from consensus.errors import ConfigError

ROLE_LEVELS = ("low", "medium", "high")


@dataclass(frozen=True)
class Role:
    key: str            # machine name, also used by a heuristic agent's weights
    title: str          # the {role} slot of a template
    instructions: str   # the role-specific guidelines


@dataclass(frozen=True)
class RoleSet:
    """The roles of one scenario by diversity level (keys into ``roles``)."""
    roles: dict
    low: str
    medium: tuple
    high: tuple

    def role_for(self, level: str, agent_id: int) -> Role:
        if level == "low":
            return self.roles[self.low]
        if level == "medium":
            return self.roles[self.medium[agent_id % len(self.medium)]]
        if level == "high":
            return self.roles[self.high[agent_id % len(self.high)]]
        raise ConfigError(f"unknown roles level '{level}'; valid: {', '.join(ROLE_LEVELS)}")
