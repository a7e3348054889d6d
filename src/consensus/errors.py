"""Exceptions shared across the package.

``ConfigError`` is the one error type for bad user input (YAML, CLI, params):
the CLI prints its message and exits with status 2, without a traceback.
"""


class ConsensusError(Exception):
    """Base class of all errors raised on purpose by this package."""


class ConfigError(ConsensusError, ValueError):
    """Invalid configuration, CLI argument or parameter. The message says what and where."""
