"""The drone agents of paper 2's disaster response scenario: one agent per drone (section 3.2, "a 1:1 mapping").

Every agent is a ``consensus.discussion.agents.DiscussionAgent`` (``discuss``, ``act``, ``vote``/``propose``; the
steps, the vote context and the counters are described there), whose ``own`` state is the drone's cell. ``inbox``
holds ``InboxMessage`` s of the other drones (the round protocol in ``consensus.discussion.rounds`` builds it). Every
step returns a ``DroneReply`` (``consensus.discussion.replies.Reply``); its ``action`` is always a cell on the grid or
``None`` (only when the drone does not know its own cell and must stay put).

Agents:

* ``LLMDrone``: the paper's LLM agent (prompts in ``consensus.scenarios.disaster.prompts``), structured output
  (``response_format`` = the JSON schema), ``parse_retries`` correction turns, then a counted fallback:
  ``llm_error`` (the client gave up after its own retries), ``client_error`` (any other client exception),
  ``unparseable`` (no usable JSON / action not two integers), ``off_grid`` (a cell outside the grid in the last
  reply). The fallback action is ``fallback_policy``: ``idle`` (stay on the own cell), or ``heuristic``: what
  ``HeuristicDrone`` would choose. A message is cleaned and cut to ``message_max_chars`` (counted
  ``messages_truncated``); a missing or empty one is ``""`` (counted ``messages_empty``; other drones read
  "(no message)"). Request seeds are ``seed + drone_id`` (identical prompts of two drones replay to their own
  answers).
* ``HeuristicDrone``: classical, no LLM. Knows the disasters as the LLM does: from the situation report's text
  (``reports.read_report``: located alerts, rumours ignored, "severity unknown" = the severity last reported on
  that cell, else 5), or with ``sensor_readings`` from the exact readings. Scores each known disaster by the role
  (``role_score``: the family's ``ROLE_SCORES`` plus the ``PART_SCORES`` terms of a generated high-diversity role),
  ties broken by Manhattan distance, then id. *Unattended* greedy with coordination by drone index: a disaster needs
  ``need(d) = max(1, min(M, ceil(s / containment_per_drone)))`` drones (M = ``misallocation_threshold``); drone i
  counts the cells proposed by drones j < i in its inbox and takes its best-scored disaster with fewer than
  ``need(d)`` such claims — its own last target first, while that disaster is active and still needs it (so
  lower-index drones' claims stay valid from the discussion to the action) — and when all are served it joins the
  one with the lowest claims/need ratio (the extra drones spread). With an empty inbox (first turn, no
  interaction) drone i takes the disaster ranked ``i mod k`` in its own ranking. Votes: its top disaster at turn 0;
  later turns adopt the coordinator's plan when shown,
  else the majority of the previous turn when shown (feedback), else its previous vote. No disaster: stay.
* ``RandomDrone``: a uniformly random cell from its own generator ``default_rng([seed, 7, drone_id])``.

Coordinators for spoke & wheel (consensus.decision's ``Coordinator``; ``prepare(obs, roles)`` before a round):
``LLMCoordinator`` asks the LLM to merge the votes into one cell (a failure returns ``None``: the aggregation
counts it and falls back to the majority vote); ``HeuristicCoordinator`` picks the voted cell holding the most
severe active disaster (ties: more votes, then the earlier vote), or the majority vote when no vote is on a
disaster.
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Sequence

import numpy as np

from consensus.decision import majority_vote
from consensus.discussion import agents as discussion
from consensus.discussion.agents import DiscussionAgent
from consensus.discussion.replies import InboxMessage  # noqa: F401 - part of this module's interface
from consensus.discussion.replies import Reply as DroneReply
from consensus.discussion.replies import add_agent_counters as add_drone_counters  # noqa: F401
from consensus.discussion.replies import agent_counters as drone_counters  # noqa: F401
from consensus.errors import ConfigError
from consensus.llm.base import LLMClient
from consensus.scenarios.disaster.prompts import (Role, coordinator_messages, discussion_phase, drone_messages,
                                                  implicit_phase, inbox_text, parse_reply, response_schema,
                                                  retry_message, role_for, situation_text, vote_phase)
from consensus.scenarios.disaster.reports import ReportedDisaster, read_report

Cell = tuple[int, int]


def manhattan(a: Sequence[int], b: Sequence[int]) -> int:
    return abs(int(a[0]) - int(b[0])) + abs(int(a[1]) - int(b[1]))


class DroneAgent(DiscussionAgent):
    """A discussion agent (consensus.discussion.agents) flying one drone; ``own`` is its cell."""

    def __init__(self, drone_id: int, role: Role, cfg) -> None:
        super().__init__(drone_id, role, cfg)

    @property
    def drone_id(self) -> int:
        return self.agent_id


# --- heuristic -------------------------------------------------------------------------------------------------------
@dataclass
class _View:
    """What a role's score may look at."""
    obs: Any
    own_cell: Cell | None
    inbox: Sequence[InboxMessage]
    me: int                         # this drone's id (its own messages do not count)
    noisy: frozenset                # ids of disasters whose report item is (or, reports only, looks) unreliable

    def dist(self, d) -> int:
        return 0 if self.own_cell is None else manhattan(self.own_cell, d.cell)

    def new(self, d) -> bool:
        """Reported for the first time this round (readings: appeared this round or the one before)."""
        return d.new if isinstance(d, ReportedDisaster) else self.obs.round - d.appeared_round <= 1

    @cached_property
    def claims(self) -> Counter:
        """Cells proposed in the inbox (only the roles that look at them pay for counting)."""
        return Counter(m.proposal for m in self.inbox if m.proposal is not None and m.sender != self.me)


