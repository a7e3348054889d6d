"""A pytest plugin for benchmarks/bench_suite.py: each test's CPU seconds (its worker process and the child processes
it reaped: ROS nodes, runners, model servers in the worker), one JSON line per test into
``$CONSENSUS_TEST_CPU_DIR/<xdist worker>.jsonl``. On a 2-core machine running 3 workers the cores are the limit, so a
test's CPU, not its wall time (which grows with what runs beside it), says what it costs the suite.

    PYTHONPATH=benchmarks CONSENSUS_TEST_CPU_DIR=cpu pytest -p pytest_cpu -n 3
"""
from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

_out = None


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _out
    folder = os.environ.get("CONSENSUS_TEST_CPU_DIR")
    if not folder:
        yield
        return
    if _out is None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        _out = open(Path(folder) / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl", "a")
    wall0, (own0, children0) = time.monotonic(), _cpu()
    yield
    own1, children1 = _cpu()
    _out.write(json.dumps({"id": item.nodeid, "wall_s": time.monotonic() - wall0,
                           "cpu_s": own1 - own0 + children1 - children0}) + "\n")
    _out.flush()
