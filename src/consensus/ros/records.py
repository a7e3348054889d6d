"""The JSON records carried in std_msgs/String, one dataclass each: the publisher builds the record and ``encode``s
it, every receiver ``decode``s it, so a record's fields, their types and their meaning are written once.

* ``decode`` refuses what is not the record (not JSON, not an object, a field of the wrong type, a required field
  missing) with ``RecordError`` (a ``ValueError``): a receiver counts it as a bad message
  (``consensus.ros.health.Health.count_bad_message``, or ``guarded_record``).
* Fields a record does not name (a scenario's additions, e.g. a disaster drone's ``phase`` in its status, or a
  node's extra health fields) are kept in ``extra`` and encoded next to the named ones, so the JSON on the wire is
  what it was before these classes (bags, readers and ``plans.jsonl`` unchanged).
* A field whose metadata says ``optional`` is left out of the JSON when it is None (a robot's ``collision`` without
  avoidance, ``llm`` without an LLM client); the other fields are always there.
* The schema tables of docs/nodes.md are ``schema_table(cls)`` (tests/unit/ros/test_records.py compares them).

No ROS import: the records are plain data (a bag reader or a headless tool may use them too).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from consensus import names


class RecordError(ValueError):
    """A message that is not the record it should be (a bad message for its receiver)."""


def doc(meaning: str, default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING,
        optional: bool = False):
    """A record field with its documented meaning (the schema table's); ``optional``: left out of the JSON when
    None."""
    return field(default=default, default_factory=factory, metadata={"doc": meaning, "optional": optional})


@dataclass(frozen=True)
class _Field:
    name: str
    type: Any
    required: bool
    optional: bool
    doc: str
    check: Any            # value -> bool: is it of the field's type (``_checker``)


@dataclass(kw_only=True)
class Record:
    """A JSON record on a String topic (``TOPIC``)."""

    TOPIC: ClassVar[names.Topic]

    extra: dict = field(default_factory=dict, repr=False, compare=True,
                        metadata={"doc": "fields the record does not name, kept as they came"})

    @classmethod
    def from_dict(cls, data: Any):
        """The record of a decoded JSON object (``RecordError`` when it is not one)."""
        if not isinstance(data, Mapping):
            raise RecordError(f"{cls.TOPIC.name}: a JSON object expected, got {type(data).__name__}")
        values, extra = {}, {}
        fields = _fields(cls)
        known = _names(cls)
        for f in fields:
            if f.name in data:
                value = data[f.name]
                if not f.check(value):
                    raise RecordError(f"{cls.TOPIC.name}: {f.name} is {_short(value)}, not {type_name(f.type)}")
                values[f.name] = value
            elif f.required:
                raise RecordError(f"{cls.TOPIC.name}: no {f.name}")
        for key, value in data.items():
            if key not in known:
                extra[str(key)] = value
        return cls(**values, extra=extra)

    @classmethod
    def decode(cls, data: str | bytes):
        """The record in a message's JSON text (``RecordError`` when it is not one)."""
        try:
            parsed = json.loads(data)
        except (ValueError, TypeError) as exc:
            raise RecordError(f"{cls.TOPIC.name}: not JSON ({exc})") from None
        return cls.from_dict(parsed)

    def to_dict(self) -> dict:
        """The JSON object: the named fields (an ``optional`` one only when not None), then ``extra``."""
        out = {}
        for f in _fields(type(self)):
            value = getattr(self, f.name)
            if not (f.optional and value is None):
                out[f.name] = value
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    def encode(self) -> str:
        """The message's JSON text."""
        return json.dumps(self.to_dict())


@functools.cache
def _names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in _fields(cls))