Score = Callable[[Any, _View], float]

#: role family key -> score of a disaster (higher first); s = severity
ROLE_SCORES: dict[str, Score] = {
    "responder": lambda d, v: d.severity,
    "medical": lambda d, v: d.severity + d.casualties / 5,
    "infrastructure": lambda d, v: d.severity + (6 if d.infrastructure else 0),
    "logistics": lambda d, v: (10 if d.severity > 5 else 0) - v.dist(d),
}
#: part of a generated high-diversity role's key (consensus.scenarios.disaster.roles) -> term added to the score;
#: focus terms are large (a conflicting priority), tie-break terms small
PART_SCORES: dict[str, Score] = {
    "scout": lambda d, v: (5 if v.new(d) else 0) - 3 * v.claims[d.cell],
    "fire": lambda d, v: 10 if d.kind == "fire" else 0,
    "recon": lambda d, v: 5 if d.id in v.noisy else 0,
    "hazmat": lambda d, v: 10 if d.kind == "chemical_spill" else 0,
    "evacuation": lambda d, v: d.casualties / 5 + (8 if d.cell == v.own_cell else 0),
    "perimeter": lambda d, v: -3 * v.claims[d.cell],
    "flood": lambda d, v: 10 if d.kind == "flood" else 0,
    "collapse": lambda d, v: 10 if d.kind == "building_collapse" else 0,
    "near": lambda d, v: -0.1 * v.dist(d),
    "casualties": lambda d, v: 0.05 * d.casualties,
    "infra": lambda d, v: 1 if d.infrastructure else 0,
    "newest": lambda d, v: 1 if v.new(d) else 0,
    "fewest": lambda d, v: -v.claims[d.cell],
}
FLOOR_PENALTY = 10          # "minK": a disaster below severity K loses this much
UNKNOWN_SEVERITY = 5        # reports only: "severity unknown" and never seen before -> assumed mid-scale


def role_score(key: str) -> Score:
    """The score of a role key: a family (``ROLE_SCORES``; unknown -> responder) plus one term per part."""
    family, *parts = key.split("/")
    base = ROLE_SCORES.get(family, ROLE_SCORES["responder"])
    terms = [PART_SCORES[p] for p in parts if p in PART_SCORES]
    floor = max([int(p[3:]) for p in parts if p.startswith("min") and p[3:].isdigit()], default=0)
    return lambda d, v: (base(d, v) + sum(t(d, v) for t in terms)
                         - (FLOOR_PENALTY if d.severity < floor else 0))


