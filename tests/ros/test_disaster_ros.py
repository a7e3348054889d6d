"""The disaster scenario through real ROS 2 processes (sim, drones, [aggregator], disaster_grid), as
`consensus run disaster` starts them, plus the wire format of the round protocol in-process.

Every test runs in the session's own ROS domain (conftest.py); the runner stops every process it started, and the
tests check that none is left."""
from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from consensus.metrics.convergence import min_pair_distance_series, packing_radius
from consensus.scenarios.disaster.config import load_disaster_config
from consensus.runs.rundir import read_trajectories

pytestmark = pytest.mark.ros

REQUIRED = ("coverage_rate", "misallocation_penalty", "response_delay", "net_reward", "mean_deviation", "llm_calls",
            "llm_fallbacks")


def _cfg(**kw):
    # 6 x 6 cells of 1 m, one disaster, no spawns; low volatility moves disasters only at round 3, so a run of at
    # most 3 rounds has a static disaster (its severity may still drift by 1)
    base = dict(num_robots=3, planner="heuristic", rounds=3, width=6, height=6, initial_disasters=1, p_new=0.0,
                volatility="low", v_max=2.0, kp=2.0, seed=1)
    base.update(kw)
    return load_disaster_config(None, **base)


def _processes_of(run_dir: Path) -> list[str]:
    """Processes whose command line names the run directory (each node gets RUN/params.yaml)."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if str(run_dir) in line and "ps -eo" not in line]


def _rounds(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "rounds.jsonl").read_text().splitlines()]


def _probe(run_dir: Path, run) -> tuple[dict, dict]:
    """Run ``run()`` in a thread while a probe node records the grid's topics; returns (summary, seen)."""
    import threading
    import time

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import String
    from visualization_msgs.msg import MarkerArray

    from consensus.ros.qos import EVENTS, profile
    from consensus.scenarios.disaster.ros import protocol

    STATE, DISCUSSION, STATE_QOS = protocol.DISASTER_STATE.name, protocol.DISASTER_DISCUSSION.name, \
        profile(protocol.DISASTER_STATE)

    result: dict = {}
    seen: dict = {"state": [], "metrics": [], "markers": [], "discussion": []}
    runner = threading.Thread(target=lambda: result.update(run()))
    rclpy.init()
    node = Node("disaster_probe")
    node.create_subscription(String, STATE, lambda m: seen["state"].append(json.loads(m.data)), STATE_QOS)
    node.create_subscription(String, DISCUSSION, lambda m: seen["discussion"].append(json.loads(m.data)), EVENTS)
    node.create_subscription(String, "/disaster/metrics", lambda m: seen["metrics"].append(json.loads(m.data)),
                             EVENTS)
    node.create_subscription(MarkerArray, "/disaster/markers", lambda m: seen["markers"].append(m), EVENTS)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while runner.is_alive() and time.monotonic() < deadline:
            ex.spin_once(timeout_sec=0.05)
    finally:
        runner.join(timeout=60)
        node.destroy_node()
        rclpy.shutdown()
    assert result, "the run did not finish"
    return result, seen


