"""A running fleet as the operator's seat sees it: its run directory, its config, and the acts on it, each validated
the way the CLI and the nodes validate (``FlatParams.replace``: the field's range and the config's own checks; the
graph built as the topology node builds it), before any approval is asked and before anything reaches the wire.

``FleetLink`` holds no ROS: it talks to a bridge (``consensus.ros.operator_bridge.OperatorBridge``, or a test's
stand-in) with ``snapshot``, ``estop``, ``suggest``, ``set_parameters`` and ``close``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from consensus.errors import ConfigError
from consensus.operator.policy import untrusted

#: the run directory's files offered as MCP resources (name -> (file, MIME type))
RUN_FILES = {
    "summary": ("summary.json", "application/json"),
    "manifest": ("manifest.json", "application/json"),
    "params": ("params.yaml", "application/yaml"),
    "operator_log": ("operator.jsonl", "application/jsonl"),
    "paths_plot": ("paths.png", "image/png"),
    "spread_plot": ("spread.png", "image/png"),
    "planned_vs_actual_plot": ("planned_vs_actual.png", "image/png"),
    "video": ("video.mp4", "video/mp4"),
}
MAX_RESOURCE_BYTES = 64 * 1024 * 1024
BRIDGE = "consensus.ros.operator_bridge:OperatorBridge"     # the seat's node on the fleet's ROS graph
#: a robot's states as its status record names them (consensus.ros.records.StatusRecord.state); another is reported
#: as "invalid" (a status heard on the wire is not trusted)
ROBOT_STATES = frozenset({"ok", "waiting", "degraded", "stopped", "pose_suspect", "blocked", "estopped"})


def read_manifest(run_dir: str | Path) -> dict:
    """A run directory's manifest.json, or one ConfigError saying why it cannot be attached to."""
    path = Path(run_dir) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{run_dir}: no manifest.json (not a run directory, or the run has not started yet)") \
            from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("mode") != "ros":
        raise ConfigError(f"{run_dir}: not a ROS run (its manifest's mode is {manifest.get('mode')!r}); "
                          f"consensus mcp attaches to a running ROS fleet")
    return manifest


