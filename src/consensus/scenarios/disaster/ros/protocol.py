"""The disaster protocol: its topics (``TOPICS``, named with ``consensus.names.Topic``) and its records, one
dataclass per JSON record of its ``std_msgs/String`` topics, built on ``consensus.ros.records.Record``.

The publisher builds the record and ``encode``s it, every receiver ``decode``s it; a record that does not decode
(``RecordError``, a ``ValueError``) is a counted bad message of the receiver (``Health.count_bad_message``). Fields a
record does not name are kept (``extra``), so the JSON on the wire is what it was before these classes (bags,
``rounds.jsonl`` and the tests read it). What a record's types cannot say (a cell on the grid, a reply's action) is
checked where the record is used (``ros.agent``'s ``cell_or_none``, ``reply_from_dict``). The schema tables of
docs/disaster.md are ``schema_table`` of these classes (tests/scenarios/test_scenario_records.py compares them).

No ROS import: plain data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from consensus.names import Topic
from consensus.ros.records import Record, doc

# ----------------------------------------------------------------------------------------------------------- topics
# A channel that nodes of different namespaces share is absolute: the drones live in /robot_<i>, the grid and the
# aggregator in the root namespace, so the team's shared channels are absolute; each drone's vote requests are inside
# its namespace (``.of(i)``), and the grid's metrics and markers are relative to the grid (a root node:
# /disaster/metrics, /disaster/markers)
DISASTER_STATE = Topic("/disaster/state", "std_msgs/msg/String", "latched", depth=10)   # the round clock, grid -> all
DISASTER_DISCUSSION = Topic("/disaster/discussion", "std_msgs/msg/String", "events")    # drone -> all
DISASTER_DECISIONS = Topic("/disaster/decisions", "std_msgs/msg/String", "events")      # drone -> grid (implicit)
DISASTER_VOTE_REQUEST = Topic("disaster/vote_request", "std_msgs/msg/String", "events")  # aggregator -> drone i
DISASTER_VOTES = Topic("/disaster/votes", "std_msgs/msg/String", "events")              # drone -> aggregator
DISASTER_COLLECTIVE = Topic("/disaster/collective", "std_msgs/msg/String", "events")    # aggregator -> grid
DISASTER_AGGREGATOR_STATUS = Topic("/disaster/aggregator/status", "std_msgs/msg/String", "events")  # each second
DISASTER_METRICS = Topic("disaster/metrics", "std_msgs/msg/String", "events")           # grid: each round's metrics
DISASTER_MARKERS = Topic("disaster/markers", "visualization_msgs/msg/MarkerArray", "events")   # grid: the cells
TOPICS = (DISASTER_STATE, DISASTER_DISCUSSION, DISASTER_DECISIONS, DISASTER_VOTE_REQUEST, DISASTER_VOTES,
          DISASTER_COLLECTIVE, DISASTER_AGGREGATOR_STATUS, DISASTER_METRICS, DISASTER_MARKERS)


# ---------------------------------------------------------------------------------------------------------- records
@dataclass(kw_only=True)
class StateRecord(Record):
    """``/disaster/state`` (grid -> all; kept for late joiners): the round clock, at every phase and every
    ``HEARTBEAT_S`` (``consensus.scenarios.disaster.round_clock.RoundClock.state``)."""

    TOPIC: ClassVar[Topic] = DISASTER_STATE

    seq: int = doc("increases with every phase (a heartbeat re-publishes the same seq)")
    round: int = doc("the round (-1 before round 0)")
    rounds: int = doc("rounds of the run", 0)
    phase: str = doc('"waiting", "discuss", "decide", "flight" or "done"')
    turn: int = doc("the discussion turn (-1 outside discuss)", -1)
    mode: str = doc('"implicit" or "explicit"', "implicit")
    strategy: str = doc('the explicit aggregation strategy ("" in implicit mode)', "")
    deadline_s: float | None = doc("node-clock time by which replies are due [s] (null: none)", None)
    observation: dict | None = doc("the round's ``Observation.to_dict()`` (discuss and decide)", None)
    cells: list[list[int] | None] | None = doc("every drone's cell [x, y] at the round's start (discuss and decide)",
                                               None)
    heard: list[dict] | None = doc("the ``InboxMessage.to_dict()`` list the phase reads (discuss and decide)", None)
    actions: list[Any] | None = doc("flight: every drone's cell [x, y], drone order (its drone refuses one off the "
                                    "grid)", None)
    stamp: float = doc("node-clock time of the phase [s]", 0.0)


@dataclass(kw_only=True)
class DiscussionRecord(Record):
    """``/disaster/discussion`` (drone -> all): a drone's message of one discussion turn."""

    TOPIC: ClassVar[Topic] = DISASTER_DISCUSSION

    round: int = doc("the round")
    turn: int = doc("the discussion turn")
    drone: int = doc("the drone's index")
    message: str = doc("the reply's message text", "")
    reply: dict = doc("``DroneReply.to_dict()``")
    stamp: float = doc("the drone's node-clock time [s]", 0.0)


