"""Naming-game simulation speed (paper 4): pair interactions/s of ``simulate`` at N = 24, 1,000 and 100,000 with a
published policy, the kernel's compile time, the wall time of the whole Fig. 3 sweep, and the mean-field solver.

    python benchmarks/bench_naming_game.py [--model gpt-4o --words his,her] [--threads 2] [--no-sweep]
                                           [--all-tables] [--repeat 3]

The policy is one of paper 4's published q tables, read from ../shared/data/naming-game/q_tables.json (reference
data, not part of the project); without that file a fixed-bias policy (q = 0.5 everywhere, which never converges, so
runs last max_population_rounds) stands in and a note says so. Target: >= 50 M pair interactions/s at every size on
this 2-core machine, >= 2x the paper's numba code (20-26 M/s with real q tables, ANCHORS.md). A row's rate is the
best of ``--repeat`` calls: interactions played / wall time of the kernel call. Compile time is measured with an
empty numba cache (NUMBA_CACHE_DIR is pointed at a new temporary directory before numba is imported).

The Fig. 3 sweep: 22 population sizes log-spaced from 2 to 1000, 1000 runs each, up to 1000 population rounds, one
table (``--all-tables``: all 44, the figure's four panels).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT.parent / "shared" / "data" / "naming-game" / "q_tables.json"
TARGET = 50e6
PAPER_RATE = 26e6
FIG3_SIZES = np.unique(np.geomspace(2, 1000, 22).round().astype(int))


def q_array(table: dict, H: int) -> np.ndarray:
    from consensus.scenarios.naming_game.game import memory_space

    ms = memory_space(H)
    q = np.empty(len(ms))
    for key, value in table["q"].items():
        q[ms.index[key]] = value
    return q


def load_tables(path: Path) -> list[dict] | None:
    if not path.exists():
        return None
    return json.loads(path.read_text())["tables"]


def rate_row(label: str, q, H: int, N: int, runs: int, repeat: int, max_population_rounds: int = 1000) -> None:
    from consensus.scenarios.naming_game.simulate import collective_bias, simulate

    best = None
    for rep in range(repeat):
        r = simulate(q, H, N, runs, seed=100 + rep, max_population_rounds=max_population_rounds)
        rate = r.interactions / r.elapsed_s
        if best is None or rate > best[0]:
            best = (rate, r)
    rate, r = best
    share, _, n = collective_bias(r)
    print(f"{label:<28} {N:>7} {runs:>6} {r.interactions / 1e6:>9.1f} {r.elapsed_s:>8.3f} {rate / 1e6:>8.1f} "
          f"{rate / PAPER_RATE:>6.1f}x {'yes' if rate >= TARGET else 'NO':>4}   "
          f"{n}/{runs} converged, word 0 {share:.3f}")


def sweep(tables: list[tuple[str, np.ndarray]], H: int, runs: int) -> None:
    from consensus.scenarios.naming_game.simulate import collective_bias, simulate

    total_i = 0
    t0 = time.perf_counter()
    for name, q in tables:
        row = []
        for N in FIG3_SIZES:
            r = simulate(q, H, int(N), runs, seed=int(N))
            total_i += r.interactions
            row.append(f"{collective_bias(r)[0]:.2f}")
        if len(tables) <= 4:
            print(f"  {name}: word-0 share at N = {FIG3_SIZES[0]}..{FIG3_SIZES[-1]}: {' '.join(row)}")
    wall = time.perf_counter() - t0
    print(f"Fig. 3 sweep: {len(tables)} table(s) x {len(FIG3_SIZES)} sizes x {runs} runs: {wall:.2f} s wall, "
          f"{total_i / 1e6:.0f} M interactions ({total_i / wall / 1e6:.0f} M/s)")


def meanfield(q5: np.ndarray) -> None:
    try:
        from consensus.scenarios.naming_game import meanfield as mf
    except ImportError:
        mf = None
    if mf is None or not hasattr(mf, "integrate"):
        # TODO: time 1000 mean-field steps for H = 5 once meanfield.integrate exists
        print("meanfield: not available")
        return
    for call in (lambda: mf.integrate(q5, 5, steps=1000), lambda: mf.integrate(q5, 5, 1000)):
        try:
            call()                                  # warm-up (compilation, tables)
            t0 = time.perf_counter()
            call()
            print(f"meanfield: 1000 steps for H = 5 in {time.perf_counter() - t0:.3f} s "
                  f"(paper's solver: 944 s, ANCHORS.md)")
            return
        except TypeError:
            continue
    print("meanfield: integrate(q, H, steps) not recognised; not timed")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt-4o")
    ap.add_argument("--words", default="his,her", help="the table's word pair, in either order")
    ap.add_argument("--threads", type=int, default=None, help="numba threads (default: all)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--all-tables", action="store_true", help="sweep all 44 published tables")
    ap.add_argument("--sweep-runs", type=int, default=1000)
    ap.add_argument("--tables", type=Path, default=TABLES, help="the published q tables (JSON)")
    args = ap.parse_args()

    cache = tempfile.TemporaryDirectory()
    os.environ["NUMBA_CACHE_DIR"] = cache.name           # before numba is imported: a cold compile
    import numba

    from consensus.scenarios.naming_game.game import state_count
    from consensus.scenarios.naming_game.simulate import simulate

    if args.threads:
        numba.set_num_threads(args.threads)
    tables = load_tables(args.tables)
    H = 5
    if tables is None:
        print(f"NOTE: {args.tables} not found; using a fixed-bias policy q = 0.5 instead "
              f"(it never converges: runs last max_population_rounds)")
        label, q, all_q = "fixed-bias q=0.5", np.full(state_count(H), 0.5), []
    else:
        words = sorted(args.words.split(","))
        table = next(t for t in tables if t["model"] == args.model and sorted(t["words"]) == words)
        H = int(table["memory_size"])
        label, q = f"{table['model']} {'/'.join(table['words'])}", q_array(table, H)
        all_q = [(f"{t['model']} {'/'.join(t['words'])}", q_array(t, H)) for t in tables]

    t0 = time.perf_counter()
    simulate(q, H, 4, 1, seed=0, max_population_rounds=2)
    print(f"compile (cold, empty numba cache): {time.perf_counter() - t0:.2f} s; "
          f"numba {numba.__version__}, {numba.get_num_threads()} threads, layer {numba.config.THREADING_LAYER}; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (other work slows the figures)")
    print(f"{'policy':<28} {'N':>7} {'runs':>6} {'M inter':>9} {'wall s':>8} {'M/s':>8} {'paper':>7} {'>=50':>4}")
    fallback_rounds = 1000 if tables is not None else 50
    rate_row(label, q, H, 24, 40_000, args.repeat, fallback_rounds)
    rate_row(label, q, H, 1000, 2000 if tables is not None else 200, args.repeat, fallback_rounds)
    rate_row(label, q, H, 100_000, 40 if tables is not None else 4, args.repeat, fallback_rounds)
    rate_row("fixed-bias q=0.5 (all states)", np.full(state_count(H), 0.5), H, 1000, 200, args.repeat, 50)

    if not args.no_sweep:
        chosen = all_q if args.all_tables and all_q else [(label, q)]
        sweep(chosen, H, args.sweep_runs)
    meanfield(q)
    cache.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