class HeuristicDrone(DroneAgent):
    """Classical drone: role-weighted, unattended-first greedy with coordination by drone index (module docstring)."""

    def __init__(self, drone_id: int, role: Role, cfg) -> None:
        super().__init__(drone_id, role, cfg)
        self._target: int | None = None      # id of the disaster this drone last proposed or chose
        self._score = role_score(role.key)
        self._seen: dict[Cell, int] = {}     # reports only: last reported severity per cell

    def known(self, obs) -> tuple[Sequence[Any], frozenset]:
        """(disasters, ids of unreliable ones): the sensor readings and the items' true quality with
        ``sensor_readings``; else what the report's text says (``reports.read_report``), a "severity unknown"
        taken as the severity last reported on that cell (``UNKNOWN_SEVERITY`` if none)."""
        if self.cfg.sensor_readings:
            return obs.disasters, frozenset(item.disaster_id for item in obs.report
                                            if item.quality != "accurate" and item.disaster_id is not None)
        return read_known(obs, self._seen)

    def ranking(self, obs, inbox: Sequence[InboxMessage], own_cell: Cell | None) -> list:
        """Active disasters as known (``known``), best first for this drone's role."""
        disasters, noisy = self.known(obs)
        view = _View(obs, own_cell, inbox, self.drone_id, noisy)
        return sorted(disasters, key=lambda d: (-self._score(d, view), view.dist(d), d.id))

    def need(self, d) -> int:
        return max(1, min(self.cfg.misallocation_threshold,
                          math.ceil(d.severity / self.cfg.containment_per_drone)))

    def choose(self, obs, inbox: Sequence[InboxMessage], own_cell: Cell | None):
        """The disaster this drone goes to (None when there is none)."""
        ranked = self.ranking(obs, inbox, own_cell)
        if not ranked:
            return None
        if not any(m.sender != self.drone_id for m in inbox):
            return ranked[self.drone_id % len(ranked)]
        lower = Counter(m.proposal for m in inbox if m.sender < self.drone_id and m.proposal is not None)
        kept = [d for d in ranked if d.id == self._target]
        for d in kept + ranked:
            if lower[d.cell] < self.need(d):
                return d
        return min(ranked, key=lambda d: lower[d.cell] / self.need(d))   # min keeps the best-ranked of equals

    def _reply(self, d, own_cell: Cell | None, verb: str) -> DroneReply:
        self._target = None if d is None else d.id
        if d is None:
            return DroneReply(analysis="No active disaster.", action=own_cell, message="No active disaster; holding.")
        what = f"{d.kind.replace('_', ' ')} severity {d.severity} at [{d.cell[0]}, {d.cell[1]}]"
        return DroneReply(analysis=f"{self.role.title}: best target is {what}.", action=tuple(d.cell),
                          message=f"{verb} [{d.cell[0]}, {d.cell[1]}] ({what}).")

    def _discuss(self, obs, inbox, turn, own_cell) -> DroneReply:
        return self._reply(self.choose(obs, inbox, own_cell), own_cell, "I propose")

    def _act(self, obs, inbox, own_cell) -> DroneReply:
        return self._reply(self.choose(obs, inbox, own_cell), own_cell, "Heading to")

    def _vote(self, obs, inbox, own_cell, ctx, strategy) -> DroneReply:
        if ctx.turn > 0 and ctx.coordinator_plan is not None:
            cell = tuple(ctx.coordinator_plan)
        elif ctx.turn > 0 and ctx.history:
            cell = majority_vote(ctx.history[-1])
        elif ctx.turn > 0 and ctx.own_previous is not None:
            cell = tuple(ctx.own_previous)
        else:
            ranked = self.ranking(obs, inbox, own_cell)
            cell = tuple(ranked[0].cell) if ranked else own_cell
        return DroneReply(analysis=f"{self.role.title} vote.", action=cell,
                          message=f"I vote for [{cell[0]}, {cell[1]}]." if cell is not None else "")


def read_known(obs, seen: dict | None = None) -> tuple[tuple[ReportedDisaster, ...], frozenset]:
    """The report's located alerts with a severity each (``HeuristicDrone.known``); ``seen`` (cell -> last
    reported severity) is read and updated."""
    seen = {} if seen is None else seen
    out = []
    for d in read_report(obs.report or obs.report_text.splitlines()):
        if d.severity is None:
            d = dataclasses.replace(d, severity=seen.get(d.cell, UNKNOWN_SEVERITY))
        seen[d.cell] = d.severity
        out.append(d)
    return tuple(out), frozenset(d.id for d in out if d.uncertain)


