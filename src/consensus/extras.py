"""The optional parts of the package (setup.py's ``extras_require``) and the one line naming a missing one's install.

The base install is what a ROS user of aggregation needs (``consensus run aggregation`` in the built-in sim or
turtlesim, the bag, the plots, the OpenAI-compatible client). Everything else is an extra, listed in ``EXTRAS``
(import name -> (PyPI distribution, extra)) and pinned in ``requirements/<extra>.txt``:

* ``require(module, what)``: the module, or one ``ConfigError`` (the CLI prints one line, exit status 2)
  ``<what> needs <distribution> (the '<extra>' extra): pip install 'consensus[<extra>]'``. Every import site of an
  extra's package goes through it, so the message is the same everywhere.
* ``optional(module)``: the module, or None when it cannot be imported: for a speed-up that has a fallback
  (numba for the collision filter's batched QP, whose numpy version solves the same problems).
"""
from __future__ import annotations

import importlib
from types import ModuleType

from consensus.errors import ConfigError

#: import name -> (PyPI distribution, the extra of setup.py that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "numba": ("numba", "studies"),
    "rouge_score": ("rouge-score", "studies"),
    "networkx": ("networkx", "studies"),
    "cryptography": ("cryptography", "security"),
    "xllamacpp": ("xllamacpp", "embedded"),
    "foxglove": ("foxglove-sdk", "foxglove"),
    "ray": ("ray", "ray"),
    "imageio_ffmpeg": ("imageio-ffmpeg", "video"),
    "mujoco": ("mujoco", "mujoco"),
    "mcp": ("mcp", "mcp"),
}


def install_command(extra: str) -> str:
    """The one command that adds ``extra``."""
    return f"pip install 'consensus[{extra}]'"


def missing(module: str, what: str, reason: str = "") -> ConfigError:
    """The error of a missing extra's package: one line with the ``pip install`` that adds it."""
    dist, extra = EXTRAS[module.split(".")[0]]
    why = f"; {reason}" if reason else ""
    return ConfigError(f"{what} needs {dist} (the '{extra}' extra{why}): {install_command(extra)}")


def require(module: str, what: str) -> ModuleType:
    """``module`` imported, or ``missing(...)`` raised (``what`` names what needs it, e.g. "--foxglove")."""
    top = module.split(".")[0]
    if top not in EXTRAS:
        raise KeyError(f"{top} is not the package of an extra (consensus.extras.EXTRAS)")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        # not installed at all, or installed but broken (say why: e.g. a numba built for another numpy)
        absent = isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == top
        raise missing(module, what, "" if absent else f"it is installed but does not import: {exc}") from None


def optional(module: str) -> ModuleType | None:
    """``module`` imported, or None when it cannot be (a speed-up whose caller has a fallback)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
