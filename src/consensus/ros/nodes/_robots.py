"""Shared set-up of robot agents for the per-robot and the fleet executables."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from consensus.config import AggregationConfig
from consensus.llm.from_config import client_from_config
from consensus.planners.factory import planners_from_config


def make_planners(cfg: AggregationConfig, robot_ids: list[int]):
    """Planners for ``robot_ids``, the thread pool for LLM calls (None for classical planners), the client's
    status function, and a close function."""
    transcripts = Path(cfg.output_dir) / "transcripts.jsonl" if cfg.output_dir else None
    if transcripts is not None:
        os.makedirs(transcripts.parent, exist_ok=True)
    client, close_client = client_from_config(cfg, transcripts)
    planners = planners_from_config(cfg, client)
    chosen = [planners[i] for i in robot_ids]
    if client is None:
        return chosen, None, None, close_client
    pool = ThreadPoolExecutor(max_workers=cfg.llm_concurrency, thread_name_prefix="planner")

    def close() -> None:
        pool.shutdown(wait=False, cancel_futures=True)
        close_client()

    status: Callable[[], dict] = client.status
    return chosen, pool, status, close
