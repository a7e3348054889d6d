"""Counters every LLM agent keeps (plans, calls, parse failures, fallbacks by reason, clamped targets).

One layout for all scenarios, so runs and studies add them up the same way.
"""
from __future__ import annotations


def new_counters() -> dict:
    """Zeroed planner counters: plans, LLM calls, parse failures, fallbacks by reason, clamped targets."""
    return {"plans": 0, "calls": 0, "parse_failures": 0, "fallbacks": {}, "clamped": 0}


def add_counters(total: dict, part: dict) -> dict:
    """Add ``part`` into ``total`` (both in the ``new_counters`` layout); returns ``total``."""
    for key in ("plans", "calls", "parse_failures", "clamped"):
        total[key] += int(part.get(key, 0))
    for reason, count in part.get("fallbacks", {}).items():
        total["fallbacks"][reason] = total["fallbacks"].get(reason, 0) + int(count)
    return total
