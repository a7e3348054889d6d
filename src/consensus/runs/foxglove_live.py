"""A live view of a ROS run for Foxglove without ROS GUI tools: a Foxglove WebSocket server (PyPI ``foxglove-sdk``,
the optional extra ``consensus[foxglove]``) inside the node that records the run, which only feeds it.

``--foxglove [PORT]`` (config field ``foxglove``, launch argument ``foxglove:=PORT``; 0 = off) and
``foxglove_host`` (default ``127.0.0.1``: only this machine can connect) turn it on. Open Foxglove, *Open
connection -> Foxglove WebSocket*, ``ws://localhost:PORT``, and import ``config/foxglove_aggregation.json``.

Channels (``CHANNELS``; the server speaks the Foxglove WebSocket protocol, subprotocol ``foxglove.sdk.v1``):

============== ========================== =========================================================================
topic          schema (encoding)          what
============== ========================== =========================================================================
``/markers``   foxglove.SceneUpdate       one entity ``robot_<i>`` per robot (sphere in its colour, its label with
               (protobuf)                 its last reasoning cut to ``LABEL_CHARS``, a cube at its target, a line
                                          to it) and ``edges`` (a line list of the communication graph), frame
                                          ``world``, lifetime ``LIFETIME_S``: what RViz2 draws from ``/markers``
``/tf``        foxglove.FrameTransforms   ``world -> robot_<i>/base_link`` at each robot's position
               (protobuf)
``/fleet``     consensus.Fleet (json)     every robot: ``robot``, ``x``, ``y``, ``target_x``, ``target_y`` (null
                                          when unknown), ``lost``, ``reasoning`` (cut to ``REASONING_CHARS``);
                                          ``edges`` ([i, j] pairs)
``/progress``  consensus.Progress (json)  the run's progress: ``t_s``, ``duration_s``, ``round``, ``spread_m``,
                                          ``llm_calls``, ``llm_fallbacks``, ``lost_robots``, ``bad_messages``,
                                          ``callback_errors`` (null where not known yet)
``/reasoning`` foxglove.Log (protobuf)    each planning record as it arrives: name ``robot_<i>``, message
                                          ``round <r>: <reasoning>`` cut to ``REASONING_CHARS``
============== ========================== =========================================================================

Outside text (the LLM's reasoning) is bounded before it goes out (``bounded_text``: control characters become
spaces, text that is not valid UTF-8 is replaced, then cut); numbers that are not finite go out as null.
"""
from __future__ import annotations

import json
import math
import socket
import unicodedata
from typing import Any, Mapping, Sequence

from consensus import names
from consensus.errors import ConfigError, ConsensusError
from consensus.extras import missing, require

SDK = "foxglove-sdk==0.30.3"
SUBPROTOCOL = "foxglove.sdk.v1"
FRAME = names.WORLD_FRAME
LIFETIME_S = 2.0
LABEL_CHARS = 120             # a robot's label in the 3D scene
REASONING_CHARS = 500         # /fleet and /reasoning
ROBOT_DIAMETER_M = 0.4
TARGET_SIZE_M = 0.2
TEXT_HEIGHT_M = 0.25

#: every channel the server serves: topic -> schema name (config/foxglove_aggregation.json uses exactly these)
CHANNELS = {"/markers": "foxglove.SceneUpdate", "/tf": "foxglove.FrameTransforms", "/fleet": "consensus.Fleet",
            "/progress": "consensus.Progress", "/reasoning": "foxglove.Log"}

DEFAULT_PORT = 8765          # Foxglove's usual port: ``--foxglove`` without a number
#: the ``consensus run <scenario>`` flags of a scenario with a live view ((flag, config field, argparse kwargs))
CLI_FLAGS = (
    ("--foxglove", "foxglove", dict(nargs="?", const=DEFAULT_PORT, type=int, metavar="PORT",
                                    help=f"live view: a Foxglove WebSocket server on PORT (default {DEFAULT_PORT}); "
                                         "open ws://localhost:PORT in Foxglove (docs/visualization.md)")),
    ("--foxglove-host", "foxglove_host", dict(metavar="HOST", help="address the Foxglove server listens on "
                                                                    "(default 127.0.0.1: this machine only)")),
)
#: the launch arguments of the same fields (``Scenario.launch_args``)
LAUNCH_ARGS = ("foxglove", "foxglove_host")

