"""Role prompts of the disaster drones by diversity level (paper 2, section 4.3; appendices C.1, C.5, F.1, F.2).

The paper's role families are the three F.2 "Role Types", named the same in F.1's dialogue analysis ("Drone 0
(Medical)", "Drone 1 (Infrastructure)", "Drone 2 (Logistics)"; "casualty rescue, infrastructure defense, supply
logistics"): **Medical Drone**, **Infrastructure Drone**, **Logistics Drone**. Their texts are F.2's, extended with
the C.5 sample prompts (medical kits, "greatest threat to people"; "critical facilities ... for the long run"). The
low-diversity text "Always address the highest severity zone." is C.1's example.

* low: every drone gets ``responder`` (one shared prompt);
* medium: drone i -> ``FAMILIES[i % 3]`` (C.1 "two or three distinct prompts");
* high (C.1 "each agent has a unique role with potentially conflicting heuristics"): drone i gets a text generated
  from its family and three clause axes, by index (no randomness, no LLM):

  - family ``FAMILIES[i % 3]``;
  - focus ``FOCUS[i % 8]`` (always present; several conflict on purpose with "highest severity first");
  - tie-break ``TIE_BREAKS[(i // 24) % 6]`` (the first is none);
  - severity floor ``FLOORS[i // 144]`` (the first is none; k: "zones below severity k are low priority").

  Since 3 and 8 are coprime, i mod 24 fixes (family, focus) one-to-one (Chinese remainder theorem), so the
  ``HIGH_CAPACITY`` = 24 x 6 x 8 = 1152 indices map to distinct clause combinations and therefore to distinct
  texts; ``num_robots`` is at most 1000. Drones 0..23 get family + focus only (e.g. drone 0: Medical Drone +
  scout). The clause wording is ours; the first six focuses are the six extra high-diversity roles used before
  (scout, firefighting, reconnaissance, hazmat, evacuation, perimeter), the last two cover the other disaster kinds.

A generated role's ``key`` lists its parts, ``family/focus[/tie-break][/minK]`` (e.g. ``medical/scout``,
``logistics/fire/near/min4``); the heuristic drone scores a disaster by the family's weights plus one term per part
(``consensus.scenarios.disaster.agents``).
"""
from __future__ import annotations

from dataclasses import dataclass

from consensus.discussion.roles import ROLE_LEVELS, Role, RoleSet
from consensus.errors import ConfigError

ROLES: dict[str, Role] = {r.key: r for r in (
    Role("responder", "Response Drone", "Always address the highest severity zone."),
    Role("medical", "Medical Drone",
         "Focus on rescuing casualties in highest-severity disaster zones for people. You have limited medical "
         "kits: always prioritize zones with potential casualties, and if multiple high-severity disasters exist, "
         "choose the one with the greatest threat to people."),
    Role("infrastructure", "Infrastructure Drone",
         "Protect power lines and roads. Even if severity is high elsewhere, prioritize built structures: your "
         "mission is to prevent damage to critical facilities (power grid, roads, bridges, hospitals) for the long "
         "run."),
    Role("logistics", "Logistics Drone",
         "Minimize travel cost. Quickly move to nearest active zone if severity is above 5."),
)}

LOW_ROLE = "responder"
FAMILIES = ("medical", "infrastructure", "logistics")      # F.2 "Role Types" (F.1: Medical, Infrastructure, Logistics)
MEDIUM_ROLES = FAMILIES


@dataclass(frozen=True)
class Clause:
    key: str        # part of the generated role's key (the heuristic drone's weights)
    label: str      # focus only: shown in the title, "Medical Drone (scout)"
    text: str


FOCUS = (
    Clause("scout", "scout", "Reach newly reported disasters first and confirm what is really there; prefer zones "
                             "that no other drone has announced, even if their severity is lower."),
    Clause("fire", "firefighting", "You carry fire suppressant: fires come first, the most severe fire first."),
    Clause("recon", "reconnaissance", "Verify uncertain information: go where the situation report is "
                                      "contradictory, incomplete or unconfirmed, rather than where the team is."),
    Clause("hazmat", "hazmat", "You carry hazmat gear: chemical spills come first, whatever their severity."),
    Clause("evacuation", "evacuation", "Stay with the zone that threatens the most people until it is cleared; do "
                                       "not switch zones while your current zone is still active."),
    Clause("perimeter", "perimeter", "Cover what the rest of the team neglects: prefer the active zone with the "
                                     "fewest drones announced, even if its severity is low."),
    Clause("flood", "water rescue", "You carry rescue boats: floods come first, the most severe flood first."),
    Clause("collapse", "urban search and rescue", "You carry lifting gear: building collapses come first."),
)
TIE_BREAKS = (
    None,
    Clause("near", "", "When zones look equally urgent, take the one nearest to you."),
    Clause("casualties", "", "When zones look equally urgent, take the one with the most casualties."),
    Clause("infra", "", "When zones look equally urgent, take the one with infrastructure at risk."),
    Clause("newest", "", "When zones look equally urgent, take the most recently reported one."),
    Clause("fewest", "", "When zones look equally urgent, take the one with the fewest drones announced."),
)
FLOORS = (None, 2, 3, 4, 5, 6, 7, 8)
FLOOR_TEXT = "Treat zones below severity {k} as low priority unless nothing else is active."
HIGH_CAPACITY = len(FAMILIES) * len(FOCUS) * len(TIE_BREAKS) * len(FLOORS)      # 1152 distinct high roles


def high_role(drone_id: int) -> Role:
    """The generated high-diversity role of drone ``drone_id`` (module docstring); unique for ids below
    ``HIGH_CAPACITY``."""
    if not 0 <= drone_id < HIGH_CAPACITY:
        raise ConfigError(f"high-diversity roles exist for drones 0..{HIGH_CAPACITY - 1} (got drone {drone_id})")
    family = ROLES[FAMILIES[drone_id % len(FAMILIES)]]
    focus = FOCUS[drone_id % len(FOCUS)]
    pair = len(FAMILIES) * len(FOCUS)
    tie = TIE_BREAKS[(drone_id // pair) % len(TIE_BREAKS)]
    floor = FLOORS[drone_id // (pair * len(TIE_BREAKS))]
    keys = [family.key, focus.key] + ([tie.key] if tie else []) + ([f"min{floor}"] if floor else [])
    texts = [family.instructions, focus.text] + ([tie.text] if tie else []) + (
        [FLOOR_TEXT.format(k=floor)] if floor else [])
    return Role("/".join(keys), f"{family.title} ({focus.label})", " ".join(texts))


class DisasterRoles(RoleSet):
    """``RoleSet`` whose high level is generated (``high_role``): unique for every drone of a fleet."""

    def role_for(self, level: str, agent_id: int) -> Role:
        if level == "high":
            return high_role(agent_id)
        return super().role_for(level, agent_id)


ROLE_SET = DisasterRoles(ROLES, LOW_ROLE, MEDIUM_ROLES, FAMILIES)


def role_for(level: str, drone_id: int) -> Role:
    """The role of drone ``drone_id`` at diversity ``level`` (low | medium | high)."""
    if level not in ROLE_LEVELS:
        raise ConfigError(f"unknown roles level '{level}'; valid: {', '.join(ROLE_LEVELS)}")
    return ROLE_SET.role_for(level, drone_id)
