"""The ament index: where ROS 2 packages (ours and others', e.g. turtlesim, ros_gz_bridge) are installed.

The one module of the package that imports ``ament_index_python`` (an import contract keeps it so). Every lookup
answers ``None`` when the package is not in the index (``AMENT_PREFIX_PATH``) or when there is no ROS 2 at all, so
callers decide what a missing package means (a fallback, or one ``ConfigError`` naming what to install).
"""
from __future__ import annotations

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
    """``lib/<package>/<name>`` under ``package``'s prefix when that file exists, else None."""
    prefix = package_prefix(package)
    path = prefix / "lib" / package / name if prefix else None
    return path if path is not None and path.is_file() else None
