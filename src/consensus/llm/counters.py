"""Counters every LLM agent keeps (plans, calls, parse failures, fallbacks by reason, clamped targets, refused tool
calls, remembered exchanges left out to fit the context window).

One layout for all scenarios, so runs and studies add them up the same way.
"""
from __future__ import annotations


def new_counters() -> dict:
    """Zeroed planner counters: plans, LLM calls, parse failures, fallbacks by reason, clamped targets, refused tool
    calls (``tool_errors``) and history exchanges left out of a prompt (``history_truncated``)."""
    return {"plans": 0, "calls": 0, "parse_failures": 0, "fallbacks": {}, "clamped": 0, "tool_errors": 0,
            "history_truncated": 0}


def add_counters(total: dict, part: dict) -> dict:
    """Add ``part`` into ``total`` (both in the ``new_counters`` layout); returns ``total``."""
    for key in ("plans", "calls", "parse_failures", "clamped", "tool_errors", "history_truncated"):
        total[key] = total.get(key, 0) + int(part.get(key, 0))
    for reason, count in part.get("fallbacks", {}).items():
        total["fallbacks"][reason] = total["fallbacks"].get(reason, 0) + int(count)
    return total