def test_three_heuristic_drones_fly_to_a_static_disaster_and_clear_it(tmp_path):
    from consensus.scenarios.disaster.runner import run_disaster_ros

    cfg = _cfg(motion="kinematic", round_time_s=3.0)
    run = tmp_path / "run"
    summary, seen = _probe(run, lambda: run_disaster_ros(cfg, run))
    assert not _processes_of(run), "a process of the run is still alive"
    for key in REQUIRED:
        assert key in summary, key
    assert summary["rounds"] == 3 and summary["llm_calls"] == 0 and summary["llm_fallbacks"] == 0
    assert summary["phase_timeouts"] == 0 and summary["stale_stops"] == 0

    rounds = _rounds(run)
    target = tuple(rounds[0]["observation"]["disasters"][0]["cell"])
    assert all(tuple(d["cell"]) == target for r in rounds for d in r["observation"]["disasters"])   # static
    attended = [r for r in rounds if r["outcome"]["attended"]]
    assert attended, "no drone ever reached the disaster"
    for r in attended:                     # every round with drones on the cell removes 3 severity points each
        before, after = r["outcome"]["severity_before"]["0"], r["outcome"]["severity_after"]["0"]
        on_cell = sum(tuple(c) == target for c in r["cells_end"])
        assert after == max(0, before - 3 * on_cell)
    assert summary["disasters_cleared"] == 1
    # the drones flew: between two of the grid's odometry samples a drone moves at most v_max (plus one odometry
    # period of sampling jitter at each end), it stays on the grid and ends on the disaster's cell centre
    times, pos, tgt = read_trajectories(run / "trajectories.csv")
    assert len(times) > 20
    step = np.linalg.norm(np.diff(pos, axis=0), axis=2)
    assert (step <= cfg.v_max * (np.diff(times)[:, None] + 0.1) + 0.02).all(), "a drone jumped"
    assert (step > 0.1).any()
    assert (np.linalg.norm(pos[-1] - pos[0], axis=1) > 1.0).any()
    assert ((pos >= 0) & (pos <= 6.0)).all()
    centre = (np.asarray(target) + 0.5) * cfg.cell_size_m
    # collision avoidance (auto: cbf through ROS): the drones sent to the disaster's cell in the last round take
    # slots around its centre (the heuristic sends at most M = 2 there once two stand on it), never closer than the
    # clearance (the filter's d_min at rest)
    assert summary["collision_avoidance"] == "cbf" and summary["collision"]["infeasible"] == 0
    sent = [i for i, cell in enumerate(rounds[-1]["decision"]["actions"]) if tuple(cell) == target]
    assert sent and (np.linalg.norm(pos[-1, sent] - centre, axis=1) < packing_radius(len(sent),
                                                                                   summary["d_min_m"])).all()
    assert min_pair_distance_series(pos).min() >= summary["clearance_m"]
    assert np.allclose(tgt[-1, sent], centre)
    for name in ("manifest.json", "params.yaml", "rounds.jsonl", "summary.json", "coverage_deviation.png"):
        assert (run / name).is_file(), name
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["scenario"] == "disaster" and manifest["mode"] == "ros" and manifest["seed"] == 1
    # on the wire: the round clock went through every phase of every round, one metrics record per round equal
    # to the recorded outcome, the discussion channel, and markers of the grid, the disaster and the drones
    phases = [(st["round"], st["phase"]) for st in seen["state"]]
    for r in range(3):
        for phase in ("discuss", "decide", "flight"):
            assert (r, phase) in phases, (r, phase)
    assert phases[-1] == (2, "done")
    assert [m["net_reward"] for m in seen["metrics"]] == [r["outcome"]["net_reward"] for r in rounds]
    said = {(d["round"], d["drone"]) for d in seen["discussion"]}   # (the probe may join after round 0's)
    assert {(2, i) for i in range(3)} <= said <= {(r, i) for r in range(3) for i in range(3)}
    last = [m for m in seen["markers"] if any(x.ns == "disasters" for x in m.markers)][-1]
    cube = next(x for x in last.markers if x.ns == "disasters")
    assert (cube.pose.position.x, cube.pose.position.y) == pytest.approx(tuple(centre))
    assert {x.id for x in last.markers if x.ns == "drones"} == {0, 1, 2}
    assert any(x.ns == "grid" and len(x.points) == 2 * (6 + 1) * 2 for x in last.markers)