class RandomDrone(DroneAgent):
    """Random strategy baseline (section 4.4): a uniformly random cell each step, seeded per drone."""

    def __init__(self, drone_id: int, role: Role, cfg) -> None:
        super().__init__(drone_id, role, cfg)
        self.rng = np.random.default_rng([cfg.seed, 7, drone_id])

    def _random(self, obs) -> DroneReply:
        cell = (int(self.rng.integers(obs.width)), int(self.rng.integers(obs.height)))
        return DroneReply(analysis="random choice", action=cell, message="")

    def _discuss(self, obs, inbox, turn, own_cell) -> DroneReply:
        return self._random(obs)

    def _act(self, obs, inbox, own_cell) -> DroneReply:
        return self._random(obs)

    def _vote(self, obs, inbox, own_cell, ctx, strategy) -> DroneReply:
        return self._random(obs)


# --- LLM -------------------------------------------------------------------------------------------------------------
def ask_llm(client: LLMClient, messages: list[dict], *, cfg, width: int, height: int, tag: str, seed: int | None,
            with_message: bool = True) -> DroneReply:
    """One LLM decision (``consensus.discussion.agents.ask_llm``) with the drones' schema and parser: an on-grid
    action, or ``action=None`` with ``fallback=True`` and the reason (the caller picks the fallback action)."""
    return discussion.ask_llm(client, messages, cfg=cfg, parse=lambda text: parse_reply(text, width, height),
                              retry=lambda error: retry_message(error, width, height),
                              schema=response_schema(width, height, message=with_message), tag=tag, seed=seed,
                              with_message=with_message)


class LLMDrone(DroneAgent):
    """The paper's LLM-piloted drone (appendix F.2 prompt); validation and fallbacks in the module docstring."""

    def __init__(self, client: LLMClient, drone_id: int, role: Role, cfg) -> None:
        super().__init__(drone_id, role, cfg)
        self.client = client
        self._heuristic = HeuristicDrone(drone_id, role, cfg) if cfg.fallback_policy == "heuristic" else None

    def shown_inbox(self, inbox: Sequence[InboxMessage]) -> list[InboxMessage]:
        """At most ``inbox_max_messages`` messages: the senders following this drone's id, cyclically (so every
        message is read by some drone when the team is larger than the bound)."""
        return discussion.shown_inbox(self.drone_id, inbox, self.cfg.num_robots, self.cfg.inbox_max_messages)

    def _ask(self, obs, inbox, own_cell, phase: tuple[str, str], label: str) -> DroneReply:
        shown = self.shown_inbox(inbox)
        others = [m for m in inbox if m.sender != self.drone_id]
        situation = situation_text(obs, own_cell, sensor_readings=self.cfg.sensor_readings,
                                   max_chars=self.cfg.message_max_chars)
        messages = drone_messages(
            drone_id=self.drone_id, role=self.role, situation=situation,
            messages=inbox_text(shown, total=len(others), tally=[m.proposal for m in others],
                                max_chars=self.cfg.message_max_chars),
            phase=phase[0], action_item=phase[1], width=obs.width, height=obs.height)
        reply = ask_llm(self.client, messages, cfg=self.cfg, width=obs.width, height=obs.height,
                        tag=f"drone_{self.drone_id}/round_{obs.round}/{label}", seed=self.cfg.seed + self.drone_id)
        if reply.fallback:
            reply.action = self._fallback_action(obs, inbox, own_cell)
        return reply

    def _fallback_action(self, obs, inbox, own_cell: Cell | None) -> Cell | None:
        if self._heuristic is not None:
            d = self._heuristic.choose(obs, inbox, own_cell)
            if d is not None:
                return tuple(d.cell)
        return own_cell

    def _discuss(self, obs, inbox, turn, own_cell) -> DroneReply:
        return self._ask(obs, inbox, own_cell, discussion_phase(turn, max(self.cfg.discussion_turns, turn + 1)),
                         f"discuss_{turn}")

    def _act(self, obs, inbox, own_cell) -> DroneReply:
        return self._ask(obs, inbox, own_cell, implicit_phase(), "act")

    def _vote(self, obs, inbox, own_cell, ctx, strategy) -> DroneReply:
        return self._ask(obs, inbox, own_cell, vote_phase(strategy, self.cfg.max_agreement_turns, ctx),
                         f"vote_{ctx.turn}")