class FleetLink:
    """The run in ``run_dir`` (a ROS run: manifest mode ``ros``), reached through ``bridge``."""

    def __init__(self, run_dir: str | Path, bridge_factory=None) -> None:
        from consensus import registry

        self.run_dir = Path(run_dir)
        self.manifest = read_manifest(self.run_dir)
        name = self.manifest.get("scenario", "")
        scenario = registry.scenarios().get(name)
        if scenario is None or scenario.config_cls is None:
            raise ConfigError(f"{run_dir}: scenario '{name}' is not one this installation knows")
        self.scenario = scenario
        try:
            self.cfg = scenario.config_cls.from_dict(self.manifest.get("config", {}), source=f"{run_dir} manifest")
        except ConfigError as exc:
            raise ConfigError(f"{run_dir}: its manifest's config does not load here: {exc}") from None
        ros = self.manifest.get("ros") or {}
        self.namespace = str(ros.get("namespace", ""))
        self.domain_id = int(ros.get("domain_id", os.environ.get("ROS_DOMAIN_ID", 0) or 0))
        self.n = int(self.cfg.num_robots)
        self.graph_cfg = self.cfg               # the config with the graph changes applied since (set_topology)
        if bridge_factory is None:         # the ROS side, by name: only ros/ modules import rclpy
            from consensus.loader import load

            bridge_factory = load(BRIDGE)
        self.bridge = bridge_factory(namespace=self.namespace, num_robots=self.n, estop_topic=self.cfg.estop_topic,
                                     domain_id=self.domain_id)

    # --- reading ---------------------------------------------------------------------------------------------------
    def status(self) -> dict:
        from consensus.ros.records import StatusRecord

        snap = self.bridge.snapshot()
        cfg = self.cfg
        named = set(StatusRecord.__dataclass_fields__) - {"robot", "round", "callback_errors", "bad_messages",
                                                          "extra"}
        robots = []
        for i in range(self.n):
            st = snap["status"][i] or {}
            state = st.get("state", "unheard")
            robots.append({
                "robot": i,
                "position": snap["positions"][i], "position_age_s": snap["position_age_s"][i],
                "meeting_point": snap["meeting_points"][i] or st.get("meeting_point"),
                "state": state if state in ROBOT_STATES or state == "unheard" else "invalid",
                "round": st.get("round"), "agreed": st.get("agreed"), "estopped": st.get("estopped"),
                "health": {"callback_errors": st.get("callback_errors", 0), "bad_messages": st.get("bad_messages", 0)},
                "counters": {k: v for k, v in st.items() if k in named and isinstance(v, int)
                             and not isinstance(v, bool)},
            })
        pos = np.array([p for p in snap["positions"] if p is not None], dtype=float).reshape(-1, 2)
        mps = np.array([m for m in (r["meeting_point"] for r in robots) if m is not None], dtype=float)
        mps = mps.reshape(-1, 2) if mps.size else np.empty((0, 2))
        tol = float(getattr(cfg, "converge_tol_m", 0.1))
        mp_spread = _max_pairwise(mps)
        graph = snap["graph"] or {}
        return {
            "run_dir": str(self.run_dir), "scenario": self.manifest.get("scenario"), "robots_heard": len(pos),
            "num_robots": self.n, "spread_m": _max_pairwise(pos), "meeting_point_spread_m": mp_spread,
            "agreement": bool(len(mps) == self.n and mp_spread is not None and mp_spread <= tol),
            "agreement_rule": f"every pair of meeting points within {tol:g} m (converge_tol_m)",
            "estop": snap["estop"], "topology": _graph_name(graph.get("name")), "workspace": list(cfg.workspace),
            "bad_messages": snap["bad_messages"], "robots": robots,
            "ended": (self.run_dir / "summary.json").exists(),
        }

    def graph(self) -> dict | None:
        return self.bridge.snapshot()["graph"]

    def reasoning(self, per_robot: int = 3) -> list[dict]:
        out = []
        for i, recs in enumerate(self.bridge.snapshot()["reasoning"]):
            for rec in recs[-per_robot:]:
                out.append({"robot": i, "round": rec.get("round"), "target": rec.get("target"),
                            "fallback": rec.get("fallback"), "reasoning": untrusted(rec.get("reasoning", ""))})
        return out

    def parameters(self) -> dict:
        """The run-time parameters: the controller's (on the robots) and the graph's (on the graph node), each with
        its range, unit and the value the run started with."""
        from consensus.settings import field_meta, ros_names

        meta, ros = field_meta(type(self.cfg)), ros_names(type(self.cfg))
        out = {}
        for name in self.runtime_fields():
            m = meta.get(name, {})
            out[name] = {"ros_name": ros[name], "start_value": getattr(self.cfg, name), "range": m.get("bounds"),
                         "unit": m.get("unit", ""), "meaning": m.get("doc", ""),
                         "on": "graph node" if name in self.scenario.graph_fields else "robots"}
        return out

    def runtime_fields(self) -> tuple[str, ...]:
        from consensus.settings import ControlParams, runtime_fields

        return runtime_fields(ControlParams) + tuple(self.scenario.graph_fields)

    # --- acting ----------------------------------------------------------------------------------------------------
    def check_parameter(self, name: str, value: Any) -> tuple[str, Any]:
        """The field and its value for ``set_parameter(name, value)`` (``name``: the field's or its ROS name), checked
        as the config checks it; one ConfigError otherwise."""
        from consensus.settings import fields_of_ros

        field = fields_of_ros(type(self.cfg)).get(name, name)
        if field not in self.runtime_fields():
            raise ConfigError(f"'{name}' is not a run-time parameter of this run; the run-time ones: "
                              f"{', '.join(self.runtime_fields())} (every other parameter is read-only while it runs)")
        if field in self.scenario.graph_fields:
            self.check_graph({field: value})
            new = self.graph_cfg.replace(**{field: value})
        else:
            new = self.cfg.replace(**{field: value})
        return field, getattr(new, field)         # as the config read it: what the node's typed parameter takes

    def check_graph(self, changes: dict) -> Any:
        """The graph ``changes`` give, built as the topology node builds it; one ConfigError otherwise."""
        if not self.scenario.graph_node:
            raise ConfigError(f"scenario '{self.manifest.get('scenario')}' has no communication graph to switch")
        bad = [k for k in changes if k not in self.scenario.graph_fields]
        if bad:
            raise ConfigError(f"not a graph parameter: {', '.join(bad)}; valid: "
                              f"{', '.join(self.scenario.graph_fields)}")
        return self.graph_cfg.replace(**changes).graph()

    def set_parameter(self, field: str, value: Any) -> str | None:
        """Apply a checked parameter on the nodes that hold it; None or the node's reason."""
        from consensus.settings import ros_names

        ros = ros_names(type(self.cfg))[field]
        if field in self.scenario.graph_fields:
            why = self.bridge.set_parameters(self.scenario.graph_node, {ros: value})
            if why is None:
                self.graph_cfg = self.graph_cfg.replace(**{field: value})
            return why
        done = []
        for node in self.robot_nodes():
            why = self.bridge.set_parameters(node, {ros: value})
            if why:
                partly = f" (already set on {', '.join(done)}: set it back there by hand)" if done else ""
                return f"{node}: {why}{partly}"
            done.append(node)
        return None

    def set_graph(self, changes: dict) -> str | None:
        from consensus.settings import ros_names

        ros = ros_names(type(self.cfg))
        new = self.graph_cfg.replace(**changes)
        why = self.bridge.set_parameters(self.scenario.graph_node, {ros[k]: getattr(new, k) for k in changes})
        if why is None:
            self.graph_cfg = new                 # the graph the node holds now: the next change is checked on it
        return why

    def robot_nodes(self) -> list[str]:
        from consensus import names

        if self.cfg.single_process:
            return [names.FLEET_NODE]
        return [f"{names.namespace(i)}/{names.ROBOT_NODE}" for i in range(self.n)]

    def check_meeting_point(self, x: Any, y: Any) -> tuple[float, float]:
        from consensus.operator.policy import finite_number

        try:
            px, py = finite_number("x", x), finite_number("y", y)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        ws = list(self.cfg.workspace)
        inside = ws[0] <= px <= ws[1] and (len(ws) < 4 or ws[2] <= py <= ws[3])
        if not inside:
            fence = f"[{ws[0]:g}, {ws[1]:g}]" + (f" x [{ws[2]:g}, {ws[3]:g}]" if len(ws) >= 4 else "")
            raise ConfigError(f"({px:g}, {py:g}) is outside the fence {fence} m (the run's workspace); a meeting "
                              f"point must lie inside it")
        return px, py

    def close(self) -> None:
        self.bridge.close()