def test_five_drones_sharing_cells_with_the_filter_complete_every_round_within_the_flight_deadline(tmp_path):
    """Drones sent to one cell take slots in it (collision filter on, the default through ROS): every round
    completes, each flight ends on arrival or at its deadline (a counted flight timeout), and no two drones come
    closer than the clearance."""
    from consensus.robots.map import fleet_avoidance
    from consensus.scenarios.disaster.environment import cell_centre
    from consensus.scenarios.disaster.drone_control import controller_config
    from consensus.scenarios.disaster.metrics import CellSlots
    from consensus.scenarios.disaster.round_clock import flight_deadline_s
    from consensus.scenarios.disaster.runner import run_disaster_ros
    from consensus.scenarios.disaster.ros.grid import TICK_S

    # two disasters, no discussion: the heuristic drones split 3 + 2 over them, then the team follows what is left
    cfg = _cfg(num_robots=5, rounds=3, initial_disasters=2, volatility="high", discussion_turns=0, flight_slack_s=8.0,
               seed=4)
    run = tmp_path / "run"
    summary = run_disaster_ros(cfg, run)
    assert not _processes_of(run), "a process of the run is still alive"
    rounds = _rounds(run)
    assert summary["rounds"] == len(rounds) == cfg.rounds                 # every round completed
    assert summary["collision_avoidance"] == "cbf" and summary["phase_timeouts"] == 0
    assert any(max(Counter(map(tuple, r["decision"]["actions"])).values()) >= 2 for r in rounds)   # shared cells
    base, _ = controller_config(cfg)
    slots = CellSlots(cfg.cell_size_m, fleet_avoidance(base, ros=True), base.packing_gap_m, base.workspace)
    timed_out = 0
    for r in rounds:
        ros, actions = r["ros"], [tuple(c) for c in r["decision"]["actions"]]
        deadline = flight_deadline_s(cfg, [tuple(c) for c in r["cells_start"]], actions)
        assert ros["flight_deadline_s"] == pytest.approx(deadline, abs=1e-3)
        assert ros["durations_s"]["flight"] <= deadline + 10 * TICK_S      # no flight waits beyond its deadline
        assert all(d <= cfg.round_timeout_s for d in ros["durations_s"].values())
        if ros.get("timeouts", {}).get("flight"):
            timed_out += 1
            assert ros["durations_s"]["flight"] >= deadline - TICK_S
        else:                                # arrived: every drone near its cell's slots, so it attends its cell
            counts = Counter(actions)
            for p, a in zip(ros["positions_end"], actions):
                assert np.linalg.norm(np.asarray(p) - cell_centre(a, cfg.cell_size_m)) <= slots.arrive_radius(
                    a, counts[a]) + 0.05
            assert [tuple(c) for c in r["cells_end"]] == actions
    assert summary["flight_timeouts"] == timed_out
    assert summary["crowded_cells"] == sum(len(r["ros"].get("crowded_cells", [])) for r in rounds)
    _, pos, _ = read_trajectories(run / "trajectories.csv")
    assert min_pair_distance_series(pos).min() >= summary["clearance_m"] - 2e-4     # (the CSV keeps 4 decimals)
    assert summary["min_pair_distance_m"] >= summary["clearance_m"]


def _without_ros(record: dict) -> dict:
    return {k: v for k, v in record.items() if k != "ros"}


@pytest.mark.parametrize("mode, strategy, fleet", [("implicit", "majority", True),
                                                   ("explicit", "spoke_wheel_feedback", False)])
def test_ros_rounds_equal_headless_rounds(tmp_path, mode, strategy, fleet):
    """The same config through ROS (drones fly until on their cells = motion teleport) and headless gives the same
    round records: observations, messages, votes, actions, cells and outcomes come from the same core."""
    from consensus.scenarios.disaster.runner import run_disaster_ros
    from consensus.scenarios.disaster.headless import run_disaster_headless

    # a flight deadline far beyond any flight (4 drones packing into one 1 m cell take 10-25 s on a loaded machine):
    # a counted flight timeout would change a round's cells, and this test compares the rounds, not the deadline
    # rule (test_five_drones_sharing_cells_... and tests/scenarios/disaster/test_disaster_round_clock.py check that)
    cfg = _cfg(num_robots=4, rounds=4, volatility="moderate", initial_disasters=2, p_new=0.2, discussion_turns=2,
               mode=mode, strategy=strategy, v_max=3.0, seed=2, single_process=fleet, flight_slack_s=300.0)
    summary = run_disaster_ros(cfg, tmp_path / "ros")
    headless = run_disaster_headless(cfg, out_dir=tmp_path / "headless")
    assert not _processes_of(tmp_path / "ros")
    assert [_without_ros(r) for r in _rounds(tmp_path / "ros")] == _rounds(tmp_path / "headless")
    for key in (*REQUIRED, "series", "vote_turns", "replies"):
        assert summary[key] == headless[key], key
    assert summary["replay_mismatches"] == 0 and summary["phase_timeouts"] == 0
    if mode == "explicit":
        assert summary["vote_turns"] >= cfg.rounds and summary["aggregator"]["timeouts"] == 0


