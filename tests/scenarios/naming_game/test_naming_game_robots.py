"""Paper 4's naming game played by a robot fleet (``consensus.scenarios.naming_game.fleet_game`` and ``ros/``).

The headless reference must be deterministic and agree with ``simulate``'s statistics. A ROS run (sim, robots,
matchmaker, started as ``consensus run`` starts them) must say the reference's words interaction by interaction
and leave the robots at the points of their last words. The ROS tests start their nodes from the modules
(``python -c "from <module> import main"``), so they do not depend on the executables being registered."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from consensus.errors import ConfigError
from consensus.metrics.convergence import arrival_radius
from consensus.scenarios.naming_game.policy import fixed_bias, memory_invariant, save_policies
from consensus.scenarios.naming_game.fleet_game import (PairSchedule, Player, RobotsGameConfig, Tally,
                                                        controller_config, fleet_policy, play_headless, result_line,
                                                        robot_generator, robot_processes, run, sequence)


def _cfg(**kw) -> RobotsGameConfig:
    base = dict(memory=2, max_population_rounds=20, seed=0)
    base.update(kw)
    return RobotsGameConfig.from_dict(base)


def _table(tmp_path: Path, p: float = 0.5, H: int = 2) -> str:
    path = save_policies(tmp_path / "q.json", [memory_invariant(p, H)])
    return f"table:{path}"


# ---------------------------------------------------------------------------------------------------- headless
def test_the_reference_is_deterministic_and_depends_on_the_seed():
    pol = memory_invariant(0.5, 2)
    a = play_headless(_cfg(seed=4), pol)
    assert a == play_headless(_cfg(seed=4), pol)
    assert sequence(a.records) != sequence(play_headless(_cfg(seed=5), pol).records)
    rec = a.records[0]
    assert (rec["round"], rec["interaction"], rec["state_i"], rec["state_j"]) == (1, 0, "", "")
    assert rec["target_i"] == ([-4.0, 0.0] if rec["word_i"] == 0 else [4.0, 0.0])
    assert [r["interaction"] for r in a.records] == list(range(len(a.records)))
    assert [r["round"] for r in a.records] == [k // 4 + 1 for k in range(len(a.records))]


@pytest.mark.parametrize("p, word", [(1.0, 0), (0.0, 1)])
@pytest.mark.parametrize("n", [2, 3, 5])
def test_a_policy_that_always_says_one_word_converges_at_the_minimum_time(p, word, n):
    from consensus.scenarios.naming_game.simulate import min_consensus_time

    for seed in range(3):
        played = play_headless(_cfg(num_robots=n, seed=seed), fixed_bias(p, 2))
        s = played.summary
        assert s["converged"] and s["word"] == word
        assert s["consensus_time"] == s["rounds"] == min_consensus_time(n) == 3
        assert s["interactions"] == s["successes"] == 3 * n
        assert s["final_words"] == [word] * n or None in s["final_words"]      # n = 5: someone may never meet
        assert all(t == [[-4.0, 0.0], [4.0, 0.0]][word] for t in s["final_targets"] if t is not None)


@pytest.mark.parametrize("p", [0.5, 0.7])
def test_the_reference_agrees_with_simulate_on_times_and_bias(p):
    from consensus.scenarios.naming_game.simulate import simulate

    pol = memory_invariant(p, 2)
    summaries = [play_headless(_cfg(seed=s, max_population_rounds=200), pol).summary for s in range(300)]
    times = [s["consensus_time"] for s in summaries if s["converged"]]
    share0 = np.mean([s["word"] == 0 for s in summaries if s["converged"]])
    sim = simulate(pol.q, 2, 4, 4000, 1, max_population_rounds=200)
    assert len(times) == 300 and sim.n_converged == 4000
    assert np.mean(times) == pytest.approx(np.nanmean(sim.time), rel=0.15)
    assert share0 == pytest.approx(float(np.mean(sim.word == 0)), abs=0.1)
    assert min(times) == 3


def test_schedule_is_uniform_over_ordered_pairs_of_distinct_robots():
    sched = PairSchedule(7, 4)
    pairs = [sched.next() for _ in range(12000)]
    assert all(i != j for i, j in pairs)
    counts = np.zeros((4, 4))
    for i, j in pairs:
        counts[i, j] += 1
    off = counts[~np.eye(4, dtype=bool)]
    assert off.min() > 850 and off.max() < 1150            # 1000 each
    assert PairSchedule(7, 4).next() == pairs[0]


def test_a_player_draws_once_per_word_from_its_own_stream():
    q = memory_invariant(0.5, 2).q
    player = Player(3, q, 2, seed=11, points=[-4, 0, 4, 0])
    rng = robot_generator(11, 3)
    for partner in (0, 1, 1, 0, 0):
        expect = 0 if rng.random() < q[player.state] else 1
        own = player.say()
        assert own == expect
        player.hear(own, partner)
    assert player.draws == player.played == 5
    assert list(player.target) == ([-4.0, 0.0] if player.word == 0 else [4.0, 0.0])
    assert len(player.key) == 4 and player.key.endswith(f"{own}{partner}")     # H = 2: the last two games


def test_tally_follows_simulates_rule_and_tie_break():
    t = Tally(2, 0.98, 3)                  # window 6, needs 6 successes
    for _ in range(2):
        t.add(0, 0)
        t.add(1, 1)
    assert not t.end_round(2)              # window not full yet
    t.add(1, 1)
    t.add(0, 0)
    assert t.end_round(3) and t.time == 3
    assert t.word == 0                     # 6 zeros of 12: tie -> the first robot of the last interaction said 0
    t2 = Tally(2, 0.98, 3)
    for w in (0, 0, 0, 0, 1, 1):
        t2.add(w, w)
    assert t2.end_round(3) and t2.word == 0
    t3 = Tally(2, 0.98, 3)
    for w in (0, 1, 1, 1, 1, 1):
        t3.add(w, 1)
    assert not t3.end_round(3) and t3.word == -1


def test_settings_and_processes():
    cfg = _cfg()
    base, overrides = controller_config(cfg)
    assert base.workspace == [-10.0, 10.0, -10.0, 10.0] and base.max_rounds == 0 and base.num_robots == 4
    assert "max_rounds" not in overrides          # the base's planning rounds: its own default (0 = unlimited)
    specs = robot_processes(cfg, use_sim_time=True)
    assert [(s.executable, s.name, s.namespace) for s in specs] == [
        ("sim", "sim", ""), ("naming_robot", "fleet", ""), ("naming_matchmaker", "matchmaker", ""),
        ("bag_recorder", "bag_recorder", "")]
    assert specs[0].params["publish_clock"] is True and specs[0].params["use_sim_time"] is False
    assert [s.ends_run for s in specs] == [False, False, True, False]
    per_robot = robot_processes(_cfg(single_process=False))
    assert [(s.name, s.namespace, s.params.get("robot_id")) for s in per_robot[1:-2]] == [
        ("agent", f"robot_{i}", i) for i in range(4)]
    with pytest.raises(ConfigError, match="num_robots must be in"):       # the fleet group's bound
        _cfg(num_robots=2000)
    for bad in (dict(rendezvous=[0.0, 0.0, 0.1, 0.0]), dict(rendezvous=[-40.0, 0.0, 4.0, 0.0]),
                dict(rendezvous=[1.0, 2.0]), dict(answer_timeout_s=0.0), dict(interaction_period_s=100.0),
                dict(arrival_tolerance_m=0.01), dict(executor="threads")):
        with pytest.raises(ConfigError):
            _cfg(**bad)


def test_the_robots_game_counts_robots_with_the_fleet_group_and_composes_the_rules():
    """One config class per concept: the game's rules (NamingGameParams) are composed by the population's config
    (with AgentsParams: num_agents) and the fleet's (with FleetParams: num_robots), neither inherits the other."""
    from consensus.scenarios.naming_game.config import NamingGameConfig, NamingGameParams
    from consensus.settings import AgentsParams, FleetParams

    assert issubclass(RobotsGameConfig, NamingGameParams) and issubclass(RobotsGameConfig, FleetParams)
    assert not issubclass(RobotsGameConfig, NamingGameConfig) and not issubclass(RobotsGameConfig, AgentsParams)
    assert issubclass(NamingGameConfig, AgentsParams) and not issubclass(NamingGameConfig, FleetParams)
    names = set(RobotsGameConfig.field_names())
    assert {"num_robots", "single_process", "executor", "max_population_rounds", "memory", "threshold"} <= names
    assert not names & {"num_agents", "max_rounds", "runs", "trajectory"}
    cfg = _cfg(num_robots=3)
    assert len(play_headless(cfg, fixed_bias(1.0, 2)).summary["final_words"]) == 3      # three robots play
    assert len(robot_processes(_cfg(num_robots=3, single_process=False))) == 1 + 3 + 1 + 1      # sim, 3 robots, mm, bag
    with pytest.raises(ConfigError, match="num_robots must be at least 2"):
        _cfg(num_robots=1)
    with pytest.raises(ConfigError, match="parameter 'max_rounds' is now called 'max_population_rounds'"):
        _cfg(max_rounds=5)
    with pytest.raises(ConfigError, match="unknown parameter 'num_agents'"):
        _cfg(num_agents=4)