_NUM = {"type": ["number", "null"]}
FLEET_SCHEMA = {
    "title": "consensus.Fleet", "type": "object",
    "properties": {
        "robots": {"type": "array", "items": {"type": "object", "properties": {
            "robot": {"type": "integer"}, "x": _NUM, "y": _NUM, "target_x": _NUM, "target_y": _NUM,
            "lost": {"type": "boolean"}, "reasoning": {"type": "string"}}}},
        "edges": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
    },
}
PROGRESS_FIELDS = ("t_s", "duration_s", "round", "spread_m", "llm_calls", "llm_fallbacks", "lost_robots",
                   "bad_messages", "callback_errors")
PROGRESS_SCHEMA = {"title": "consensus.Progress", "type": "object",
                   "properties": {k: _NUM for k in PROGRESS_FIELDS}}


def require_sdk():
    """The ``foxglove`` module, or one ConfigError naming the install command."""
    foxglove = require("foxglove", "--foxglove (the live view)")
    if not hasattr(foxglove, "start_server"):           # the server part (absent in some builds)
        raise missing("foxglove", "--foxglove (the live view)", f"this foxglove has no server; {SDK} has it")
    return foxglove


def check_live_view(cfg: Any) -> None:
    """Before a run starts (``consensus.runs.processes.prepare_run``): with ``cfg.foxglove`` set, the SDK is
    installed and ``foxglove_host:foxglove`` can be listened on; else one ConfigError."""
    port = int(getattr(cfg, "foxglove", 0) or 0)
    if not port:
        return
    require_sdk()
    host = cfg.foxglove_host
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as exc:
        raise ConfigError(f"foxglove: cannot listen on {host}:{port} ({exc.strerror or exc}); "
                          f"choose another port (--foxglove PORT) or host (--set foxglove_host=...)") from None


def bounded_text(text: Any, limit: int) -> str:
    """``text`` as one line of at most ``limit`` characters: control and format characters become spaces, runs
    of whitespace one space, what is not valid UTF-8 (lone surrogates) ``?``."""
    s = str(text)[: 4 * limit]
    s = s.encode("utf-8", "replace").decode("utf-8")
    s = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in s)
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: max(limit - 3, 0)] + "..."


def finite(x: Any) -> float | int | None:
    """``x`` as a number (an int stays an int), or None when it is missing or not finite."""
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _valid(p) -> bool:
    return finite(p[0]) is not None and finite(p[1]) is not None


