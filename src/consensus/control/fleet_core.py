"""A whole fleet's control tick in one vectorised step (no ROS): the robot cores of ``consensus.control.robot_core``,
stepped together.

``FleetCore(cores).step(now, nearby)`` returns every robot's ``Command``, each equal (to 1e-6, tested on random scenes:
tests/unit/control/test_fleet_core.py) to what ``cores[i].step(now, nearby[i])`` returns: the same safety rules, goals,
packing, deadlock rule and counters. What is batched is the expensive part: the collision filter's QPs of all robots are
solved at once (``consensus.control.collision.filter_velocity_many``: the rows built as arrays, the fast paths
vectorised, the remaining 2-D QPs by one batched dual active-set), instead of one filter call (and one DAQP solve) per
robot.

It stays **decentralised**: robot i's rows use only ``nearby[i]`` (what robot i heard, with its ages and speeds), its
own ``d_min`` margins (``filter_adapter.neighbour_margins``: a fresh position's honest margin, a silent body's
growing keep-out), speed limit and geofence; nothing of one robot's knowledge reaches another's problem. A robot that
holds (no slot it can reach: ``RobotCore.hold``) has no rows.

It re-derives nothing of a robot core: each robot's tick is the core's own stages (``RobotCore.rules``, ``drive``,
``hold``, ``filter_input``, ``filtered``) and its parts' public API (``core.goals``: the goal and whether it reads
the nearby robots; ``core.filter``: ``d_min_rows``, the filter's ``batch_row`` and ``record``).

The nearby sets come as one ``NearbyBatch`` of dense arrays (a fleet process: ``consensus.ros.nearby.FleetNearby``;
the headless loop) or as one ``Nearby`` per robot (a robot process fed by the relay), padded into one; no per-robot
``Nearby`` is built from a batch (only for a robot that assigns its packing slot in this tick) and every pair's
margin is computed at once (tested equal to the per-robot lists).

Users: the headless aggregation loop, and the fleet process's one clock (``consensus.ros.fleet.FleetClock``), where
a process of one robot (``single_process:=false``, real robots) is the same core with N = 1.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from consensus.control.collision import filter_velocity_many, warm_up
from consensus.control.filter_adapter import d_min_rows
from consensus.control.robot_core import RobotCore
from consensus.control.robot_state import Command, Nearby


@dataclass(frozen=True)
class NearbyBatch:
    """What every robot of a fleet heard of the others, as dense arrays: ``positions (n, k, d)`` (row i: what robot
    i holds; NaN: nothing there, robot i itself included), ``ages (n, k)`` [s], ``speeds (n, k)`` [m/s] and ``ids``,
    the robot of each entry: ``(k,)`` for every row alike (a fleet process's ``FleetNearby``: column j is robot j) or
    ``(n, k)``; ``heard (n,)``: False for a robot that has heard nothing yet (None: every robot has)."""

    positions: np.ndarray
    ages: np.ndarray
    speeds: np.ndarray
    ids: np.ndarray
    heard: np.ndarray | None = None

    @classmethod
    def of(cls, nearby: Sequence[Nearby | None], dim: int) -> NearbyBatch:
        """One robot's ``Nearby`` (None: nothing heard yet) per row, padded with NaN."""
        n = len(nearby)
        k = max((len(x.positions) for x in nearby if x is not None), default=0)
        positions, ages = np.full((n, k, dim), np.nan), np.full((n, k), np.inf)
        speeds, ids = np.zeros((n, k)), np.full((n, k), -1)
        for i, x in enumerate(nearby):
            if x is not None and len(x.positions):       # (an empty Nearby: heard, but no other robot yet)
                m = len(x.positions)
                positions[i, :m] = np.asarray(x.positions, dtype=float).reshape(m, -1)[:, :dim]
                ages[i, :m], speeds[i, :m], ids[i, :m] = x.ages, x.speeds, x.ids
        return cls(positions, ages, speeds, ids, np.array([x is not None for x in nearby], dtype=bool))

    def robot(self, i: int) -> Nearby | None:
        """Row ``i`` as the robot core's ``Nearby`` (the robots it holds, in their order), None if it heard nothing."""
        if self.heard is not None and not self.heard[i]:
            return None
        known = np.flatnonzero(np.isfinite(self.positions[i, :, 0]))
        ids = self.ids[i] if self.ids.ndim == 2 else self.ids
        return Nearby(self.positions[i, known], self.ages[i, known], self.speeds[i, known], ids[known])


class FleetCore:
    """The cores of the robots one process (or the headless loop) runs, stepped together."""

    def __init__(self, cores: Sequence[RobotCore]) -> None:
        self.cores = list(cores)
        if any(c.avoid is not None for c in self.cores):
            warm_up()                       # the compiled QP now (or from numba's cache), not in the first tick

    def step(self, now: float, nearby: Sequence[Nearby | None] | NearbyBatch) -> list[Command]:
        """One control tick of every robot: ``nearby[i]`` is what robot i heard of the others (None: nothing yet),
        or a ``NearbyBatch`` of the whole fleet (its rows in the order of ``cores``). No per-robot ``Nearby`` is
        built from a batch (only for a robot that assigns its packing slot in this tick), and the margins of every
        pair are computed at once."""
        nb = nearby if isinstance(nearby, NearbyBatch) else NearbyBatch.of(nearby, self.cores[0].dim if self.cores
                                                                           else 2)
        cmds: list[Command | None] = [None] * len(self.cores)
        rows, points, u_noms, nominals, goals = [], [], [], [], []
        for i, core in enumerate(self.cores):
            heard = nb if nb.heard is None or nb.heard[i] else None       # (the rules ask only whether it heard)
            stop = core.rules(now, heard)
            if stop is not None:
                cmds[i] = stop
                continue
            if core.avoid is None:
                cmds[i] = core.drive(now, None)       # without the filter the nearby robots play no part
                continue
            goal = core.goals.goal_for(nb.robot(i) if core.goals.needs_nearby() else None, now)
            if goal is None:
                cmds[i] = core.hold(now)              # no slot it can reach: it holds where it is
                continue
            point, u_nom, nominal = core.filter_input(now, goal)
            rows.append(i)
            points.append(point)
            u_noms.append(u_nom)
            nominals.append(nominal)
            goals.append(goal)
        if not rows:
            return cmds  # type: ignore[return-value]
        cores = [self.cores[i] for i in rows]
        filters = [c.filter for c in cores]
        idx = np.asarray(rows)
        d_min = d_min_rows(filters, nb.ages[idx], nb.speeds[idx])
        dim = len(points[0])
        v_max, gamma, bounds = (np.array(x) for x in zip(*(f.batch_row(dim) for f in filters)))
        u, info = filter_velocity_many(np.array(points), np.array(nominals), nb.positions[idx][:, :, :dim], d_min,
                                       v_max, gamma, bounds=(bounds[:, 0], bounds[:, 1]))
        for r, core in enumerate(cores):
            filters[r].record(info.robot(r))
            cmds[rows[r]] = core.filtered(now, points[r], u_noms[r], u[r], goals[r])
        return cmds  # type: ignore[return-value]