def test_the_fleets_policy_and_the_headless_runner(tmp_path):
    assert fleet_policy(_cfg(policy="fixed_bias:0.25")).q[0] == 0.25
    assert np.array_equal(fleet_policy(_cfg()).q, memory_invariant(0.5, 2).q)      # the default policy
    assert np.array_equal(fleet_policy(_cfg(policy=_table(tmp_path))).q, memory_invariant(0.5, 2).q)
    with pytest.raises(ConfigError, match="memory"):
        fleet_policy(_cfg(policy=_table(tmp_path), memory=3))
    with pytest.raises(ConfigError, match="fixed q table"):
        _cfg(policy="llm")
    path = save_policies(tmp_path / "two.json", [memory_invariant(0.5, 2), fixed_bias(0.3, 2)])
    with pytest.raises(ConfigError, match="2 tables"):
        fleet_policy(_cfg(policy=f"table:{path}"))
    assert fleet_policy(_cfg(policy=f"table:{path}#fixed_bias(p=0.3)/π1,π2")).q[5] == 0.3
    assert (RobotsGameConfig().num_robots, RobotsGameConfig().max_population_rounds) == (4, 10)

    said: list[str] = []
    summary = run(_cfg(seed=9, max_population_rounds=5), tmp_path / "headless", headless=True, echo=said.append)
    reference = play_headless(_cfg(seed=9, max_population_rounds=5), memory_invariant(0.5, 2))
    records = [json.loads(line) for line in (tmp_path / "headless" / "interactions.jsonl").read_text().splitlines()]
    assert records == reference.records
    assert json.loads((tmp_path / "headless" / "summary.json").read_text()) == summary
    assert summary["converged"] and summary["word_name"] == "word_b" and summary["runtime"] == "headless"
    assert len(said) == 1 and "headless" in said[0]
    assert result_line(summary).startswith("converged on word 1 (word_b) at round 5; 20 interactions")


