"""Build an ``LLMClient`` from configuration: the backend's factory (``consensus.llm.backends``) on one set of
options, plus transcript recording and one ``close()``."""
from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from consensus.errors import ConfigError
from consensus.llm import backends
from consensus.llm.base import LLMClient

if TYPE_CHECKING:
    from consensus.llm.pool import Endpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientOptions:
    """What a backend's factory gets (``make_client``'s arguments but the backend and the transcripts)."""

    model: str = ""
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 30.0
    max_retries: int = 2
    concurrency: int = 4
    replay_path: str | None = None
    n_ctx: int = 4096
    n_threads: int | None = None
    n_parallel: int = 1
    llama_cpp: bool = False
    endpoints: Sequence[Endpoint] | None = None
    share_prefix: bool | None = None


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
    """Return ``(client, close)``; ``close()`` releases the client and any server it started. ``backend`` is a
    name of ``consensus.llm.backends``; its factory below gets the options:

    * ``openai``: ``OpenAIChatClient(base_url or the OpenAI endpoint, model)``.
    * ``embedded``: the default offline model (or the GGUF file named by ``model``)
      served by an ``EmbeddedServer`` on 127.0.0.1 with ``n_parallel`` slots (one per agent asking at once),
      with an OpenAI client on it that pins each agent to a slot (its prompt prefix stays cached).
    * ``llama_cpp``: the ``openai`` endpoint is a llama.cpp server (e.g. the ``llm_server`` node): send its
      prompt-cache, slot and grammar fields; with ``share_prefix`` (a server with ``--slot-save-path``, as the
      ``llm_server`` node's) cold slots start from the first request's prompt cache (``consensus.llm.slots``;
      the ``embedded`` server always shares unless ``share_prefix`` is False).
    * ``replay``: ``ReplayClient(replay_path)``, no network.
    * ``endpoints`` (backend ``openai``): a ``PooledClient`` spreading the requests over them, each with its own
      in-flight limit (``consensus.llm.pool``); ``base_url`` and ``concurrency`` are then not used.

    With ``transcripts_path`` the clients of a backend that ``records`` record every exchange.
    """
    names = backends.names()
    if backend not in names:
        raise ConfigError(f"llm backend must be one of {', '.join(names)}; got {backend!r}")
    spec = backends.backend_spec(backend)
    inner, server = spec.make(ClientOptions(
        model=model, base_url=base_url, api_key_env=api_key_env, timeout_s=timeout_s, max_retries=max_retries,
        concurrency=concurrency, replay_path=replay_path, n_ctx=n_ctx, n_threads=n_threads, n_parallel=n_parallel,
        llama_cpp=llama_cpp, endpoints=endpoints, share_prefix=share_prefix))
    if not spec.records:
        return inner, inner.close

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


# --------------------------------------------------------------------------- the backends' factories
def replay_client(o: ClientOptions):
    """``replay``: ``ReplayClient(replay_path)``, no network."""
    from consensus.llm.transcripts import ReplayClient

    if not o.replay_path:
        raise ConfigError("llm replay_path is required for backend 'replay'")
    return ReplayClient(o.replay_path), None


def openai_client(o: ClientOptions):
    """``openai``: one OpenAI-compatible endpoint, or a pool over ``endpoints``."""
    from consensus.llm.openai_client import OpenAIChatClient

    if o.endpoints:
        from consensus.llm.pool import PooledClient, SlotBroker

        return PooledClient(o.endpoints, SlotBroker([e.concurrency for e in o.endpoints]), model=o.model,
                            api_key_env=o.api_key_env, timeout_s=o.timeout_s, max_retries=o.max_retries), None
    return OpenAIChatClient(o.base_url or None, o.model, api_key_env=o.api_key_env, timeout_s=o.timeout_s,
                            max_retries=o.max_retries, concurrency=o.concurrency, llama_cpp=o.llama_cpp,
                            slots=o.n_parallel if o.llama_cpp else 0, share_prefix=bool(o.share_prefix)), None


def embedded_client(o: ClientOptions):
    """``embedded``: the pinned model (or the .gguf ``model``) on an ``EmbeddedServer`` of this process, with an
    OpenAI client on it that pins each agent to a slot."""
    from consensus.llm.embedded import EmbeddedServer, ensure_default_model, resolve_model_path
    from consensus.llm.openai_client import OpenAIChatClient

    if o.model and not o.model.lower().endswith(".gguf"):
        raise ConfigError(f"llm model for backend 'embedded' must be empty or a .gguf file path; got {o.model!r}")
    path = resolve_model_path(o.model) if o.model else ensure_default_model()
    key = secrets.token_urlsafe(24)   # only this process can use the local server
    server = EmbeddedServer(path, n_ctx=o.n_ctx, n_threads=o.n_threads, n_parallel=o.n_parallel,
                            api_key=key).start()
    # Requests beyond the server's slots would wait inside llama.cpp with their timeout running;
    # holding them in the client's semaphore instead makes timeout_s measure generation only.
    try:
        inner = OpenAIChatClient(server.base_url, server.model_alias, timeout_s=o.timeout_s,
                                 max_retries=o.max_retries, concurrency=min(o.concurrency, o.n_parallel),
                                 api_key=key, llama_cpp=True, slots=o.n_parallel,
                                 share_prefix=o.share_prefix is not False)
    except BaseException:
        server.close()
        raise
    return inner, server
