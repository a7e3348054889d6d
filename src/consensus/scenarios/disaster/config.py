"""Run configuration of the dynamic disaster response scenario (paper 2, section 4 and appendix C.1).

One flat set of parameters shared by ``consensus run disaster``, the headless runner, the batch study and the
ROS 2 nodes: every field of ``DisasterConfig`` is a ROS parameter of the same name. The YAML file is a ROS 2
parameters file with one ``/**:`` section (``config/disaster.yaml``), read by ``load_disaster_config`` exactly like
``consensus.scenarios.aggregation.config.load_config`` reads the aggregation file (the same reader and type coercion
are used).

Baselines (paper 2, section 4.4; ``consensus.discussion.baselines``) are resolved by ``DisasterConfig.resolved()``
into the plain settings they mean:

============== ===========================================================================================
baseline       what runs
============== ===========================================================================================
none           the configured mode (implicit or explicit consensus)
single_llm     "A single LLM agent performs the task alone": ONE drone, no discussion (N = 1, so no
               misallocation is possible — the paper reports MP as "-" for it)
no_interaction implicit consensus without the discussion phase (discussion_turns = 0)
random         every drone picks a uniformly random cell (seeded), no discussion
no_diversity   implicit consensus with the low-diversity roles (one shared role prompt)
============== ===========================================================================================

A baseline always runs in implicit mode; asking for a baseline together with ``mode: explicit`` is an error.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

from consensus.discussion.baselines import BASELINES, baseline_changes
from consensus.settings import (ControlParams, FlatParams, FleetParams, LLMParams, RunParams, load_flat, need,
                                need_positive)
from consensus.scenarios.disaster.prompts import ROLE_LEVELS

PLANNERS = ("heuristic", "llm", "random")
MODES = ("implicit", "explicit")
MOTIONS = ("teleport", "kinematic")
FALLBACK_POLICIES = ("stay", "heuristic")


def explicit_strategies() -> tuple[str, ...]:
    """The explicit-consensus strategies: consensus.decision's architectures except "single"."""
    from consensus.decision import ARCHITECTURES

    return tuple(a for a in ARCHITECTURES if a != "single")


@dataclass
class DisasterConfig(FlatParams, RunParams, LLMParams, ControlParams, FleetParams):
    """Parameters of one disaster response run (paper 2, scenario 1): the shared run, LLM, control and fleet groups
    of ``consensus.settings`` (``num_robots`` is the number of drones N) and the scenario's own fields."""

    # team and protocol (paper 2, sections 3.1 and 4.3, appendix C.4)
    num_robots: int = 3               # N drones
    planner: str = "heuristic"        # heuristic | llm | random
    mode: str = "implicit"            # implicit | explicit
    strategy: str = "majority"        # used in explicit mode: majority | averaging | decentralized | ... (aggregation)
    roles: str = "medium"             # diversity level: low | medium | high
    discussion_turns: int = 1         # K: discussion turns per round before acting (0 = no discussion)
    baseline: str = "none"            # none | single_llm | no_interaction | random | no_diversity
    max_agreement_turns: int = 5      # explicit decentralized / feedback strategies: at most this many votes
    fallback_policy: str = "stay"     # a drone whose LLM reply is unusable: stay on its cell | heuristic choice
    inbox_max_messages: int = 10      # an LLM drone reads at most this many other drones' messages per turn
    message_max_chars: int = 300      # each drone message is cut to this many characters
    sensor_readings: bool = False     # drones also get the disasters' exact numbers (paper 2's code); default:
                                      # the noisy textual report only (docs/disaster.md "Fidelity switches")
    rounds: int = 20                  # T (paper: 20 or 30)

    # environment (consensus.scenarios.disaster.environment.EnvConfig; paper 2, appendix C.1)
    width: int = 10
    height: int = 10
    max_active: int = 3               # K: at most this many active disasters
    volatility: str = "moderate"      # low | moderate | high
    p_new: float = 0.2                # chance of a new disaster when fewer than max_active are active
    initial_disasters: int = 2
    containment_per_drone: int = 3    # severity removed per drone on the cell per round
    alpha: float = 5.0                # clear reward per severity point at the clearing round's start
    beta: float = 2.0                 # uncontained penalty per severity point and round
    misallocation_threshold: int = 2  # M: more than M drones on one cell while a disaster is uncovered
    misallocation_cost: float = 5.0   # per wasted drone and round (MP_t)
    misallocation: str = "section_4_2"  # MP_t: section_4_2 (paper 2, 4.2) | c1 (appendix C.1's trigger)
    high_severity: int = 7            # response delay and MP section_4_2: disasters at or above this severity
    report_noise: float = 0.2         # share of contradictory or incomplete report items (<= 0.2)

    # motion: teleport (paper) or kinematic (P controller + single integrator, cell centres as targets)
    motion: str = "teleport"
    cell_size_m: float = 1.0
    round_time_s: float = 10.0        # flight time of one round (kinematic)
    target_timeout_s: float = 10.0    # ROS: a drone without a round-clock message for this long stops
    # LLM: the shared group, with paper 2's defaults (appendix C: temperature 0.7, 256 tokens)
    llm_max_tokens: int = 256
    llm_timeout_s: float = 300.0      # embedded 1.5B on 2 cores: ~40 s per drone prompt, ~2 min when 3 share the server
    parse_retries: int = 1
    llm_structured: bool = True       # request the JSON schema (response_format); off for endpoints without it

    # ROS
    round_timeout_s: float = 600.0    # ROS: a drone that has not answered a phase after this long counts as failed

    # ------------------------------------------------------------------
    def env_config(self):
        """The environment part as ``consensus.scenarios.disaster.environment.EnvConfig``."""
        from consensus.scenarios.disaster.environment import EnvConfig

        mine = set(self.field_names())
        return EnvConfig(**{f.name: getattr(self, f.name) for f in fields(EnvConfig) if f.name in mine})

    def resolved(self) -> "DisasterConfig":
        """The settings the configured baseline means (see the module docstring); ``self`` when none."""
        changes = baseline_changes(self.baseline)
        return dataclasses.replace(self, **changes) if changes else self

    def uses_llm(self) -> bool:
        """Does a run with this config call an LLM?"""
        return self.resolved().planner == "llm"

    # ------------------------------------------------------------------
    def check(self) -> None:
        def one_of(name: str, valid: tuple[str, ...]) -> None:
            value = getattr(self, name)
            need(value in valid, f"unknown {name} '{value}'; valid: {', '.join(valid)}")

        for name, valid in (("planner", PLANNERS), ("mode", MODES), ("roles", ROLE_LEVELS),
                            ("baseline", BASELINES), ("motion", MOTIONS), ("fallback_policy", FALLBACK_POLICIES)):
            one_of(name, valid)
        one_of("strategy", explicit_strategies())         # checked in implicit mode too: a typo is never silent
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
        need_positive(self, "cell_size_m", "round_time_s", "round_timeout_s")
        need(self.kinematics == "single_integrator", "the drones fly as single integrators (kinematics: "
             f"single_integrator; got '{self.kinematics}')")
        need(self.control_period_s <= self.round_time_s, "control_period_s must not exceed round_time_s")
        self.env_config().validate()


def load_disaster_config(path=None, **overrides: Any) -> DisasterConfig:
    """Load and validate a ``/**:`` parameters file (or the defaults), then apply the non-None overrides."""
    return load_flat(DisasterConfig, path, **overrides)
