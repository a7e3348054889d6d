"""The ``robots:`` map: which real robots a run drives (crazyswarm2-style YAML, read and validated here, no ROS).

::

    frame: world                  # the one frame every robot's pose is in (docs/real-robots.md)
    robots:
      tb3_a:                      # the robot's name
        enabled: true             # optional, default true; disabled robots are not run
        preset: turtlebot3        # consensus.robots.presets.PRESETS
        namespace: tb3_a          # optional, default the name; the driver's namespace ("" = none, one robot only)
        initial_pose: [0.0, -1.0, 0.0]   # x, y[, yaw] in the shared frame where the robot stands at start
        cmd_stamped: false        # optional: override the preset's Twist / TwistStamped
        pose_source: odom         # optional: override the preset's odom | world_odom | world_pose
        pose_topic: odom          # optional: override the preset's pose topic (relative or absolute)

Robot ``i`` of the run is the ``i``-th enabled entry in file order; its own topics (``state``, ``target``,
``neighbors``, ``planner/*``) stay under ``/robot_<i>/`` (topology, recorder and markers are unchanged) and only the
driver-facing topics (command and pose) are resolved in the entry's namespace. ``apply_robots_file`` turns a run's
config into the map's robots (``num_robots``, ``initial_positions``, ``sim``). Every problem is one ``ConfigError``
naming the file and the robot: bad YAML, a missing or unknown field, an unknown preset, a duplicate or invalid
namespace, a pose that is not numbers or lies outside the workspace geofence, a mix of simulated and real robots.
``check_fence`` refuses a fleet its geofence cannot hold with the collision filter on (the configs' validation).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


from consensus.control.avoidance import Avoidance, avoidance_from_config
from consensus.control.packing import extent, fits, most_that_fit
from consensus.control.safety import Geofence
from consensus.errors import ConfigError
from consensus.robots.presets import POSE_SOURCES, PRESETS, TWIST, TWIST_STAMPED, Preset, resolve

REQUIRED = ("preset", "initial_pose")
OPTIONAL = ("enabled", "namespace", "cmd_stamped", "pose_source", "pose_topic")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class RobotEntry:
    """One robot of the map, with the preset's choices and the entry's overrides resolved."""

    name: str
    preset: Preset
    namespace: str                             # without leading/trailing "/"; "" = root
    initial_pose: tuple[float, float, float]   # x, y, yaw in the shared frame
    enabled: bool = True
    cmd_type: str = TWIST
    pose_source: str = "odom"
    pose_topic: str = "odom"
    frame: str = "world"                       # the map's shared frame

    @property
    def cmd_topic(self) -> str:
        """Absolute command topic, e.g. ``/tb4_1/cmd_vel``."""
        return self.preset.cmd_topic_in(self.namespace)

    @property
    def pose_topic_name(self) -> str:
        """Absolute pose topic, e.g. ``/cf1/link/pose``."""
        return resolve(self.namespace, self.pose_topic)

    @property
    def pose_type(self) -> str:
        return POSE_SOURCES[self.pose_source]

    @property
    def stamped(self) -> bool:
        return self.cmd_type == TWIST_STAMPED

    def kinematics(self, run_kinematics: str) -> str:
        return self.preset.kinematics or run_kinematics

    def limits(self, v_max: float, w_max: float) -> tuple[float, float]:
        """The run's speed limits capped by the preset's (the robot's own)."""
        return min(v_max, self.preset.v_max), min(w_max, self.preset.w_max)

    def to_shared(self, x: float, y: float, yaw: float) -> tuple[float, float, float]:
        """A measured pose in the shared frame: odometry (``pose_source: odom``) starts at ``initial_pose``, so it
        is composed with it; the other sources already are in the shared frame."""
        if self.pose_source != "odom":
            return x, y, yaw
        x0, y0, th = self.initial_pose
        c, s = math.cos(th), math.sin(th)
        return x0 + c * x - s * y, y0 + s * x + c * y, math.atan2(math.sin(th + yaw), math.cos(th + yaw))


@dataclass(frozen=True)
class RobotsMap:
    frame: str
    robots: tuple[RobotEntry, ...]

    @property
    def enabled(self) -> tuple[RobotEntry, ...]:
        return tuple(r for r in self.robots if r.enabled)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _entry(name: str, spec: Any, where: str) -> RobotEntry:
    here = f"{where}: robot '{name}'"
    if not isinstance(spec, dict):
        raise ConfigError(f"{here}: expected a mapping of fields ({', '.join(REQUIRED + OPTIONAL)})")
    unknown = sorted(set(map(str, spec)) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise ConfigError(f"{here}: unknown field '{unknown[0]}'; valid: {', '.join(REQUIRED + OPTIONAL)}")
    missing = [k for k in REQUIRED if k not in spec]
    if missing:
        raise ConfigError(f"{here}: missing field '{missing[0]}'")
    preset = PRESETS.get(spec["preset"]) if isinstance(spec["preset"], str) else None
    if preset is None:
        raise ConfigError(f"{here}: unknown preset {spec['preset']!r}; valid: {', '.join(PRESETS)}")
    enabled = spec.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{here}: enabled must be true or false (got {enabled!r})")
    ns = spec.get("namespace", name)
    if not isinstance(ns, str) or (ns.strip("/") and not _NAME.fullmatch(ns.strip("/"))):
        raise ConfigError(f"{here}: namespace {ns!r} is not a valid ROS namespace (letters, digits, '_', '/')")
    pose = spec["initial_pose"]
    if not (isinstance(pose, list) and len(pose) in (2, 3) and all(_number(v) for v in pose)):
        raise ConfigError(f"{here}: initial_pose must be [x, y] or [x, y, yaw] (finite numbers), got {pose!r}")
    cmd_type = preset.cmd_type
    if "cmd_stamped" in spec:
        if not isinstance(spec["cmd_stamped"], bool):
            raise ConfigError(f"{here}: cmd_stamped must be true or false (got {spec['cmd_stamped']!r})")
        cmd_type = TWIST_STAMPED if spec["cmd_stamped"] else TWIST
    source = spec.get("pose_source", preset.pose_source)
    if source not in POSE_SOURCES:
        raise ConfigError(f"{here}: unknown pose_source {source!r}; valid: {', '.join(POSE_SOURCES)}")
    topic = spec.get("pose_topic", preset.pose_topic)
    if not isinstance(topic, str) or not _NAME.fullmatch(topic.lstrip("/")):
        raise ConfigError(f"{here}: pose_topic {topic!r} is not a valid ROS topic name")
    return RobotEntry(name=name, preset=preset, namespace=ns.strip("/"),
                      initial_pose=(float(pose[0]), float(pose[1]), float(pose[2]) if len(pose) == 3 else 0.0),
                      enabled=enabled, cmd_type=cmd_type, pose_source=source, pose_topic=topic)


def parse_robots(data: Any, where: str = "robots map") -> RobotsMap:
    """Validate a parsed ``robots:`` document (module docstring)."""
    if not isinstance(data, dict) or "robots" not in data:
        raise ConfigError(f"{where}: expected a mapping with a 'robots:' map at the top level")
    extra = sorted(set(map(str, data)) - {"robots", "frame"})
    if extra:
        raise ConfigError(f"{where}: unknown top-level key '{extra[0]}' (valid: robots, frame)")
    frame = data.get("frame", "world")
    if not isinstance(frame, str) or not _NAME.fullmatch(frame):
        raise ConfigError(f"{where}: frame must be a frame id such as 'world' or 'map' (got {frame!r})")
    robots = data["robots"]
    if not isinstance(robots, dict) or not robots:
        raise ConfigError(f"{where}: 'robots' must be a non-empty mapping name -> fields")
    entries = tuple(replace(_entry(str(name), spec, where), frame=frame) for name, spec in robots.items())
    seen: dict[str, str] = {}
    for e in entries:
        if e.enabled and e.namespace in seen:
            raise ConfigError(f"{where}: robots '{seen[e.namespace]}' and '{e.name}' share the namespace "
                              f"'/{e.namespace}' (each robot needs its own)")
        if e.enabled:
            seen[e.namespace] = e.name
    return RobotsMap(frame=frame, robots=entries)


def load_robots(path: str | Path) -> RobotsMap:
    from consensus.settings import read_yaml

    return parse_robots(read_yaml(path, "robots_file"), str(path))


def check_robots(robots: RobotsMap, workspace: list[float], where: str = "robots map") -> tuple[RobotEntry, ...]:
    """The enabled robots, refused unless there is one, every initial pose lies inside the workspace geofence and
    simulated and real robots are not mixed (a simulated fleet needs namespaces robot_<i> in map order)."""
    enabled = robots.enabled
    if not enabled:
        raise ConfigError(f"{where}: no robot is enabled")
    fence = Geofence.from_bounds(workspace)
    for e in enabled:
        if fence.dim != 2 or e.preset.dim != 2:
            raise ConfigError(f"{where}: a robots map needs a 2-D run (dim 2, workspace [xmin, xmax, ymin, ymax])")
        if not fence.contains(e.initial_pose[:2]):
            raise ConfigError(f"{where}: robot '{e.name}' starts at {list(e.initial_pose[:2])}, outside the "
                              f"workspace geofence {fence.to_bounds()}")
    simulated = {e.preset.simulated for e in enabled}
    if len(simulated) > 1:
        raise ConfigError(f"{where}: simulated ('sim') and real robots cannot share a run")
    if simulated == {True}:
        for i, e in enumerate(enabled):
            if e.namespace != f"robot_{i}":
                raise ConfigError(f"{where}: sim robot '{e.name}' is robot {i} of the run and needs namespace "
                                  f"robot_{i} (the builtin sim drives /robot_<i>/...), got '/{e.namespace}'")
    return enabled


def apply_robots_file(cfg):
    """``cfg`` (a ``RobotBaseConfig``) with the robots of ``cfg.robots_file``: ``num_robots`` = the enabled
    entries, their initial positions, ``sim: none`` for real robots (unless ``sim`` simulates their preset:
    ``Simulator.drives``), the file's absolute path (every robot process
    reads its entry). ``cfg`` unchanged without a robots file; ``ConfigError`` for any problem (``check_robots``)."""
    if not cfg.robots_file:
        return cfg
    path = Path(cfg.robots_file).expanduser().resolve()
    enabled = check_robots(load_robots(path), cfg.workspace, str(path))
    changes: dict[str, Any] = {
        "robots_file": str(path), "num_robots": len(enabled),
        "initial_positions": [v for e in enabled for v in e.initial_pose[:2]]}
    if not enabled[0].preset.simulated and not _drives_all(cfg, enabled):
        changes["sim"] = "none"
    try:
        return cfg.replace(**changes)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _drives_all(cfg, enabled) -> bool:
    """Does ``cfg``'s ``sim`` simulate the enabled robots' presets (``Simulator.drives``: a vendor's simulator of
    those robots, e.g. ``turtlebot3_fake``)? Then the run keeps it; a sim that drives some but not all is refused
    (``simulated_entries``)."""
    from consensus.control.motion import sim_spec

    sim = sim_spec(getattr(cfg, "sim", "none"))
    if not sim.drives:
        return False
    simulated_entries(cfg, sim, enabled)
    return True


def simulated_entries(cfg, sim, enabled: tuple[RobotEntry, ...] | None = None) -> tuple[RobotEntry, ...]:
    """The enabled robots of ``cfg``'s robots file, which the simulator ``sim`` (a ``Simulator`` record whose
    ``drives`` names the presets it stands in for) simulates: one ``ConfigError`` without a robots file or when a
    robot's preset is not one of them. ``enabled``: the file's enabled robots when the caller has read them."""
    robots_file = _robots_file(cfg)
    if not robots_file:
        raise ConfigError(f"sim '{sim.name}' simulates the robots of a robots file: give --robots-file with "
                          f"{' / '.join(sim.drives)} robots (docs/real-robots.md)")
    if enabled is None:
        enabled = check_robots(load_robots(robots_file), cfg.workspace, robots_file)
    others = sorted({e.preset.name for e in enabled if e.preset.name not in sim.drives})
    if others:
        raise ConfigError(f"{robots_file}: sim '{sim.name}' simulates {', '.join(sim.drives)} robots only, not "
                          f"{', '.join(others)} (use one robots file per kind, or sim none for real robots)")
    return enabled


def robot_entry(cfg, robot_id: int) -> RobotEntry | None:
    """The map entry of robot ``robot_id`` of a run (None without a robots file); the file must still hold
    ``num_robots`` enabled robots (it is read again by each robot process)."""
    if not cfg.robots_file:
        return None
    enabled = check_robots(load_robots(cfg.robots_file), cfg.workspace, cfg.robots_file)
    if len(enabled) != cfg.num_robots:
        raise ConfigError(f"{cfg.robots_file}: {len(enabled)} enabled robot(s) but num_robots is {cfg.num_robots} "
                          f"(start the run with `consensus run ... --robots-file`, which sets it)")
    return enabled[robot_id]


def _robots_file(cfg) -> str:
    """The robots file of ``cfg``: the aggregation's ``robots_file``; the configs of the scenarios without real robots
    (a disaster run's drones, the naming game's robots) have none."""
    return getattr(cfg, "robots_file", "") or ""


def fleet_footprint(cfg) -> float:
    """The largest footprint radius [m] of a run's robots: of the robots file's enabled presets
    (``Preset.footprint_radius_m``), else the config's ``footprint_radius_m`` (the control group's)."""
    robots_file = _robots_file(cfg)
    if not robots_file:
        return float(cfg.footprint_radius_m)
    enabled = check_robots(load_robots(robots_file), cfg.workspace, robots_file)
    return max(e.preset.footprint_radius_m for e in enabled)


def fleet_reach(cfg) -> tuple[float, float] | None:
    """What the nearby relay's reach (``consensus.control.avoidance.within_reach``) needs of the whole fleet of
    ``cfg`` in a ROS run: the largest distance any robot's filter keeps from another's broadcast centre at rest
    (its ``d_min_m``, which holds a unicycle's ``2 l``, plus its offset ``l``: its filtered point is ``l`` ahead
    of its centre) and the fastest filtered point's speed, over every enabled entry of the robots file (each with
    its preset's kinematics and limits) or the config's one robot type. None when the filter is off."""
    radius = fleet_footprint(cfg)
    robots_file = _robots_file(cfg)
    if robots_file:
        entries = check_robots(load_robots(robots_file), cfg.workspace, robots_file)
        kinds = {(e.kinematics(cfg.kinematics), *e.limits(cfg.v_max, cfg.w_max)) for e in entries}
    else:
        kinds = {(cfg.kinematics, cfg.v_max, cfg.w_max)}
    avoids = [avoidance_from_config(cfg, ros=True, kinematics=k, v_max=v, w_max=w, radius=radius, fleet_radius=radius)
              for k, v, w in kinds]
    avoids = [a for a in avoids if a is not None]
    if not avoids:
        return None
    return max(a.d_min_m + a.offset for a in avoids), max(a.point_v_max for a in avoids)


def check_fence(cfg, workspace=None, *, num_robots: int | None = None,
                widen: str | None = "widen the workspace") -> None:
    """Refuse (one ``ConfigError``) a fleet of ``cfg`` that its geofence cannot hold safely once the collision filter
    is on (``resolved_collision_avoidance(ros=True)``: a config cannot know whether it will run headless, so
    ``auto`` counts as on):

    * an axis of the fence narrower than a body, ``2 (r + l)`` (r the fleet's largest footprint, l a unicycle's
      offset ``v_max / w_max``): no point of it keeps a whole body inside, and the filter would have no wall rows
      on it (``Avoidance._set_bounds``);
    * a packing that does not fit: the ``num_robots`` slots (default the config's, or the robots file's enabled
      robots) ``d_min + packing_gap_m`` apart, the spacing the robot core packs at (``RobotCore.goal_for``), wider on
      some axis than the box the filter keeps the robots' points in (the fence less ``r + l``, where
      ``RobotCore._inside`` moves the pattern): its outer slots would be clamped onto each other and outside the
      box (``consensus.control.packing.fits``).

    Every kind of robot of the fleet is checked (a robots file's presets' kinematics and speed limits), with the
    fleet's largest footprint on both sides of a pair (``fleet_footprint``): the largest spacing and body there
    are. ``workspace``: the fence for a config without a ``workspace`` field (a disaster run's grid, the naming
    game's fixed fence); ``num_robots``: the most robots that may share one point (a disaster cell: all drones);
    ``widen``: how the message tells to make the fence larger (a disaster run: its grid; None: a fixed fence)."""
    if cfg.resolved_collision_avoidance(ros=True) != "cbf":
        return
    ws = [float(v) for v in (cfg.workspace if workspace is None else workspace)]
    robots_file = _robots_file(cfg)
    if robots_file:
        entries = check_robots(load_robots(robots_file), ws, robots_file)
        radius = max(e.preset.footprint_radius_m for e in entries)
        kinds = sorted({(e.kinematics(cfg.kinematics), *e.limits(cfg.v_max, cfg.w_max)) for e in entries})
        n = len(entries)
    else:
        radius, kinds, n = float(cfg.footprint_radius_m), [(cfg.kinematics, cfg.v_max, cfg.w_max)], cfg.num_robots
    n = int(n if num_robots is None else num_robots)
    lo, hi = [float(v) for v in ws[0::2]], [float(v) for v in ws[1::2]]
    fence = " × ".join(f"{b - a:g}" for a, b in zip(lo, hi))
    for kinematics, v_max, w_max in kinds:
        avoid = avoidance_from_config(cfg, ros=True, kinematics=kinematics, v_max=v_max, w_max=w_max, radius=radius,
                                      fleet_radius=radius, workspace=ws)
        inset = radius + avoid.offset
        body = f"footprint_radius_m {radius:g} m" + (f" + the unicycle's offset v_max / w_max = {avoid.offset:g} m"
                                                      if avoid.offset else "")
        for axis, (a, b) in enumerate(zip(lo, hi)):
            if b - a < 2 * inset - 1e-9:
                fixes = [widen, "use smaller robots" + (" (or a lower v_max / higher w_max)" if avoid.offset else "")]
                raise ConfigError(
                    f"workspace axis {axis} is {b - a:g} m wide, narrower than a robot's body: 2 × ({body}) = "
                    f"{2 * inset:g} m; no robot can stand inside the fence there, and the collision filter would "
                    f"have no wall on it. {_either(fixes)}")
        spacing = avoid.d_min_m + float(cfg.packing_gap_m)
        box_lo, box_hi = [a + inset for a in lo], [b - inset for b in hi]
        problem = fits(n, spacing, box_lo, box_hi)
        if problem is None:
            continue
        needed = " × ".join(f"{v:.3g}" for v in extent(n, spacing, len(lo)) + 2 * inset)
        most = most_that_fit(spacing, box_lo, box_hi, limit=n)
        fixes = [f"use at most {most} robot{'s' if most != 1 else ''}", widen,
                 "lower packing_gap_m / safety_margin_m / the footprint"]
        if cfg.resolved_collision_avoidance(ros=False) == "none":
            fixes.append("for a headless study of point robots, set collision_avoidance: none")
        raise ConfigError(
            f"{n} robots do not fit inside the {fence} m geofence: packed around a shared meeting point, their "
            f"slots are {spacing:.3g} m apart (the filter's d_min {avoid.d_min_m:.3g} m + packing_gap_m "
            f"{float(cfg.packing_gap_m):g} m) and need a fence of at least {needed} m ({problem}: the fence less "
            f"{body}); their outer slots would overlap at the fence. {_either(fixes)}")


def _either(fixes: list) -> str:
    """``["a", None, "b", "c"]`` -> ``"A; b; or c."``: the remedies of a refused config."""
    fixes = [f for f in fixes if f]
    text = fixes[0] if len(fixes) == 1 else "; ".join(fixes[:-1]) + "; or " + fixes[-1]
    return text[:1].upper() + text[1:] + "."


def fleet_avoidance(cfg, *, ros: bool) -> Avoidance | None:
    """The filter as the whole fleet of ``cfg`` (a ``RobotBaseConfig``-like config) is filtered, seen from outside
    the robots (a node that judges arrival, a headless loop): the fleet's largest footprint on both sides of a pair
    (``fleet_footprint``), so ``d_min_m`` is the largest any robot keeps at rest (a moving robot adds its neighbours'
    age margins, ``consensus.control.robot_core``). None when the rule says ``none``."""
    radius = fleet_footprint(cfg)
    return avoidance_from_config(cfg, ros=ros, radius=radius, fleet_radius=radius)
