"""``sim: mujoco``: the run's robots as bodies in a MuJoCo physics world (the ``mujoco`` extra), with no ROS.

``world_xml(cfg, start)`` writes the MJCF of a run: the floor over the workspace (a checker of ``floor_cell_m``
cells: a disaster run's grid), walls just outside the geofence, and one body per robot with its preset's footprint
radius, height and mass (``consensus.robots.presets``: the builtin robots are the ``sim`` preset with the run's
``footprint_radius_m``). A ground robot (``flight_altitude_m = 0``) stands on the floor; a drone is held at its
flight altitude. Each body moves in the plane on two slide joints and turns on a hinge, driven by three velocity
servos whose forces are capped by its mass times ``accel_max`` (a unicycle's servos follow its heading, so it cannot
slide sideways faster than its drive corrects); ``wheel_friction`` is the joints' Coulomb friction and
``actuator_lag_s`` a first-order lag of the set points.

``MujocoWorld`` steps that world at ``physics_rate_hz`` and is the independent judge of the run: after every physics
step it reads MuJoCo's own contact list and keeps each touch between two robots, or a robot and a wall, as one
contact (from the step it began to the step it ended: its time, the pair, the deepest penetration; a pair that
touches again within ``CONTACT_GAP_S`` is still the same contact). Our collision
filter's bookkeeping plays no part in it. The positions it reports to the robots carry ``odom_noise_m`` and
``localization_offset_m``; ``poses()`` is the ground truth.

``processes``/``prepare`` are the simulator's process factory and checks (its record: ``consensus.sims.mujoco``);
``render_frames`` draws the recorded poses of a run in the same world with MuJoCo's offscreen renderer (EGL;
``RuntimeError`` without OpenGL).
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from consensus.control.dynamics import dynamics_of
from consensus.errors import ConfigError
from consensus.runs.processes import ProcessSpec

ROBOT_BIT, FLOOR_BIT = 1, 2          # contype/conaffinity: robots touch robots and walls, never the floor
WALL_HEIGHT_M = 0.3
WALL_THICKNESS_M = 0.05
SERVO_TAU_S = 0.05                   # the velocity servos' time constant (kv = inertia / tau)
MAX_CONTACTS_KEPT = 1000             # contacts kept in full (the count goes on)
CONTACT_GAP_S = 0.1                  # a pair touching again within this is the same contact (bodies that jostle)
EXECUTABLE = "mujoco_sim"
WORLD_FILE = "world.xml"             # RUN/world.xml: the MJCF a run stepped (its video draws the same world)


def _choose_gl() -> None:
    """MuJoCo picks its OpenGL platform once, when it is imported (``MUJOCO_GL``): a headless one where this machine
    has it (EGL, else OSMesa), unless the user chose. Done before this module imports mujoco, so that a process that
    steps the world and then renders its video (``consensus run --video``) can still render."""
    import ctypes.util

    if "MUJOCO_GL" in os.environ or "mujoco" in sys.modules:
        return
    if os.environ.get("PYOPENGL_PLATFORM") in ("egl", "osmesa"):     # the user's choice for PyOpenGL: the same
        os.environ["MUJOCO_GL"] = os.environ["PYOPENGL_PLATFORM"]
        return
    for platform, library in (("egl", "EGL"), ("osmesa", "OSMesa")):
        if ctypes.util.find_library(library):
            os.environ["MUJOCO_GL"] = platform
            return


_choose_gl()


@dataclass(frozen=True)
class Body:
    """One robot's body in the world."""

    radius: float
    height: float
    mass: float


def bodies(cfg) -> list[Body]:
    """Each robot's body: its robots-file preset (radius, height, mass), else the ``sim`` preset with the run's
    ``footprint_radius_m``."""
    from consensus.robots.map import robot_entry
    from consensus.robots.presets import PRESETS

    base = PRESETS["sim"]
    out = []
    for i in range(cfg.num_robots):
        entry = robot_entry(cfg, i) if getattr(cfg, "robots_file", "") else None
        preset = entry.preset if entry is not None else None
        out.append(Body(radius=float(preset.footprint_radius_m if preset else cfg.footprint_radius_m),
                        height=float(preset.height_m if preset else base.height_m),
                        mass=float(preset.mass_kg if preset else base.mass_kg)))
    return out