@dataclass(kw_only=True)
class DecisionRecord(Record):
    """``/disaster/decisions`` (drone -> grid, implicit mode): a drone's own action of the round."""

    TOPIC: ClassVar[Topic] = DISASTER_DECISIONS

    round: int = doc("the round")
    drone: int = doc("the drone's index")
    action: list[int] | None = doc("the cell [x, y] it flies to", None)
    reply: dict = doc("``DroneReply.to_dict()``")
    stamp: float = doc("the drone's node-clock time [s]", 0.0)


@dataclass(kw_only=True)
class VoteRequestRecord(Record):
    """``/robot_<i>/disaster/vote_request`` (aggregator -> drone i, explicit mode): one vote the aggregation asks
    for (``consensus.decision.ProposeContext``)."""

    TOPIC: ClassVar[Topic] = DISASTER_VOTE_REQUEST

    round: int = doc("the round")
    id: int = doc("the request's id (the vote answers it)")
    agent: int = doc("the drone asked")
    turn: int = doc("the voting turn")
    context: dict = doc("the ``ProposeContext`` as JSON (cells as lists, ``ros.agent.context_to_dict``)")


@dataclass(kw_only=True)
class VoteRecord(Record):
    """``/disaster/votes`` (drone -> aggregator): a drone's answer to a vote request."""

    TOPIC: ClassVar[Topic] = DISASTER_VOTES

    round: int = doc("the round")
    id: int = doc("the request's id")
    agent: int = doc("the drone")
    turn: int = doc("the voting turn")
    action: list[int] | None = doc("the proposed cell [x, y] (null for a fallback)", None)
    reply: dict | None = doc("``DroneReply.to_dict()`` (a malformed one becomes a ``bad_message`` fallback reply)",
                             None)
    stamp: float = doc("the drone's node-clock time [s]", 0.0)


@dataclass(kw_only=True)
class CollectiveRecord(Record):
    """``/disaster/collective`` (aggregator -> grid, explicit mode): the aggregation's result of a round."""

    TOPIC: ClassVar[Topic] = DISASTER_COLLECTIVE

    round: int = doc("the round")
    decision: list[int] | None = doc("the collective cell [x, y] (null: none)", None)
    votes: list[list[dict]] = doc("``DroneReply.to_dict()`` of every drone, per voting turn", factory=list)
    coordinator: list[dict] = doc("the spoke & wheel coordinator's replies, one per merge", factory=list)
    aggregation: dict = doc("architecture, decision, turns, agreed, failures, coordinator_failures, fallback, "
                            "proposals (per turn, per drone), coordinator_plans", factory=dict)
    stamp: float = doc("the aggregator's node-clock time [s]", 0.0)


@dataclass(kw_only=True)
class AggregatorStatusRecord(Record):
    """``/disaster/aggregator/status`` (aggregator -> grid, every second)."""

    TOPIC: ClassVar[Topic] = DISASTER_AGGREGATOR_STATUS

    state: str = doc('"idle" or "voting"')
    round: int = doc("the newest round whose vote it started (-1: none)", -1)
    requests: int = doc("vote requests sent", 0)
    replies: int = doc("votes received in time", 0)
    timeouts: int = doc("votes not answered within round_timeout_s", 0)
    late_votes: int = doc("votes received after their timeout", 0)
    callback_errors: int = doc("exceptions of its callbacks (caught, logged, counted)", 0)
    bad_messages: int = doc("inputs it dropped", 0)
    llm: dict | None = doc("the coordinator's LLM client's state and counters", None, optional=True)


@dataclass(kw_only=True)
class MetricsRecord(Record):
    """``/disaster/metrics`` (grid, once a round): the round's outcome (``RoundOutcome.to_dict()``) with the
    round's counters, the cells the drones ended on and the round's ROS record (as in ``rounds.jsonl``)."""

    TOPIC: ClassVar[Topic] = DISASTER_METRICS

    round: int = doc("the round")
    drone_cells: list[list[int]] = doc("every drone's cell the round was scored on", factory=list)
    actions: list[list[int]] | None = doc("the decided cells", None)
    attended: list[int] = doc("indices of the disasters attended", factory=list)
    severity_before: dict[str, float] = doc("severity by disaster index, before the round", factory=dict)
    severity_after: dict[str, float] = doc("severity by disaster index, after it (0: cleared)", factory=dict)
    cleared: list[int] = doc("indices of the disasters cleared this round", factory=list)
    reward_cleared: float = doc("reward for the disasters cleared", 0.0)
    penalty_uncontained: float = doc("penalty for the disasters left", 0.0)
    misallocation_cost: float = doc("cost of drones on no disaster", 0.0)
    net_reward: float = doc("reward - penalties", 0.0)
    metrics: dict = doc("coverage, misallocation_penalty, deviation, active, attended, cleared", factory=dict)
    counters: dict = doc("the round's LLM and fallback counters (``RoundDecision.counters``)", factory=dict)
    cells_end: list[list[int]] = doc("every drone's cell at the round's end", factory=list)
    ros: dict = doc("phase durations, timeouts, positions (``rounds.jsonl``'s ``ros``)", factory=dict)


RECORDS: tuple[type[Record], ...] = (StateRecord, DiscussionRecord, DecisionRecord, VoteRequestRecord, VoteRecord,
                                     CollectiveRecord, AggregatorStatusRecord, MetricsRecord)