def _drone_llm(body: dict):
    """Scripted drone LLM: drone 0 answers the situation report's first disaster, drone 1 does the same but answers its
    first discussion turn too late, drone 2 answers prose (unparseable)."""
    from support.fake_openai_server import Reply

    text = "\n".join(m["content"] for m in body["messages"])
    drone = int(re.search(r"You are Drone (\d+)", text).group(1))
    cells = re.findall(r"Dispatch alert: [a-z ]+ at sector \((\d+),(\d+)\)", text)
    x, y = map(int, cells[0]) if cells else (0, 0)
    if drone == 2:
        return "Let us all head north and see."
    reply = json.dumps({"analysis": "most severe", "action": [x, y], "message": f"drone {drone} to [{x}, {y}]"})
    late = drone == 1 and "Discussion turn 1 of" in text
    return Reply(reply, delay_s=4.0 if late else 0.1)


def test_llm_drones_count_fallbacks_and_timeouts_and_stay_on_the_grid(tmp_path):
    from support.fake_openai_server import FakeOpenAIServer

    from consensus.scenarios.disaster.runner import run_disaster_ros

    with FakeOpenAIServer(script=_drone_llm) as srv:
        cfg = _cfg(planner="llm", llm_backend="openai", llm_base_url=srv.base_url, llm_model="fake", rounds=2,
                   round_timeout_s=2.5, parse_retries=1, llm_max_retries=0, llm_concurrency=3)
        summary = run_disaster_ros(cfg, tmp_path / "run")
    assert not _processes_of(tmp_path / "run")
    by_reason = summary["llm_fallbacks_by_reason"]
    assert summary["llm_fallbacks"] == sum(by_reason.values())
    # drone 2: every reply unparseable (2 calls each: the reply and one correction turn); drone 1: its discussion
    # message of each round came after round_timeout_s
    assert by_reason["unparseable"] == 2 * 2 and by_reason["timeout"] == 2
    assert summary["late_replies"] == 2 and summary["phase_timeouts"] == 2
    rounds = _rounds(tmp_path / "run")
    for r in rounds:
        replies = r["decision"]["action_replies"]
        assert replies[2]["fallback"] and replies[2]["action"] == r["cells_start"][2]   # stays (fallback "stay")
        assert r["decision"]["discussion"][0][1]["fallback_reason"] == "timeout"
        assert r["decision"]["messages"][0][1]["text"] == ""                           # nothing heard from it
    # every LLM call was made and recorded (late ones included)
    transcripts = (tmp_path / "run" / "transcripts.jsonl").read_text().splitlines()
    assert summary["llm_calls"] == len(transcripts) == len(srv.requests)
    times, pos, _ = read_trajectories(tmp_path / "run" / "trajectories.csv")
    assert ((pos >= 0) & (pos <= 6.0)).all()
    assert summary["control_on_time_share"] > 0.9


@pytest.mark.embedded
def test_two_embedded_llm_drones_through_ros(tmp_path, shared_llm):
    """The real model end to end (~4-9 s per call on 2 cores), on the session's shared model server through the
    OpenAI backend (tests/conftest.py). Whatever the small model answers, every reply is a parsed cell or a counted
    fallback, the drones stay on the grid and the run writes its directory; whether they contain the disaster is the
    model's behaviour and is not asserted."""
    from consensus.scenarios.disaster.runner import run_disaster_ros

    # one action phase without discussion (2 calls of a ~460-token prompt), one request at a time: on 2 shared cores
    # a call takes 20-60 s. Two drones, the fewest that share a round (the drones' protocol with more is the scripted
    # tests'). Point drones (no collision filter): the small model often sends both to the one disaster's cell, and
    # what this test checks is the LLM path, not how drones share a cell (round_timeout_s bounds the LLM phase)
    cfg = load_disaster_config(None, num_robots=2, planner="llm", llm_backend="openai",
                               llm_base_url=shared_llm.base_url, llm_model=shared_llm.model, llm_concurrency=1,
                               rounds=1, discussion_turns=0, width=6, height=6, initial_disasters=1, p_new=0.0,
                               llm_max_tokens=120, llm_timeout_s=150.0, llm_max_retries=0, parse_retries=0,
                               v_max=3.0, kp=2.0, seed=3, round_timeout_s=500.0, collision_avoidance="none")
    run = tmp_path / "run"
    summary = run_disaster_ros(cfg, run)
    assert summary["rounds"] == 1
    assert summary["llm_calls"] >= cfg.num_robots and summary["phase_timeouts"] == 0
    assert summary["llm_fallbacks"] == sum(summary["llm_fallbacks_by_reason"].values())
    record = json.loads((run / "rounds.jsonl").read_text().splitlines()[0])
    replies = record["decision"]["action_replies"]
    assert len(replies) == cfg.num_robots
    for r in replies:
        assert r["fallback"] or (r["action"] is not None and r["llm_calls"] >= 1), r
        if r["fallback"]:
            assert r["fallback_reason"], r
    assert summary["llm_fallbacks"] == sum(r["fallback"] for r in replies)
    for cell in record["decision"]["actions"] + record["cells_end"]:
        assert 0 <= cell[0] < 6 and 0 <= cell[1] < 6
    _, pos, _ = read_trajectories(run / "trajectories.csv")
    assert ((pos >= 0) & (pos <= 6 * cfg.cell_size_m)).all()
    transcripts = (run / "transcripts.jsonl").read_text().splitlines()
    assert len(transcripts) >= summary["llm_calls"] - summary["llm_fallbacks_by_reason"].get("llm_error", 0)


