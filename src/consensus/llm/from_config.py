"""Create the LLM client a run's config asks for (shared by the headless runner and the ROS nodes)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from consensus.llm.base import LLMClient


def client_from_config(cfg, transcripts_path: str | Path | None = None
                       ) -> tuple[LLMClient | None, Callable[[], None]]:
    """The client for ``cfg`` (a config with the LLM group of ``consensus.settings``; None when the run needs no
    LLM) and a function that closes it.

    ``llm_backend: embedded`` with ``llm_base_url`` set means the embedded server already runs there (started by
    the ``llm_server`` node or the CLI runner), so robots connect to it like to any OpenAI-compatible endpoint.
    """
    if not cfg.uses_llm():
        return None, lambda: None
    from consensus.llm.backends import backend_spec, endpoint_backend
    from consensus.llm.factory import make_client

    llama_cpp = backend_spec(cfg.llm_backend).local_server
    backend = endpoint_backend(cfg.llm_backend, cfg.llm_base_url)
    # one server slot per agent that asks at once (the llm_server node sizes its slots the same way)
    slots = max(1, min(cfg.llm_concurrency, getattr(cfg, "num_robots", cfg.llm_concurrency)))
    return make_client(
        backend,
        model=cfg.llm_model,
        base_url=cfg.llm_base_url,
        api_key_env=cfg.llm_api_key_env,
        timeout_s=cfg.llm_timeout_s,
        max_retries=cfg.llm_max_retries,
        concurrency=cfg.llm_concurrency,
        transcripts_path=str(transcripts_path) if transcripts_path else None,
        replay_path=cfg.replay_path or None,
        n_parallel=slots if llama_cpp else 1,
        n_ctx=embedded_context(slots),
        llama_cpp=llama_cpp,
        # the run's own llm_server (consensus.ros.llm_server) saves and restores slots: the robots of one fleet
        # process start from one prompt prefix (consensus.llm.slots); one process per robot: each has one slot
        share_prefix=llama_cpp and bool(cfg.llm_base_url) and getattr(cfg, "single_process", False),
    )


def embedded_context(slots: int, per_slot: int = 4096) -> int:
    """Context of the embedded server for ``slots`` agents: one shared (unified) KV cache of ``per_slot`` tokens per
    slot, at most the model's 32768."""
    return min(32768, max(4096, per_slot * max(1, slots)))
