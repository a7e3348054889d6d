"""The end of a run (consensus.ros.supervisor): once, written, announced; and the fleet's figures every run-ending
node's summary holds."""
from __future__ import annotations

import json

from consensus.control.avoidance import Avoidance
from consensus.ros.health import Health
from consensus.ros.supervisor import RunEnd, fleet_figures


class _Node:
    def __init__(self):
        self.lines = []

    def get_logger(self):
        return self

    def info(self, line):
        self.lines.append(line)


def test_a_run_ends_once_with_its_summary_written_and_announced(tmp_path, capsys):
    node = _Node()
    end = RunEnd(node, tmp_path)
    calls = []

    def judge():
        calls.append(1)
        return {"converged": True}, "converged"

    assert not end.done
    assert end.conclude(judge) == {"converged": True} and end.done
    assert end.conclude(judge) == {"converged": True} and len(calls) == 1       # a second end: the same summary
    assert json.loads((tmp_path / "summary.json").read_text()) == {"converged": True}
    assert node.lines == [f"done: converged; results in {tmp_path}"]
    assert capsys.readouterr().out == f"RESULTS {tmp_path.resolve()}\n"


def test_a_judge_that_wrote_its_summary_is_not_overwritten(tmp_path, capsys):
    (tmp_path / "summary.json").write_text('{"plots": ["a.png"]}')
    RunEnd(_Node(), tmp_path).conclude(lambda: ({"plots": []}, "x"), written=True)
    assert json.loads((tmp_path / "summary.json").read_text()) == {"plots": ["a.png"]}
    assert capsys.readouterr().out.startswith("RESULTS ")


def test_the_fleet_figures_sum_robots_nodes_and_the_ending_node():
    own = Health()
    own.count_bad_message("grid.state")
    robots = [{"callback_errors": 1, "bad_messages": 2, "stale_stops": 3, "control": {"ticks": 10, "on_time": 9},
               "collision": {"steps": 10, "interventions": 2, "min_distance_m": 0.5},
               "implausible": {"jump": 4}, "suspected": [1]},
              {"callback_errors": 0, "bad_messages": "bad", "stale_stops": 1, "control": {"ticks": 10, "on_time": 10},
               "collision": {"steps": 5, "interventions": 1, "min_distance_m": 0.4}}]
    nodes = [{"node": "/topology", "callback_errors": 2, "bad_messages": 0, "implausible": {"past": 1}}]
    avoid = Avoidance(kinematics="single_integrator", v_max=1.0, w_max=2.0, gamma=1.0, margin=0.05, radius=0.2)
    got = fleet_figures(robots, nodes, own, "grid", avoid)
    assert got["callback_errors"] == 3 and got["bad_messages"] == 3             # a malformed count adds nothing
    assert got["stale_stops"] == 4 and got["control_ticks"] == 20 and got["control_on_time_share"] == 0.95
    assert got["implausible"]["jump"] == 4 and got["implausible"]["past"] == 1 and got["suspected_robots"] == [1]
    assert got["collision_avoidance"] == "cbf" and got["clearance_m"] == avoid.clearance_m
    assert got["collision"]["steps"] == 15 and got["collision"]["min_distance_m"] == 0.4
    plain = fleet_figures([], [], Health(), "matchmaker")
    assert plain["collision_avoidance"] == "none" and "collision" not in plain
    assert plain["control_on_time_share"] is None
