"""The scenario protocols (disaster, naming game): their topics, named in each scenario's ``ros/protocol`` module
(``TOPICS``) by the rules of the kernel's table ``consensus.names`` (one name per topic across the kernel and every
scenario, a known QoS class, absolute where namespaces meet); their records as dataclasses on
``consensus.ros.records.Record``: what the publishers send keeps its JSON, what is not the record is one
``RecordError`` counted as a bad message by the node that got it, and the schema tables of docs/disaster.md and
docs/naming-game.md are the generated ones."""
from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

import consensus.scenarios
from consensus import names
from consensus.ros.records import RecordError, schema_table
from consensus.scenarios.disaster.ros import protocol as disaster
from consensus.scenarios.naming_game.ros import protocol as naming

ROOT = Path(__file__).resolve().parents[2]


def _protocols() -> dict[str, ModuleType]:
    """Every scenario's ``ros/protocol`` module, by scenario (a scenario without one has no protocol topics)."""
    found = {}
    for info in pkgutil.iter_modules(consensus.scenarios.__path__):
        name = f"consensus.scenarios.{info.name}.ros.protocol"
        if info.ispkg and importlib.util.find_spec(f"consensus.scenarios.{info.name}.ros") is not None \
                and importlib.util.find_spec(name) is not None:
            found[info.name] = importlib.import_module(name)
    return found


PROTOCOLS = _protocols()
SCENARIO_TOPICS = tuple(t for module in PROTOCOLS.values() for t in module.TOPICS)


def test_every_scenario_s_protocol_topics_are_its_topics_list_and_follow_the_table_s_rules():
    assert {"disaster": disaster, "naming_game": naming}.items() <= PROTOCOLS.items()
    for scenario, module in PROTOCOLS.items():
        # every Topic the module names is in its TOPICS, once, and is a names.Topic of a known QoS class
        assert {v for v in vars(module).values() if isinstance(v, names.Topic)} == set(module.TOPICS), scenario
        assert len(set(module.TOPICS)) == len(module.TOPICS), scenario
        for topic in module.TOPICS:
            assert isinstance(topic, names.Topic) and topic.qos in names.QOS_CLASSES, topic
            assert topic.depth is None or topic.depth > 0, topic
            assert re.fullmatch(r"/?[a-z_][a-z0-9_]*(/[a-z_][a-z0-9_]*)*", topic.name), topic
    # one name per topic across the kernel's table and every scenario's protocol
    every = [t.name for t in (*names.ROBOT_TOPICS, *names.FLEET_TOPICS, *SCENARIO_TOPICS)]
    assert len(every) == len(set(every)), sorted(n for n in set(every) if every.count(n) > 1)


def test_every_scenario_topic_has_a_profile_that_publisher_and_subscriber_share():
    rclpy_qos = pytest.importorskip("rclpy.qos")
    from consensus.ros import qos

    for topic in SCENARIO_TOPICS:
        assert isinstance(qos.profile(topic), rclpy_qos.QoSProfile), topic
    kept = qos.profile(naming.NAMING_GAME_WORDS)            # a protocol's kept records: latched, deeper history
    assert (kept.depth, kept.durability) == (50, rclpy_qos.DurabilityPolicy.TRANSIENT_LOCAL)
    assert qos.profile(disaster.DISASTER_STATE).depth == 10


def test_the_scenario_protocols_topics_are_absolute_where_namespaces_meet():
    absolute = {t.name for t in SCENARIO_TOPICS if t.name.startswith("/")}
    assert absolute == {"/disaster/state", "/disaster/discussion", "/disaster/decisions", "/disaster/votes",
                        "/disaster/collective", "/disaster/aggregator/status", "/naming_game/pairs",
                        "/naming_game/words", "/naming_game/outcomes", "/naming_game/status"}
    assert disaster.DISASTER_VOTE_REQUEST.of(2).endswith("robot_2/disaster/vote_request")
    # a run launched in a namespace (namespace:=fleet_a) keeps its shared channels to itself: its root nodes and its
    # robots (in /fleet_a/robot_<i>) meet under /fleet_a; in the root namespace the names are as they are
    for ns in ("/fleet_a", "/fleet_a/robot_3", "/fleet_a/"):
        assert disaster.DISASTER_STATE.in_run(ns) == "/fleet_a/disaster/state"
    assert disaster.DISASTER_STATE.in_run("/") == disaster.DISASTER_STATE.in_run("/robot_0") == "/disaster/state"
    assert naming.NAMING_GAME_PAIRS.in_run("/a/b/robot_12") == "/a/b/naming_game/pairs"
    assert disaster.DISASTER_VOTE_REQUEST.in_run("/fleet_a/robot_3") == "disaster/vote_request"   # relative: as is


