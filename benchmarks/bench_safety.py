"""Cost of the collision filter (consensus.control.collision) per control tick, on one core, no ROS.

Scenes: k + 1 robots (k = 1, 20, 100 neighbours each) start on a square grid of spacing 2 d_min and are all told to
meet at one point near its centre (the aggregation that issue 19 is about): single integrators, P controller,
dt = 0.1 s, v_max = 0.5 m/s, d_min = 0.5 m. Every tick, every robot's ``filter_velocity`` (it and its k
neighbours) is timed; the figures are over all robots and ticks, so they mix the free approach (nominal path)
and the packing (closed form, QP). Then the centralised ``filter_velocities`` of a 100-robot scene, timed per
tick. Target: 100 robots x the per-robot
filter must fit well inside a 10 Hz tick: < 20 ms per tick.

Times are the calling thread's CPU time (``time.thread_time``): the filter's cost on one core, without the
preemption that a shared machine adds to wall-clock figures (the per-tick wall time is printed too).

    python benchmarks/bench_safety.py [--ticks 300]
"""
from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np

from consensus.control.collision import METHODS, filter_velocities, filter_velocity
from consensus.control.controller import PController

DT, V_MAX, D_MIN, GAMMA = 0.1, 0.5, 0.5, 1.0


def start(n: int) -> np.ndarray:
    """n robots on a square grid of spacing 2 d_min around the meeting point (jittered by up to 0.1 d_min)."""
    side = int(np.ceil(np.sqrt(n)))
    grid = 2 * D_MIN * (np.stack(np.divmod(np.arange(n), side), axis=1) - (side - 1) / 2)
    return grid + np.random.default_rng(n).uniform(-0.05, 0.05, grid.shape) * D_MIN + 0.01


def per_robot(n: int, ticks: int) -> tuple[np.ndarray, Counter, np.ndarray, np.ndarray]:
    """Per-call CPU times [µs] of filter_velocity, the method mix, per-tick CPU and wall totals [ms] over all n
    robots."""
    pos = start(n)
    ctl = PController(kp=1.0, v_max=V_MAX, deadband=0.0)
    calls, totals, walls, mix = [], [], [], Counter()
    for _ in range(ticks):
        u_nom = ctl.compute_batch(pos, np.zeros_like(pos))
        u = np.empty_like(pos)
        others = [np.delete(pos, i, axis=0) for i in range(n)]     # what each robot knows: the others' positions
        tick0, wall0 = time.thread_time(), time.perf_counter()
        for i in range(n):
            t0 = time.thread_time()
            u[i], info = filter_velocity(pos[i], u_nom[i], others[i], D_MIN, V_MAX, GAMMA)
            calls.append(time.thread_time() - t0)
            mix[info.method] += 1
        totals.append(time.thread_time() - tick0)
        walls.append(time.perf_counter() - wall0)
        pos = pos + DT * u
    return np.array(calls) * 1e6, mix, np.array(totals) * 1e3, np.array(walls) * 1e3


def centralised(n: int, ticks: int) -> tuple[np.ndarray, Counter]:
    pos = start(n)
    ctl = PController(kp=1.0, v_max=V_MAX, deadband=0.0)
    times, mix = [], Counter()
    for _ in range(ticks):
        u_nom = ctl.compute_batch(pos, np.zeros_like(pos))
        t0 = time.thread_time()
        u, info = filter_velocities(pos, u_nom, D_MIN, V_MAX, GAMMA)
        times.append(time.thread_time() - t0)
        mix.update(METHODS[m] for m in info.method)
        pos = pos + DT * u
    return np.array(times) * 1e3, mix


def share(mix: Counter) -> str:
    total = sum(mix.values())
    return " ".join(f"{m} {mix[m] / total:.0%}" for m in METHODS if mix[m])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=300, help="control ticks per scene (default 300 = 30 s)")
    args = ap.parse_args()
    print(f"dt={DT}s v_max={V_MAX}m/s d_min={D_MIN}m gamma={GAMMA}/s, {args.ticks} ticks per scene")
    worst_tick_ms = worst_wall_ms = None
    for k in (1, 20, 100):
        us, mix, totals, walls = per_robot(k + 1, args.ticks)
        print(f"per-robot filter, {k:3d} neighbours: median {np.median(us):7.1f} us  "
              f"p99 {np.percentile(us, 99):7.1f} us  max {us.max():8.1f} us   ({share(mix)})")
        if k == 100:
            worst_tick_ms, worst_wall_ms = totals, walls
    ms, mix = centralised(100, args.ticks)
    print(f"centralised step, 100 robots:     median {np.median(ms):7.2f} ms  p99 {np.percentile(ms, 99):7.2f} ms"
          f"  max {ms.max():8.2f} ms   ({share(mix)})")
    p99 = float(np.percentile(worst_tick_ms, 99))
    print(f"100 robots x per-robot filter (100 neighbours each), per tick: median {np.median(worst_tick_ms):.2f} ms"
          f"  p99 {p99:.2f} ms CPU (wall: median {np.median(worst_wall_ms):.2f} ms, p99 "
          f"{np.percentile(worst_wall_ms, 99):.2f} ms)")
    print("target: 100 robots x per-robot filter < 20 ms per tick (p99):", "met" if p99 < 20.0 else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
