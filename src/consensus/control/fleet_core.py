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

Users: the headless aggregation loop, and the fleet process's one clock (``consensus.ros.fleet.FleetClock``), where
a process of one robot (``fleet:=false``, real robots) is the same core with N = 1.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from consensus.control.collision import filter_velocity_many
from consensus.control.robot_core import Command, Nearby, RobotCore


class FleetCore:
    """The cores of the robots one process (or the headless loop) runs, stepped together."""

    def __init__(self, cores: Sequence[RobotCore]) -> None:
        self.cores = list(cores)

    def step(self, now: float, nearby: Sequence[Nearby | None]) -> list[Command]:
        """One control tick of every robot: ``nearby[i]`` is what robot i heard of the others (None: nothing yet)."""
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