def test_every_record_is_on_a_topic_of_its_scenario_s_protocol():
    for records, topics in ((disaster.RECORDS, disaster.TOPICS), (naming.RECORDS, naming.TOPICS)):
        assert {cls.TOPIC for cls in records} <= set(topics)
        assert all(cls.TOPIC.type == "std_msgs/msg/String" for cls in records)


def test_a_round_clock_state_keeps_its_json():
    from consensus.scenarios.disaster.config import load_disaster_config
    from consensus.scenarios.disaster.environment import DisasterEnv
    from consensus.scenarios.disaster.round_clock import RoundClock

    cfg = load_disaster_config(None, num_robots=3, rounds=2, seed=5).resolved()
    clock = RoundClock(cfg, 0.0, parse_reply=lambda d: d)
    obs = DisasterEnv(cfg.env_config(), seed=5).begin_round()
    clock.begin_round(1.0, obs, [(0, 0), (1, 1), (2, 2)])
    wire = json.loads(json.dumps(clock.state))
    rec = disaster.StateRecord.decode(json.dumps(wire))
    assert (rec.phase, rec.round, rec.cells) == (clock.state["phase"], 0, [[0, 0], [1, 1], [2, 2]])
    assert json.loads(rec.encode()) == wire and rec.extra == {}


def test_a_drone_s_records_and_a_game_s_records_keep_their_json():
    wire = {"round": 2, "turn": 1, "drone": 0, "message": "to [1, 2]", "reply": {"action": [1, 2]}, "stamp": 3.5}
    assert json.loads(disaster.DiscussionRecord.decode(json.dumps(wire)).encode()) == wire
    vote = {"round": 1, "id": 7, "agent": 2, "turn": 0, "action": None, "reply": {"fallback": True}, "stamp": 1.0}
    assert disaster.VoteRecord.decode(json.dumps(vote)).to_dict() == vote
    outcome = {"interaction": 4, "round": 1, "i": 0, "j": 3, "word_i": None, "word_j": None, "success": False,
               "skipped": True, "missing": [3], "stamp": 2.0}
    rec = naming.parse_outcome(json.dumps(outcome), 4)
    assert rec.skipped and rec.missing == [3] and json.loads(rec.encode()) == outcome


@pytest.mark.parametrize("cls, data, why", [
    (disaster.StateRecord, '{"round": 0, "phase": "discuss"}', "no seq"),
    (disaster.StateRecord, '{"seq": 1, "round": 0, "phase": "discuss", "cells": [[0, 0.5]]}', "cells is"),
    (disaster.DiscussionRecord, '{"round": 0, "turn": 0, "drone": "0", "reply": {}}', 'drone is "0", not int'),
    (disaster.DecisionRecord, '{"round": 0, "drone": 1}', "no reply"),
    (disaster.VoteRequestRecord, '{"round": 0, "id": 1, "agent": 0, "turn": 0, "context": []}', "not object"),
    (disaster.VoteRecord, '{"id": 1}', "no round"),
    (disaster.CollectiveRecord, '{"round": 0, "votes": {"0": []}}', "votes is"),
    (disaster.MetricsRecord, "not json", "not JSON"),
    (naming.WordRecord, '{"interaction": 0, "robot": 1, "word": true}', "word is true, not int"),
    (naming.PairRecord, '[0, 1]', "a JSON object expected"),
])
def test_what_is_not_the_record_is_one_record_error(cls, data, why):
    with pytest.raises(RecordError, match=re.escape(why)):
        cls.decode(data)


@pytest.mark.parametrize("parse, data", [
    (naming.parse_word, '{"interaction": 0, "robot": 9, "word": 1}'),                 # no robot 9 in a fleet of 4
    (naming.parse_word, '{"interaction": 0, "robot": 1, "word": 2}'),
    (naming.parse_pair, '{"interaction": 0, "round": 1, "i": 2, "j": 2, "played_i": 0, "played_j": 0, '
                        '"deadline": 1}'),
    (naming.parse_outcome, '{"interaction": 0, "round": 1, "i": 0, "j": 1, "word_i": null, "word_j": 1, '
                           '"skipped": false}'),
])
def test_a_game_record_out_of_range_is_refused(parse, data):
    with pytest.raises(ValueError):
        parse(data, 4)


@pytest.mark.ros
def test_the_grid_counts_a_record_that_does_not_decode_as_a_bad_message(ros):
    from std_msgs.msg import String

    from consensus.ros.health import Health
    from consensus.scenarios.disaster.ros.grid import DisasterGrid

    got = []
    clock = SimpleNamespace(on_discussion=got.append, on_decision=got.append, on_collective=got.append)
    logger = SimpleNamespace(warning=lambda _text: None)
    grid = SimpleNamespace(health=Health(), n=2, status={}, node_health={}, aggregator_status=None, clock=clock,
                           node=SimpleNamespace(get_fully_qualified_name=lambda: "/disaster_grid",
                                                get_logger=lambda: logger))
    grid._decoded = lambda cls, msg, what: DisasterGrid._decoded(grid, cls, msg, what)
    DisasterGrid._on_discussion(grid, String(data='{"round": 0, "turn": 0, "drone": 1, "reply": {}}'))
    DisasterGrid._on_discussion(grid, String(data='{"round": 0, "turn": 0, "drone": 1}'))
    DisasterGrid._on_decision(grid, String(data="{"))
    DisasterGrid._on_collective(grid, String(data='{"round": 0, "decision": [1, 2], "votes": []}'))
    DisasterGrid._on_status(grid, String(data='{"robot": 1, "drone": 1, "phase": "discuss"}'))
    DisasterGrid._on_status(grid, String(data='{"robot": 1, "drone": 5}'))                    # no drone 5
    DisasterGrid._on_health(grid, String(data='{"node": "/aggregator", "bad_messages": 2}'))
    DisasterGrid._on_health(grid, String(data='{"node": 3}'))
    DisasterGrid._on_aggregator(grid, String(data='{"state": "idle", "round": -1}'))
    assert [r["drone"] if "drone" in r else r["decision"] for r in got] == [1, [1, 2]]
    assert grid.status[1]["phase"] == "discuss" and grid.node_health["/aggregator"]["bad_messages"] == 2
    assert grid.aggregator_status["state"] == "idle"
    assert grid.health.bad_by_input == {"grid.discussion": 1, "grid.decision": 1, "grid.status": 1,
                                        "grid.health": 1}


@pytest.mark.ros
def test_the_aggregator_counts_a_vote_that_does_not_decode(ros):
    import threading

    from std_msgs.msg import String

    from consensus.ros.health import Health
    from consensus.scenarios.disaster.ros.aggregator import Aggregator

    event, box = threading.Event(), []
    logger = SimpleNamespace(warning=lambda _text: None)
    agg = SimpleNamespace(health=Health(), _lock=threading.Lock(), _waiting={7: (event, box)},
                          counters={"late_votes": 0}, node=SimpleNamespace(get_logger=lambda: logger))
    Aggregator._on_vote(agg, String(data='{"id": 7}'))                                       # no round, agent, turn
    Aggregator._on_vote(agg, String(data='{"round": 0, "id": 7, "agent": 1, "turn": 0, "reply": {"action": [1, 1]}}'))
    Aggregator._on_vote(agg, String(data='{"round": 0, "id": 8, "agent": 1, "turn": 0}'))     # after its timeout
    assert event.is_set() and box == [{"action": [1, 1]}] and agg.counters["late_votes"] == 1
    assert agg.health.bad_by_input == {"aggregator.votes": 1}


@pytest.mark.parametrize("doc, records", [("disaster.md", disaster.RECORDS), ("naming-game.md", naming.RECORDS)])
def test_the_docs_schema_tables_are_the_generated_ones(doc, records):
    text = (ROOT / "docs" / doc).read_text()
    found = dict(re.findall(r"<!-- schema: (\w+) -->\n(.*?)\n<!-- end schema -->", text, flags=re.S))
    assert set(found) == {cls.__name__ for cls in records}
    for cls in records:
        assert found[cls.__name__] == schema_table(cls), f"docs/{doc}: regenerate the table of {cls.__name__}"
