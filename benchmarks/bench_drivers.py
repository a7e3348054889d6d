"""The figures of our fleets in the vendors' own simulators (issue 43; docs/real-robots.md, "The vendors'
simulators"): 4 TurtleBot 3 fake nodes and 4 Crazyflies in crazyswarm2's simulator, each gathered by
``consensus run aggregation --robots-file config/robots_<turtlebot3_fake|crazyswarm2>.yaml --sim ... --planner average
--per-robot-processes`` (the shipped maps; one process per robot), judged on the drivers' own ground truth (the
fake nodes' odometry composed with the start poses; crazyswarm2's ``/tf``, both from the run's MCAP bag):

* time to consensus (the run's summary), the closest pair of bodies by the driver's truth (for the drones while all
  are airborne), the largest commanded speed against the preset's limit (the fake nodes' odometry twist, which is
  what they were commanded; the drones' ``cmd_full_state`` velocities), and for the drones the height at their
  first horizontal move and at the end.

    python benchmarks/bench_drivers.py [--runs 3] [--out /tmp/bench_drivers]

Needs the simulators (``make drivers``); prints one line per run and a JSON summary.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import _common

from support.driver_truth import closest_pair, tb3_tracks, tf_tracks

#: the shipped maps the docs' commands name (docs/real-robots.md, "The vendors' simulators")
TB3_MAP = _common.ROOT / "config" / "robots_turtlebot3_fake.yaml"
CF_MAP = _common.ROOT / "config" / "robots_crazyswarm2.yaml"


def _poses(robots: Path) -> dict[str, tuple[float, float, float]]:
    from consensus.robots.map import load_robots

    return {e.namespace: e.initial_pose for e in load_robots(robots).enabled}


def _run(out: Path, robots: Path, sim: str, seed: int, sim_time: bool) -> tuple[dict, float]:
    cmd = [sys.executable, "-m", "consensus.cli", "run", "aggregation", "--robots-file", str(robots), "--sim", sim,
           "--planner", "average", "--per-robot-processes", "--seed", str(seed), "--duration", "120",
           "--settle", "3", "--out", str(out), "-q"] + (["--use-sim-time"] if sim_time else [])
    start = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return json.loads((out / "summary.json").read_text()), time.monotonic() - start


def tb3(out: Path, seed: int) -> dict:
    summary, wall = _run(out, TB3_MAP, "turtlebot3_fake", seed, False)
    tracks = tb3_tracks(out, _poses(TB3_MAP))
    return {"fleet": "turtlebot3_fake x4", "seed": seed, "converged": summary["converged"],
            "time_to_consensus_s": summary.get("time_to_converge_s"), "wall_s": round(wall, 1),
            "closest_pair_m": round(closest_pair(tracks), 3),
            "max_v": round(max(abs(v) for t in tracks.values() for v in t.v), 4), "v_limit": 0.22,
            "max_w": round(max(abs(w) for t in tracks.values() for w in t.w), 4), "w_limit": 2.84}


def drones(out: Path, seed: int) -> dict:
    from consensus.runs.bag import read_messages

    summary, wall = _run(out, CF_MAP, "crazyswarm2", seed, True)
    start = _poses(CF_MAP)
    tracks = tf_tracks(out, list(start))
    takeoff, final = [], []
    for name, tr in tracks.items():
        p = tr.array()
        moved = next((i for i, q in enumerate(p) if math.dist(q[:2], start[name][:2]) > 0.02), None)
        takeoff.append(float(p[moved][2]) if moved is not None else math.nan)      # nan: it never moved
        final.append(float(p[-1][2]))
    fastest = max(math.hypot(m.twist.linear.x, m.twist.linear.y) for _t, _ty, _l, m in
                  read_messages(out / "bag", [f"/{n}/cmd_full_state" for n in start]))
    return {"fleet": "crazyswarm2 x4", "seed": seed, "converged": summary["converged"],
            "time_to_consensus_s": summary.get("time_to_converge_s"), "wall_s": round(wall, 1),
            "closest_pair_airborne_m": round(closest_pair(
                tracks, when=lambda newest: all(q[2] > 0.1 for q in newest.values())), 3),
            "max_setpoint_speed": round(fastest, 4), "v_limit": 0.5,
            "takeoff_z_min": round(min(takeoff), 3), "final_z_max": round(max(final), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench_drivers"))
    args = ap.parse_args()
    _common.isolate_ros()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in range(args.runs):
        for fn in (tb3, drones):
            row = fn(args.out / f"{fn.__name__}-{seed}", seed)
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(json.dumps({"runs": rows}, indent=1))


if __name__ == "__main__":
    main()
