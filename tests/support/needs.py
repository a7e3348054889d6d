"""The one place that decides whether an outside tool a test needs is here, and what to do when it is not.

A user's machine has none of ../shared and maybe no ROS 2 install: a test that needs the real ROS 2 launch, the
ros2 CLI, turtlesim, Xvfb, ImageMagick, rosbag2, gz, docker, ... skips with the reason and the command that installs
it (``pytest -rs`` lists them). CI sets ``CONSENSUS_REQUIRE_ALL=1`` (``.ci/run``, only where ../shared is beside the
clone): then a tool that CI installs itself (``ci=True`` below) must be there, and its absence fails the test instead
of skipping it. Tools that cannot be installed on this machine kind (rosbag2, gz, a Docker engine) always skip.

Use it as a marker, ``@pytest.mark.needs("ros2_launch", "xvfb")`` (checked by conftest before the test runs, so the
test body may import ``launch`` freely), or call ``need("ros2_cli")`` inside a fixture or test.

Python packages: ``pytest.importorskip`` is ``importorskip`` below (conftest puts it in pytest's place). It skips as
usual, except under CONSENSUS_REQUIRE_ALL=1 for a module that ``make test`` installs (``make_test_modules``: every
requirements file of the Makefile's ``REQS``, and the package itself): then a module that does not import fails the
test (or the module's collection) instead of hiding its tests. ``not_installed`` is the same rule for a fixture that
finds a package missing by other means (the embedded model's parts).

Presence is judged by what only the real thing has. In particular the repository's own top-level ``launch/`` folder
is importable from the repository root as a namespace package named ``launch``: ``import launch`` succeeding says
nothing; the real package has an ``__init__.py`` (a file origin), ``launch.actions`` and a ``launch_ros`` beside it.
"""
from __future__ import annotations

import ctypes.util
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"


def _spec(name: str, path: list[str] | None = None):
    """The module spec of ``name`` as this interpreter would find it (``path=None``: sys.path, importing parents),
    or as it would be found on ``path`` alone (nothing imported)."""
    try:
        if path is None:
            return importlib.util.find_spec(name)
        parts = name.split(".")
        spec = importlib.machinery.PathFinder.find_spec(parts[0], path)
        for i in range(1, len(parts)):
            if spec is None or spec.submodule_search_locations is None:
                return None
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]),
                                                            list(spec.submodule_search_locations))
        return spec
    except (ImportError, ValueError):          # a parent that is not a package, a broken install
        return None


def real_package(name: str, path: list[str] | None = None) -> bool:
    """``name`` is an installed regular package (an ``__init__.py``), not a namespace package made of folders that
    happen to carry its name (the repository's ``launch/``)."""
    spec = _spec(name, path)
    return spec is not None and spec.origin not in (None, "namespace") and spec.has_location


def have_ros2_launch(path: list[str] | None = None) -> bool:
    """The real ROS 2 ``launch`` (with ``launch.actions``) and ``launch_ros``, importable by this interpreter (or
    found on ``path`` alone)."""
    return all(real_package(pkg, path) and _spec(f"{pkg}.actions", path) is not None
               for pkg in ("launch", "launch_ros"))


def ros2_executable() -> str | None:
    """The ``ros2`` of this venv (the wheels) or of the PATH (a ROS 2 install) whose Python has ros2cli."""
    if not real_package("ros2cli"):
        return None
    mine = Path(sys.prefix) / "bin" / "ros2"
    if mine.is_file():
        return str(mine)
    return shutil.which("ros2")


def have_ros2_cli() -> bool:
    return ros2_executable() is not None and real_package("ros2launch")


def have_ros2_bag() -> bool:
    exe = ros2_executable()
    return bool(exe) and subprocess.run([exe, "bag", "info", "--help"], capture_output=True,
                                        check=False).returncode == 0


def have_docker_engine() -> bool:
    exe = shutil.which("docker")
    return bool(exe) and subprocess.run([exe, "info"], capture_output=True, check=False,
                                        timeout=30).returncode == 0


def have_imagemagick() -> bool:
    """ImageMagick's ``import`` (a screenshot of an X display); some machines have a ``convert`` stand-in only."""
    exe = shutil.which("import")
    return bool(exe) and "ImageMagick" in subprocess.run([exe, "-version"], capture_output=True, text=True,
                                                          check=False).stdout


