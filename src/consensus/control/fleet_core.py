"""A whole fleet's control tick in one vectorised step (no ROS): the robot cores of ``consensus.control.robot_core``,
stepped together.

``FleetCore(cores).step(now, nearby)`` returns every robot's ``Command``, each equal (to 1e-6, tested on random
scenes: tests/test_fleet_core.py) to what ``cores[i].step(now, nearby[i])`` returns: the same safety rules, goals,
packing, deadlock rule and counters. What is batched is the expensive part: the collision filter's QPs of all robots
are solved at once (``consensus.control.collision.filter_velocity_many``: the rows built as arrays, the fast paths
vectorised, the remaining 2-D QPs by one batched dual active-set), instead of one filter call (and one DAQP solve)
per robot.

It stays **decentralised**: robot i's rows use only ``nearby[i]`` (what robot i heard, with its ages and speeds), its
own ``d_min`` margins, speed limit and geofence; nothing of one robot's knowledge reaches another's problem.

The nearby sets come as one ``Nearby`` per robot (the headless loop, a robot process fed by the relay) or as one
``NearbyBatch`` of dense ``(n, n)`` arrays (a fleet process: ``consensus.ros.nearby.FleetNearby``); with the batch no
per-robot ``Nearby`` is built (only for a robot that assigns its packing slot in this tick) and every pair's margin
is computed at once (tested equal to the per-robot lists).

Users: the headless aggregation loop, and the fleet process's one clock (``consensus.ros.fleet.FleetClock``), where
a process of one robot (``fleet:=false``, real robots) is the same core with N = 1.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from consensus.control.collision import filter_velocity_many, warm_up
from consensus.control.robot_core import Command, Nearby, RobotCore


@dataclass(frozen=True)
class NearbyBatch:
    """What every robot of a fleet heard of every other, as dense arrays (the fleet process's ``FleetNearby``):
    ``positions (n, n, d)`` (row i: what robot i holds of each robot; NaN: nothing, and robot i itself),
    ``ages (n, n)`` [s], ``speeds (n, n)`` [m/s]; ``ids (n,)``: the robot of each column (and row)."""

    positions: np.ndarray
    ages: np.ndarray
    speeds: np.ndarray
    ids: np.ndarray

    def robot(self, i: int) -> Nearby:
        """Row ``i`` as the robot core's ``Nearby`` (the robots it holds, in id order)."""
        known = np.flatnonzero(np.isfinite(self.positions[i, :, 0]))
        return Nearby(self.positions[i, known], self.ages[i, known], self.speeds[i, known], self.ids[known])


class FleetCore:
    """The cores of the robots one process (or the headless loop) runs, stepped together."""

    def __init__(self, cores: Sequence[RobotCore]) -> None:
        self.cores = list(cores)
        if any(c.avoid is not None for c in self.cores):
            warm_up()                       # the compiled QP now (or from numba's cache), not in the first tick

    def step(self, now: float, nearby: Sequence[Nearby | None] | NearbyBatch) -> list[Command]:
        """One control tick of every robot: ``nearby[i]`` is what robot i heard of the others (None: nothing yet),
        or a ``NearbyBatch`` of the whole fleet (its rows in the order of ``cores``)."""
        if isinstance(nearby, NearbyBatch):
            return self._step_batch(now, nearby)
        cmds: list[Command | None] = [None] * len(self.cores)
        batch: list[tuple] = []              # (index, point, u_nom, nominal, goal, positions, d_min) per filtered robot
        for i, core in enumerate(self.cores):
            nb = nearby[i]
            stop = core.rules(now, nb)
            if stop is not None:
                cmds[i] = stop
            elif core.avoid is None:
                cmds[i] = core.drive(now, nb)          # no filter: the controller alone is cheap
            else:
                goal = core._goal(nb)
                point, u_nom, nominal = core.filter_input(now, goal)
                batch.append((i, point, u_nom, nominal, goal, core.nearby_points_of(nb), core._d_min(nb)))
        if batch:
            self._filter(now, batch, cmds)
        return cmds  # type: ignore[return-value]

    def _filter(self, now: float, batch: list[tuple], cmds: list) -> None:
        by_dim: dict[int, list[tuple]] = {}
        for row in batch:
            by_dim.setdefault(len(row[1]), []).append(row)
        for dim, rows in by_dim.items():
            m = len(rows)
            k = max(len(r[5]) for r in rows)
            others = np.full((m, k, dim), np.nan)
            d_min = np.ones((m, k))
            points = np.empty((m, dim))
            nominal = np.empty((m, dim))
            v_max, gamma = np.empty(m), np.empty(m)
            lo, hi = np.full((m, dim), np.nan), np.full((m, dim), np.nan)
            for r, (i, point, _u, nom, _g, pos, dm) in enumerate(rows):
                av = self.cores[i].avoid
                points[r], nominal[r] = point, nom
                others[r, : len(pos)] = pos
                d_min[r, : len(pos)] = dm
                v_max[r], gamma[r] = av.point_v_max, av.gamma
                if av.bounds is not None:
                    lo[r], hi[r] = av.bounds
            u, info = filter_velocity_many(points, nominal, others, d_min, v_max, gamma, bounds=(lo, hi))
            for r, (i, point, u_nom, _n, goal, _p, _d) in enumerate(rows):
                core = self.cores[i]
                core.avoid.counters.record(info.robot(r))
                cmds[i] = core.filtered(now, point, u_nom, u[r], goal)


    def _step_batch(self, now: float, nb: NearbyBatch) -> list[Command]:
        """``step`` with dense arrays: no per-robot ``Nearby`` is built (only for a robot that assigns its packing
        slot this tick), the margins of every pair are computed at once and the filter gets the rows as they are
        (tested equal to ``step`` with ``nb.robot(i)`` for every robot)."""
        cmds: list[Command | None] = [None] * len(self.cores)
        rows, points, u_noms, nominals, goals = [], [], [], [], []
        for i, core in enumerate(self.cores):
            stop = core.rules(now, nb)
            if stop is not None:
                cmds[i] = stop
                continue
            if core.avoid is None:
                cmds[i] = core.drive(now, None)
                continue
            goal = core._goal(nb.robot(i) if core.goal_needs_nearby() else None)
            point, u_nom, nominal = core.filter_input(now, goal)
            rows.append(i)
            points.append(point)
            u_noms.append(u_nom)
            nominals.append(nominal)
            goals.append(goal)
        if not rows:
            return cmds  # type: ignore[return-value]
        cores = [self.cores[i] for i in rows]
        idx = np.asarray(rows)
        base = np.array([c.d_min_base() for c in cores])
        last_speed = np.array([c.last_speed for c in cores])
        d_min = base[:, None] + np.maximum(nb.ages[idx], 0.0) * (last_speed[:, None] + np.maximum(nb.speeds[idx], 0.0))
        dim = len(points[0])
        bounds = np.array([c.avoid.bounds if c.avoid.bounds is not None else np.full((2, dim), np.nan)
                           for c in cores])
        u, info = filter_velocity_many(np.array(points), np.array(nominals), nb.positions[idx][:, :, :dim], d_min,
                                       np.array([c.avoid.point_v_max for c in cores]),
                                       np.array([c.avoid.gamma for c in cores]), bounds=(bounds[:, 0], bounds[:, 1]))
        for r, core in enumerate(cores):
            core.avoid.counters.record(info.robot(r))
            cmds[rows[r]] = core.filtered(now, points[r], u_noms[r], u[r], goals[r])
        return cmds  # type: ignore[return-value]
