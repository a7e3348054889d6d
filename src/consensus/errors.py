"""Exceptions shared across the package, and the one error boundary.

``ConfigError`` is the one error type for bad user input (YAML, CLI, params): the CLI prints its message and exits
with status 2, without a traceback. ``error_boundary`` is where every command (``consensus.cli``) and every node main
(``consensus.ros.process.run_node``) turns an exception into one line on stderr and an exit status: bad input
(``ConfigError``) 2, a failure of the run, the LLM (``consensus.llm.base.LLMError`` is a ``ConsensusError``) or the
file system 1, Ctrl-C 130, anything unexpected 70 (``CONSENSUS_DEBUG=1`` prints the traceback).
"""
from __future__ import annotations

import os
import sys
import traceback
from typing import Callable

EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_INTERNAL = 2, 1, 130, 70


class ConsensusError(Exception):
    """Base class of all errors raised on purpose by this package."""


class ConfigError(ConsensusError, ValueError):
    """Invalid configuration, CLI argument or parameter. The message says what and where."""


def error_boundary(body: Callable[[], int], prog: str) -> int:
    """Run ``body`` and map what it raises to one line on stderr and an exit status (module docstring)."""
    try:
        return body()
    except ConfigError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ConsensusError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"{prog}: error:{where} {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the boundary: one line, never a traceback (unless asked for)
        if os.environ.get("CONSENSUS_DEBUG"):
            traceback.print_exc()
        print(f"{prog}: internal error: {type(exc).__name__}: {exc} (CONSENSUS_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL
