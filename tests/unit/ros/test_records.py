"""The JSON records in std_msgs/String as dataclasses (``consensus.ros.records``): what the publishers send decodes
to the same JSON (the wire is unchanged), what is not the record is refused with one ``RecordError`` and counted as a
bad message by the receiver, and the schema tables in docs/nodes.md are the ones the dataclasses generate."""
from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from consensus.ros.records import (RECORDS, GraphRecord, HealthRecord, ReasoningRecord, RecordError, StatusRecord,
                                   schema_table)

ROOT = Path(__file__).resolve().parents[3]


def test_a_health_record_with_a_node_s_own_fields_keeps_its_json():
    from consensus.ros.health import Health

    health = Health()
    health.count_callback_error("relay.tick")
    health.count_bad_message("relay.state", 3)
    health.extra = lambda: {"suspects": [2], "implausible": {"jump": 1}}
    wire = health.record("/nearby_relay")
    rec = HealthRecord.decode(json.dumps(wire))
    assert (rec.node, rec.callback_errors, rec.bad_messages) == ("/nearby_relay", 1, 3)
    assert rec.errors_by_callback == {"relay.tick": 1} and rec.bad_by_input == {"relay.state": 3}
    assert rec.extra == {"suspects": [2], "implausible": {"jump": 1}}
    assert json.loads(rec.encode()) == wire


@pytest.mark.ros
def test_a_robot_s_status_keeps_its_json_and_a_scenario_s_fields(ros):
    from rclpy.node import Node

    from consensus.ros.robot import RobotNode
    from consensus.scenarios.aggregation.config import load_config
    from consensus.scenarios.aggregation.planners.classical import AveragePlanner

    cfg = load_config(None, num_robots=2, planner="average", llm_backend="openai", seed=3)
    node = Node("agent", namespace="robot_1")
    try:
        robot_node = RobotNode(node, cfg, 1, AveragePlanner(dim=2), None,
                               llm_status=lambda: {"state": "ok", "calls": 0})
        wire = {**robot_node.status(), "phase": "discuss", "cell": [1, 2]}       # a disaster drone adds its own
        rec = StatusRecord.from_dict(wire)
        assert rec.robot == 1 and rec.state == "waiting" and rec.extra == {"phase": "discuss", "cell": [1, 2]}
        assert rec.llm == {"state": "ok", "calls": 0} and isinstance(rec.control, dict)
        assert json.loads(rec.encode()) == wire
        assert StatusRecord.decode(rec.encode()) == rec
    finally:
        node.destroy_node()


def test_a_planning_round_s_record_and_a_graph_keep_their_json():
    from consensus.control.robot_core import Heard, RobotCore
    from consensus.graphs.topology import make_graph
    from consensus.scenarios.aggregation.config import load_config
    from consensus.scenarios.aggregation.planners.classical import AveragePlanner

    cfg = load_config(None, num_robots=3, planner="average", seed=1)
    core = RobotCore(cfg, 2, AveragePlanner(dim=2))
    core.observe(0.5, [1.0, 2.0])
    assert core.plan(0.5, Heard.none(2)) is not None
    wire = core.collect(0.5)
    rec = ReasoningRecord.from_dict(wire)
    assert (rec.robot, rec.round, rec.target) == (2, wire["round"], [1.0, 2.0]) and rec.extra == {}
    assert json.loads(rec.encode()) == wire

    graph = make_graph("ring", 4).to_dict()
    rec = GraphRecord.from_dict(graph)
    assert rec.name == "ring" and rec.n == 4 and len(rec.adjacency) == 4
    assert json.loads(rec.encode()) == graph


def test_optional_fields_are_left_out_when_null_and_the_others_are_always_there():
    rec = StatusRecord.decode('{"robot": 0}')
    out = rec.to_dict()
    assert "llm" not in out and "collision" not in out
    assert out["meeting_point"] is None and out["round"] == 0 and out["state"] == "ok"
    out = StatusRecord(robot=0, collision={"steps": 3}).to_dict()
    assert out["collision"] == {"steps": 3}


