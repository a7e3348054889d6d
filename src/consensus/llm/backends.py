"""The LLM backend registry: every backend's name, its client factory and what it needs, written once.

A backend is a ``Backend`` record: a name (the ``llm_backend`` value of a config, the sweep spec's ``llm.backend``,
``--backend`` of ``consensus run`` and ``consensus experiment``), a factory (``"module:function"``, imported on its
first use, so naming a backend imports none of its client code) and what a run must do for it:

* ``local_server``: the backend serves a model from this machine (llama.cpp): a ROS run starts the ``llm_server``
  process (``llm_port``) and the nodes reach it over ``http://127.0.0.1:<llm_port>/v1``; a sweep holds it in its
  own process (so Ray workers cannot use it);
* ``via_url``: with ``llm_base_url`` set, such a server runs already, and clients reach it through this backend;
* ``records``: its exchanges are recorded in ``transcripts.jsonl`` (a replay records nothing);
* ``needs_replay_path``: it answers from a recorded ``transcripts.jsonl`` (``replay_path``), no network.

The factory is ``factory(options) -> (client, server)``: ``options`` is ``consensus.llm.factory.ClientOptions``;
``server`` is what ``close()`` must stop besides the client (or None). Every list of backend names is
``names()``; every question about a backend is ``backend_spec(name)``. Adding a backend is one ``register_backend``
call here and its factory (docs/architecture.md, "How to add an LLM backend").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from consensus.errors import ConfigError
from consensus.loader import Registry, load


@dataclass(frozen=True)
class Backend:
    name: str
    summary: str                      # one line: what answers (shown in the docs and --help)
    factory: str                      # "module:function": factory(options) -> (client, server or None)
    local_server: bool = False        # serves a model on this machine (a ROS run starts the llm_server process)
    via_url: str = ""                 # with llm_base_url set: the backend that reaches the running server
    records: bool = True              # exchanges go into transcripts.jsonl
    needs_replay_path: bool = False   # answers from a recorded transcripts.jsonl (replay_path), no network

    def make(self, options: Any) -> tuple[Any, Any]:
        """The backend's client (and the server it started, or None) for ``options``."""
        return load(self.factory)(options)


#: every backend by name (``consensus.loader.Registry``); an unknown name is one ``ConfigError`` naming the valid ones
_BACKENDS: Registry[Backend] = Registry("llm backend", ConfigError)


def register_backend(backend: Backend) -> Backend:
    return _BACKENDS.register(backend)


def names() -> tuple[str, ...]:
    """Every backend's name, in registration order (the first is the default of ``LLMParams.llm_backend``)."""
    return _BACKENDS.names()


def backend_spec(name: str) -> Backend:
    """The backend called ``name`` (``_BACKENDS``)."""
    return _BACKENDS.get(name)


def endpoint_backend(name: str, base_url: str) -> str:
    """The backend a client uses for ``name`` with ``base_url``: a local-server backend whose server runs already
    (``base_url`` set) is reached through its ``via_url`` backend; any other is itself."""
    spec = backend_spec(name)
    return spec.via_url if spec.local_server and spec.via_url and base_url else name


def starts_local_server(name: str, base_url: str = "") -> bool:
    """A run of backend ``name`` must start its model server (no ``base_url`` names a running one)."""
    return backend_spec(name).local_server and not base_url


EMBEDDED = register_backend(Backend(
    "embedded", "the pinned offline model (or a .gguf llm_model) served by llama.cpp on this machine",
    "consensus.llm.factory:embedded_client", local_server=True, via_url="openai"))
OPENAI = register_backend(Backend(
    "openai", "any OpenAI-compatible endpoint (llm_base_url; OpenAI's without): vLLM, Ollama, llama.cpp, ...",
    "consensus.llm.factory:openai_client"))
REPLAY = register_backend(Backend(
    "replay", "answers from a recorded transcripts.jsonl (replay_path), no network",
    "consensus.llm.factory:replay_client", records=False, needs_replay_path=True))

#: the default backend (``LLMParams.llm_backend``, a sweep spec's ``llm.backend``)
DEFAULT = EMBEDDED.name