# ----------------------------------------------------------------------------------- wire format (in-process)
def test_wire_round_trips_and_refuses_off_grid_cells():
    from consensus.decision import ProposeContext
    from consensus.scenarios.disaster.environment import DisasterEnv
    from consensus.scenarios.disaster.agents import DroneReply
    from consensus.scenarios.disaster.ros.agent import (context_from_dict, context_to_dict, observation_from_dict,
                                           reply_from_dict)

    cfg = _cfg(initial_disasters=3, p_new=0.5)
    obs = DisasterEnv(cfg.env_config(), seed=4).begin_round()
    back = observation_from_dict(json.loads(json.dumps(obs.to_dict())))
    assert back == obs
    ctx = ProposeContext(agent=1, turn=2, own_previous=(1, 2), others_previous=((0, 0), None),
                         coordinator_plan=(3, 3), history=(((1, 1), (2, 2), None),))
    assert context_from_dict(json.loads(json.dumps(context_to_dict(ctx))), 6, 6) == ctx
    reply = DroneReply(analysis="a", action=(5, 5), message="m", llm_calls=2)
    assert reply_from_dict(json.loads(json.dumps(reply.to_dict())), 6, 6) == reply
    for action in ([6, 0], [1, -1], [1.5, 2], "1,2", [True, 1]):
        with pytest.raises(ValueError):
            reply_from_dict({**reply.to_dict(), "action": action}, 6, 6)


def test_policy_jobs_run_one_at_a_time_in_order_and_skip_finished_phases():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from consensus.scenarios.disaster.ros.agent import PlannerJobs

    gate = threading.Event()
    running = []
    with ThreadPoolExecutor(4) as pool:
        jobs = PlannerJobs(pool)

        def job(name):
            def run():
                running.append(name)
                gate.wait(5)
                return name
            return run

        for name in ("a", "b", "stale", "c"):
            jobs.submit((name,), job(name))
        current = lambda key: key != ("stale",)          # noqa: E731
        assert jobs.poll(current) == [] and running == ["a"] and jobs.pending() == 4
        gate.set()
        done = []
        for _ in range(200):
            done += [r for _, r in jobs.poll(current)]
            if len(done) == 3:
                break
            threading.Event().wait(0.01)
    assert done == ["a", "b", "c"] and running == ["a", "b", "c"] and jobs.skipped == 1


