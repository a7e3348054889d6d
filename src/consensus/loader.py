"""The one loader of ``"package.module:attr"`` strings, which every registry names its code by.

The scenario registry (``consensus.registry.lazy``), the simulator registry (``consensus.control.motion``), the LLM
backend registry (``consensus.llm.backends``) and a simulator's renderer (``consensus.runs.video``) all resolve their
targets with ``load``. It sits in a bottom layer (it imports only ``errors``), so any kernel package may use it.
"""
from __future__ import annotations

import importlib
from typing import Any

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
