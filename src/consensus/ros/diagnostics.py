"""Node health on ``/diagnostics`` (diagnostic_msgs/DiagnosticArray), the topic rqt_robot_monitor,
diagnostic_aggregator and Foxglove's diagnostics panel read, next to the JSON records it is made from (``health`` of
a root node, ``consensus.ros.health.publish_health``; ``planner/status`` of a robot).

One ``DiagnosticStatus`` per node, every second:

* ``name``: the node's fully-qualified name (``/recorder``, ``/robot_3/agent``);
* ``hardware_id``: the robot (its robots-file entry's name, else ``robot_<i>``) or, for the other nodes, the host;
* ``level``: from the counters that rose in the last ``HOLD_S`` seconds (``LEVELS``): a callback error is ERROR; a
  bad message, an LLM fallback, a stale-input stop or a stop for a suspect pose is WARN; else OK. A node whose
  counters stopped rising goes back to OK after ``HOLD_S``; the totals stay in its key-values and its message. A
  robot's ``state`` sets a level of its own for as long as the record says it (``STATE_LEVELS``): ``pose_suspect``
  (the robot cannot trust its own pose and holds still) is ERROR until its pose source is consistent again; the
  higher of the two levels is the node's;
* ``message``: ``ok``, or the counters that rose with their totals, and a robot's ``state`` when it is not ``ok``;
* ``values``: the record's fields as ``KeyValue`` pairs (nested records one level deep, as ``key.sub``), the level's
  counters first, at most ``MAX_PAIRS`` pairs (the last then says how many were left out) with keys of at most
  ``MAX_KEY_CHARS`` and values of at most ``MAX_VALUE_CHARS`` characters: the whole record stays on its JSON topic.

A node publishing health (``publish_health``) sends its status with its ``health`` record. A robot process (a fleet
or one robot, ``consensus.ros.fleet.run_robots``) sends every robot's status and its main node's (the fleet clock's
counts) from a timer of its own (``RobotsDiagnostics``: arrays of ``ROBOTS_PER_ARRAY`` robots spread over the
second): the robots' last ``planner/status`` records (as published, not rebuilt) with their current health counts,
so nothing is added to the control ticks and no diagnostics callback holds their thread for long.

The mapping (``node_status``, ``StatusTracker``) is plain Python; only ``to_array`` and ``DiagnosticsPublisher``
import the ROS messages.
"""
from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from consensus import names

OK, WARN, ERROR = 0, 1, 2                    # DiagnosticStatus.OK / WARN / ERROR
LEVEL_NAMES = {OK: "OK", WARN: "WARN", ERROR: "ERROR"}

#: the counters that set a node's level while they rise, and the level each sets
LEVELS: tuple[tuple[str, int], ...] = (("callback_errors", ERROR), ("bad_messages", WARN), ("llm_fallbacks", WARN),
                                       ("stale_stops", WARN), ("pose_suspect_stops", WARN))
#: a robot's ``state`` (its status record) that sets a level while the record says it
STATE_LEVELS: dict[str, int] = {"pose_suspect": ERROR}
HOLD_S = 10.0                # a counter that rose within this long keeps its level
PERIOD_S = 1.0               # each node's status once a second
ROBOTS_PER_ARRAY = 10        # a robot process's statuses go out in arrays of this many robots (RobotsDiagnostics)
MAX_PAIRS = 48               # key-values per status (the last says how many were left out)
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 96
SKIPPED_KEYS = ("node",)     # the status's name already
BREAKDOWNS = ("errors_by_callback", "bad_by_input")   # the level's counters by callback and input (after them)
HOST = socket.gethostname() or "localhost"

Entry = tuple[str, str, Mapping[str, Any]]      # (node name, hardware id, JSON record)