def _graph_name(name):
    from consensus.graphs.topology import TOPOLOGIES

    return name if name is None or name in TOPOLOGIES else untrusted(name, 80)


def _max_pairwise(points: np.ndarray) -> float | None:
    if len(points) == 0:
        return None
    d = points[:, None, :] - points[None, :, :]
    return round(float(np.sqrt((d ** 2).sum(-1)).max()), 4)


class StartedRun:
    """A run this server started (``start_run``: ``consensus run <scenario> ...``; ``start_experiment``:
    ``consensus experiment <preset> ...``) in a session of its own, so that ``stop_run`` (SIGINT, as Ctrl-C) ends it
    and every process it started."""

    def __init__(self, command: list[str], out: Path, args: list[str], log: Path) -> None:
        self.out = out
        self.log = log
        cmd = [sys.executable, "-c", "import sys; from consensus.cli import main; sys.exit(main())", *command,
               *args, "--out", str(out), "-q"]
        self._log_file = open(log, "ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.command = cmd

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait_manifest(self, timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if (self.out / "manifest.json").exists():
                return True
            if not self.running():
                return False
            time.sleep(0.2)
        return False

    def stop(self, timeout_s: float = 30.0) -> int | None:
        if self.running():
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._log_file.close()
        return self.proc.returncode
