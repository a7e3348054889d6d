"""The processes of a ROS run and the run directory they share — used by every scenario's launch file and runner.

A scenario lists its processes as ``ProcessSpec``s (``Scenario.processes`` in ``consensus.registry``);
``launch/<scenario>.launch.py`` turns them into ``launch_ros.actions.Node`` actions
(``consensus.runs.launch_file``) and ``consensus run <scenario>`` starts the very same executables with the very
same parameters file (``consensus.runs.ros_runner``). So a run started either way is the same set of nodes
configured by the same YAML.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from consensus.llm.backends import starts_local_server
from consensus.runs import security
from consensus.runs.foxglove_live import check_live_view
from consensus.runs.rundir import new_run_dir, write_manifest
from consensus.settings import RobotBaseConfig
from consensus import names

FLEET_NODE = names.FLEET_NODE      # the node of a process that runs every robot (root namespace)
ROBOT_NODE = names.ROBOT_NODE      # a robot's node: /robot_<i>/agent


#: processes whose death does not end the run (under ``consensus run`` and ``ros2 launch`` alike): they only write its
#: record (the run's own summary and trajectories are the recorder's); ``consensus run`` repairs what they wrote at
#: the end and summary.json names them
GOES_ON_WITHOUT = ("bag_recorder",)
#: after a stop (Ctrl-C): how long a process that writes the run's record (the one that ends the run, the bag writer)
#: may take to write it before it is sent SIGTERM, under `consensus run` and `ros2 launch` alike (on a loaded 2-core
#: host its summary and figures take longer than 15 s: docs/benchmarks.md, 'Why the code is as it is')
FINISH_GRACE_S = 30.0


#: what a process's death does to the run (``ProcessSpec.death_rule``), the one place the rules are decided; both
#: ``runs.ros_runner.run_processes`` (``consensus run``) and ``runs.launch_file.node_actions`` (``ros2 launch``)
#: carry them out
FINISHES = "finishes"        # its exit ends the run, with an error when it failed (the recorder, grid, matchmaker)
GOES_ON = "goes_on"          # the run goes on; its record is repaired at the end (``GOES_ON_WITHOUT``: the bag)
EXPENDABLE = "expendable"    # one robot of many: the run goes on without it, unless it was the last robot left
NEEDED = "needed"            # the run ends with an error (the sim, the fleet, the relays, the LLM server...)
DEATH_RULES = (FINISHES, GOES_ON, EXPENDABLE, NEEDED)


#: the order processes stop in at the end of a run (``ProcessSpec.stop_stage``), the same under ``consensus run``
#: (``runs.ros_runner.stop_all``) and ``ros2 launch`` (``runs.launch_file.node_actions``): each stage is signalled
#: only once the one before has exited
STOP_FIRST = 0        # a robot's link to its driver that must act before anything else stops (a drone's link lands it)
STOP_WITH_RUN = 1     # our nodes
STOP_LAST = 2         # the vendors' simulators, which move the bodies until the links have landed them
STOP_STAGES = (STOP_FIRST, STOP_WITH_RUN, STOP_LAST)


def writes_record(spec: "ProcessSpec") -> bool:
    """Does this process write the run's record on its way out (``FINISH_GRACE_S``)?"""
    return spec.death_rule in (FINISHES, GOES_ON)