def have_turtlesim() -> bool:
    """The turtlesim_node of a ROS 2 install (on the ament prefix path) or of ../shared/turtlesim."""
    if (SHARED / "turtlesim" / "setup-env.sh").is_file():
        return True
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix and (Path(prefix) / "lib" / "turtlesim" / "turtlesim_node").is_file():
            return True
    return False


def _driver(check: str) -> Callable[[], bool]:
    """A fleet's driver simulator is here (``consensus.runs.drivers``' ``check``: None when present)."""
    def present() -> bool:
        from consensus.runs import drivers

        return getattr(drivers, check)() is None
    return present


def _drivers_hint() -> str:
    from consensus.runs.drivers import INSTALL_HINT

    return INSTALL_HINT


ROS2_TOOLS_HINT = ("`make ros2-tools` (the real launch/launch_ros/ros2 CLI as wheels: from ../shared/ros2-tools, or "
                   "built from the ROS 2 sources, docs/ros2-tools.md), or a ROS 2 install (apt install "
                   "ros-kilted-ros-base; source /opt/ros/kilted/setup.bash)")


@dataclass(frozen=True)
class Tool:
    what: str                      # what is missing, as a person says it
    present: Callable[[], bool]
    install: str                   # the command (or the way) that installs it
    ci: Callable[[], bool]         # CI (CONSENSUS_REQUIRE_ALL=1) must have it


def _shared(sub: str) -> Callable[[], bool]:
    return lambda: (SHARED / sub).is_dir()


def _never() -> bool:
    return False


TOOLS: dict[str, Tool] = {
    "ros2_launch": Tool("the real ROS 2 launch and launch_ros", have_ros2_launch, ROS2_TOOLS_HINT,
                        _shared("ros2-tools")),
    "ros2_cli": Tool("the ros2 command-line tools (ros2cli, ros2launch)", have_ros2_cli, ROS2_TOOLS_HINT,
                     _shared("ros2-tools")),
    "turtlesim": Tool("turtlesim", have_turtlesim, "apt install ros-kilted-turtlesim (a ROS 2 install)",
                      _shared("turtlesim")),
    "xvfb": Tool("Xvfb (a virtual display)", lambda: shutil.which("Xvfb") is not None, "apt install xvfb",
                 _shared("turtlesim")),
    "qt5": Tool("the Qt 5 libraries turtlesim links", lambda: ctypes.util.find_library("Qt5Widgets") is not None,
                "apt install libqt5widgets5 libqt5gui5 libqt5core5a", _shared("turtlesim")),
    "imagemagick": Tool("ImageMagick (import, for screenshots)", have_imagemagick, "apt install imagemagick",
                        _shared("turtlesim")),
    "std_srvs": Tool("the std_srvs message package", lambda: _spec("std_srvs") is not None,
                     "pip install -r requirements/ros-kilted.txt", _shared("turtlesim")),
    "colcon": Tool("colcon", lambda: shutil.which("colcon") is not None or
                   shutil.which("colcon", path=str(Path(sys.prefix) / "bin")) is not None,
                   "pip install colcon-common-extensions", lambda: True),
    "rosbag2": Tool("rosbag2 (`ros2 bag`)", have_ros2_bag,
                    "apt install ros-kilted-rosbag2 ros-kilted-rosbag2-storage-mcap (no PyPI wheel)", _never),
    "gz": Tool("Gazebo (`gz sim`)", lambda: shutil.which("gz") is not None,
               "apt install ros-kilted-ros-gz (Gazebo Ionic)", _never),
    "docker": Tool("a Docker engine", have_docker_engine, "install Docker Engine and start dockerd", _never),
    "turtlebot3_fake": Tool("TurtleBot 3's fake node (turtlebot3_fake_node, the vendor's driver simulator)",
                            _driver("turtlebot3_available"), _drivers_hint(), _shared("drivers")),
    "crazyswarm2": Tool("crazyswarm2's simulator (crazyflie_server with crazyflie_interfaces, tf2_ros, cffirmware, "
                        "rowan)", _driver("crazyswarm2_available"), _drivers_hint(), _shared("drivers")),
    "ray": Tool("Ray (the package and its `ray` command)", lambda: _spec("ray") is not None and
                (Path(sys.prefix) / "bin" / "ray").is_file(), "pip install -r requirements/ray.txt (`make setup` does)",
                lambda: True),
}