def _f(*values: float) -> str:
    return " ".join(f"{v:.6g}" for v in values)


def world_xml(cfg, start: np.ndarray) -> str:
    """The MJCF of the run's world (module docstring); ``start``: (n, 3) start poses x, y, yaw."""
    ws = list(cfg.workspace) if len(cfg.workspace) == 4 else [*cfg.workspace, -1.0, 1.0]
    x0, x1, y0, y1 = (float(v) for v in ws)
    cx, cy, hx, hy = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
    robots = bodies(cfg)
    gap = max(b.radius for b in robots) + 0.01          # walls just outside the geofence: a touch = a robot out
    altitude = float(cfg.flight_altitude_m)
    cell = float(cfg.floor_cell_m)
    ext = max(hx, hy) + gap
    top = ext / math.tan(math.radians(22.5)) * 1.05     # the top camera sees the whole workspace (fovy 45)
    view = 1.6 * ext + 2.0
    walls = []
    for name, pos, size in (("wall_s", (cx, y0 - gap - WALL_THICKNESS_M, 0), (hx + gap, WALL_THICKNESS_M)),
                            ("wall_n", (cx, y1 + gap + WALL_THICKNESS_M, 0), (hx + gap, WALL_THICKNESS_M)),
                            ("wall_w", (x0 - gap - WALL_THICKNESS_M, cy, 0), (WALL_THICKNESS_M, hy + gap)),
                            ("wall_e", (x1 + gap + WALL_THICKNESS_M, cy, 0), (WALL_THICKNESS_M, hy + gap))):
        z = altitude + WALL_HEIGHT_M / 2 if altitude > 0 else WALL_HEIGHT_M / 2
        walls.append(f'<geom name="{name}" type="box" pos="{_f(pos[0], pos[1], z)}" '
                     f'size="{_f(size[0], size[1], WALL_HEIGHT_M / 2)}" rgba="0.55 0.55 0.6 0.6" '
                     f'contype="{ROBOT_BIT}" conaffinity="{ROBOT_BIT}"/>')
    parts, actuators = [], []
    palette = [(0.12, 0.47, 0.71), (1.0, 0.5, 0.05), (0.17, 0.63, 0.17), (0.84, 0.15, 0.16), (0.58, 0.4, 0.74),
               (0.55, 0.34, 0.29), (0.89, 0.47, 0.76), (0.5, 0.5, 0.5), (0.74, 0.74, 0.13), (0.09, 0.75, 0.81)]
    for i, (b, pose) in enumerate(zip(robots, start)):
        r, g, bl = palette[i % len(palette)]
        height = 0.05 if altitude > 0 else b.height
        z = altitude if altitude > 0 else b.height / 2
        inertia_z = 0.5 * b.mass * b.radius ** 2
        force = b.mass * float(cfg.accel_max)
        torque = inertia_z * float(cfg.accel_max) / max(b.radius, 1e-3)
        loss = float(cfg.wheel_friction)
        marker = (f'<geom type="box" pos="{_f(b.radius * 0.55, 0, height / 2 + 0.005)}" '
                  f'size="{_f(b.radius * 0.35, b.radius * 0.12, 0.005)}" rgba="1 1 1 1" mass="0" '
                  f'contype="0" conaffinity="0"/>')
        parts.append(
            f'<body name="robot_{i}" pos="0 0 {_f(z)}">'
            f'<joint name="x_{i}" type="slide" axis="1 0 0" frictionloss="{_f(loss * force)}"/>'
            f'<joint name="y_{i}" type="slide" axis="0 1 0" frictionloss="{_f(loss * force)}"/>'
            f'<joint name="yaw_{i}" type="hinge" axis="0 0 1" frictionloss="{_f(loss * torque)}"/>'
            f'<geom name="body_{i}" type="cylinder" size="{_f(b.radius, height / 2)}" mass="{_f(b.mass)}" '
            f'rgba="{_f(r, g, bl)} 1" contype="{ROBOT_BIT}" conaffinity="{ROBOT_BIT}" friction="0.5 0.005 0.0001"/>'
            f'{marker}</body>')
        for axis, gain, limit in (("x", b.mass, force), ("y", b.mass, force), ("yaw", inertia_z, torque)):
            actuators.append(f'<velocity name="{axis}_{i}" joint="{axis}_{i}" kv="{_f(gain / SERVO_TAU_S)}" '
                             f'forcelimited="true" forcerange="{_f(-limit, limit)}"/>')
    floor_z = 0.0
    return f"""<mujoco model="consensus">
  <option timestep="{_f(1.0 / float(cfg.physics_rate_hz))}" integrator="implicitfast" gravity="0 0 -9.81"/>
  <visual><global offwidth="1280" offheight="960"/><quality shadowsize="2048"/></visual>
  <asset>
    <texture type="skybox" builtin="gradient" rgb1="0.62 0.74 0.86" rgb2="0.95 0.96 0.98" width="256" height="256"/>
    <texture name="grid" type="2d" builtin="checker" rgb1="0.82 0.84 0.86" rgb2="0.72 0.74 0.77" width="64"
             height="64"/>
    <material name="grid" texture="grid" texuniform="true" texrepeat="{_f(1.0 / (2 * cell), 1.0 / (2 * cell))}"/>
  </asset>
  <worldbody>
    <light pos="{_f(cx, cy, top)}" dir="0 0 -1" diffuse="0.8 0.8 0.8"/>
    <camera name="top" pos="{_f(cx, cy, top)}" xyaxes="1 0 0 0 1 0" fovy="45"/>
    <camera name="view" pos="{_f(cx, cy - 0.8 * view, 0.6 * view)}" xyaxes="1 0 0 0 0.6 0.8" fovy="45"/>
    <geom name="floor" type="plane" pos="{_f(cx, cy, floor_z)}" size="{_f(hx + gap + 0.5, hy + gap + 0.5, 0.1)}"
          material="grid" contype="{FLOOR_BIT}" conaffinity="{FLOOR_BIT}"/>
    {"".join(walls)}
    {"".join(parts)}
  </worldbody>
  <actuator>{"".join(actuators)}</actuator>
</mujoco>"""


