"""Metrics of the disaster scenario (paper 2, sections 3.2 and 4.2, appendix C.1).

Notation for round t: D_t = the disasters active during the round (after the environment update, before
containment; a disaster cleared in round t belongs to D_t), n_c = number of drones on cell c at the round's end,
N = number of drones, M = ``misallocation_threshold`` (2), a_i = the cell drone i chose.

Coverage (CR, 4.2 "percentage of active disaster cells correctly attended by at least one agent")
    CR_t = |{d in D_t : n_{cell(d)} >= 1}| / |D_t|, undefined (None) when D_t is empty;
    CR = mean of CR_t over the rounds where it is defined (None if there is none).

Misallocation penalty (MP), two definitions (``misallocation``; the environment charges
``misallocation_cost * MP_t`` in round t; MP = mean of MP_t over all rounds, in drones per round;
``misallocation_share`` = mean of MP_t / N):

``section_4_2`` (default; 4.2 "Penalty incurred for assigning agents to non-disaster cells or over-allocating to
low-severity cells when high-severity cells are unattended"; B.1 "resources wasted on low-severity areas while
ignoring high-severity ones"). With s_d the severity at the round's start and h = ``high_severity`` (7):
    E_t = number of drones on cells without an active disaster
    H_t = 1 if some d in D_t has s_d >= h and n_{cell(d)} = 0, else 0          (a high-severity disaster unattended)
    L_t = number of drones on cells of disasters with s_d < h                  (on low-severity cells)
    MP_t = E_t + H_t * L_t,   and MP_t = 0 when D_t is empty (nothing to allocate to)
    A drone off every disaster is always wasted (each drone on a disaster contains 3 points, so it had a use);
    a drone on a low-severity disaster is wasted only while a high-severity one has no drone.

``c1`` (appendix C.1 "more than M drones converge on the same location while another active disaster is
uncovered", with 4.2's drones on non-disaster cells):
    U_t = 1 if some d in D_t has n_{cell(d)} = 0, else 0
    MP_t = U_t * ( sum over disaster cells c of max(0, n_c - M)  +  number of drones on no disaster cell )

Response delay (RD, 4.2 "average number of rounds taken to attend to a new high-severity disaster after its
appearance")
    A disaster is high-severity from h_d = the first round whose start (its appearance, or a later environment
    update) shows severity >= ``high_severity`` (7). RD_d = r_d - h_d with r_d = the first round >= h_d at whose end
    a drone is on its cell (0 = attended in the round it became high). Censoring: a high-severity disaster never
    attended since h_d is still active at the run's end (only drones clear disasters); it counts with
    RD_d = T - h_d (T = rounds completed), a lower bound, and is counted in ``response_censored``.
    RD = mean of RD_d over the high-severity disasters (None if there is none).

Net reward (C.1): sum over rounds of (clear rewards - uncontained penalties - misallocation costs), see
``consensus.scenarios.disaster.environment``.

Action deviation (3.2): mu(t) = the mode of the chosen cells; ties go to the tied cell chosen first (lowest drone
index), i.e. ``consensus.decision.voting.majority_vote``, the explicit-consensus vote.
d_i(t) = |x_i - x_mu| + |y_i - y_mu|, d̄(t) = (1/N) sum_i d_i(t); ``mean_deviation`` = mean of d̄(t) over rounds.

Where drones sharing a cell stand (``CellSlots``; with the collision filter, which keeps them ``d_min`` apart): the
k drones sent to one cell cannot all stand on its centre. Each takes one of k *slots* (``consensus.control.packing``,
through its robot core's ``RobotCore.set_meeting_point(point, group=...)``, sent by ``drone_control.fly_to_cell``: the
ROS drones and the headless flight alike): a hexagonal pattern of spacing ``d_min + packing_gap_m`` (0.55 m with the
defaults: clearance 0.45 m for 0.2 m footprints, gap 0.1 m), sent to ``packing.centred(centre, k, spacing)`` so that
the k slots have their bounding box centred on the cell's centre (two drones: 0.275 m either side of it, both over
the cell; the packing alone would put them at the centre and 0.55 m beside it, over the neighbouring 1 m cell).
``CellSlots`` holds the slots of the k drones of a cell as the drones compute them (that pattern, moved as a whole
inside the filter's box at the grid's walls and clamped to the geofence, as ``RobotCore`` does), their radius about
the cell's centre (``radius``), whether they fit the cell (``fits``), and the two judgements made from them with no
position but the drones' own (the grid node's odometry; the headless flight's positions): a drone has *arrived* (a
teleport flight may end) within ``radius + ARRIVE_FRACTION s`` of its chosen cell's centre, and it *attends* its
chosen cell within ``radius + s / 2`` (``attend_radius``; at least ``arrival_radius(s / 2, k, d_min)``), s =
``cell_size_m``. The judge does not know which slot each drone took (the drones assign them over the positions they
know), so it judges by the radius of the cell's whole pattern.

Fit and misallocation: the k slots *fit* the cell when every slot's centre lies in it, so a drone in its slot stands
over its chosen cell. With the defaults (0.55 m spacing, 1 m cells) up to 3 drones fit every cell and 4 every cell
not on the grid's left or right edge; 5 or more never do. More drones than fit is what the paper counts as
misallocation (appendix C.1: more than M = 2 drones on one cell; ``misallocation_threshold``): their slots reach over
the neighbouring cells, where they may take the room of another cell's slots. They still attend their chosen cell
(``attend_radius``), and a drone that cannot reach its slot by the flight's deadline is a counted flight timeout
(``consensus.scenarios.disaster.round_clock``): the round goes on. Larger cells (``cell_size_m``) fit more.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Sequence

import numpy as np

from consensus.control.packing import centred, inside, slots
from consensus.control.safety import Geofence
from consensus.decision.voting import majority_vote
from consensus.metrics.convergence import arrival_radius
from consensus.scenarios.disaster.world import Cell, Disaster, RoundOutcome, cell_centre

MISALLOCATION = ("section_4_2", "c1")     # the MP_t definitions (module docstring)


def mode_action(actions: Sequence[Cell]) -> Cell:
    """The most frequent cell; ties -> the tied cell that appears first in ``actions`` (majority-vote rule)."""
    if len(actions) == 0:
        raise ValueError("mode_action needs at least one action")
    return majority_vote([(a[0], a[1]) for a in actions])


def action_deviation(actions: Sequence[Cell]) -> float:
    """d̄(t): mean Manhattan distance of the actions to their mode."""
    mx, my = mode_action(actions)
    return sum(abs(a[0] - mx) + abs(a[1] - my) for a in actions) / len(actions)


def coverage(disaster_cells: Sequence[Cell], drone_cells: Iterable[Cell]) -> float | None:
    """CR_t: share of the disaster cells with at least one drone; None without disasters.
    ``drone_cells`` may be a sequence of cells or a Counter of them."""
    if len(disaster_cells) == 0:
        return None
    occupied = set(drone_cells)
    return sum(c in occupied for c in disaster_cells) / len(disaster_cells)


def misallocation_penalty(disaster_cells: Sequence[Cell], drone_cells: Iterable[Cell], threshold: int) -> int:
    """MP_t of ``c1``: drones wasted while some disaster is uncovered (formula in the module docstring).
    ``drone_cells`` may be a sequence of cells or a Counter of them."""
    counts = drone_cells if isinstance(drone_cells, Counter) else Counter(drone_cells)
    cells = set(disaster_cells)
    if all(counts.get(c, 0) for c in cells):
        return 0
    on_disasters = sum(counts.get(c, 0) for c in cells)
    excess = sum(max(0, counts.get(c, 0) - threshold) for c in cells)
    return excess + sum(counts.values()) - on_disasters


def misallocation_section_4_2(disasters: Sequence[tuple[Cell, int]], drone_cells: Iterable[Cell], high: int) -> int:
    """MP_t of section 4.2 (module docstring); ``disasters`` = (cell, severity at the round's start) of D_t,
    ``drone_cells`` a sequence of cells or a Counter of them, ``high`` = ``high_severity``."""
    if len(disasters) == 0:
        return 0
    counts = drone_cells if isinstance(drone_cells, Counter) else Counter(drone_cells)
    cells = {c for c, _ in disasters}
    off = sum(counts.values()) - sum(counts.get(c, 0) for c in cells)
    if not any(s >= high and not counts.get(c, 0) for c, s in disasters):
        return off
    low_cells = {c for c, s in disasters if s < high} - {c for c, s in disasters if s >= high}
    return off + sum(counts.get(c, 0) for c in low_cells)


def response_delays(disasters: Iterable[Disaster], rounds_completed: int) -> list[tuple[int, bool]]:
    """(RD_d, censored) for every disaster that became high-severity, in the given order."""
    out = []
    for d in disasters:
        if d.high_round is None:
            continue
        if d.high_attended_round is not None:
            out.append((d.high_attended_round - d.high_round, False))
        else:
            out.append((rounds_completed - d.high_round, True))
    return out


def summarize(outcomes: Sequence[RoundOutcome], everything: Sequence[Disaster], rounds_completed: int
              ) -> dict[str, Any]:
    """Run-level metrics and per-round series (JSON-able) of a run's ``outcomes`` and every disaster that appeared
    (``DisasterEnv.all_disasters()``). RD censoring takes ``rounds_completed`` (``DisasterEnv.round``) as the run's
    end."""
    cov = [o.metrics["coverage"] for o in outcomes]
    mp = [o.metrics["misallocation_penalty"] for o in outcomes]
    delays = response_delays(everything, rounds_completed)
    return {
        "rounds": len(outcomes),
        "coverage_rate": _mean([c for c in cov if c is not None]),
        "misallocation_penalty": _mean(mp),
        "misallocation_share": _mean([m / len(o.drone_cells) for m, o in zip(mp, outcomes)]),
        "response_delay": _mean([r for r, _ in delays]),
        "response_delay_disasters": len(delays),
        "response_censored": sum(c for _, c in delays),
        "net_reward": float(sum(o.net_reward for o in outcomes)),
        "reward_cleared": float(sum(o.reward_cleared for o in outcomes)),
        "penalty_uncontained": float(sum(o.penalty_uncontained for o in outcomes)),
        "misallocation_cost": float(sum(o.misallocation_cost for o in outcomes)),
        "mean_deviation": _mean([o.metrics["deviation"] for o in outcomes]),
        "disasters_appeared": len(everything),
        "disasters_cleared": sum(d.cleared_round is not None for d in everything),
        "series": {
            "coverage": cov,
            "misallocation": mp,
            "deviation": [o.metrics["deviation"] for o in outcomes],
            "net_reward": [o.net_reward for o in outcomes],
            "active": [o.metrics["active"] for o in outcomes],
        },
    }


def _mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


# ------------------------------------------------------------------------------------ drones sharing a cell
ARRIVE_FRACTION = 0.25      # a drone this close (in cells) beyond its cell's farthest slot has arrived


class CellSlots:
    """The slots of the drones sharing a cell of a grid of ``cell_size_m`` cells (module docstring), for drones whose
    collision filter is ``avoid`` (``consensus.control.avoidance.Avoidance``: its ``d_min_m``, ``clearance_m`` and
    ``box``) with ``packing_gap_m`` between slots, inside the geofence ``workspace`` ([xmin, xmax, ymin, ymax])."""

    def __init__(self, cell_size_m: float, avoid, packing_gap_m: float, workspace: Sequence[float]) -> None:
        self.s = float(cell_size_m)
        self.d_min = float(avoid.d_min_m)
        self.spacing = self.d_min + float(packing_gap_m)
        self.fence = Geofence.from_bounds(list(workspace))
        self.lo, self.hi = avoid.box(self.fence.lo, self.fence.hi)    # the box the filter keeps a drone's centre in
        self._cache: dict[tuple, np.ndarray] = {}

    def slots(self, cell, k: int) -> np.ndarray:
        """``(k, 2)``: where the ``k`` drones sent to ``cell`` stand (the drones' own computation: ``packing.centred``,
        clamped into the geofence by ``set_meeting_point``, the pattern moved inside the filter's box, each slot clamped
        into the geofence)."""
        key = (int(cell[0]), int(cell[1]), max(int(k), 1))
        if key not in self._cache:
            point = centred(cell_centre(key[:2], self.s), key[2], self.spacing)
            point = self.fence.clamp(point)[0]
            spots = np.clip(inside(slots(point, key[2], self.spacing), self.lo, self.hi), self.fence.lo, self.fence.hi)
            spots.setflags(write=False)
            self._cache[key] = spots
        return self._cache[key]

    def radius(self, cell, k: int) -> float:
        """The distance of the farthest of the ``k`` slots of ``cell`` from its centre (0 for one drone)."""
        return float(np.linalg.norm(self.slots(cell, k) - cell_centre(cell, self.s), axis=1).max())

    def fits(self, cell, k: int) -> bool:
        """Does every slot's centre lie in ``cell``? (module docstring: otherwise the paper's misallocation)"""
        off = np.abs(self.slots(cell, k) - cell_centre(cell, self.s))
        return bool((off <= 0.5 * self.s + 1e-9).all())

    def arrive_radius(self, cell, k: int) -> float:
        """How close to ``cell``'s centre each of the ``k`` drones sent there must be to have arrived."""
        return self.radius(cell, k) + ARRIVE_FRACTION * self.s

    def attend_radius(self, cell, k: int) -> float:
        """How close to ``cell``'s centre each of the ``k`` drones sent there must be to attend it."""
        return max(self.radius(cell, k) + 0.5 * self.s, arrival_radius(0.5 * self.s, k, self.d_min))

    def radii(self, goals: Sequence) -> tuple[list[float], list[float]]:
        """Per drone of ``goals`` (every drone's chosen cell): how close to its cell's centre it arrives
        (``arrive_radius``) and attends it (``attend_radius``), k being the drones that chose that cell."""
        goals = [tuple(int(v) for v in g) for g in goals]
        counts = Counter(goals)
        return ([self.arrive_radius(g, counts[g]) for g in goals], [self.attend_radius(g, counts[g]) for g in goals])

    def crowded(self, goals: Sequence) -> list[list[int]]:
        """``[x, y, k]`` of every cell of ``goals`` (every drone's chosen cell) whose k slots do not fit it."""
        counts = Counter(tuple(int(v) for v in g) for g in goals)
        return [[x, y, k] for (x, y), k in sorted(counts.items()) if not self.fits((x, y), k)]