def require_all() -> bool:
    return os.environ.get("CONSENSUS_REQUIRE_ALL") == "1"


@lru_cache(maxsize=None)
def present(name: str) -> bool:
    return TOOLS[name].present()


def missing_reason(name: str) -> str:
    tool = TOOLS[name]
    return f"{tool.what} not found; install: {tool.install}"


def need(*names: str) -> None:
    """Skip the calling test (or fail it, under CONSENSUS_REQUIRE_ALL=1 for tools CI installs) unless every tool in
    ``names`` is present."""
    for name in names:
        if name not in TOOLS:
            raise KeyError(f"unknown tool {name!r}; known: {', '.join(TOOLS)}")
        if present(name):
            continue
        if require_all() and TOOLS[name].ci():
            pytest.fail(f"CONSENSUS_REQUIRE_ALL=1: {missing_reason(name)}")
        pytest.skip(missing_reason(name))


# --------------------------------------------------------------------------------- Python packages make test installs
#: a distribution whose import name is not its normalised name (lower case, ``ros-`` dropped, ``-`` -> ``_``), beside
#: the extras' (``consensus.extras.EXTRAS``)
IMPORT_NAMES = {"pyyaml": "yaml", "mcap-ros2-support": "mcap_ros2", "pytest-xdist": "xdist",
                "import-linter": "importlinter", "colcon-common-extensions": "colcon_core", "protobuf": "google"}
_REQS = re.compile(r"^REQS\s*:=((?:[^\n]*\\\n)*[^\n]*)$", re.M)
_DIST = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def import_name(distribution: str) -> str:
    """The top-level module a requirements line's distribution installs."""
    from consensus.extras import EXTRAS

    dist = distribution.lower()
    known = {**{d.lower(): module for module, (d, _) in EXTRAS.items()}, **IMPORT_NAMES}
    if dist in known:
        return known[dist]
    return dist.removeprefix("ros-").replace("-", "_").replace(".", "_")


@lru_cache(maxsize=None)
def make_test_modules(root: Path = ROOT) -> dict[str, str]:
    """Top-level module -> the requirements file (of the Makefile's ``REQS``, what ``make test`` installs) that
    brings it, and ``consensus`` -> ``setup.py`` (the package under test)."""
    m = _REQS.search((root / "Makefile").read_text())
    if m is None:
        raise RuntimeError(f"no REQS := ... in {root / 'Makefile'}")
    out = {"consensus": "setup.py"}
    for name in m.group(1).replace("\\\n", " ").split():
        for line in (root / name).read_text().splitlines():
            dist = _DIST.match(line.split("#", 1)[0])
            if dist:
                out.setdefault(import_name(dist.group(1)), name)
    return out


def not_installed(what: str, module: str, detail: object = "") -> None:
    """``what`` (of top-level ``module``) is missing: skip, or fail under CONSENSUS_REQUIRE_ALL=1 when ``make test``
    installs ``module``."""
    reason = f"{what} not installed" + (f": {detail}" if detail else "")
    source = make_test_modules().get(module.split(".")[0])
    if require_all() and source:
        pytest.fail(f"CONSENSUS_REQUIRE_ALL=1: {reason} (`make test` installs it: {source})", pytrace=False)
    pytest.skip(reason)


_pytest_importorskip = pytest.importorskip


def importorskip(modname: str, *args, **kwargs):
    """``pytest.importorskip``, but under CONSENSUS_REQUIRE_ALL=1 a module that ``make test`` installs
    (``make_test_modules``) must import: its absence fails instead of skipping (at module level too: the module's
    collection fails)."""
    try:
        return _pytest_importorskip(modname, *args, **kwargs)
    except pytest.skip.Exception as exc:
        source = make_test_modules().get(modname.split(".")[0])
        if require_all() and source:
            pytest.fail(f"CONSENSUS_REQUIRE_ALL=1: {modname} does not import, yet `make test` installs it ({source}): "
                        f"{exc.msg}", pytrace=False)
        raise


def free_port() -> int:
    """A TCP port free on the loopback now (the embedded LLM server of a test must not collide with another
    test session's on this machine)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
