"""End to end with the embedded LLM: 3 robots through real ROS 2 nodes, a few LLM planning rounds.

Slow (loads the 1.1 GB model; 3-6 s per LLM call on 2 cores). Every planner output must be a parsed target or a
counted fallback, and the robots must end closer together than they started."""
from __future__ import annotations

import json

import pytest

from consensus.config import load_config

pytestmark = [pytest.mark.ros, pytest.mark.embedded]


def test_three_robots_embedded_llm_through_ros(tmp_path):
    pytest.importorskip("xllamacpp")
    from consensus.llm.embedded import installed_part_paths

    try:
        installed_part_paths()
    except Exception as exc:  # noqa: BLE001 - model packages absent: skip (CI installs them, see Makefile)
        pytest.skip(f"embedded model packages not installed: {exc}")
    from consensus.runs.ros_runner import run_ros

    cfg = load_config(None, num_robots=3, planner="llm", llm_backend="embedded", llm_concurrency=3,
                      max_rounds=3, duration_s=75.0, seed=11, llm_temperature=0.0, init_radius=4.0)
    summary = run_ros(cfg, tmp_path / "run", echo=None)
    plans = [json.loads(line) for line in (tmp_path / "run" / "plans.jsonl").read_text().splitlines()]
    assert len(plans) >= 6, "expected at least two rounds per robot"
    for p in plans:
        assert p["fallback"] or (p["target"] is not None and p["llm_calls"] >= 1), p
        if p["fallback"]:
            assert p["fallback_reason"], p
    assert summary["llm_fallbacks"] == sum(p["fallback"] for p in plans)
    assert summary["llm_calls"] >= len(plans)
    assert summary["final_spread_m"] < summary["initial_spread_m"]
    transcripts = (tmp_path / "run" / "transcripts.jsonl").read_text().splitlines()
    assert len(transcripts) >= summary["llm_calls"] - summary["llm_fallbacks"]
