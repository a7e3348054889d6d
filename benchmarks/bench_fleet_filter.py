"""Cost of the collision filter of a whole fleet per control tick: the per-robot ``filter_velocity`` loop against
the batched ``filter_velocity_many`` (issue 29), on one core, no ROS.

Scenes (dt = 0.1 s, v_max = 0.5 m/s, gamma = 1/s, d_min = 0.5 m, every robot knows every other robot):

- *gather*: n robots start uniformly spread over a 10 m square and a saturated P controller sends them to its
  centre; the fleet moves with the batched filter's commands for ``--ticks`` ticks (free approach, then packing),
  and both filters are timed on the same state every tick;
- *hex*: a packed hexagonal cluster (spacing 1.02 d_min) with every nominal pointing at its centre at full speed,
  timed ``--reps`` times.

Times are the calling thread's CPU time (``time.thread_time``), median per fleet step; ``QP`` is the share of robots
whose filter needed the QP (method qp or infeasible); ``max |du|`` the largest difference between the two filters'
commands [m/s].

    python benchmarks/bench_fleet_filter.py [--robots 20 50 100 200] [--ticks 100] [--reps 20]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from consensus.control.collision import INFEASIBLE, QP, filter_velocity, filter_velocity_many

DT, V_MAX, D_MIN, GAMMA, SIDE = 0.1, 0.5, 0.5, 1.0, 10.0


def others(pos: np.ndarray) -> np.ndarray:
    """(n, n-1, d): what each robot knows, every other robot's position."""
    n = len(pos)
    idx = np.array([[j for j in range(n) if j != i] for i in range(n)], dtype=int).reshape(n, n - 1)
    return pos[idx]


def nominal(pos: np.ndarray, centre: np.ndarray) -> np.ndarray:
    u = centre - pos
    speed = np.linalg.norm(u, axis=1, keepdims=True)
    return u * np.minimum(1.0, V_MAX / np.maximum(speed, 1e-12))


def hex_cluster(n: int) -> np.ndarray:
    side = int(np.ceil(np.sqrt(n))) + 2
    ij = np.stack(np.meshgrid(np.arange(side), np.arange(side)), axis=-1).reshape(-1, 2).astype(float)
    pts = np.column_stack([ij[:, 0] + 0.5 * (ij[:, 1] % 2), ij[:, 1] * np.sqrt(3) / 2]) * 1.02 * D_MIN
    return pts[np.argsort(np.linalg.norm(pts - pts.mean(axis=0), axis=1), kind="stable")[:n]]


def time_both(pos: np.ndarray, u: np.ndarray) -> tuple[float, float, float, float, np.ndarray]:
    """(loop ms, batch ms, QP share, max |du|, batch command) for one fleet step."""
    nb = others(pos)
    t0 = time.thread_time()
    loop = np.array([filter_velocity(pos[i], u[i], nb[i], D_MIN, V_MAX, GAMMA)[0] for i in range(len(pos))])
    t1 = time.thread_time()
    batch, info = filter_velocity_many(pos, u, nb, D_MIN, V_MAX, GAMMA)
    t2 = time.thread_time()
    qp = float(np.mean((info.method == QP) | (info.method == INFEASIBLE)))
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3, qp, float(np.abs(loop - batch).max()), batch


def gather(n: int, ticks: int, rng: np.random.Generator) -> list[tuple[float, float, float, float]]:
    pos = rng.uniform(0.0, SIDE, (n, 2))
    centre = np.full(2, SIDE / 2)
    rows = []
    for _ in range(ticks):
        *row, u = time_both(pos, nominal(pos, centre))
        rows.append(tuple(row))
        pos = pos + DT * u
    return rows


def hex_scene(n: int, reps: int) -> list[tuple[float, float, float, float]]:
    pos = hex_cluster(n)
    u = nominal(pos, pos.mean(axis=0))
    return [tuple(time_both(pos, u)[:4]) for _ in range(reps)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", type=int, nargs="+", default=[20, 50, 100, 200])
    ap.add_argument("--ticks", type=int, default=100, help="ticks of the gather scene (default 100 = 10 s)")
    ap.add_argument("--reps", type=int, default=20, help="repetitions of the hex scene (default 20)")
    args = ap.parse_args()
    print(f"dt={DT}s v_max={V_MAX}m/s d_min={D_MIN}m gamma={GAMMA}/s; CPU ms per fleet step, median")
    print(f"{'scene':7s} {'robots':>6s} {'loop ms':>9s} {'batch ms':>9s} {'speed-up':>8s} {'QP share':>8s} "
          f"{'max |du|':>9s}")
    for n in args.robots:
        rng = np.random.default_rng(n)
        for name, rows in (("gather", gather(n, args.ticks, rng)), ("hex", hex_scene(n, args.reps))):
            a = np.array(rows)
            loop, batch = np.median(a[:, 0]), np.median(a[:, 1])
            print(f"{name:7s} {n:6d} {loop:9.2f} {batch:9.2f} {loop / batch:7.1f}x {np.mean(a[:, 2]):8.1%} "
                  f"{a[:, 3].max():9.1e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