def test_drone_node_answers_with_its_core_agent_and_flies_only_to_grid_cells():
    """In-process: a drone answers a discussion phase exactly as its core agent does, refuses an off-grid flight
    target, flies to the centre of a valid one at no more than v_max, and sent to a cell with another drone takes the
    slot a headless flight's drone takes there (tests/scenarios/disaster/test_headless_and_ros_slots.py)."""
    import time

    import rclpy
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import String

    from consensus.control.robot_core import Nearby
    from consensus.scenarios.disaster.environment import DisasterEnv
    from consensus.scenarios.disaster.agents import make_drone
    from consensus.scenarios.disaster.headless import KinematicFlight
    from consensus.ros.fleet import FleetClock
    from consensus.ros.qos import profile
    from consensus.scenarios.disaster.ros import protocol
    from consensus.scenarios.disaster.ros.agent import DisasterRobot

    STATE, DISCUSSION, STATE_QOS = protocol.DISASTER_STATE.name, protocol.DISASTER_DISCUSSION.name, \
        profile(protocol.DISASTER_STATE)

    cfg = _cfg(num_robots=2, control_period_s=0.05, v_max=1.5)
    obs = DisasterEnv(cfg.env_config(), seed=4).begin_round()
    cells = [[0, 0], [3, 3]]
    rclpy.init()
    node, drv = Node("drone", namespace="robot_0"), Node("driver")
    try:
        drone = DisasterRobot(node, cfg, 0, make_drone(cfg, 0), None)
        FleetClock(node, cfg, [drone], nearby_in_process=False)          # as in a drone's own process: a fleet of one
        odom_pub = drv.create_publisher(Odometry, "/robot_0/odom", 10)
        # the grid's nearby relay: drone 1 hovers at (0.5, 5.5), far from drone 0's flights (a drone with a body
        # never moves before it knows where the others are)
        from sensor_msgs.msg import PointCloud2

        from consensus.ros.nearby import nearby_cloud

        nearby_pub = drv.create_publisher(PointCloud2, "/robot_0/nearby", 10)
        state_pub = drv.create_publisher(String, STATE, STATE_QOS)
        said, cmds = [], []
        drv.create_subscription(String, DISCUSSION, lambda m: said.append(json.loads(m.data)), 10)
        drv.create_subscription(Twist, "/robot_0/cmd_vel", lambda m: cmds.append((m.linear.x, m.linear.y)), 10)
        ex = SingleThreadedExecutor()
        ex.add_node(node)
        ex.add_node(drv)
        odom = Odometry()
        odom.pose.pose.position.x = odom.pose.pose.position.y = 0.5          # centre of cell (0, 0)

        def state(seq, phase, **kw):
            msg = {"seq": seq, "round": 0, "rounds": 1, "phase": phase, "turn": kw.pop("turn", -1),
                   "mode": "implicit", "strategy": "", "deadline_s": None, "observation": None, "cells": None,
                   "heard": None, "actions": None, "stamp": 0.0, **kw}
            state_pub.publish(String(data=json.dumps(msg)))

        def spin_for(seconds):
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                odom_pub.publish(odom)
                nearby_pub.publish(nearby_cloud(drv.get_clock().now().nanoseconds, np.array([[0.5, 5.5]]),
                                                np.zeros(1), np.zeros(1), np.array([1])))
                ex.spin_once(timeout_sec=0.02)

        spin_for(0.5)
        state(1, "discuss", turn=0, observation=obs.to_dict(), cells=cells, heard=[])
        spin_for(0.5)
        assert len(said) == 1 and (said[0]["round"], said[0]["turn"], said[0]["drone"]) == (0, 0, 0)
        expected = make_drone(cfg, 0).discuss(obs, [], 0, (0, 0))           # a fresh twin of the drone's agent
        assert said[0]["reply"] == expected.to_dict() and said[0]["message"] == expected.message
        state(2, "flight", actions=[[6, 0], [1, 1]])                          # off the 6 x 6 grid: refused
        spin_for(0.5)
        assert drone.counters["bad_actions"] == 1 and drone.meeting_point is None
        assert all(c == (0.0, 0.0) for c in cmds[-5:])
        state(3, "flight", actions=[[4, 0], [1, 1]])
        cmds.clear()
        spin_for(0.5)
        assert np.allclose(drone.meeting_point, [4.5, 0.5])
        assert cmds and cmds[-1][0] == pytest.approx(1.5) and cmds[-1][1] == pytest.approx(0.0)   # saturated
        # both drones sent to one cell: the drone node packs as a headless flight's drone 0 does (drone 1 at the
        # centre of cell (0, 5), drone 0's odometry at that of (0, 0)): the same target, group and slot
        state(4, "flight", actions=[[2, 2], [2, 2]])
        spin_for(0.1)
        flight = KinematicFlight(cfg.replace(motion="kinematic", collision_avoidance="cbf", round_time_s=0.05),
                                 [(0, 0), (0, 5)])
        flight.fly([(2, 2), (2, 2)])
        twin = flight.cores[0]
        assert np.allclose(drone.core.meeting_point, twin.meeting_point) and drone.core.group == twin.group == (0, 1)
        slot = drone.core.goal_for(Nearby.of(np.array([[0.5, 5.5]]), ids=[1]), 0.0)
        assert slot is not None and np.allclose(slot, flight.targets[0][0]) and np.allclose(slot, twin.goal)
    finally:
        node.destroy_node()            # also after a failed assertion: no node of this test outlives it
        drv.destroy_node()
        rclpy.shutdown()
