"""Build an ``LLMClient`` from configuration: "openai", "embedded" or "replay"."""
from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Callable, Sequence

from consensus.errors import ConfigError
from consensus.llm.base import LLMClient

if TYPE_CHECKING:
    from consensus.llm.pool import Endpoint

log = logging.getLogger(__name__)

BACKENDS = ("openai", "embedded", "replay")


def make_client(
    backend: str,
    *,
    model: str = "",
    base_url: str = "",
    api_key_env: str = "OPENAI_API_KEY",
    timeout_s: float = 30.0,
    max_retries: int = 2,
    concurrency: int = 4,
    transcripts_path: str | None = None,
    replay_path: str | None = None,
    n_ctx: int = 4096,
    n_threads: int | None = None,
    n_parallel: int = 1,
    llama_cpp: bool = False,
    endpoints: Sequence[Endpoint] | None = None,
    share_prefix: bool | None = None,
) -> tuple[LLMClient, Callable[[], None]]:
    """Return ``(client, close)``; ``close()`` releases the client and any server it started.

    * "openai": ``OpenAIChatClient(base_url or the OpenAI endpoint, model)``.
    * "embedded": the default offline model (or the GGUF file named by ``model``)
      served by an ``EmbeddedServer`` on 127.0.0.1 with ``n_parallel`` slots (one per agent asking at once),
      with an OpenAI client on it that pins each agent to a slot (its prompt prefix stays cached).
    * ``llama_cpp``: the "openai" endpoint is a llama.cpp server (e.g. the ``llm_server`` node): send its
      prompt-cache, slot and grammar fields; with ``share_prefix`` (a server with ``--slot-save-path``, as the
      ``llm_server`` node's) cold slots start from the first request's prompt cache (``consensus.llm.slots``;
      the "embedded" server always shares unless ``share_prefix`` is False).
    * "replay": ``ReplayClient(replay_path)``, no network.
    * ``endpoints`` (backend "openai"): a ``PooledClient`` spreading the requests over them, each with its own
      in-flight limit (``consensus.llm.pool``); ``base_url`` and ``concurrency`` are then not used.

    With ``transcripts_path`` the "openai" and "embedded" clients record every exchange.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"llm backend must be one of {', '.join(BACKENDS)}; got {backend!r}")

    if backend == "replay":
        from consensus.llm.transcripts import ReplayClient

        if not replay_path:
            raise ConfigError("llm replay_path is required for backend 'replay'")
        client = ReplayClient(replay_path)
        return client, client.close

    from consensus.llm.openai_client import OpenAIChatClient

    server = None
    if backend == "openai" and endpoints:
        from consensus.llm.pool import PooledClient, SlotBroker

        inner = PooledClient(endpoints, SlotBroker([e.concurrency for e in endpoints]), model=model,
                             api_key_env=api_key_env, timeout_s=timeout_s, max_retries=max_retries)
    elif backend == "openai":
        inner = OpenAIChatClient(base_url or None, model, api_key_env=api_key_env, timeout_s=timeout_s,
                                 max_retries=max_retries, concurrency=concurrency, llama_cpp=llama_cpp,
                                 slots=n_parallel if llama_cpp else 0, share_prefix=bool(share_prefix))
    else:
        from consensus.llm.embedded import EmbeddedServer, ensure_default_model, resolve_model_path

        if model and not model.lower().endswith(".gguf"):
            raise ConfigError(f"llm model for backend 'embedded' must be empty or a .gguf file path; got {model!r}")
        path = resolve_model_path(model) if model else ensure_default_model()
        key = secrets.token_urlsafe(24)   # only this process can use the local server
        server = EmbeddedServer(path, n_ctx=n_ctx, n_threads=n_threads, n_parallel=n_parallel, api_key=key).start()
        # Requests beyond the server's slots would wait inside llama.cpp with their timeout running;
        # holding them in the client's semaphore instead makes timeout_s measure generation only.
        try:
            inner = OpenAIChatClient(server.base_url, server.model_alias, timeout_s=timeout_s,
                                     max_retries=max_retries, concurrency=min(concurrency, n_parallel),
                                     api_key=key, llama_cpp=True, slots=n_parallel,
                                     share_prefix=share_prefix is not False)
        except BaseException:
            server.close()
            raise

    client: LLMClient = inner
    if transcripts_path:
        from consensus.llm.transcripts import RecordingClient, TranscriptStore

        client = RecordingClient(inner, TranscriptStore(transcripts_path))

    def close() -> None:
        try:
            client.close()
        finally:
            if server is not None:
                server.close()

    return client, close