@functools.cache
def _fields(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    return tuple(_Field(f.name, hints[f.name],
                        f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                        bool(f.metadata.get("optional")), f.metadata.get("doc", ""), _checker(hints[f.name]))
                 for f in dataclasses.fields(cls) if f.name != "extra")


def _is(value: Any, tp: Any) -> bool:
    """Is the decoded JSON ``value`` of the field type ``tp`` (int, float, str, bool, Any, dict, list[T],
    dict[str, T], T | None)?"""
    return _checker(tp)(value)


@functools.cache
def _checker(tp: Any):
    """The check of one field type, built once (a record is checked at every publish and receipt)."""
    if tp is Any:
        return lambda v: True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        checks = tuple(_checker(arg) for arg in typing.get_args(tp))
        return lambda v: any(check(v) for check in checks)
    if tp is type(None):
        return lambda v: v is None
    if tp is bool:
        return lambda v: v is True or v is False
    if tp is int:
        return lambda v: type(v) is int or (isinstance(v, int) and not isinstance(v, bool))
    if tp is float:
        return lambda v: type(v) is float or (isinstance(v, (int, float)) and not isinstance(v, bool))
    if tp is str:
        return lambda v: isinstance(v, str)
    if tp is dict:
        return lambda v: isinstance(v, dict)
    if origin is list:
        item = _checker(typing.get_args(tp)[0])
        return lambda v: isinstance(v, list) and all(map(item, v))
    if origin is dict:
        key_tp, item_tp = typing.get_args(tp)
        key, item = _checker(key_tp), _checker(item_tp)
        return lambda v: isinstance(v, dict) and all(key(k) and item(x) for k, x in v.items())
    raise TypeError(f"record field type {tp!r} is not supported")


def type_name(tp: Any) -> str:
    """A field type as the schema tables write it: ``int``, ``[float]``, ``{str: int}``, ``object``, ``... or null``."""
    if tp is Any:
        return "any"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if tp is dict:
        return "object"
    if origin is list:
        return f"[{type_name(typing.get_args(tp)[0])}]"
    if origin is dict:
        key, item = typing.get_args(tp)
        return f"{{{type_name(key)}: {type_name(item)}}}"
    return tp.__name__


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def schema_table(cls: type) -> str:
    """The Markdown table of a record's fields (docs/nodes.md holds one per record, checked by the tests)."""
    lines = ["| key | type | meaning |", "|---|---|---|"]
    for f in _fields(cls):
        note = " (required)" if f.required else (" (left out when null)" if f.optional else "")
        lines.append(f"| `{f.name}` | {type_name(f.type)} | {f.doc}{note} |")
    lines.append("| ... | | other fields of the node or scenario (kept as they are) |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------- the records
@dataclass(kw_only=True)
class HealthRecord(Record):
    """``health`` (``/health`` for the root namespace's nodes): a node's counters, every second
    (``consensus.ros.health.publish_health``)."""

    TOPIC: ClassVar[names.Topic] = names.HEALTH

    node: str = doc("the node's fully-qualified name")
    callback_errors: int = doc("exceptions its callbacks raised (caught, logged, counted)", 0)
    bad_messages: int = doc("inputs (or parts of one) it dropped or repaired", 0)
    errors_by_callback: dict[str, int] = doc("callback_errors by callback name", factory=dict)
    bad_by_input: dict[str, int] = doc("bad_messages by input name", factory=dict)


@dataclass(kw_only=True)
class StatusRecord(Record):
    """``planner/status``: a robot's state and counters, once a planning slot (``consensus.ros.robot.RobotNode``;
    a scenario's robot adds its own fields)."""

    TOPIC: ClassVar[names.Topic] = names.PLANNER_STATUS

    robot: int = doc("the robot's index")
    round: int = doc("planning rounds completed", 0)
    state: str = doc('"ok", "waiting" (no pose yet), "degraded" (LLM retrying or down), "stopped" (stale inputs), '
                     '"pose_suspect" (its own pose cannot be trusted: it holds still), "blocked" (no free slot: it '
                     'holds) or "estopped"', "ok")
    llm_calls: int = doc("LLM requests made", 0)
    llm_fallbacks: int = doc("rounds planned without a usable LLM reply", 0)
    clamped: int = doc("meeting points clamped into the workspace", 0)
    overruns: int = doc("planning slots skipped while the previous plan still ran", 0)
    news_waits: int = doc("planning slots that waited for its neighbours' new meeting points (news_wait_s)", 0)
    planner_errors: int = doc("rounds whose planner raised", 0)
    stale_stops: int = doc("stops for stale odometry or plans", 0)
    estops: int = doc("e-stop engagements", 0)
    deadlocks: int = doc("deadlocks detected and escaped", 0)
    census_fallbacks: int = doc("packing slots solved on the robots in reach, for want of a fresh census", 0)
    pose_suspect_stops: int = doc("control ticks held because its own pose could not be trusted", 0)
    odom_creeps: int = doc("times its odometry crept against the commands it sent", 0)
    slots_blocked: int = doc("packing slots given up after bounded deadlock escapes", 0)
    blocked: int = doc("holds entered for want of a free slot", 0)
    suggestions: int = doc("operator's meeting points applied (RobotCore.suggest; planning held suggestion_hold_s)", 0)
    suggestions_refused: int = doc("operator's meeting points refused (outside the geofence, not finite, ...)", 0)
    rounds_dropped: int = doc("planning rounds in flight when an operator's meeting point came, dropped", 0)
    estopped: bool = doc("the e-stop holds the robot now", False)
    meeting_point: list[float] | None = doc("its meeting point (its planner's output)", None)
    goal: list[float] | None = doc("where the controller drives (the meeting point or the robot's slot)", None)
    agreed: bool = doc("every meeting point heard this round is within packing_gap_m of its own", False)
    slot: int | None = doc("its slot around the shared meeting point", None)
    implausible: dict[str, int] = doc("positions refused by the plausibility checks, by kind", factory=dict)
    suspects: list[int] = doc("robots whose positions are suspect now", factory=list)
    collision: dict | None = doc("the collision filter's distances and counters", None, optional=True)
    callback_errors: int = doc("exceptions of its ticks (caught, logged, counted)", 0)
    bad_messages: int = doc("inputs it dropped", 0)
    control: dict = doc("control timing (ticks, on time, publish delays; a fleet's clock figures)", factory=dict)
    llm: dict | None = doc("the LLM client's state and counters", None, optional=True)


@dataclass(kw_only=True)
class ReasoningRecord(Record):
    """``planner/reasoning``: one record per planning round of a robot (``RobotCore.collect``); the recorder keeps
    them in ``plans.jsonl`` as they came."""

    TOPIC: ClassVar[names.Topic] = names.PLANNER_REASONING

    robot: int = doc("the robot's index")
    round: int = doc("the planning round")
    stamp: float = doc("when the round was applied [s, ROS clock]", 0.0)
    target: list[float] | None = doc("the new meeting point, after geofence clamping", None)
    reasoning: str = doc("the planner's reasoning (at most 500 characters)", "")
    fallback: bool = doc("planned without a usable LLM reply", False)
    fallback_reason: str = doc("why (empty without a fallback)", "")
    clamped: bool = doc("the meeting point was clamped into the workspace", False)
    llm_calls: int = doc("LLM requests of this round", 0)
    agreed: bool = doc("every meeting point heard is within packing_gap_m of its own", False)


@dataclass(kw_only=True)
class GraphRecord(Record):
    """``/topology/graph`` (latched): the communication graph, at start and after each change
    (``consensus.graphs.topology.Graph.to_dict``)."""

    TOPIC: ClassVar[names.Topic] = names.TOPOLOGY_GRAPH

    adjacency: list[list[float]] = doc("row i: whom robot i hears (0/1)")
    name: str = doc("the topology's name (ring, complete, ...)", "")
    n: int = doc("the number of robots", 0)
    directed: bool = doc("the graph is directed", False)
    edges: list[list[int]] = doc("[i, j]: i hears j", factory=list)


RECORDS: tuple[type[Record], ...] = (HealthRecord, StatusRecord, ReasoningRecord, GraphRecord)
