"""turtlesim as the simulator of a run (``sim: turtlesim``): the pure parts, no ROS (docs/turtlesim.md).

* ``WindowMap``: the workspace <-> turtlesim window map. turtlesim draws a square world ``[0, WINDOW_M]^2`` (its
  500 px window at 45 px per metre); the workspace is mapped into it by one uniform scale (angles and the aspect
  ratio are kept, so a yaw is the same in both) with ``MARGIN_M`` free on the tighter axis, centred on the other.
  Speeds scale by the same factor, yaw rates not at all.
* ``odom_from_pose``: a ``turtlesim/msg/Pose`` (x, y, theta, linear_velocity, angular_velocity) as the robot's
  odometry in workspace coordinates (x, y, yaw, forward speed, yaw rate).
* ``turtle_name``/``pen``: robot ``i`` is ``turtle<i+1>`` (robot 0 reuses turtlesim's own ``turtle1``), with pen
  colour ``PEN_COLOURS[i % len]``.
* ``processes``: ``turtlesim_node`` (package turtlesim) and our ``turtlesim_bridge``
  (``consensus.sims.turtlesim.ros``), in place of the built-in ``sim``.
* ``prepare``: the checks and settings of a turtlesim run, before anything starts: turtlesim installed
  (``find_turtlesim``), a display for its window, ``dim`` 2; the robots' kinematics is set to ``unicycle`` (turtles
  are unicycles; a scenario whose robots stay single integrators asks for holonomic turtles instead) and the change
  is returned for the manifest.
* Commands: turtlesim stops a turtle whose last ``cmd_vel`` is ``TURTLESIM_CMD_TIMEOUT_S`` old. The bridge forwards
  each robot command once and zeroes a turtle whose robot has been silent for ``CMD_HOLD_S`` (the built-in sim's
  timeout, shorter than turtlesim's), so a held command is always still live in turtlesim and a robot that stops
  commanding stops; nothing re-sends a stale command.
"""
from __future__ import annotations

import importlib.util
import math
import os
from dataclasses import dataclass
from pathlib import Path

from consensus.control.motion import UNICYCLE
from consensus.control.dynamics import dynamics_of
from consensus.errors import ConfigError
from consensus.runs.processes import ProcessSpec

PACKAGE = "turtlesim"
NODE_EXECUTABLE = "turtlesim_node"
BRIDGE_EXECUTABLE = "turtlesim_bridge"
WINDOW_M = (500 - 1) / 45.0          # turtlesim's world is [0, WINDOW_M]^2 (about 11.09 m); turtles stop at the walls
MARGIN_M = 0.5                       # kept free between the mapped workspace and the window's edge
TURTLESIM_CMD_TIMEOUT_S = 1.0        # turtlesim zeroes a turtle's velocity after this long without cmd_vel
CMD_HOLD_S = 0.5                     # the bridge zeroes a turtle whose robot was silent this long (= built-in sim)
PEN_WIDTH = 3
#: bright pens that stand out on turtlesim's blue background (69, 86, 255)
PEN_COLOURS = ((255, 255, 255), (255, 210, 0), (255, 70, 70), (0, 230, 120), (255, 140, 0), (255, 0, 255),
               (0, 230, 230), (0, 0, 0), (160, 255, 60), (255, 150, 200))

INSTALL_HINT = ("install ROS 2's turtlesim: with ROS 2 from apt, `apt install ros-$ROS_DISTRO-turtlesim` and "
                "source /opt/ros/$ROS_DISTRO/setup.bash; with the PyPI wheels, a turtlesim built for them "
                "(../shared/turtlesim: `pip install -r ../shared/turtlesim/requirements.txt` and "
                "`source ../shared/turtlesim/setup-env.sh \"$VIRTUAL_ENV\"`); see docs/turtlesim.md")


@dataclass(frozen=True)
class WindowMap:
    """``turtle = scale * workspace + offset`` per axis (one scale for both axes)."""

    scale: float
    offset_x: float
    offset_y: float

    @classmethod
    def for_workspace(cls, workspace, window: float = WINDOW_M, margin: float = MARGIN_M) -> "WindowMap":
        """The map of a 2-D workspace ``[xmin, xmax, ymin, ymax]`` into ``[margin, window - margin]^2``."""
        if len(workspace) != 4:
            raise ConfigError(f"turtlesim needs a 2-D workspace [xmin, xmax, ymin, ymax] (got {list(workspace)})")
        xmin, xmax, ymin, ymax = (float(v) for v in workspace)
        if not (xmin < xmax and ymin < ymax and 0 <= 2 * margin < window):
            raise ConfigError(f"turtlesim: cannot map workspace {list(workspace)} into the window")
        scale = (window - 2 * margin) / max(xmax - xmin, ymax - ymin)
        centre = window / 2
        return cls(scale, centre - scale * (xmin + xmax) / 2, centre - scale * (ymin + ymax) / 2)

    def to_turtle(self, x: float, y: float) -> tuple[float, float]:
        return self.scale * x + self.offset_x, self.scale * y + self.offset_y

    def to_workspace(self, tx: float, ty: float) -> tuple[float, float]:
        return (tx - self.offset_x) / self.scale, (ty - self.offset_y) / self.scale

    def cmd_to_turtle(self, vx: float, vy: float, wz: float) -> tuple[float, float, float]:
        """A body-frame velocity command (m/s, m/s, rad/s) of the workspace in turtle units."""
        return vx * self.scale, vy * self.scale, wz