class MujocoWorld:
    """The run's world, stepped at ``physics_rate_hz``, and the judge of contacts (module docstring)."""

    def __init__(self, cfg, start: np.ndarray, *, seed: int = 0) -> None:
        from consensus.extras import require

        self.mj = mj = require("mujoco", "sim: mujoco")
        self.cfg = cfg
        n = self.n = cfg.num_robots
        start = np.asarray(start, dtype=float).reshape(n, -1)
        if start.shape[1] < 3:
            start = np.hstack([start, np.zeros((n, 3 - start.shape[1]))])
        self.xml = world_xml(cfg, start)          # what RUN/world.xml keeps (the video draws the same world)
        self.model = mj.MjModel.from_xml_string(self.xml)
        self.data = mj.MjData(self.model)
        self.qadr = np.array([[self.model.joint(f"{a}_{i}").qposadr[0] for a in ("x", "y", "yaw")]
                              for i in range(n)])
        self.vadr = np.array([[self.model.joint(f"{a}_{i}").dofadr[0] for a in ("x", "y", "yaw")]
                              for i in range(n)])
        self.act = np.array([[self.model.actuator(f"{a}_{i}").id for a in ("x", "y", "yaw")] for i in range(n)])
        self.data.qpos[self.qadr.ravel()] = start[:, :3].ravel()
        mj.mj_forward(self.model, self.data)
        self.dt = float(self.model.opt.timestep)
        self.unicycle = dynamics_of(cfg.kinematics).turns
        self.cmd = np.zeros((n, 3))           # vx, vy, wz as the robots command them (the kinematics' meaning)
        self.setpoint = np.zeros((n, 3))      # after the actuator lag
        # what each geom is: robot index, or -1 for a wall, -2 for anything else
        self.who = np.full(self.model.ngeom, -2)
        for i in range(n):
            self.who[self.model.geom(f"body_{i}").id] = i
        for wall in ("wall_s", "wall_n", "wall_w", "wall_e"):
            self.who[self.model.geom(wall).id] = -1
        rng = np.random.default_rng(seed)
        angle = rng.uniform(0.0, 2 * math.pi, n)
        self.offset = float(cfg.localization_offset_m) * np.stack([np.cos(angle), np.sin(angle)], axis=1)
        self.noise_rng = np.random.default_rng(seed + 1)
        self.contacts: list[dict[str, Any]] = []       # ended and open, in the order they began
        self.contact_count = self.wall_count = 0
        self.max_depth = 0.0
        # ground truth of the bodies, whatever their odometry says: the closest pair of centres, the farthest any
        # body's centre went outside the workspace (checked after every advance)
        self.min_pair_m = math.inf
        self.outside_m = 0.0
        ws = list(cfg.workspace)
        self.bounds = (np.array(ws[0::2], dtype=float), np.array(ws[1::2], dtype=float))
        self._until = 0.0                               # the time advance() steps to (no remainder lost)
        self._open: dict[tuple[int, int], dict[str, Any]] = {}
        self._ended: dict[tuple[int, int], dict[str, Any]] = {}     # each pair's last ended contact
        self.steps = 0

    # ------------------------------------------------------------------------------------------------ stepping
    @property
    def time(self) -> float:
        return float(self.data.time)

    def set_commands(self, cmd: np.ndarray) -> None:
        """Each robot's newest command: (n, 3) vx, vy, wz (a unicycle's vx is its forward speed)."""
        self.cmd = np.asarray(cmd, dtype=float).reshape(self.n, 3)

    def advance(self, seconds: float) -> int:
        """Step the physics on by ``seconds``: whole timesteps up to the running total of what was asked, so a
        period that is not a whole number of timesteps loses nothing over many calls; the number of steps."""
        self._until += seconds
        steps = max(0, int(round((self._until - self.time) / self.dt)))
        lag = float(self.cfg.actuator_lag_s)
        alpha = 1.0 if lag <= 0 else 1.0 - math.exp(-self.dt / lag)
        mj, m, d = self.mj, self.model, self.data
        for _ in range(steps):
            self.setpoint += alpha * (self.cmd - self.setpoint)
            ctrl = self.setpoint.copy()
            if self.unicycle:                 # forward speed along the heading; no commanded side-slip
                yaw = d.qpos[self.qadr[:, 2]]
                ctrl[:, 0], ctrl[:, 1] = self.setpoint[:, 0] * np.cos(yaw), self.setpoint[:, 0] * np.sin(yaw)
            d.ctrl[self.act.ravel()] = ctrl.ravel()
            mj.mj_step(m, d)
            self.steps += 1
            self._judge()
        self._measure()
        return steps

    def _measure(self) -> None:
        """The ground truth after an advance: closest pair of centres, farthest excursion outside the workspace."""
        xy = self.data.qpos[self.qadr[:, :2]]
        if self.n > 1:
            gaps = np.linalg.norm(xy[:, None, :] - xy[None, :, :], axis=2)
            self.min_pair_m = min(self.min_pair_m, float(gaps[np.triu_indices(self.n, 1)].min()))
        lo, hi = self.bounds
        d = len(lo)
        out = np.maximum(lo - xy[:, :d], 0.0) + np.maximum(xy[:, :d] - hi, 0.0)
        self.outside_m = max(self.outside_m, float(np.linalg.norm(out, axis=1).max()))

    def _judge(self) -> None:
        """MuJoCo's contacts of this step between two robots or a robot and a wall: open, extend or end each."""
        d = self.data
        now: dict[tuple[int, int], float] = {}
        if d.ncon:
            c = d.contact
            for g1, g2, dist in zip(c.geom1.tolist(), c.geom2.tolist(), c.dist.tolist()):
                a, b = int(self.who[g1]), int(self.who[g2])
                if a == -2 or b == -2 or (a < 0 and b < 0) or dist > 0:
                    continue
                pair = (min(a, b), max(a, b))          # a wall is -1: (-1, i)
                now[pair] = max(now.get(pair, 0.0), -dist)
        t = self.time
        for pair in [p for p in self._open if p not in now]:
            event = self._ended[pair] = self._open.pop(pair)
            event["end_s"] = round(t, 4)
        for pair, depth in now.items():
            event = self._open.get(pair)
            last = self._ended.get(pair)
            if event is None and last is not None and t - last["end_s"] <= CONTACT_GAP_S:
                event = self._open[pair] = self._ended.pop(pair)        # the same contact, touching again
                event["end_s"] = None
            if event is None:
                self.contact_count += 1
                self.wall_count += int(pair[0] < 0)
                event = {"t_s": round(t, 4), "pair": ["wall" if p < 0 else f"robot_{p}" for p in pair],
                         "depth_m": 0.0, "end_s": None}
                self._open[pair] = event
                if len(self.contacts) < MAX_CONTACTS_KEPT:
                    self.contacts.append(event)
            event["depth_m"] = round(max(event["depth_m"], depth), 5)
            self.max_depth = max(self.max_depth, depth)

    def save_xml(self, out_dir) -> None:
        """``RUN/world.xml``: the MJCF this run steps (the video draws the same world); a full disk: the video
        rebuilds the world from the params."""
        from pathlib import Path

        try:
            (Path(out_dir) / WORLD_FILE).write_text(self.xml)
        except OSError:
            pass

    # ------------------------------------------------------------------------------------------------ reading
    def poses(self) -> np.ndarray:
        """(n, 3) true x, y, yaw."""
        return self.data.qpos[self.qadr].copy()

    def velocities(self) -> np.ndarray:
        """(n, 3) world-frame vx, vy and the turn rate wz."""
        return self.data.qvel[self.vadr].copy()

    def reported_poses(self) -> np.ndarray:
        """What the robots' odometry says: the true poses plus the localisation offset and the odometry noise."""
        pose = self.poses()
        pose[:, :2] += self.offset
        sigma = float(self.cfg.odom_noise_m)
        if sigma > 0:
            pose[:, :2] += self.noise_rng.normal(0.0, sigma, (self.n, 2))
        return pose

    def judgement(self) -> dict[str, Any]:
        """The contacts so far: ``contacts`` (how many), ``robot_contacts``, ``wall_contacts``, the deepest
        penetration, each contact (the first ``MAX_CONTACTS_KEPT``), and the bodies' ground truth: the closest pair
        of centres (``true_min_pair_distance_m``) and the farthest a centre went outside the workspace
        (``true_outside_geofence_m``)."""
        return {"contacts": self.contact_count, "robot_contacts": self.contact_count - self.wall_count,
                "wall_contacts": self.wall_count, "max_penetration_m": round(self.max_depth, 5),
                "contact_list": [dict(e) for e in self.contacts],
                "true_min_pair_distance_m": None if math.isinf(self.min_pair_m) else round(self.min_pair_m, 5),
                "true_outside_geofence_m": round(self.outside_m, 5),
                "physics_steps": self.steps, "physics_rate_hz": 1.0 / self.dt}