# ---------------------------------------------------------------------------------------------------- ROS
def _processes_of(run_dir: Path) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if str(run_dir) in line and "ps -eo" not in line]


MODULES = {"naming_robot": "consensus.scenarios.naming_game.ros.robot",
           "naming_matchmaker": "consensus.scenarios.naming_game.ros.matchmaker"}


def _run_ros(tmp_path: Path, monkeypatch, *, drop: tuple[str, ...] = (), **kw) -> tuple[dict, Path, RobotsGameConfig]:
    """``robots.run`` (the runner's ROS branch) of the demo config with ``kw``, the nodes started from their modules
    and the processes in namespaces ``drop`` left out; no process of the run may outlive it."""
    from consensus.runs import ros_runner
    from consensus.scenarios.naming_game import fleet_game

    original_command, original_processes = ros_runner.executable_command, fleet_game.robot_processes

    def command(exe: str, package: str = "consensus") -> list[str]:
        if exe in MODULES:
            return [sys.executable, "-c", f"import sys; from {MODULES[exe]} import main; sys.exit(main())"]
        return original_command(exe, package)

    monkeypatch.setattr(ros_runner, "executable_command", command)
    monkeypatch.setattr(fleet_game, "robot_processes", lambda cfg, **kw: [
        spec for spec in original_processes(cfg, **kw) if spec.namespace not in drop])
    settings = dict(num_robots=4, memory=2, max_population_rounds=5, interaction_period_s=0.25,
                    answer_timeout_s=3.0, v_max=3.0, kp=2.0, arrival_timeout_s=20.0)
    settings.update(kw)
    cfg = RobotsGameConfig.from_dict(settings)
    out = tmp_path / "run"
    try:
        summary = run(cfg, out, echo=None)
    finally:
        leftover = _processes_of(out)
    assert not leftover, f"processes of the run still alive: {leftover}"
    assert json.loads((out / "manifest.json").read_text())["scenario"] == "naming-game-robots"
    return summary, out, cfg.replace(output_dir=str(out))