@pytest.mark.parametrize("cls, data, why", [
    (HealthRecord, "not json", "not JSON"),
    (HealthRecord, "[1, 2]", "a JSON object expected"),
    (HealthRecord, '{"callback_errors": 1}', "no node"),
    (HealthRecord, '{"node": 7}', "node is 7, not str"),
    (HealthRecord, '{"node": "/x", "bad_messages": true}', "bad_messages is true, not int"),
    (HealthRecord, '{"node": "/x", "errors_by_callback": {"a": "1"}}', "not {str: int}"),
    (StatusRecord, '{"robot": "3"}', 'robot is "3", not int'),
    (StatusRecord, '{"robot": 3.0}', "robot is 3.0, not int"),
    (StatusRecord, '{"robot": 0, "meeting_point": [1, "x"]}', "not [float] or null"),
    (StatusRecord, '{"robot": 0, "control": [1]}', "control is [1], not object"),
    (StatusRecord, b'\xff\xfe', "not JSON"),
    (ReasoningRecord, '{"robot": 0}', "no round"),
    (ReasoningRecord, '{"robot": 0, "round": 1, "reasoning": null}', "reasoning is null, not str"),
    (GraphRecord, '{"name": "ring"}', "no adjacency"),
    (GraphRecord, '{"adjacency": [[0, 1], "x"]}', "not [[float]]"),
])
def test_what_is_not_the_record_is_one_record_error(cls, data, why):
    with pytest.raises(RecordError, match=re.escape(why)):
        cls.decode(data)
    assert issubclass(RecordError, ValueError)                   # guarded_record counts it as a bad message


def test_numbers_of_a_float_field_may_be_integers_and_keep_their_json():
    rec = StatusRecord.decode('{"robot": 0, "goal": [1, 2.5]}')
    assert rec.goal == [1, 2.5] and json.loads(rec.encode())["goal"] == [1, 2.5]


@pytest.mark.ros
def test_the_recorder_counts_a_record_that_does_not_decode_as_a_bad_message(ros):
    from std_msgs.msg import String

    from consensus.ros.health import Health
    from consensus.scenarios.aggregation.ros.recorder import Recorder

    rec = SimpleNamespace(health=Health(), cfg=SimpleNamespace(num_robots=2), status={}, node_health={},
                          node=SimpleNamespace(get_fully_qualified_name=lambda: "/recorder"))
    Recorder._on_status(rec, String(data='{"robot": 1, "round": 4, "phase": "act"}'))
    Recorder._on_status(rec, String(data='{"robot": 1, "round": "four"}'))
    Recorder._on_status(rec, String(data='{"robot": 5}'))                                   # no such robot
    Recorder._on_health(rec, String(data='{"node": "/sim", "callback_errors": 2}'))
    Recorder._on_health(rec, String(data='{"node": ["/sim"]}'))
    Recorder._on_health(rec, String(data='{"node": "/recorder", "callback_errors": 9}'))   # its own: read directly
    assert rec.status[1]["round"] == 4 and rec.status[1]["phase"] == "act"
    assert rec.node_health == {"/sim": HealthRecord(node="/sim", callback_errors=2).to_dict()}
    assert rec.health.bad_by_input == {"recorder.status": 2, "recorder.health": 1}


@pytest.mark.ros
def test_the_recorder_counts_a_plan_or_graph_that_does_not_decode(ros):
    from std_msgs.msg import String

    from consensus.ros.health import Health
    from consensus.scenarios.aggregation.ros.recorder import Recorder

    noted, lines = [], []
    rec = SimpleNamespace(health=Health(), cfg=SimpleNamespace(num_robots=3), rounds_planned=[0, 0, 0],
                          _append=lambda name, fn: fn(), plans=SimpleNamespace(append=lines.append),
                          _note_reasoning=lambda robot, r: noted.append((robot, r.reasoning)),
                          edges=[], _graph_seen=None, t0=None, topology_changes=[])
    Recorder._on_plan(rec, String(data='{"robot": 1, "round": 2, "reasoning": "avg"}'))
    Recorder._on_plan(rec, String(data='{"robot": 1, "round": "3"}'))
    assert rec.rounds_planned == [0, 3, 0] and noted == [(1, "avg")]
    assert len(lines) == 2                                       # plans.jsonl keeps every record as it came
    Recorder._on_graph(rec, String(data=json.dumps({"name": "line", "directed": False,
                                                    "adjacency": [[0, 1, 0], [1, 0, 1], [0, 1, 0]]})))
    Recorder._on_graph(rec, String(data='{"name": 3, "adjacency": [[0]]}'))
    Recorder._on_graph(rec, String(data='{"adjacency": [[0, 1], [1, 0]]}'))                  # 2 robots, not 3
    assert rec.edges == [(0, 1), (1, 2)]
    assert rec.topology_changes == [{"t_s": 0.0, "topology": "line", "directed": False, "links": 4}]
    assert rec.health.bad_by_input == {"recorder.plan": 1, "recorder.graph": 2}


def test_the_docs_schema_tables_are_the_generated_ones():
    text = (ROOT / "docs" / "nodes.md").read_text()
    found = dict(re.findall(r"<!-- schema: (\w+) -->\n(.*?)\n<!-- end schema -->", text, flags=re.S))
    assert set(found) == {cls.__name__ for cls in RECORDS}
    for cls in RECORDS:
        assert found[cls.__name__] == schema_table(cls), f"docs/nodes.md: regenerate the table of {cls.__name__}"