# --- coordinators (spoke & wheel) -------------------------------------------------------------------------------------
class HeuristicCoordinator:
    """Classical wheel: the voted cell with the most severe active disaster (as the sensor readings or, without
    them, the report's text say), else the majority vote."""

    def __init__(self, sensor_readings: bool = False) -> None:
        self.sensor_readings = sensor_readings
        self.obs = None
        self.log: list[DroneReply] = []

    def prepare(self, obs, roles: Sequence[str] = ()) -> None:
        self.obs, self.log = obs, []

    def merge(self, proposals: Sequence[Cell | None], turn: int) -> Cell | None:
        known = () if self.obs is None else self.obs.disasters if self.sensor_readings else read_known(self.obs)[0]
        severity = {tuple(d.cell): d.severity for d in known}
        votes = Counter(tuple(p) for p in proposals if p is not None)
        on_disaster = [tuple(p) for p in proposals if p is not None and tuple(p) in severity]
        if on_disaster:
            cell = max(dict.fromkeys(on_disaster), key=lambda c: (severity[c], votes[c]))
        else:
            cell = majority_vote(proposals)
        self.log.append(DroneReply(analysis="most severe voted disaster", action=cell))
        return cell


class LLMCoordinator:
    """LLM wheel: merges the drones' votes into one cell; ``None`` (counted by the aggregation) when it fails."""

    def __init__(self, client: LLMClient, cfg) -> None:
        self.client = client
        self.cfg = cfg
        self.obs = None
        self.roles: tuple[str, ...] = ()
        self.log: list[DroneReply] = []

    def prepare(self, obs, roles: Sequence[str] = ()) -> None:
        self.obs, self.roles, self.log = obs, tuple(roles), []

    def merge(self, proposals: Sequence[Cell | None], turn: int) -> Cell | None:
        obs = self.obs
        votes = [(i, self.roles[i] if i < len(self.roles) else "drone", p) for i, p in enumerate(proposals)]
        messages = coordinator_messages(situation=situation_text(obs, None, sensor_readings=self.cfg.sensor_readings,
                                                                 max_chars=self.cfg.message_max_chars),
                                        votes=votes, width=obs.width, height=obs.height)
        reply = ask_llm(self.client, messages, cfg=self.cfg, width=obs.width, height=obs.height,
                        tag=f"coordinator/round_{obs.round}/merge_{turn}", seed=self.cfg.seed, with_message=False)
        self.log.append(reply)
        return reply.action


# --- factories --------------------------------------------------------------------------------------------------------
def make_drone(cfg, drone_id: int, client: LLMClient | None = None) -> DroneAgent:
    """Drone ``drone_id`` of a (baseline-resolved) ``DisasterConfig``: its planner and its role."""
    role = role_for(cfg.roles, drone_id)
    if cfg.planner == "llm":
        if client is None:
            raise ConfigError("planner 'llm' needs an LLM client (llm_backend); none was given")
        return LLMDrone(client, drone_id, role, cfg)
    if cfg.planner == "random":
        return RandomDrone(drone_id, role, cfg)
    return HeuristicDrone(drone_id, role, cfg)


def make_drones(cfg, client: LLMClient | None = None) -> list[DroneAgent]:
    return [make_drone(cfg, i, client) for i in range(cfg.num_robots)]


def make_coordinator(cfg, client: LLMClient | None = None):
    """The spoke & wheel coordinator of an explicit run (None for the other strategies and modes)."""
    if cfg.mode != "explicit" or not cfg.strategy.startswith("spoke_wheel"):
        return None
    if cfg.planner == "llm" and client is not None:
        return LLMCoordinator(client, cfg)
    return HeuristicCoordinator(cfg.sensor_readings)
