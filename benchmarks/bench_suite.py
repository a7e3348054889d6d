"""Test suite: where `make test`'s pytest time goes, by kind of test, and the slowest tests.

    python benchmarks/bench_suite.py --junit report.xml          # group a finished run's JUnit report
    python benchmarks/bench_suite.py --run [-- PYTEST ARGS]      # run the suite as `make test` does, then group
    python benchmarks/bench_suite.py --junit report.xml --cpu DIR   # ... with each test's CPU seconds (--run: too)

A JUnit report with each test's whole time (set-up + call + tear-down) comes from
``pytest --junitxml=report.xml -o junit_duration_report=total``. The kinds (first match wins):

* embedded LLM: tests marked ``embedded`` (the real model);
* builds: colcon / ros2-tools builds and installs (test_colcon, test_ros2_tools*, test_install_layout);
* ROS process runs: tests marked ``ros`` and the other files that start ROS processes (test_turtlesim, test_bag);
* experiments: the sweep runner and its studies (test_experiments, test_ray, test_studies_consensus, *study*);
* docs commands: test_docs (every command of README and docs/ run in order);
* unit tests: the rest.

"cpu s" (with ``--cpu``) is each test's CPU seconds, its worker's and its reaped children's (benchmarks/pytest_cpu.py,
which ``--run`` loads): on 2 cores with 3 workers the cores are the limit, so CPU, not wall time, is what a test
costs the suite. "sum" is the tests' own time added up; with xdist workers the wall time is less than the sum
(pytest's last line says the wall time). Markers are read by collecting the suite (``pytest --collect-only -m ...``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_FILES = ("test_colcon.py", "test_ros2_tools.py", "test_ros2_tools_source.py", "test_install_layout.py")
ROS_FILES = ("test_turtlesim.py", "test_bag.py")
EXPERIMENT_FILES = ("test_experiments.py", "test_ray.py", "test_studies_consensus.py")
KINDS = ("embedded LLM", "builds", "ROS process runs", "experiments", "docs commands", "unit tests")


def collect(marker: str) -> set[str]:
    """The node ids of the tests that carry ``marker`` (a -m expression)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", marker, "-n", "0"], cwd=ROOT, capture_output=True, text=True, check=False).stdout
    return {line.strip() for line in out.splitlines() if "::" in line}


def kind_of(node_id: str, embedded: set[str], ros: set[str]) -> str:
    file = node_id.split("::")[0].rsplit("/", 1)[-1]
    if node_id in embedded:
        return "embedded LLM"
    if file in BUILD_FILES:
        return "builds"
    if node_id in ros or file in ROS_FILES:
        return "ROS process runs"
    if file in EXPERIMENT_FILES or "study" in file:
        return "experiments"
    if file == "test_docs.py":
        return "docs commands"
    return "unit tests"


def read_junit(path: Path) -> list[tuple[str, float]]:
    """(node id, seconds) of every test case of a JUnit report written by pytest."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "")
        parts = module.split(".")
        # pytest writes classname "tests.unit.llm.test_x" (or "tests.ros.test_x.TestClass") and name "test_y[param]"
        file_parts, cls = (parts, None) if not parts[-1][:1].isupper() else (parts[:-1], parts[-1])
        node = "/".join(file_parts) + ".py" + (f"::{cls}" if cls else "") + f"::{case.get('name')}"
        cases.append((node, float(case.get("time", 0.0))))
    return cases


def read_cpu(folder: Path) -> dict[str, float]:
    """{node id: CPU seconds} from benchmarks/pytest_cpu.py's files."""
    cpu: dict[str, float] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            cpu[rec["id"]] = cpu.get(rec["id"], 0.0) + float(rec["cpu_s"])
    return cpu


def report(cases: list[tuple[str, float]], slowest: int, cpu: dict[str, float] | None = None) -> None:
    embedded, ros = collect("embedded"), collect("ros")
    seconds, count, cpu_s = defaultdict(float), defaultdict(int), defaultdict(float)
    for node, t in cases:
        k = kind_of(node, embedded, ros)
        seconds[k] += t
        count[k] += 1
        cpu_s[k] += (cpu or {}).get(node, 0.0)
    total, total_cpu = sum(seconds.values()), sum(cpu_s.values())
    print(f"{'kind':<18} {'tests':>6} {'sum s':>8} {'share':>6}" + (f" {'cpu s':>8} {'share':>6}" if cpu else ""))
    for k in KINDS:
        line = f"{k:<18} {count[k]:>6} {seconds[k]:>8.1f} {seconds[k] / total if total else 0:>6.1%}"
        if cpu:
            line += f" {cpu_s[k]:>8.1f} {cpu_s[k] / total_cpu if total_cpu else 0:>6.1%}"
        print(line)
    print(f"{'all':<18} {len(cases):>6} {total:>8.1f}" + (f"        {total_cpu:>8.1f}" if cpu else ""))
    print(f"\nslowest {slowest} (set-up + call + tear-down):")
    for node, t in sorted(cases, key=lambda c: -c[1])[:slowest]:
        print(f"{t:>8.1f} s  {node}")
    if cpu:
        print(f"\nmost CPU {slowest}:")
        for node, c in sorted(cpu.items(), key=lambda c: -c[1])[:slowest]:
            print(f"{c:>8.1f} s  {node}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--junit", type=Path, help="a JUnit report of a finished run")
    ap.add_argument("--run", action="store_true", help="run the suite first (the Makefile's pytest arguments)")
    ap.add_argument("--slowest", type=int, default=10)
    ap.add_argument("--cpu", type=Path, help="a folder of benchmarks/pytest_cpu.py's per-test CPU files")
    ap.add_argument("pytest_args", nargs="*", help="after --: extra pytest arguments for --run")
    args = ap.parse_args()
    if args.run:
        junit = args.junit or Path("suite-junit.xml")
        workers = os.environ.get("TEST_WORKERS", "3")
        args.cpu = (args.cpu or Path("suite-cpu")).resolve()
        shutil.rmtree(args.cpu, ignore_errors=True)
        cmd = [sys.executable, "-m", "pytest", "-q", "-n", workers, f"--junitxml={junit}",
               "-o", "junit_duration_report=total", "-p", "pytest_cpu", *args.pytest_args]
        env = dict(os.environ, CONSENSUS_TEST_CPU_DIR=str(args.cpu),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")])))
        print("running:", " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=ROOT, check=False, env=env)
        args.junit = junit
    if args.junit is None:
        ap.error("give --junit REPORT or --run")
    report(read_junit(args.junit), args.slowest, read_cpu(args.cpu) if args.cpu else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
