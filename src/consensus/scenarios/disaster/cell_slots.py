"""Where drones that share a cell stand when the collision filter keeps them apart (ROS runs), without ROS.

Drones sent to one cell cannot all stand on its centre: the filter keeps them ``d_min`` apart. Each of the k drones
sent to a cell takes one of k *slots* (``consensus.control.packing``, through ``RobotCore.set_target(point,
group=...)``): a hexagonal pattern of spacing ``d_min + packing_gap_m`` (0.55 m with the defaults: clearance 0.45 m
for 0.2 m footprints, gap 0.1 m). Here, for the drone nodes and the grid node alike:

* ``pattern_point(centre, k, spacing)``: the point the drones of a cell are sent to. The packing's pattern starts at
  its point and grows to one side (two drones: the point and 0.55 m beside it, over the neighbouring 1 m cell);
  sent to ``pattern_point`` the k slots have their bounding box centred on the cell's centre (two drones: 0.275 m
  either side of it, both over the cell).
* ``CellSlots``: the slots of the k drones of a cell as the drones compute them (that pattern, moved as a whole
  inside the filter's box at the grid's walls and clamped to the geofence, as ``RobotCore`` does), their radius
  about the cell's centre (``radius``), whether they fit the cell (``fits``), and the two judgements the grid node
  makes from them with no position but the drones' odometry: a drone has *arrived* (a teleport flight may end) within
  ``radius + ARRIVE_FRACTION s`` of its chosen cell's centre, and it *attends* its chosen cell within ``radius + s /
  2`` (``attend_radius``; at least ``arrival_radius(s / 2, k, d_min)``, the headless packing's bound), s =
  ``cell_size_m``. The node does not know which slot each drone took (the drones assign them over the positions
  they know), so it judges by the radius of the cell's whole pattern.

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
from typing import Sequence

import numpy as np

from consensus.control.packing import inside, slots
from consensus.control.safety import Geofence
from consensus.metrics.convergence import arrival_radius
from consensus.scenarios.disaster.environment import cell_centre

ARRIVE_FRACTION = 0.25      # a drone this close (in cells) beyond its cell's farthest slot has arrived


def pattern_point(centre, k: int, spacing: float) -> np.ndarray:
    """The point to send ``k`` drones to so that their slots (``packing.slots``, ``spacing`` apart) have their
    bounding box centred on ``centre``."""
    c = np.asarray(centre, dtype=float).reshape(-1)
    unit = slots(np.zeros(c.size), max(int(k), 1), 1.0)
    return c - spacing * 0.5 * (unit.min(axis=0) + unit.max(axis=0))


class CellSlots:
    """The slots of the drones sharing a cell of a grid of ``cell_size_m`` cells, for drones whose collision filter
    is ``avoid`` (``consensus.control.avoidance.Avoidance``: its ``d_min_m``, ``clearance_m`` and ``bounds``) with
    ``packing_gap_m`` between slots, inside the geofence ``workspace`` ([xmin, xmax, ymin, ymax])."""

    def __init__(self, cell_size_m: float, avoid, packing_gap_m: float, workspace: Sequence[float]) -> None:
        self.s = float(cell_size_m)
        self.d_min = float(avoid.d_min_m)
        self.spacing = self.d_min + float(packing_gap_m)
        self.fence = Geofence.from_bounds(list(workspace))
        self.lo, self.hi = avoid.box(self.fence.lo, self.fence.hi)    # the box the filter keeps a drone's centre in
        self._cache: dict[tuple, np.ndarray] = {}

    def slots(self, cell, k: int) -> np.ndarray:
        """``(k, 2)``: where the ``k`` drones sent to ``cell`` stand (the drones' own computation: ``pattern_point``,
        clamped into the geofence by ``set_target``, the pattern moved inside the filter's box, each slot clamped
        into the geofence)."""
        key = (int(cell[0]), int(cell[1]), max(int(k), 1))
        if key not in self._cache:
            point = pattern_point(cell_centre(key[:2], self.s), key[2], self.spacing)
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