@dataclass(frozen=True)
class ProcessSpec:
    executable: str               # name under lib/<package>
    name: str                     # node name
    namespace: str = ""
    params: dict = field(default_factory=dict)   # per-process parameters on top of the run's params file
    ends_run: bool = False        # the run is over when this process exits
    expendable: bool = False      # one robot of many: if it dies, the run goes on without it (a lost robot)
    package: str = "consensus"    # another package's node (e.g. turtlesim) gets only ``params``, not the run's file
    #: another package's node whose parameters are a tree (crazyswarm2's server): the whole ``ros__parameters``
    #: mapping, written into the run directory (``own_params_file``) and given as its params file
    params_tree: dict = field(default_factory=dict)
    stop_stage: int = STOP_WITH_RUN   # when it is stopped at the end of the run (``STOP_STAGES``)
    grace_s: float = 0.0          # how long it may take to stop after SIGINT (0: the runner's default)

    @property
    def ours(self) -> bool:
        return self.package == "consensus"

    @property
    def ros_params(self) -> dict:
        """``params`` as the node's parameters: a config field under its nested ROS name (``publish_clock`` ->
        ``sim.publish_clock``: ``consensus.settings.ros_names``), a node's own parameter (``robot_id``) and another
        package's node's parameters as they are."""
        if not self.ours:
            return dict(self.params)
        names = _kernel_ros_names()
        return {names.get(k, k): v for k, v in self.params.items()}

    @property
    def death_rule(self) -> str:
        """What this process's death does to the run (``DEATH_RULES``)."""
        if self.ends_run:
            return FINISHES
        if self.executable in GOES_ON_WITHOUT:
            return GOES_ON
        return EXPENDABLE if self.expendable else NEEDED

    def own_params_file(self, out_dir: str | Path) -> Path | None:
        """``params_tree`` written as ``out_dir/params/<namespace>_<name>.yaml`` (keyed ``/**``, so the node's name
        and namespace do not matter), or None when the spec has no tree."""
        if not self.params_tree:
            return None
        import yaml

        folder = Path(out_dir) / "params"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.path.replace('/', '_')}.yaml"
        path.write_text(yaml.safe_dump({"/**": {"ros__parameters": self.params_tree}}, sort_keys=False))
        return path

    @property
    def path(self) -> str:
        """``namespace/name`` (``name`` in the root namespace): how a run's messages and records name the process."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def _kernel_ros_names() -> dict[str, str]:
    """The ROS names of the fields a run gives a process on top of its params file (the kernel's groups)."""
    from consensus.settings import AgentsParams, LiveViewParams, ros_names

    return {**ros_names(AgentsParams), **ros_names(LiveViewParams), **ros_names(RobotBaseConfig)}


def prepare_run(cfg, out_dir: str | Path, *, scenario: str, extra: dict | None = None):
    """Fix the run's output directory (and the embedded server's URL), write params.yaml and manifest.json.

    ``cfg`` is a scenario config (``consensus.settings.FlatParams`` with the LLM group). Returns the final config
    and the path of the params file every node is started with."""
    check_live_view(cfg)          # --foxglove: the SDK is installed and the port free, before anything is written
    out = new_run_dir(out_dir)
    changes: dict = {"output_dir": str(out)}
    if cfg.uses_llm() and starts_local_server(cfg.llm_backend, cfg.llm_base_url):
        changes["llm_base_url"] = f"http://127.0.0.1:{cfg.llm_port}/v1"
    extra = dict(extra or {})
    if hasattr(cfg, "resolved_collision_avoidance"):    # the control group's rule: auto is cbf in a ROS run
        changes["collision_avoidance"] = cfg.resolved_collision_avoidance(ros=True)
        extra["collision_avoidance"] = {"requested": cfg.collision_avoidance,
                                        "resolved": changes["collision_avoidance"]}
    if security.enabled():        # SROS2 (--security, security:=true): the record says which keystore
        extra["security"] = {"keystore": os.environ.get("ROS_SECURITY_KEYSTORE", ""),
                             "strategy": os.environ.get("ROS_SECURITY_STRATEGY", "")}
    cfg = cfg.replace(**changes)
    params = out / "params.yaml"
    params.write_text(cfg.to_ros_params_yaml())
    write_manifest(out, scenario=scenario, config=cfg.to_dict(), seed=cfg.seed,
                   **cfg.manifest_llm(),
                   mode="ros", extra={"params_file": str(params), **extra})
    return cfg, params


def robot_specs(executable: str, cfg, params: dict, num_robots: int | None = None) -> list[ProcessSpec]:
    """The robots' processes of a run: one ``/fleet`` process running them all (``cfg.single_process``), or one
    ``/robot_<i>/agent`` process per robot (``robot_id`` i), each with ``params`` (``consensus.ros.fleet``); a
    robot's own process is expendable: the run goes on if it dies."""
    n = cfg.num_robots if num_robots is None else num_robots
    if cfg.single_process:
        return [ProcessSpec(executable, FLEET_NODE, params=params)]
    return [ProcessSpec(executable, ROBOT_NODE, namespace=names.namespace(i), params={**params, "robot_id": i},
                        expendable=n > 1) for i in range(n)]


def robot_base_overrides(cfg, settings: dict[str, Any], *, values=None, exclude: tuple[str, ...] = (),
                         source: str = "robot base settings") -> tuple[RobotBaseConfig, dict[str, Any]]:
    """The ``RobotBaseConfig`` a kernel robot node (the robot base, ``sim``, ``llm_server``) runs with in a run of
    the scenario config ``cfg``, and the parameters such a node must get on top of the run's params file.

    The node reads the file's values of the fields ``cfg`` shares with ``RobotBaseConfig`` (taken from ``values``
    when given, e.g. a baseline-resolved copy; ``exclude``: shared names whose meaning differs) and its own defaults
    for the rest; ``settings`` go on top. Validated here (ConfigError naming ``source``). The overrides are
    ``settings`` and every other field whose value differs from what the node would read from the file."""
    names = [n for n in RobotBaseConfig.field_names() if n in cfg.field_names()]
    shared = {n: getattr(values or cfg, n) for n in names if n not in exclude}
    base = RobotBaseConfig.from_dict({**shared, **settings}, source=source)
    seen = {**RobotBaseConfig().to_dict(), **{n: getattr(cfg, n) for n in names}}
    return base, {k: v for k, v in base.to_dict().items() if k in settings or v != seen[k]}


def bag_specs(cfg, params: dict) -> list[ProcessSpec]:
    """The ``bag_recorder`` process (``consensus.ros.bag_recorder``: every topic into ``RUN/bag``) with ``params``,
    unless the config's ``bag`` switch is off. A config without that switch always records."""
    return [ProcessSpec("bag_recorder", "bag_recorder", params=params)] if getattr(cfg, "bag", True) else []


#: how long a robot's link may take to stop after SIGINT (a drone's link lands it first: crazyflie_link's land_s
#: + 1 s, with room to spare)
LINK_GRACE_S = 6.0


def link_specs(cfg, params: dict) -> list[ProcessSpec]:
    """The links of a robots file's robots whose preset has one (``Preset.link``: a Crazyflie's ``crazyflie_link``),
    one process named ``link`` in each robot's driver namespace, with ``params`` (``use_sim_time``), the drone's
    name in its driver (its namespace) and the map's frame. They stop first (``STOP_FIRST``: they land the drones
    while the rest still runs) and the run needs them (a dead link leaves its robot uncommanded)."""
    if not getattr(cfg, "robots_file", ""):
        return []
    from consensus.robots.map import check_robots, load_robots

    robots = load_robots(cfg.robots_file)
    return [ProcessSpec(e.preset.link, "link", namespace=e.namespace,
                        params={**params, "robot_name": e.namespace, "world_frame": robots.frame},
                        stop_stage=STOP_FIRST, grace_s=LINK_GRACE_S)
            for e in check_robots(robots, cfg.workspace, cfg.robots_file) if e.preset.link]
