"""``llm_server``: the embedded LLM (llama.cpp via xllamacpp) as a process of the run.

Serves the OpenAI chat-completions protocol on ``127.0.0.1:<llm_port>`` only. The default weights are the pinned
Qwen2.5-Coder-1.5B-Instruct Q4_K_M chunks, assembled and checked against their SHA-256 before use; ``llm_model`` may
name any other ``.gguf`` file instead. Robots reach it with ``llm_backend: embedded`` and
``llm_base_url: http://127.0.0.1:<llm_port>/v1``. The server stops with this process. Its health goes out on
``health`` and ``/diagnostics`` once at start and every second while it serves.
"""
from __future__ import annotations

from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from consensus.llm.embedded import EmbeddedServer, ensure_default_model
from consensus.settings import RobotBaseConfig
from consensus.ros.health import publish_health
from consensus.ros.params import declare_config
from consensus.ros.process import run_node, spin

# context tokens per parallel request: a disaster drone's prompt with a full discussion inbox is ~650-900 tokens
# plus up to 256 reply tokens; the KV cache costs ~28 kB per token for the 1.5B model (2048 x 4 slots ~ 230 MB)
CTX_PER_REQUEST = 2048


def _body(_args: list[str]) -> None:
    node = Node("llm_server")
    cfg = declare_config(node, RobotBaseConfig, uses=("llm_model", "llm_port", "llm_concurrency"))
    publish_health(node)          # on /health and /diagnostics like every node: once now, every second once serving
    model = cfg.llm_model if cfg.llm_model.endswith(".gguf") else str(ensure_default_model())
    node.get_logger().info(f"starting embedded LLM on 127.0.0.1:{cfg.llm_port} with {model}")
    with EmbeddedServer(model, port=cfg.llm_port, n_parallel=cfg.llm_concurrency,
                        n_ctx=CTX_PER_REQUEST * cfg.llm_concurrency) as server:
        node.get_logger().info(f"embedded LLM ready at {server.base_url}")
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spin(executor)


def main() -> int:
    return run_node(_body, "llm_server")
