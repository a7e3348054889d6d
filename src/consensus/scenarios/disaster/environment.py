"""The closed-loop disaster environment of paper 2, scenario 1 (appendices B.1 and C.1).

ROS-free and seeded: every random draw comes from one ``numpy.random.default_rng(seed)``, in a fixed order, so the
same config and seed give the same disasters, reports and outcomes for the same drone cells.

Grid and disasters
    A ``width`` x ``height`` grid (default 10 x 10), cells ``(x, y)`` with ``0 <= x < width``, ``0 <= y < height``.
    At most ``max_active`` (K = 3) disasters are active; each occupies one cell and no two active disasters share a
    cell. A disaster has an integer severity ``s`` in [1, 10] while active (0 once cleared), a ``kind``
    (``DISASTER_KINDS``), ``casualties`` (drawn at appearance, uniform in [0, 3 s]) and ``infrastructure`` at risk
    ("" with probability 1/2, else one of ``INFRASTRUCTURE``). A new disaster (``initial_disasters`` at
    construction, later spawns) gets a severity uniform in [``new_severity_min``, ``new_severity_max``] (3..9) on a
    cell drawn uniformly among the cells not occupied by an active disaster.

Round protocol (appendix C.4): ``begin_round()`` -> observation and situation report; the drones discuss and act;
``end_round(drone_cells, actions)`` -> containment, rewards, penalties and the round's metrics.

Environment update (``begin_round`` of every round except the first; round t = 1, 2, ...), in this order:
    1. severity: each active disaster, with probability ``severity_change_prob``, changes by +-k, k uniform in
       1..``severity_step_max`` (sign 50/50), clipped to [1, 10] (only drones clear a disaster);
    2. moves: on rounds with ``t % move_every == 0`` each active disaster (in id order), with probability
       ``move_prob``, moves to a 4-neighbour cell drawn uniformly among those on the grid and not occupied by
       another active disaster (it stays if there is none);
    3. spawn: if fewer than K are active, a new disaster appears with probability ``p_new * spawn_scale``;
    4. forced shock (high volatility only): if neither a move nor a spawn happened, a spawn happens if fewer than
       K are active, else one movable disaster (drawn uniformly) moves.

    preset    move_every  move_prob  severity_change_prob  severity_step_max  spawn_scale  forced_shock
    low       3           0.5        0.3                   1                  0.5          no
    moderate  2           0.5        0.5                   2                  1.0          no
    high      1           0.5        0.7                   3                  1.5          yes

    (C.1: low = "rarely move (once every 3 rounds), severity +-1"; moderate = "move or spawn every 2 rounds, up to
    +-2"; high = "every round at least one shift or new disaster, up to +-3"; p_new = 0.2 is the paper's spawn
    probability, used as is at moderate volatility; the spawn scales 0.5/1/1.5 give spawn probabilities
    0.1/0.2/0.3 at p_new = 0.2, those of public implementation B.)

Closed loop (``end_round``; appendix C.1 "Rewards and Penalties"); s0 = severity at the round's start (the ground truth
in the round's observation), n = number of drones on the disaster's cell at the round's end:
    containment      s <- s0 - containment_per_drone * n           (3 per drone; the drone attends for the round)
    cleared          when s <= 0: the disaster is removed (severity recorded as 0) and earns alpha * s0  (alpha = 5)
    uncontained      every disaster still active after containment costs beta * s (its remaining severity; beta = 2)
    misallocation    misallocation_cost * MP_t, with MP_t the misallocation penalty of the round (wasted drones,
                     ``misallocation``: section_4_2 (default) or c1, see ``consensus.scenarios.disaster.metrics``)
    net reward       alpha-rewards - uncontained penalties - misallocation costs (per round; summed over a run)

``end_round`` is O(N + K) for N drones.
"""
from __future__ import annotations

import dataclasses
import math
import operator
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from consensus.errors import ConfigError
from consensus.scenarios.disaster import metrics
from consensus.scenarios.disaster.reports import SituationReporter
from consensus.scenarios.disaster.world import (CASUALTIES_PER_SEVERITY, DISASTER_KINDS, INFRASTRUCTURE,  # noqa: F401
                                               INFRASTRUCTURE_PROB, MAX_GRID_SIDE, SEVERITY_MAX, SEVERITY_MIN, Cell,
                                               Disaster,
                                               Observation, ReportItem, RoundOutcome, cell_centre, clamp_cell,
                                               in_grid, neighbours)

