"""The ament index: where ROS 2 packages (ours and others', e.g. turtlesim, ros_gz_bridge) are installed.

The one module of the package that imports ``ament_index_python`` (an import contract keeps it so). Every lookup
answers ``None`` when the package is not in the index (``AMENT_PREFIX_PATH``) or when there is no ROS 2 at all, so
callers decide what a missing package means (a fallback, or one ``ConfigError`` naming what to install).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


def available() -> bool:
    """``ament_index_python`` imports (a ROS 2 install, or the pinned wheels)."""
    try:
        import ament_index_python  # noqa: F401
    except ImportError:
        return False
    return True


def _lookup(getter: str, package: str) -> Path | None:
    """``ament_index_python.packages.<getter>(package)`` as a Path, or None (not in the index, or no ROS 2)."""
    try:
        from ament_index_python import packages
    except ImportError:
        return None
    try:
        return Path(getattr(packages, getter)(package))
    except (packages.PackageNotFoundError, ValueError, KeyError, OSError):
        return None


def package_prefix(package: str) -> Path | None:
    """The install prefix of ``package`` (its ``lib/<package>/`` holds its executables), or None."""
    return _lookup("get_package_prefix", package)


def package_share(package: str) -> Path | None:
    """``share/<package>`` of ``package`` (its launch files, configs, package.xml), or None."""
    return _lookup("get_package_share_directory", package)


def executable(package: str, name: str) -> Path | None:
    """``lib/<package>/<name>``, an executable file, under ``package``'s prefix in the ament index, else under this
    Python's prefix (an ament prefix once a package is pip-installed into the venv, as ours and the vendors'
    simulators of ``make drivers`` are, though ``AMENT_PREFIX_PATH`` may be unset); None when neither has one."""
    prefixes = [package_prefix(package), Path(sys.prefix)]
    for path in (prefix / "lib" / package / name for prefix in prefixes if prefix is not None):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None
