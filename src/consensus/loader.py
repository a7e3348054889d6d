"""The one loader of ``"package.module:attr"`` strings, which every registry names its code by, and the one shape of
a registry of named entries.

* ``load``: the scenario registry (``consensus.registry.lazy``), the simulator registry (``consensus.control.motion``),
  the LLM backend registry (``consensus.llm.backends``) and a simulator's renderer (``consensus.runs.video``) all
  resolve their targets with it.
* ``Registry``: entries with a ``name``, in registration order, and one error naming the valid names for an unknown
  one. The kinematics (``consensus.control.dynamics``), the simulators and the LLM backends are each one.

It sits in a bottom layer (it imports only ``errors``), so any kernel package may use it.
"""
from __future__ import annotations

import importlib
from typing import Any, Generic, TypeVar

from consensus.errors import ConfigError


def load(target: str) -> Any:
    """The attribute named by ``"package.module:attr"``, importing the module.

    One ``ConfigError`` (a ``ValueError``) naming ``target`` when the string is not of that form, when there is no
    such module, or when the module has no such attribute. A module that exists but fails to import (one of its own
    imports is missing, or it raises) raises what its import raised.
    """
    module, sep, attr = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not (sep and module and attr) or ":" in attr or module.startswith("."):
        raise ConfigError(f"{target!r} is not of the form 'package.module:attr'")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module == missing or module.startswith(missing + ".")):
            raise ConfigError(f"{target}: there is no module {missing}") from None
        raise
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise ConfigError(f"{target}: {module} offers no {attr}") from None


T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries (each has a ``name``) in registration order: ``register(entry)`` (a second entry of one name
    replaces the first), ``names()``, and ``get(name)`` with one ``error`` (default ``ValueError``) naming ``what``
    was asked for and the valid names otherwise. ``copy()``: a registry of its own (a test registers into one)."""

    def __init__(self, what: str, error: type[Exception] = ValueError) -> None:
        self.what, self.error = what, error
        self._entries: dict[str, T] = {}

    def register(self, entry: T) -> T:
        self._entries[entry.name] = entry
        return entry

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except (KeyError, TypeError):        # TypeError: an unhashable name (a list from a YAML file)
            raise self.error(f"unknown {self.what} {name!r}; valid: {', '.join(self._entries)}") from None

    def copy(self) -> "Registry[T]":
        other: Registry[T] = Registry(self.what, self.error)
        other._entries.update(self._entries)
        return other