@dataclass(frozen=True)
class Volatility:
    """How fast the environment changes (paper 2, appendix C.1 "Volatility Settings"). The presets (``VOLATILITY``):
    low: moves every 3rd round (p 0.5), severity +-1 (p 0.3), spawn p_new x 0.5; moderate: every 2nd round (p 0.5),
    +-1..2 (p 0.5), p_new x 1; high: every round (p 0.5), +-1..3 (p 0.7), p_new x 1.5, and at least one move or
    spawn per round (forced shock)."""

    name: str
    move_every: int                 # moves are possible on update rounds t with t % move_every == 0
    move_prob: float                # per active disaster, on such a round
    severity_change_prob: float     # per active disaster, every update round
    severity_step_max: int          # a change is +-k, k uniform in 1..severity_step_max
    spawn_scale: float              # spawn probability = min(1, p_new * spawn_scale)
    forced_shock: bool              # at least one move or spawn on every update round

    def spawn_probability(self, p_new: float) -> float:
        return min(1.0, p_new * self.spawn_scale)


VOLATILITY: dict[str, Volatility] = {
    "low": Volatility("low", move_every=3, move_prob=0.5, severity_change_prob=0.3, severity_step_max=1,
                      spawn_scale=0.5, forced_shock=False),
    "moderate": Volatility("moderate", move_every=2, move_prob=0.5, severity_change_prob=0.5, severity_step_max=2,
                           spawn_scale=1.0, forced_shock=False),
    "high": Volatility("high", move_every=1, move_prob=0.5, severity_change_prob=0.7, severity_step_max=3,
                       spawn_scale=1.5, forced_shock=True),
}


