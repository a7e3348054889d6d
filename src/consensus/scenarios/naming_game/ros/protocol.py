"""Paper 4's naming game played by a fleet of ROS 2 robots: the protocol between the matchmaker and the robots (the
main module of this package; the nodes are ``robot`` and ``matchmaker``).

Two words, two rendezvous points: word 0 is point A and word 1 is point B (``rendezvous``). The game's parts and the
reference sequence are ``consensus.scenarios.naming_game.fleet_game``. The words are chosen where the paper chooses
them, in the agents:

* every robot (``ros/robot.py``, executable ``naming_robot``; node ``/robot_<i>/agent``, or the whole fleet in one
  process ``/fleet``) holds its own memory and its own seeded generator (``fleet_game.Player``). When it is named in a
  pair it draws its word from q[its memory state]. When the outcome comes it shifts its memory and drives, with the
  kernel's ``RobotAgent`` controller, to the point of the word it said;
* the ``matchmaker`` (``ros/matchmaker.py``, executable ``naming_matchmaker``, root namespace) owns the pair
  schedule (``fleet_game.PairSchedule``) and the convergence tally (``fleet_game.Tally``). It announces one pair every
  ``interaction_period_s``, collects both words, publishes the outcome, and ends the run.

Topics (absolute; every record is a ``std_msgs/String`` holding one JSON object; ``stamp`` = the sender's node-clock
time in seconds):

==========================  ===========================  =============================================================
topic                       from -> to                   JSON
==========================  ===========================  =============================================================
``/naming_game/pairs``      matchmaker -> robots         ``{"interaction": k, "round": t, "i": int, "j": int,
                            (``GAME_QOS``)               "played_i": int, "played_j": int, "deadline": float,
                                                         "stamp": float}``
``/naming_game/words``      robot -> matchmaker          ``{"interaction": k, "robot": int, "word": 0|1,
                            (``GAME_QOS``)               "state": memory key before the interaction, "stamp": float}``
``/naming_game/outcomes``   matchmaker -> robots         ``{"interaction": k, "round": t, "i": int, "j": int,
                            (``GAME_QOS``)               "word_i": 0|1|null, "word_j": 0|1|null, "success": bool,
                                                         "skipped": bool, "missing": [robot, ...], "stamp": float}``
``/naming_game/status``     matchmaker -> all, every     ``{"phase": "waiting"|"playing"|"arriving"|"done",
                            ``STATUS_PERIOD_S``          "round": t, "interactions": int, "played": int,
                            (``qos.EVENTS``)             "skipped": int, "successes": int, "converged": bool,
                                                         "word": -1|0|1, "stamp": float}``
==========================  ===========================  =============================================================

``k`` counts the announced interactions from 0, and ``t`` = k // N + 1 is the population round. ``played_i`` is the
number of interactions robot i has played before k (the outcomes it must have applied first). A robot named in a
pair answers once, when it has applied that many outcomes: pairs and outcomes are two topics, so an outcome may
arrive after the next pair. ``deadline`` is when the matchmaker stops waiting (``answer_timeout_s`` after the
announcement). Then the interaction is skipped (``"skipped": true``, ``missing`` = the robots that did not answer,
each counted in the summary's ``timeouts``), nobody's memory changes, and the next pair follows. ``GAME_QOS`` is
reliable and transient local, so an endpoint matched late still gets the records of the last ``GAME_DEPTH``
interactions, and every side ignores what it has seen before.

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

Health: a record that is not JSON, lacks a field or has a wrong type or an out-of-range value is dropped and counted
(``bad_messages``) by the node that got it. The same holds for a word from a robot that is not in the pair, a second,
different word, and an outcome that contradicts what the robot said. An exception of any other kind in a callback
is counted in ``callback_errors`` (``consensus.ros.params.guarded``).
"""
from __future__ import annotations

import json
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from consensus.ros.params import declare_config
from consensus.scenarios.naming_game.fleet_game import RobotsGameConfig

PAIRS = "/naming_game/pairs"
WORDS = "/naming_game/words"
OUTCOMES = "/naming_game/outcomes"
STATUS = "/naming_game/status"
GAME_DEPTH = 50
GAME_QOS = QoSProfile(depth=GAME_DEPTH, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)
STATUS_PERIOD_S = 1.0


def declare_game_config(node: Node, runtime: tuple[str, ...] = ()) -> RobotsGameConfig:
    """Every field of the demo's config (``fleet_game.RobotsGameConfig``) declared on ``node`` (``runtime``: the ones
    the node applies when they change; the rest read-only); the validated config."""
    return declare_config(node, RobotsGameConfig, runtime)


# ------------------------------------------------------------------------------------------------------ wire format
def dumps(record: dict) -> String:
    return String(data=json.dumps(record))


def _int(rec: dict, key: str, lo: int, hi: int | None = None) -> int:
    v = rec[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        raise ValueError(f"'{key}' must be an integer in [{lo}, {hi if hi is not None else 'inf'}] (got {v!r})")
    return v


def _word(rec: dict, key: str, allow_null: bool = False) -> int | None:
    v = rec[key]
    if v is None and allow_null:
        return None
    if isinstance(v, bool) or v not in (0, 1):
        raise ValueError(f"'{key}' must be 0 or 1 (got {v!r})")
    return int(v)


def _number(rec: dict, key: str) -> float:
    v = rec[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"'{key}' must be a number (got {v!r})")
    return float(v)


def _object(data: str) -> dict:
    rec = json.loads(data)
    if not isinstance(rec, dict):
        raise ValueError("a record must be a JSON object")
    return rec


def _pair_fields(rec: dict, n: int) -> dict[str, Any]:
    out = {"interaction": _int(rec, "interaction", 0), "round": _int(rec, "round", 1), "i": _int(rec, "i", 0, n - 1),
           "j": _int(rec, "j", 0, n - 1)}
    if out["i"] == out["j"]:
        raise ValueError(f"a robot cannot meet itself (i = j = {out['i']})")
    return out


def parse_pair(data: str, n: int) -> dict:
    """A ``/naming_game/pairs`` record of a fleet of ``n`` (ValueError, TypeError, KeyError when malformed)."""
    rec = _object(data)
    out = _pair_fields(rec, n)
    out.update(played_i=_int(rec, "played_i", 0), played_j=_int(rec, "played_j", 0),
               deadline=_number(rec, "deadline"))
    return out


def parse_word(data: str, n: int) -> dict:
    """A ``/naming_game/words`` record."""
    rec = _object(data)
    state = rec.get("state", "")
    if not isinstance(state, str):
        raise ValueError(f"'state' must be a string (got {state!r})")
    return {"interaction": _int(rec, "interaction", 0), "robot": _int(rec, "robot", 0, n - 1),
            "word": _word(rec, "word"), "state": state}


def parse_outcome(data: str, n: int) -> dict:
    """A ``/naming_game/outcomes`` record: words null only for a skipped interaction."""
    rec = _object(data)
    out = _pair_fields(rec, n)
    skipped = rec["skipped"]
    if not isinstance(skipped, bool):
        raise ValueError(f"'skipped' must be true or false (got {skipped!r})")
    out.update(skipped=skipped, word_i=_word(rec, "word_i", allow_null=skipped),
               word_j=_word(rec, "word_j", allow_null=skipped))
    return out
