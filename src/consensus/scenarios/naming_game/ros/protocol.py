"""Paper 4's naming game played by a fleet of ROS 2 robots: the protocol between the matchmaker and the robots (the
main module of this package; the nodes are ``robot`` and ``matchmaker``).

Two words, two rendezvous points: word 0 is point A and word 1 is point B (``rendezvous``). The game's parts and the
reference sequence are ``consensus.scenarios.naming_game.fleet_game``. The words are chosen where the paper chooses
them, in the agents:

* every robot (``ros/robot.py``, executable ``naming_robot``; node ``/robot_<i>/agent``, or the whole fleet in one
  process ``/fleet``) holds its own memory and its own seeded generator (``fleet_game.Player``). When it is named in a
  pair it draws its word from q[its memory state]. When the outcome comes it shifts its memory and drives, with the
  kernel's ``RobotNode`` controller, to the point of the word it said;
* the ``matchmaker`` (``ros/matchmaker.py``, executable ``naming_matchmaker``, root namespace) owns the pair
  schedule (``fleet_game.PairSchedule``) and the convergence tally (``fleet_game.Tally``). It announces one pair every
  ``interaction_period_s``, collects both words, publishes the outcome, and ends the run.

Topics (``TOPICS`` below, absolute: the robots live in ``/robot_<i>``, the matchmaker in the
root namespace). Every record is a ``std_msgs/String`` holding one JSON object, one dataclass each below (built on
``consensus.ros.records.Record``, encoded by its publisher and decoded by its receivers; the schema tables in
docs/naming-game.md are generated from them); ``stamp`` = the sender's node-clock time in seconds:

==========================  ===========================  =============================================================
topic                       from -> to                   record
==========================  ===========================  =============================================================
``/naming_game/pairs``      matchmaker -> robots (kept)  ``PairRecord``: the pair of interaction k
``/naming_game/words``      robot -> matchmaker (kept)   ``WordRecord``: a robot's word (``state`` = its memory key
                                                         before the interaction)
``/naming_game/outcomes``   matchmaker -> robots (kept)  ``OutcomeRecord``: both words, or the interaction skipped
``/naming_game/status``     matchmaker -> all, every     ``GameStatusRecord``: the game's phase and tally
                            ``STATUS_PERIOD_S``
==========================  ===========================  =============================================================

``k`` counts the announced interactions from 0, and ``t`` = k // N + 1 is the population round. ``played_i`` is the
number of interactions robot i has played before k (the outcomes it must have applied first). A robot named in a
pair answers once, when it has applied that many outcomes: pairs and outcomes are two topics, so an outcome may
arrive after the next pair. ``deadline`` is when the matchmaker stops waiting (``answer_timeout_s`` after the
announcement). Then the interaction is skipped (``"skipped": true``, ``missing`` = the robots that did not answer,
each counted in the summary's ``timeouts``), nobody's memory changes, and the next pair follows. The kept topics
(QoS class ``latched`` with depth ``GAME_DEPTH``: reliable and transient local) give an endpoint matched late the
records of the last ``GAME_DEPTH`` interactions, and every side ignores what it has seen before.

Each robot also publishes its ``planner/status`` (``consensus.ros.robot``'s record plus ``"memory"``, ``"word"``,
``"played"``, ``"draws"``, ``"target"``, ``"position"``, ``"pending"``). The matchmaker starts the game when every
robot reports a position. After the game it waits until every robot is within ``arrival_tolerance_m`` of its point
(at most ``arrival_timeout_s``). The matchmaker's records also serve the robots as the game clock: a robot that hears
nothing from the matchmaker for ``target_timeout_s`` stops, like a robot whose planner has gone quiet.

Run directory (``output_dir``), written by the matchmaker: ``interactions.jsonl`` (one outcome record per interaction
with ``state_i``/``state_j`` and the robots' targets, ``fleet_game.interaction_record``'s fields plus ``skipped``,
``missing`` and ``stamp``) and ``summary.json`` (``fleet_game.game_summary``'s fields plus ``timeouts``,
``bad_messages``, ``callback_errors``, ``reference_match`` and ``first_mismatch`` against ``fleet_game.play_headless``
of the same config, and the robots' final positions and targets).

Health: a record that does not decode (``RecordError``: not JSON, a field missing or of a wrong type) or has an
out-of-range value is dropped and counted
(``bad_messages``) by the node that got it. The same holds for a word from a robot that is not in the pair, a second,
different word, and an outcome that contradicts what the robot said. An exception of any other kind in a callback
is counted in ``callback_errors`` (``consensus.ros.health.guarded``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Iterable

from rclpy.node import Node
from std_msgs.msg import String

from consensus.names import Topic
from consensus.ros.params import declare_config
from consensus.ros.records import Record, doc
from consensus.scenarios.naming_game.fleet_game import RobotsGameConfig

# ----------------------------------------------------------------------------------------------------------- topics
# the robots live in /robot_<i>, the matchmaker in the root namespace, so every channel is absolute; the game's records
# are kept for an endpoint matched late (the last 50 interactions), the matchmaker's status is an event each second
NAMING_GAME_PAIRS = Topic("/naming_game/pairs", "std_msgs/msg/String", "latched", depth=50)        # matchmaker ->
NAMING_GAME_WORDS = Topic("/naming_game/words", "std_msgs/msg/String", "latched", depth=50)        # robot ->
NAMING_GAME_OUTCOMES = Topic("/naming_game/outcomes", "std_msgs/msg/String", "latched", depth=50)  # matchmaker ->
NAMING_GAME_STATUS = Topic("/naming_game/status", "std_msgs/msg/String", "events")                # matchmaker ->
TOPICS = (NAMING_GAME_PAIRS, NAMING_GAME_WORDS, NAMING_GAME_OUTCOMES, NAMING_GAME_STATUS)

GAME_DEPTH = NAMING_GAME_PAIRS.depth     # interactions kept for an endpoint matched late
STATUS_PERIOD_S = 1.0


def declare_game_config(node: Node, runtime: Iterable[str] = (), *, uses: Iterable[str],
                        groups: Iterable[str] = ()) -> RobotsGameConfig:
    """The fields of the demo's config (``fleet_game.RobotsGameConfig``) that ``node`` reads (its module's ``GROUPS``
    and ``USES``) declared on it (``runtime``: the ones the node applies when they change; the rest read-only; the
    other fields still take the run's values: ``consensus.ros.params.declare_config``); the validated config."""
    return declare_config(node, RobotsGameConfig, runtime, uses=uses, groups=groups)


# ---------------------------------------------------------------------------------------------------------- records
@dataclass(kw_only=True)
class PairRecord(Record):
    """``/naming_game/pairs`` (matchmaker -> robots): the pair of an interaction."""

    TOPIC: ClassVar[Topic] = NAMING_GAME_PAIRS

    interaction: int = doc("k, the announced interactions counted from 0")
    round: int = doc("the population round t = k // N + 1")
    i: int = doc("the first robot of the pair")
    j: int = doc("the second robot")
    played_i: int = doc("interactions robot i played before k (the outcomes it must have applied first)")
    played_j: int = doc("the same for robot j")
    deadline: float = doc("when the matchmaker stops waiting for the words [s, its node clock]")
    stamp: float = doc("the matchmaker's node-clock time [s]", 0.0)


@dataclass(kw_only=True)
class WordRecord(Record):
    """``/naming_game/words`` (robot -> matchmaker): the word a robot said in an interaction."""

    TOPIC: ClassVar[Topic] = NAMING_GAME_WORDS

    interaction: int = doc("k")
    robot: int = doc("the robot's index")
    word: int = doc("0 (point A) or 1 (point B)")
    state: str = doc("its memory key before the interaction", "")
    stamp: float = doc("the robot's node-clock time [s]", 0.0)


@dataclass(kw_only=True)
class OutcomeRecord(Record):
    """``/naming_game/outcomes`` (matchmaker -> robots): both words of an interaction, or why it was skipped."""

    TOPIC: ClassVar[Topic] = NAMING_GAME_OUTCOMES

    interaction: int = doc("k")
    round: int = doc("t")
    i: int = doc("the first robot of the pair")
    j: int = doc("the second robot")
    word_i: int | None = doc("robot i's word (null: skipped)")
    word_j: int | None = doc("robot j's word (null: skipped)")
    success: bool = doc("both said the same word", False)
    skipped: bool = doc("a word did not come by the deadline: nobody's memory changes")
    missing: list[int] = doc("the robots that did not answer", factory=list)
    stamp: float = doc("the matchmaker's node-clock time [s]", 0.0)


@dataclass(kw_only=True)
class GameStatusRecord(Record):
    """``/naming_game/status`` (matchmaker -> all, every ``STATUS_PERIOD_S``): the game clock of the robots."""

    TOPIC: ClassVar[Topic] = NAMING_GAME_STATUS

    phase: str = doc('"waiting", "playing", "arriving" or "done"')
    round: int = doc("the population round", 0)
    interactions: int = doc("interactions resolved", 0)
    played: int = doc("interactions played (not skipped)", 0)
    skipped: int = doc("interactions skipped", 0)
    successes: int = doc("interactions whose two words agreed", 0)
    converged: bool = doc("every robot says the same word", False)
    word: int = doc("the word converged on (-1: none yet)", -1)
    stamp: float = doc("the matchmaker's node-clock time [s]", 0.0)


RECORDS: tuple[type[Record], ...] = (PairRecord, WordRecord, OutcomeRecord, GameStatusRecord)


# ------------------------------------------------------------------------------------------------------ wire format
def message(record: Record) -> String:
    """The ``std_msgs/String`` of a record (its ``encode``)."""
    return String(data=record.encode())


def _in_range(name: str, v: int, lo: int, hi: int | None = None) -> int:
    if v < lo or (hi is not None and v > hi):
        raise ValueError(f"'{name}' must be an integer in [{lo}, {hi if hi is not None else 'inf'}] (got {v!r})")
    return v


def _word(name: str, v: int | None, allow_null: bool = False) -> int | None:
    if v is None and allow_null:
        return None
    if v not in (0, 1):
        raise ValueError(f"'{name}' must be 0 or 1 (got {v!r})")
    return v


def _check_pair(rec: PairRecord | OutcomeRecord, n: int) -> None:
    _in_range("interaction", rec.interaction, 0)
    _in_range("round", rec.round, 1)
    _in_range("i", rec.i, 0, n - 1)
    _in_range("j", rec.j, 0, n - 1)
    if rec.i == rec.j:
        raise ValueError(f"a robot cannot meet itself (i = j = {rec.i})")


def parse_pair(data: str, n: int) -> PairRecord:
    """A ``/naming_game/pairs`` record of a fleet of ``n`` (``RecordError`` or ValueError when malformed)."""
    rec = PairRecord.decode(data)
    _check_pair(rec, n)
    _in_range("played_i", rec.played_i, 0)
    _in_range("played_j", rec.played_j, 0)
    return rec


def parse_word(data: str, n: int) -> WordRecord:
    """A ``/naming_game/words`` record."""
    rec = WordRecord.decode(data)
    _in_range("interaction", rec.interaction, 0)
    _in_range("robot", rec.robot, 0, n - 1)
    _word("word", rec.word)
    return rec


def parse_outcome(data: str, n: int) -> OutcomeRecord:
    """A ``/naming_game/outcomes`` record: words null only for a skipped interaction."""
    rec = OutcomeRecord.decode(data)
    _check_pair(rec, n)
    _word("word_i", rec.word_i, allow_null=rec.skipped)
    _word("word_j", rec.word_j, allow_null=rec.skipped)
    return rec
