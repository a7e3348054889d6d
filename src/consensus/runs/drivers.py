"""The vendors' driver simulators (TurtleBot 3's fake node, crazyswarm2's sim): are they here, and where.

``make drivers`` (tools/drivers/install.py, docs/drivers.md) links them into the venv, so that they need no sourced
environment: their executables sit in ``<venv>/lib/<package>/`` and their Python packages import. A ROS 2 install that
has them works too (its ament index). No ROS import here: the modules are looked up with ``importlib.util.find_spec``
(found, not imported), the executables with ``runs.ament.executable`` (re-exported here).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from consensus.runs.ament import executable  # the ament index, else this venv (where make drivers links)

INSTALL_HINT = ("`make drivers` (links ../shared/drivers into the venv, or builds the vendors' sources pinned in "
                "requirements/drivers-sources.txt; docs/drivers.md)")

#: (package, executable) of each fleet's simulator
TURTLEBOT3_FAKE = ("turtlebot3_fake_node", "turtlebot3_fake_node")
CRAZYFLIE_SERVER = ("crazyflie_sim", "crazyflie_server")
#: what crazyswarm2's simulator imports (and what our Crazyflie link needs): its messages, tf2 for Python, the
#: firmware's bindings (the ``np`` backend), rowan
CRAZYSWARM2_MODULES = ("crazyflie_interfaces", "tf2_msgs", "tf2_ros", "cffirmware", "rowan")


def missing_modules(names: tuple[str, ...]) -> list[str]:
    """The top-level modules of ``names`` that this Python does not find."""
    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def turtlebot3_available() -> str | None:
    """None when TurtleBot 3's fake node is here; else why not (one phrase)."""
    if executable(*TURTLEBOT3_FAKE) is None:
        return (f"{TURTLEBOT3_FAKE[0]}'s executable {TURTLEBOT3_FAKE[1]} was found neither in the ament index nor "
                f"in {Path(sys.prefix) / 'lib'}")
    return None


def crazyswarm2_available() -> str | None:
    """None when crazyswarm2's simulator server and what it imports are here; else why not (one phrase)."""
    if executable(*CRAZYFLIE_SERVER) is None:
        return (f"{CRAZYFLIE_SERVER[0]}'s {CRAZYFLIE_SERVER[1]} was found neither in the ament index nor in "
                f"{Path(sys.prefix) / 'lib'}")
    missing = missing_modules(CRAZYSWARM2_MODULES)
    if missing:
        return f"crazyswarm2's simulator needs Python modules that do not import: {', '.join(missing)}"
    return None


def available() -> bool:
    """Both fleets' simulators are here."""
    return turtlebot3_available() is None and crazyswarm2_available() is None