# ---------------------------------------------------------------------------------------------------- the registry
def processes(cfg, params: dict, *, use_sim_time: bool = False) -> list[ProcessSpec]:
    """The MuJoCo simulator node (``consensus.sims.mujoco.ros``) with what the built-in ``sim`` would get. A world
    that does not run in real time needs sim time (the nodes follow its /clock): one ``ConfigError`` otherwise."""
    factor = float(params.get("realtime_factor", getattr(cfg, "realtime_factor", 1.0)))
    clock = bool(params.get("publish_clock", use_sim_time)) or use_sim_time
    if factor != 1.0 and not clock:
        raise ConfigError(f"realtime_factor {factor:g} needs sim time, so that the nodes follow the physics' /clock: "
                          f"add --use-sim-time (ros2 launch: use_sim_time:=true)")
    return [ProcessSpec(EXECUTABLE, "sim", params=dict(params))]


def prepare(cfg, **options: Any) -> tuple[Any, dict]:
    """Refused before anything starts when MuJoCo is not installed (one line naming the extra), for a 1-D run, and
    for ``point_mass_pid`` (the built-in sim's own model of paper 1's robot; MuJoCo's bodies take velocity
    commands). Nothing of the config changes."""
    from consensus.extras import require

    require("mujoco", "sim: mujoco")
    if getattr(cfg, "dim", 2) != 2:
        raise ConfigError(f"sim 'mujoco' needs dim 2 (got dim {cfg.dim})")
    if dynamics_of(cfg.kinematics).has_mass:
        raise ConfigError("sim 'mujoco' drives velocity commands (single_integrator or unicycle); point_mass_pid is "
                          "the built-in sim's model of paper 1's robot")
    return cfg, {}