def odom_from_pose(m: WindowMap, x: float, y: float, theta: float, v: float, w: float
                   ) -> tuple[float, float, float, float, float]:
    """A turtle's ``Pose`` fields as the robot's odometry in the workspace: (x, y, yaw, forward speed, yaw rate).
    Raises ``ValueError`` for a non-finite field (the bridge counts it as a bad message)."""
    if not all(math.isfinite(val) for val in (x, y, theta, v, w)):
        raise ValueError("non-finite turtlesim pose")
    wx, wy = m.to_workspace(x, y)
    yaw = math.atan2(math.sin(theta), math.cos(theta))          # wrap to (-pi, pi]
    return wx, wy, yaw, v / m.scale, w


class CommandHold:
    """Which turtles to stop: a turtle that moves and whose robot sent nothing for ``hold_s`` gets one zero
    command (module docstring). ``sent(i, cmd, now)`` after every command forwarded to turtle ``i``; ``due(now)``
    the turtles to stop now (each once)."""

    def __init__(self, n: int, hold_s: float = CMD_HOLD_S) -> None:
        self.hold_s = hold_s
        self.last = [-math.inf] * n
        self.moving = [False] * n

    def sent(self, i: int, cmd: tuple[float, ...], now: float) -> None:
        self.last[i] = now
        self.moving[i] = any(v != 0.0 for v in cmd)

    def due(self, now: float) -> list[int]:
        out = [i for i, t in enumerate(self.last) if self.moving[i] and now - t > self.hold_s]
        for i in out:
            self.moving[i] = False
        return out


def turtle_name(robot: int) -> str:
    return f"turtle{robot + 1}"


def pen(robot: int) -> tuple[int, int, int, int]:
    """(r, g, b, width) of robot ``robot``'s pen."""
    return (*PEN_COLOURS[robot % len(PEN_COLOURS)], PEN_WIDTH)


def find_turtlesim() -> Path:
    """The ``turtlesim_node`` executable of the ament index (``AMENT_PREFIX_PATH``), after checking that
    turtlesim's Python messages import too; one ``ConfigError`` naming what to install when either is missing."""
    from consensus.runs import ament

    if not ament.available():          # no ROS 2 at all
        raise ConfigError(f"sim 'turtlesim' needs ROS 2 (ament_index_python does not import); {INSTALL_HINT}")
    prefix = ament.package_prefix(PACKAGE)
    if prefix is None:
        raise ConfigError(f"sim 'turtlesim': turtlesim was not found (no '{PACKAGE}' package in the ament index, "
                          f"AMENT_PREFIX_PATH); {INSTALL_HINT}")
    exe = prefix / "lib" / PACKAGE / NODE_EXECUTABLE
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise ConfigError(f"sim 'turtlesim': {exe} is missing; {INSTALL_HINT}")
    if importlib.util.find_spec(PACKAGE) is None:
        raise ConfigError(f"sim 'turtlesim': turtlesim's Python messages (turtlesim.msg) do not import; "
                          f"{INSTALL_HINT}")
    return exe


def check_display() -> None:
    """turtlesim_node opens a Qt window: without a display it aborts, so say so before anything starts."""
    env = os.environ
    if not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY") or env.get("QT_QPA_PLATFORM")):
        raise ConfigError("sim 'turtlesim' opens a window but there is no display (DISPLAY is not set): run it on a "
                          "desktop, under a virtual one (`xvfb-run -a consensus run ...`, or `Xvfb :55 &` and "
                          "DISPLAY=:55), or without a window with QT_QPA_PLATFORM=offscreen")


def prepare(cfg, *, holonomic: bool = False):
    """Check that a turtlesim run can start and adapt ``cfg`` (a config with the control group) to it: ``dim`` (where
    the config has one) must be 2, and ``kinematics`` becomes ``unicycle`` (turtles are unicycles) unless
    ``holonomic``: then single integrators stay single integrators on holonomic turtles (turtlesim's ``holonomic``
    parameter: a command's lateral speed moves the turtle sideways), e.g. the disaster drones. Returns
    ``(cfg, changes)``; ``changes`` (field -> [was, now]) goes into the run's manifest."""
    if getattr(cfg, "dim", 2) != 2:
        raise ConfigError(f"sim 'turtlesim' needs dim 2 (got dim {cfg.dim})")
    find_turtlesim()
    check_display()
    changes = {}
    dynamics = dynamics_of(cfg.kinematics)
    if holonomic and dynamics.holonomic:
        return cfg, changes
    if not dynamics.turns:
        changes["kinematics"] = [cfg.kinematics, UNICYCLE]
        cfg = cfg.replace(kinematics=UNICYCLE)
    return cfg, changes


def processes(cfg, params: dict | None = None, *, use_sim_time: bool = False) -> list[ProcessSpec]:
    """turtlesim's window and our bridge; the bridge gets ``params`` (what the built-in ``sim`` would get: start
    positions, workspace, ...; default: it publishes ``/clock`` when the run uses sim time). Robots that are single
    integrators get holonomic turtles."""
    turtles = {"use_sim_time": False}
    if dynamics_of(cfg.kinematics).holonomic:
        turtles["holonomic"] = True
    bridge = {"use_sim_time": False, "publish_clock": bool(use_sim_time)} if params is None else dict(params)
    return [ProcessSpec(NODE_EXECUTABLE, "turtlesim", package=PACKAGE, params=turtles),
            ProcessSpec(BRIDGE_EXECUTABLE, BRIDGE_EXECUTABLE, params=bridge)]