def _check_against_reference(summary: dict, out: Path, cfg) -> None:
    reference = play_headless(cfg, fleet_policy(cfg))
    records = [json.loads(line) for line in (out / "interactions.jsonl").read_text().splitlines()]
    assert summary["skipped"] == 0 and not any(r["skipped"] for r in records)
    assert sequence(records) == sequence(reference.records)
    assert [(r["target_i"], r["target_j"]) for r in records] == [(r["target_i"], r["target_j"])
                                                                 for r in reference.records]
    assert summary["reference_match"] is True and summary["first_mismatch"] is None
    for key in ("converged", "word", "consensus_time", "rounds", "interactions", "successes"):
        assert summary[key] == reference.summary[key], key
    assert summary["bad_messages"] == 0 and summary["callback_errors"] == 0
    assert summary["implausible"] == {"outside": 0, "jump": 0, "future": 0, "past": 0}
    assert summary["suspected_robots"] == []
    assert summary["timeouts"] == [0] * cfg.num_robots
    # every robot ended at the point of its last word: within arrival_tolerance_m, or (collision avoidance, auto =
    # cbf through ROS) packed around it with the robots of the same word
    assert summary["arrived"] is True and summary["collision_avoidance"] == "cbf"
    final = reference.summary["final_words"]
    for rob, word in zip(summary["robots"], final):
        assert rob["word"] == word
        point = [[-4.0, 0.0], [4.0, 0.0]][word]
        assert rob["target"] == point
        radius = arrival_radius(cfg.arrival_tolerance_m, final.count(word), summary["d_min_m"])
        assert rob["arrival_radius_m"] == pytest.approx(radius)
        assert np.linalg.norm(np.subtract(rob["position"], point)) <= radius
    # and no two robots ever came closer than the clearance (footprints + margin) the filter keeps: from the
    # odometry of the run's bag
    closest, robots_seen = _closest_in_bag(out)
    assert robots_seen == cfg.num_robots and closest >= summary["clearance_m"], closest
    assert summary["collision"]["infeasible"] == 0


def _closest_in_bag(out: Path) -> tuple[float, int]:
    """(smallest distance between two robots' newest odometry at any odometry message, robots seen)."""
    from support.bag_odometry import odometry_in_bag

    odom = odometry_in_bag(out)
    return odom.closest, odom.robots


@pytest.mark.ros
def test_ros_fleet_says_the_reference_words_and_gathers_at_both_points(tmp_path, monkeypatch):
    # seed 4: five rounds without convergence; the robots end split between A and B
    summary, out, cfg = _run_ros(tmp_path, monkeypatch, seed=4, policy=_table(tmp_path))
    assert summary["converged"] is False and summary["rounds"] == 5
    assert {rob["word"] for rob in summary["robots"]} == {0, 1}
    _check_against_reference(summary, out, cfg)


@pytest.mark.ros
def test_ros_robots_in_their_own_processes_converge_like_the_reference(tmp_path, monkeypatch):
    # seed 9: converges on word 1 (point B) at round 5
    summary, out, cfg = _run_ros(tmp_path, monkeypatch, seed=9, single_process=False)
    assert summary["converged"] is True and summary["word"] == 1 and summary["consensus_time"] == 5
    _check_against_reference(summary, out, cfg)


@pytest.mark.ros
def test_ros_a_robot_that_never_answers_is_timed_out_and_bad_records_are_counted(tmp_path, monkeypatch):
    """Robot 3's process is missing; a probe node reports a position for it (so the game starts) and sends a
    malformed word record: every interaction of robot 3 is skipped and counted, the rest of the game goes on."""
    import threading
    import time

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import String

    from consensus.ros.qos import EVENTS
    from consensus.ros.qos import profile
    from consensus.scenarios.naming_game.ros import protocol

    WORDS, GAME_QOS = protocol.NAMING_GAME_WORDS.name, profile(protocol.NAMING_GAME_WORDS)

    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(zip(("summary", "out", "cfg"), _run_ros(
        tmp_path, monkeypatch, drop=("robot_3",), seed=2, single_process=False, max_population_rounds=2,
        answer_timeout_s=0.5))))
    rclpy.init()
    node = Node("naming_probe")
    status = node.create_publisher(String, "/robot_3/planner/status", EVENTS)
    words = node.create_publisher(String, WORDS, GAME_QOS)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while runner.is_alive() and time.monotonic() < deadline:
            status.publish(String(data=json.dumps({"robot": 3, "position": [0.0, 0.0]})))
            words.publish(String(data="not a record"))
            executor.spin_once(timeout_sec=0.2)
    finally:
        runner.join(timeout=60)
        node.destroy_node()
        rclpy.shutdown()
    summary, out = result["summary"], result["out"]
    records = [json.loads(line) for line in (out / "interactions.jsonl").read_text().splitlines()]
    with_3 = [r for r in records if 3 in (r["i"], r["j"])]
    assert with_3 and all(r["skipped"] and r["missing"] == [3] and r["word_i"] is None for r in with_3)
    assert not any(r["skipped"] for r in records if r not in with_3)
    assert summary["timeouts"] == [0, 0, 0, len(with_3)] and summary["skipped"] == len(with_3)
    assert summary["interactions"] == len(records) == 8 and summary["played"] == 8 - len(with_3)
    assert summary["bad_messages"] >= 1
    assert summary["robots"][3]["word"] is None and summary["arrived"] is True