class LiveView:
    """The Foxglove WebSocket server of a run and its channels (module docstring). ``close()`` stops it."""

    def __init__(self, port: int, host: str = "127.0.0.1", *, name: str = "consensus") -> None:
        fg = require_sdk()
        from foxglove import channels as ch
        from foxglove import messages as m

        self._m = m
        self._ctx = fg.Context()
        try:
            self._server = fg.start_server(name=name, host=host, port=int(port), context=self._ctx)
        except Exception as exc:  # noqa: BLE001 - the SDK raises its own error types
            raise ConsensusError(f"foxglove: cannot start the WebSocket server on {host}:{port}: {exc}") from None
        self.host = host
        self.port = int(self._server.port)
        schema = lambda name, body: fg.Schema(name=name, encoding="jsonschema",      # noqa: E731
                                              data=json.dumps(body).encode())
        self._scene = ch.SceneUpdateChannel("/markers", context=self._ctx)
        self._tf = ch.FrameTransformsChannel("/tf", context=self._ctx)
        self._log = ch.LogChannel("/reasoning", context=self._ctx)
        self._fleet = fg.Channel("/fleet", schema=schema("consensus.Fleet", FLEET_SCHEMA),
                                 message_encoding="json", context=self._ctx)
        self._progress = fg.Channel("/progress", schema=schema("consensus.Progress", PROGRESS_SCHEMA),
                                    message_encoding="json", context=self._ctx)

    # ------------------------------------------------------------------ helpers
    def _stamp(self, now_ns: int):
        return self._m.Timestamp(sec=int(now_ns // 1_000_000_000), nsec=int(now_ns % 1_000_000_000))

    def _pose(self, x: float, y: float, z: float = 0.0):
        m = self._m
        return m.Pose(position=m.Vector3(x=float(x), y=float(y), z=float(z)),
                      orientation=m.Quaternion(x=0.0, y=0.0, z=0.0, w=1.0))

    def _color(self, c, alpha: float | None = None):
        return self._m.Color(r=float(c[0]), g=float(c[1]), b=float(c[2]), a=float(c[3] if alpha is None else alpha))

    # ------------------------------------------------------------------ what the recorder feeds
    def fleet(self, now_ns: int, positions: Sequence, targets: Sequence, edges: Sequence[tuple[int, int]],
              reasoning: Mapping[int, str], colors: Sequence, lost: Sequence[int] = ()) -> None:
        """``/markers``, ``/tf`` and ``/fleet`` from the robots' positions and targets (``(n, 2)``, NaN where
        unknown), the graph's undirected ``edges``, each robot's last ``reasoning`` and its RGBA colour."""
        m = self._m
        stamp = self._stamp(now_ns)
        life = m.Duration.from_secs(LIFETIME_S)
        entities, transforms, robots = [], [], []
        for i, p in enumerate(positions):
            t = targets[i] if i < len(targets) else (math.nan, math.nan)
            text = bounded_text(reasoning.get(i, ""), REASONING_CHARS)
            robots.append({"robot": i, "x": finite(p[0]), "y": finite(p[1]), "target_x": finite(t[0]),
                           "target_y": finite(t[1]), "lost": i in lost, "reasoning": text})
            if not _valid(p):
                continue
            x, y = float(p[0]), float(p[1])
            label = bounded_text(f"robot_{i}: {text}" if text else f"robot_{i}", LABEL_CHARS)
            ent = dict(spheres=[m.SpherePrimitive(pose=self._pose(x, y), size=m.Vector3(
                           x=ROBOT_DIAMETER_M, y=ROBOT_DIAMETER_M, z=ROBOT_DIAMETER_M), color=self._color(colors[i]))],
                       texts=[m.TextPrimitive(pose=self._pose(x, y, ROBOT_DIAMETER_M + TEXT_HEIGHT_M), billboard=True,
                                              font_size=TEXT_HEIGHT_M, color=m.Color(r=1.0, g=1.0, b=1.0, a=1.0),
                                              text=label)])
            if _valid(t):
                tx, ty = float(t[0]), float(t[1])
                ent["cubes"] = [m.CubePrimitive(pose=self._pose(tx, ty), size=m.Vector3(
                    x=TARGET_SIZE_M, y=TARGET_SIZE_M, z=TARGET_SIZE_M), color=self._color(colors[i], 0.6))]
                ent["lines"] = [m.LinePrimitive(type=m.LinePrimitiveLineType.LineList, thickness=0.02,
                                                points=[m.Point3(x=x, y=y, z=0.0), m.Point3(x=tx, y=ty, z=0.0)],
                                                color=self._color(colors[i], 0.8))]
            entities.append(m.SceneEntity(timestamp=stamp, frame_id=FRAME, id=f"robot_{i}", lifetime=life, **ent))
            transforms.append(m.FrameTransform(timestamp=stamp, parent_frame_id=FRAME,
                                               child_frame_id=names.base_link(i),
                                               translation=m.Vector3(x=x, y=y, z=0.0),
                                               rotation=m.Quaternion(x=0.0, y=0.0, z=0.0, w=1.0)))
        segments, pairs = [], []
        for i, j in edges:
            if 0 <= i < len(positions) and 0 <= j < len(positions):
                pairs.append([int(i), int(j)])
                if _valid(positions[i]) and _valid(positions[j]):
                    segments += [m.Point3(x=float(positions[k][0]), y=float(positions[k][1]), z=0.0) for k in (i, j)]
        entities.append(m.SceneEntity(timestamp=stamp, frame_id=FRAME, id="edges", lifetime=life, lines=[
            m.LinePrimitive(type=m.LinePrimitiveLineType.LineList, thickness=0.03, points=segments,
                            color=m.Color(r=0.6, g=0.6, b=0.6, a=0.6))] if segments else []))
        self._scene.log(m.SceneUpdate(entities=entities), log_time=now_ns)
        self._tf.log(m.FrameTransforms(transforms=transforms), log_time=now_ns)
        self._fleet.log({"robots": robots, "edges": pairs}, log_time=now_ns)

    def progress(self, now_ns: int, **values: Any) -> None:
        """``/progress``: the ``PROGRESS_FIELDS`` given (numbers; the rest and non-finite ones are null)."""
        self._progress.log({k: finite(values.get(k)) for k in PROGRESS_FIELDS}, log_time=now_ns)

    def reasoning(self, now_ns: int, robot: int, rnd: int, text: Any) -> None:
        """``/reasoning``: one planning record of robot ``robot`` (round ``rnd``) as a log line."""
        m = self._m
        self._log.log(m.Log(timestamp=self._stamp(now_ns), level=m.LogLevel.Info, name=f"robot_{int(robot)}",
                            message=bounded_text(f"round {int(rnd)}: {bounded_text(text, REASONING_CHARS)}",
                                                 REASONING_CHARS)),
                      log_time=now_ns)

    def close(self) -> None:
        self._server.stop()