@dataclass(frozen=True)
class EnvConfig:
    """Parameters of the disaster environment (paper 2, appendix C.1). ``validate()`` checks every field."""

    width: int = 10
    height: int = 10
    max_active: int = 3                # K
    volatility: str = "moderate"       # key of VOLATILITY
    p_new: float = 0.2                 # spawn probability per update round (times the preset's spawn_scale)
    initial_disasters: int = 2         # active at round 0
    containment_per_drone: int = 3     # severity removed per drone attending a cell for a round
    alpha: float = 5.0                 # clear reward alpha * s0
    beta: float = 2.0                  # uncontained penalty beta * s per round
    misallocation_threshold: int = 2   # M
    misallocation_cost: float = 5.0    # cost per wasted drone (MP_t) in a round
    misallocation: str = "section_4_2"  # MP_t definition: section_4_2 (paper 2, 4.2) | c1 (appendix C.1's trigger)
    high_severity: int = 7             # response delay and MP section_4_2: disasters with severity >= this
    report_noise: float = 0.2          # max share of contradictory/incomplete report items (<= 0.2)
    new_severity_min: int = 3          # severity of a new disaster: uniform in [new_severity_min, new_severity_max]
    new_severity_max: int = 9

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the first bad field."""
        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise ConfigError(msg)

        for name in ("width", "height", "max_active", "initial_disasters", "containment_per_drone",
                     "misallocation_threshold", "high_severity", "new_severity_min", "new_severity_max"):
            value = getattr(self, name)
            need(isinstance(value, (int, np.integer)) and not isinstance(value, bool),
                 f"{name} must be an integer (got {value!r})")
        for name in ("p_new", "alpha", "beta", "misallocation_cost", "report_noise"):
            value = getattr(self, name)
            need(isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
                 and math.isfinite(value), f"{name} must be a finite number (got {value!r})")
        for name in ("width", "height"):
            value = getattr(self, name)
            need(2 <= value <= MAX_GRID_SIDE, f"{name} must be in [2, {MAX_GRID_SIDE}] (got {value})")
        cells = self.width * self.height
        need(1 <= self.max_active <= cells // 2,
             f"max_active must be in [1, {cells // 2}] (at most half the {cells} grid cells; got {self.max_active})")
        need(self.misallocation in metrics.MISALLOCATION,
             f"unknown misallocation '{self.misallocation}'; valid: {', '.join(metrics.MISALLOCATION)}")
        need(self.volatility in VOLATILITY,
             f"unknown volatility '{self.volatility}'; valid: {', '.join(VOLATILITY)}")
        need(0.0 <= self.p_new <= 1.0, f"p_new must be in [0, 1] (got {self.p_new})")
        need(0 <= self.initial_disasters <= self.max_active,
             f"initial_disasters must be in [0, max_active={self.max_active}] (got {self.initial_disasters})")
        need(self.containment_per_drone >= 1,
             f"containment_per_drone must be >= 1 (got {self.containment_per_drone})")
        for name in ("alpha", "beta", "misallocation_cost"):
            need(getattr(self, name) >= 0, f"{name} must be >= 0 (got {getattr(self, name)})")
        need(self.misallocation_threshold >= 1,
             f"misallocation_threshold must be >= 1 (got {self.misallocation_threshold})")
        need(SEVERITY_MIN <= self.high_severity <= SEVERITY_MAX,
             f"high_severity must be in [{SEVERITY_MIN}, {SEVERITY_MAX}] (got {self.high_severity})")
        need(0.0 <= self.report_noise <= 0.2,
             f"report_noise must be in [0, 0.2] (paper 2: up to 20% of the reports; got {self.report_noise})")
        need(SEVERITY_MIN <= self.new_severity_min <= self.new_severity_max <= SEVERITY_MAX,
             f"need {SEVERITY_MIN} <= new_severity_min <= new_severity_max <= {SEVERITY_MAX} "
             f"(got {self.new_severity_min}, {self.new_severity_max})")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class DisasterEnv:
    """The environment; see the module docstring for the exact rules."""

    def __init__(self, cfg: EnvConfig, seed: int) -> None:

        cfg.validate()
        self.cfg = cfg
        self.seed = seed
        self.volatility = VOLATILITY[cfg.volatility]
        self.rng = np.random.default_rng(seed)
        self.round = 0                        # rounds completed so far
        self._disasters: list[Disaster] = []  # every disaster so far, in id order
        self._active: list[Disaster] = []     # the active ones, in id order
        self._in_round = False
        self._reporter = SituationReporter(cfg.width, cfg.height, cfg.report_noise, self.rng)
        for _ in range(cfg.initial_disasters):
            self._spawn()

    # ------------------------------------------------------------------ round protocol
    def begin_round(self) -> Observation:
        """Environment update (from the second round on), then the situation report of this round."""
        if self._in_round:
            raise RuntimeError("begin_round called twice without end_round")
        if self.round > 0:
            self._update()
        for d in self._active:
            if d.high_round is None and d.severity >= self.cfg.high_severity:
                d.high_round = self.round
        report = self._reporter.report(self._active)
        self._in_round = True
        return Observation(round=self.round, width=self.cfg.width, height=self.cfg.height,
                           disasters=tuple(dataclasses.replace(d) for d in self._active), report=report,
                           report_text="\n".join(item.text for item in report))

    def end_round(self, drone_cells: Sequence[Cell], actions: Sequence[Cell] | None = None) -> RoundOutcome:
        """Apply the drones' attendance (``drone_cells``: where each drone is at the round's end); ``actions``
        are the cells they chose (for the deviation metric; default ``drone_cells``). Off-grid -> ValueError."""
        if not self._in_round:
            raise RuntimeError("end_round called without begin_round")
        cells = self._checked_cells(drone_cells, "drone_cells")
        chosen = None if actions is None else self._checked_cells(actions, "actions")
        if chosen is not None and len(chosen) != len(cells):
            raise ValueError(f"actions has {len(chosen)} entries for {len(cells)} drones")
        cfg, t = self.cfg, self.round
        counts = Counter(cells)
        faced = self._active
        before = {d.id: d.severity for d in faced}
        attended, cleared, remaining = [], [], []
        reward = 0.0
        for d in faced:
            n = counts.get(d.cell, 0)
            if n:
                attended.append(d.id)
                self._mark_attended(d, t)
                d.severity -= cfg.containment_per_drone * n
            if d.severity <= 0:
                d.severity, d.cleared_round = 0, t
                cleared.append(d.id)
                reward += cfg.alpha * before[d.id]
            else:
                remaining.append(d)
        disaster_cells = [d.cell for d in faced]
        if cfg.misallocation == "c1":
            wasted = metrics.misallocation_penalty(disaster_cells, counts, cfg.misallocation_threshold)
        else:
            wasted = metrics.misallocation_section_4_2([(d.cell, before[d.id]) for d in faced], counts,
                                                       cfg.high_severity)
        penalty = cfg.beta * sum(d.severity for d in remaining)
        cost = cfg.misallocation_cost * wasted
        round_metrics = {
            "coverage": metrics.coverage(disaster_cells, counts),
            "misallocation_penalty": wasted,
            "deviation": metrics.action_deviation(cells if chosen is None else chosen),
            "active": len(faced), "attended": len(attended), "cleared": len(cleared),
        }
        self._active = remaining
        self._in_round = False
        self.round += 1
        return RoundOutcome(round=t, drone_cells=cells, actions=chosen, attended=attended, severity_before=before,
                            severity_after={d.id: d.severity for d in faced}, cleared=cleared,
                            reward_cleared=reward, penalty_uncontained=penalty, misallocation_cost=cost,
                            net_reward=reward - penalty - cost, metrics=round_metrics)

    # ------------------------------------------------------------------ state
    def active(self) -> list[Disaster]:
        """Copies of the active disasters, in id order."""
        return [dataclasses.replace(d) for d in self._active]

    def all_disasters(self) -> list[Disaster]:
        """Copies of every disaster so far (active and cleared), in id order."""
        return [dataclasses.replace(d) for d in self._disasters]

    def snapshot(self) -> dict[str, Any]:
        """The full state, JSON-able."""
        return {"round": self.round, "seed": self.seed, "in_round": self._in_round, "config": self.cfg.to_dict(),
                "active": [d.id for d in self._active], "disasters": [d.to_dict() for d in self._disasters],
                "report_items_total": self._reporter.items_total,
                "report_items_noisy": self._reporter.items_noisy}

    # ------------------------------------------------------------------ internals
    def _checked_cells(self, cells: Sequence[Cell], name: str) -> list[Cell]:
        if len(cells) == 0:
            raise ValueError(f"{name} is empty: need one cell per drone")
        w, h = self.cfg.width, self.cfg.height
        out = []
        for i, c in enumerate(cells):
            try:
                x, y = c
                x, y = operator.index(x), operator.index(y)
            except (TypeError, ValueError):
                raise ValueError(f"{name}[{i}] is not an (x, y) pair of integers: {c!r}") from None
            if not (0 <= x < w and 0 <= y < h):
                raise ValueError(f"{name}[{i}] = {(x, y)} is off the {w}x{h} grid")
            out.append((x, y))
        return out

    @staticmethod
    def _mark_attended(d: Disaster, t: int) -> None:
        if d.first_attended_round is None:
            d.first_attended_round = t
        if d.high_round is not None and d.high_attended_round is None:
            d.high_attended_round = t

    def _update(self) -> None:
        rng, vol, t = self.rng, self.volatility, self.round
        for d in self._active:
            if rng.random() < vol.severity_change_prob:
                step = int(rng.integers(1, vol.severity_step_max + 1)) * (1 if rng.random() < 0.5 else -1)
                d.severity = min(max(d.severity + step, SEVERITY_MIN), SEVERITY_MAX)
        shocked = False
        if t % vol.move_every == 0:
            for d in self._active:
                if rng.random() < vol.move_prob:
                    shocked |= self._move(d)
        if len(self._active) < self.cfg.max_active and rng.random() < vol.spawn_probability(self.cfg.p_new):
            self._spawn()
            shocked = True
        if vol.forced_shock and not shocked:
            self._force_shock()

    def _force_shock(self) -> None:
        if len(self._active) < self.cfg.max_active:
            self._spawn()
            return
        movable = [d for d in self._active if self._free_neighbours(d)]
        if movable:
            self._move(movable[int(self.rng.integers(len(movable)))])

    def _free_neighbours(self, d: Disaster) -> list[Cell]:
        taken = {a.cell for a in self._active if a is not d}
        return [c for c in neighbours(d.cell, self.cfg.width, self.cfg.height) if c not in taken]

    def _move(self, d: Disaster) -> bool:
        options = self._free_neighbours(d)
        if not options:
            return False
        d.cell = options[int(self.rng.integers(len(options)))]
        return True

    def _spawn(self) -> None:
        cfg, rng = self.cfg, self.rng
        taken = {d.cell for d in self._active}
        while True:                    # at most half the cells are taken (validate), so this ends quickly
            index = int(rng.integers(cfg.width * cfg.height))
            cell = (index % cfg.width, index // cfg.width)
            if cell not in taken:
                break
        severity = int(rng.integers(cfg.new_severity_min, cfg.new_severity_max + 1))
        kind = DISASTER_KINDS[int(rng.integers(len(DISASTER_KINDS)))]
        casualties = int(rng.integers(0, CASUALTIES_PER_SEVERITY * severity + 1))
        infrastructure = (INFRASTRUCTURE[int(rng.integers(len(INFRASTRUCTURE)))]
                          if rng.random() < INFRASTRUCTURE_PROB else "")
        d = Disaster(id=len(self._disasters), cell=cell, severity=severity, kind=kind, casualties=casualties,
                     infrastructure=infrastructure, appeared_round=self.round)
        self._disasters.append(d)
        self._active.append(d)
