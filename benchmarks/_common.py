"""Shared helpers of the benchmark scripts: isolated ROS environment and per-run control-timing figures."""
from __future__ import annotations

import os
import random
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))          # fake_openai_server


def isolate_ros() -> None:
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.randint(120, 200)))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"


def timing(summary: dict) -> dict:
    """Control-timing figures over all robots of a run's summary."""
    per = [st for st in summary.get("per_robot", []) if st.get("control")]
    ticks = sum(st["control"]["ticks"] for st in per)
    on_time = sum(st["control"]["on_time"] for st in per)
    rates = [st["control"].get("rate_hz") or 0.0 for st in per]
    return {"robots_reporting": len(per), "ticks": ticks, "on_time_share": on_time / ticks if ticks else 0.0,
            "min_rate_hz": min(rates, default=0.0), "max_late_ms": max((st["control"]["max_late_ms"] for st in per),
                                                                      default=0.0)}


class ChildCPU:
    """CPU seconds used by finished child processes between start() and stop(), as a share of wall time."""

    def __enter__(self):
        self.t0 = time.monotonic()
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.c0 = ru.ru_utime + ru.ru_stime
        return self

    def __exit__(self, *exc):
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu_s = ru.ru_utime + ru.ru_stime - self.c0
        self.wall_s = time.monotonic() - self.t0
        self.share = self.cpu_s / self.wall_s