# ---------------------------------------------------------------------------------------------------- rendering
def render_frames(params: dict, times: list[float], poses: np.ndarray, width: int = 640,
                  height: int = 480) -> Iterator[np.ndarray]:
    """The recorded ``poses`` ((T, N, 3): x, y, yaw at ``times``) of a run drawn in its world by MuJoCo's offscreen
    renderer (the ``view`` camera), one (height, width, 3) uint8 frame each. ``params``: the run's config values
    (its params file). ``RuntimeError`` when no OpenGL context can be made (EGL: ``apt install libegl1``; or
    ``MUJOCO_GL=osmesa`` with ``libosmesa6``)."""
    from consensus.settings import RobotBaseConfig

    known = set(RobotBaseConfig.field_names())
    poses = np.asarray(poses, dtype=float)
    cfg = RobotBaseConfig.from_dict({k: v for k, v in params.items() if k in known} | {"num_robots": poses.shape[1],
                                                                                        "robots_file": ""})
    world = MujocoWorld(cfg, poses[0])
    mj = world.mj
    model = world.model
    if params.get("world_xml"):           # the world the run stepped (RUN/world.xml): its walls, floor and bodies
        try:
            model = mj.MjModel.from_xml_string(str(params["world_xml"]))
        except Exception as exc:          # noqa: BLE001 - a damaged file: the world rebuilt from the params
            raise RuntimeError(f"world.xml does not load ({type(exc).__name__}: {exc})") from None
        if model.nq != world.model.nq:
            raise RuntimeError("world.xml holds another fleet than the trajectories")
    data = mj.MjData(model)
    try:
        renderer = mj.Renderer(model, height, width)
    except Exception as exc:          # noqa: BLE001 - any GL failure means: no renderer here
        raise RuntimeError(f"no OpenGL context for MuJoCo's renderer ({type(exc).__name__}: {exc})") from None
    try:
        for pose in poses:
            data.qpos[world.qadr.ravel()] = pose[:, :3].ravel()
            try:
                mj.mj_forward(model, data)
                renderer.update_scene(data, camera="view")
                frame = renderer.render().copy()
            except Exception as exc:      # noqa: BLE001 - a GL failure mid-way (mujoco.FatalError): say so
                raise RuntimeError(f"MuJoCo's renderer failed ({type(exc).__name__}: {exc})") from None
            yield frame
    finally:
        renderer.close()