@dataclass(frozen=True)
class NodeStatus:
    """One node's diagnostic status, ROS-free (``to_array`` makes the message)."""

    name: str
    hardware_id: str
    level: int
    message: str
    values: tuple[tuple[str, str], ...]


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (int, str)):
        return str(value)
    try:
        return json.dumps(value, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(value)


def _count(record: Mapping[str, Any], key: str) -> int:
    value = record.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def key_values(record: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The record's fields as bounded (key, value) strings: the level's counters first, then their breakdowns
    (``BREAKDOWNS``: which callback failed, which input was bad), then the rest in the record's order, a nested
    mapping one level deep (``key.sub``); at most ``MAX_PAIRS``, so a long status record leaves out its last fields,
    never what explains its level."""
    level_keys = [k for k, _ in LEVELS if k in record]
    pairs: list[tuple[str, str]] = [(k, _text(record[k])) for k in level_keys]
    rest = [k for k in BREAKDOWNS if k in record]
    rest += [k for k in record if k not in rest and k not in level_keys and k not in SKIPPED_KEYS]
    for key in rest:
        value = record[key]
        if isinstance(value, Mapping):
            pairs.extend((f"{key}.{sub}", _text(v)) for sub, v in value.items())
        else:
            pairs.append((str(key), _text(value)))
    if len(pairs) > MAX_PAIRS:
        left_out = len(pairs) - (MAX_PAIRS - 1)
        pairs = pairs[:MAX_PAIRS - 1] + [("left_out", f"{left_out} more values (the node's JSON record has them)")]
    return tuple((_bounded(str(k), MAX_KEY_CHARS), _bounded(v, MAX_VALUE_CHARS)) for k, v in pairs)


def node_status(name: str, hardware_id: str, record: Mapping[str, Any], rising: Iterable[str] = ()) -> NodeStatus:
    """The status of node ``name`` from its health or status record; ``rising``: the ``LEVELS`` counters that rose
    lately (``StatusTracker`` knows which), which set the level."""
    rising = set(rising)
    state = record.get("state")
    state = state if isinstance(state, str) else None
    level = max((lvl for key, lvl in LEVELS if key in rising and _count(record, key)), default=OK)
    level = max(level, STATE_LEVELS.get(state, OK))
    parts = [f"{key} {_count(record, key)}" for key, _ in LEVELS if key in rising and _count(record, key)]
    message = ", ".join(parts) + f" (rising in the last {HOLD_S:g} s)" if parts else "ok"
    if state in STATE_LEVELS:
        message = f"state {state}" if message == "ok" else f"state {state}; {message}"
    elif state is not None and state != "ok":
        message = f"{message}; state {state}"
    return NodeStatus(_bounded(name, 256), _bounded(hardware_id, 256), level, _bounded(message, 256),
                      key_values(record))


class StatusTracker:
    """Which ``LEVELS`` counters of each node rose within ``hold_s``: a node's level reflects what goes wrong now,
    its totals stay in the values. ``now`` is monotonic time [s] (never the ROS clock, which sim time may stop)."""

    def __init__(self, hold_s: float = HOLD_S) -> None:
        self.hold_s = hold_s
        self._seen: dict[tuple[str, str], int] = {}
        self._rose_at: dict[tuple[str, str], float] = {}

    def status(self, name: str, hardware_id: str, record: Mapping[str, Any], now: float | None = None) -> NodeStatus:
        now = time.monotonic() if now is None else now
        rising = []
        for key, _ in LEVELS:
            value = _count(record, key)
            if value > self._seen.get((name, key), 0):
                self._rose_at[(name, key)] = now
            self._seen[(name, key)] = value
            rose = self._rose_at.get((name, key))
            if rose is not None and now - rose < self.hold_s:
                rising.append(key)
        return node_status(name, hardware_id, record, rising)


def merged(record: Mapping[str, Any], other: Mapping[str, Any]) -> dict:
    """``record`` with ``other``'s health counts added (``callback_errors``, ``bad_messages`` and their breakdowns):
    one node's status when two parts of it count apart (a single robot's node and its process's clock)."""
    out = dict(record)
    for key in ("callback_errors", "bad_messages"):
        out[key] = _count(record, key) + _count(other, key)
    for key in ("errors_by_callback", "bad_by_input"):
        mine, theirs = record.get(key), other.get(key)
        if isinstance(theirs, Mapping) and theirs:
            out[key] = {**(mine if isinstance(mine, Mapping) else {}), **theirs}
    return out


def robot_entry(robot) -> Entry:
    """A robot's (``consensus.ros.robot.RobotNode``) entry: its last published ``planner/status`` record (``robot``
    and ``state`` only before the first) with its health's current counts."""
    name = robot.node.get_fully_qualified_name()
    last = getattr(robot, "last_status", None) or {"robot": robot.id, "state": "starting"}
    health = robot.health.record(name)
    hardware = robot.entry.name if getattr(robot, "entry", None) is not None else names.namespace(robot.id)
    return name, hardware, {**last, **health}


def robots_entries(main_node, robots: list, main_health, *, main: bool = True) -> list[Entry]:
    """Every robot's entry and (``main``) the process's main node's (``main_health``: the fleet clock's counts); when
    the main node is a robot's own (one robot per process), its counts join that robot's status (one status a
    node)."""
    entries = []
    main_name = main_node.get_fully_qualified_name()
    main_is_robot = False
    for robot in robots:
        name, hardware, rec = robot_entry(robot)
        if robot.node is main_node:
            main_is_robot = True
            rec = merged(rec, main_health.record(main_name))
        entries.append((name, hardware, rec))
    if main and not main_is_robot:
        entries.insert(0, (main_name, HOST, main_health.record(main_name)))
    return entries


# ------------------------------------------------------------------------------------------------------ ROS side
def to_array(statuses: Iterable[NodeStatus], stamp=None):
    """The ``diagnostic_msgs/DiagnosticArray`` of ``statuses`` (``stamp``: a builtin_interfaces/Time)."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

    msg = DiagnosticArray()
    if stamp is not None:
        msg.header.stamp = stamp
    out = []
    for st in statuses:
        status = DiagnosticStatus(level=bytes([st.level]), name=st.name, message=st.message,
                                  hardware_id=st.hardware_id)
        status.values = [KeyValue(key=k, value=v) for k, v in st.values]
        out.append(status)
    msg.status = out
    return msg


class DiagnosticsPublisher:
    """``node``'s publisher on ``/diagnostics``: ``publish(entries)`` sends one array of the entries' statuses."""

    def __init__(self, node, hold_s: float = HOLD_S) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        from consensus.ros import qos

        self.node = node
        self.tracker = StatusTracker(hold_s)
        self.pub = node.create_publisher(DiagnosticArray, names.DIAGNOSTICS.name, qos.profile(names.DIAGNOSTICS))

    def publish(self, entries: Iterable[Entry]) -> None:
        now = time.monotonic()
        statuses = [self.tracker.status(name, hardware, rec, now) for name, hardware, rec in entries]
        self.pub.publish(to_array(statuses, self.node.get_clock().now().to_msg()))


class RobotsDiagnostics:
    """A robot process's statuses on ``/diagnostics``: its robots in arrays of at most ``per_array`` (the main node's
    status with the first), one array every ``period_s``, so each robot's status goes out once every ``PERIOD_S``
    and no callback holds the executor thread (the fleet clock's) for long (measured: docs/nodes.md, 'Node health
    on /diagnostics', and docs/benchmarks.md, 'Why the code is as it is'). A monitor keeps the newest status of each
    name, whichever array brought it."""

    def __init__(self, main_node, robots: list, main_health, per_array: int = ROBOTS_PER_ARRAY) -> None:
        self.main_node, self.main_health = main_node, main_health
        self.diagnostics = DiagnosticsPublisher(main_node)
        n = len(robots)
        count = max(1, -(-n // max(per_array, 1)))
        self.chunks = [robots[k * n // count:(k + 1) * n // count] for k in range(count)]
        self.period_s = PERIOD_S / count
        self._next = 0

    def publish(self) -> None:
        """The next array (the timer's callback)."""
        k = self._next
        self._next = (k + 1) % len(self.chunks)
        self.diagnostics.publish(robots_entries(self.main_node, self.chunks[k], self.main_health, main=k == 0))
