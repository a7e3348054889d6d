"""MuJoCo (``sim: mujoco``): what a physics step costs per robot, and what each realism knob does to a 6-robot ring.

    python benchmarks/bench_mujoco.py [--robots 6 20 100] [--knobs] [--seeds 0 1 2]

Step cost: one world of N robots (the run's MJCF, ``consensus.sims.mujoco.world``) driven toward the origin for 2 s
of physics at ``physics_rate_hz`` (500 Hz): wall time per physics step (our Python around ``mj_step`` and the
contact judge included), per robot, and wall seconds per second of physics.

``--knobs``: the 6-robot ring gathering (average planner, the collision filter on) in the headless loop with its
bodies in MuJoCo (``consensus run aggregation --headless --sim mujoco --robots 6 --topology ring``), once per knob
setting and seed: time to consensus (the meeting points within ``converge_tol_m`` and every body within the packing
radius; mean over the seeds that converged, and how many did), when the last body came to rest (no robot moving more
than ``STILL_M`` per control period after it; mean), the closest pair of bodies (ground truth: the world's own poses,
not the noisy odometry), and MuJoCo's contact count. A table for docs/real-robots.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

KNOBS = [("none (defaults)", {}),
         ("wheel_friction 0.3", {"wheel_friction": 0.3}),
         ("wheel_friction 0.6", {"wheel_friction": 0.6}),
         ("actuator_lag_s 0.2", {"actuator_lag_s": 0.2}),
         ("actuator_lag_s 0.5", {"actuator_lag_s": 0.5}),
         ("odom_noise_m 0.02", {"odom_noise_m": 0.02}),
         ("odom_noise_m 0.05", {"odom_noise_m": 0.05}),
         ("localization_offset_m 0.1", {"localization_offset_m": 0.1}),
         ("localization_offset_m 0.3", {"localization_offset_m": 0.3})]


STILL_M = 0.005          # a robot moving less than this per control period (0.1 s) stands still


def step_cost(n: int) -> dict:
    from consensus.settings import RobotBaseConfig
    from consensus.sims.mujoco.world import MujocoWorld

    cfg = RobotBaseConfig.from_dict({"num_robots": n, "workspace": [-12.0, 12.0, -12.0, 12.0]})
    rng = np.random.default_rng(0)
    start = np.c_[rng.uniform(-10, 10, (n, 2)), np.zeros(n)]
    world = MujocoWorld(cfg, start)
    world.set_commands(np.c_[-0.2 * start[:, :2], np.zeros(n)])
    world.advance(0.1)                                   # warm
    t0, s0 = time.perf_counter(), world.steps
    world.advance(2.0)
    wall, steps = time.perf_counter() - t0, world.steps - s0
    return {"robots": n, "us_per_step": 1e6 * wall / steps, "us_per_robot_step": 1e6 * wall / steps / n,
            "wall_s_per_physics_s": wall / 2.0}


def ring(seed: int, knobs: dict) -> dict:
    from consensus import cli

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        sets = [a for k, v in knobs.items() for a in ("--set", f"{k}={v}")]
        code = cli.main(["run", "aggregation", "--headless", "--sim", "mujoco", "--robots", "6", "--topology", "ring",
                         "--seed", str(seed), "--duration", "60", "--settle", "3", *sets, "--out", str(out), "-q"])
        if code != 0:
            raise SystemExit(f"run failed ({code}) for {knobs}, seed {seed}")
        s = json.loads((out / "summary.json").read_text())
        rows = np.genfromtxt(out / "trajectories.csv", delimiter=",", names=True)
    times = np.unique(rows["t"])
    xy = np.stack([np.c_[rows["x"][rows["t"] == t], rows["y"][rows["t"] == t]] for t in times])   # (T, n, 2)
    step = np.linalg.norm(np.diff(xy, axis=0), axis=2).max(axis=1)     # the fastest robot's move per sample
    moving = np.nonzero(step > STILL_M)[0]
    still = float(times[moving[-1] + 1]) if len(moving) else 0.0
    return {"converged": bool(s["converged"]), "t": s.get("time_to_converge_s"), "still": still,
            "closest": s["min_pair_distance_m"], "contacts": s["contacts"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", type=int, nargs="+", default=[6, 20, 100])
    ap.add_argument("--knobs", action="store_true", help="also the realism knobs' table (6-robot ring)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    print("physics step cost (500 Hz; Python around mj_step and the contact judge included)")
    print("| robots | µs per physics step | µs per robot and step | wall s per physics s |")
    print("|---|---|---|---|")
    for n in args.robots:
        r = step_cost(n)
        print(f"| {n} | {r['us_per_step']:.1f} | {r['us_per_robot_step']:.2f} | {r['wall_s_per_physics_s']:.3f} |")
    if not args.knobs:
        return 0
    print(f"\n6-robot ring, filter on, seeds {args.seeds}")
    print("| knob | converged | time to consensus [s] | bodies at rest after [s] | closest pair [m] (worst seed) "
          "| contacts |")
    print("|---|---|---|---|---|---|")
    for label, knobs in KNOBS:
        rows = [ring(seed, knobs) for seed in args.seeds]
        ts = [r["t"] for r in rows if r["converged"] and r["t"] is not None]
        mean_t = f"{np.mean(ts):.1f}" if ts else "—"
        print(f"| {label} | {sum(r['converged'] for r in rows)}/{len(rows)} | {mean_t} | "
              f"{np.mean([r['still'] for r in rows]):.1f} | "
              f"{min(r['closest'] for r in rows):.3f} | {sum(r['contacts'] for r in rows)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
