"""Paper 3's NLP presets with heuristic agents: wall time of each preset at its defaults (the paper's item counts,
architectures and 30 trials) and its Table 2 row(s) next to the paper's.

    python benchmarks/bench_paper3_presets.py [--data ../shared/data/paper3] [--workers 2] [--trials 30]

Target: each preset in under 60 s on this 2-core machine. The data files are the reference copies in
../shared/data/paper3 (SQuAD 2.0 dev half, AG News test, XSum test sample); without them the script says so and exits.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
FILES = {"qa-reliability": "squad_dev.json", "classification-reliability": "ag_news_test.csv",
         "summarization-reliability": "xsum_test.jsonl"}
TARGET_S = 60.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "paper3")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args()
    if not args.data.is_dir():
        print(f"no reference data at {args.data}: pass --data DIR holding {', '.join(FILES.values())}")
        return 0
    from consensus.experiments.report import write_report
    from consensus.experiments.runner import run_experiment
    from consensus.experiments.spec import resolve_spec
    from consensus.registry import all_studies

    from consensus.scenarios.nlp_tasks.study import TASK_TITLES
    from consensus.scenarios.nlp_tasks.tasks import METRIC_LABELS

    KEEP = set(METRIC_LABELS.values()) | set(TASK_TITLES.values())
    studies = all_studies()
    print(f"{'preset':<28} {'trials':>7} {'wall s':>8}  target < {TARGET_S:.0f} s")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, file in FILES.items():
            spec = resolve_spec({"study": name, "trials": args.trials, "workers": args.workers,
                                 "params": {"dataset": str(args.data / file)}}, studies)
            t0 = time.perf_counter()
            result = run_experiment(spec, studies[name], Path(tmp) / name, progress=False)
            wall = time.perf_counter() - t0
            print(f"{name:<28} {result.ok:>7} {wall:>8.1f}  {'ok' if wall < TARGET_S else 'SLOWER THAN TARGET'}")
            report = write_report(Path(tmp) / name, studies).read_text().splitlines()
            rows += [f"{name} (ours, then the paper's):"] + [line for line in report
                                                           if line.split(" | ")[0].lstrip("| ") in KEEP]
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
