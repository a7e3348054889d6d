"""Paper 4's naming game played by a fleet of robots (issue item 6, "With robots"): the ROS-free half.

The game is the one of ``game.py`` and ``simulate.py``. Robots meet in pairs, each says one of the two words, and
the words are two rendezvous points: word 0 is point A and word 1 is point B (``rendezvous`` = [xA, yA, xB, yB]).
After each interaction a robot drives to the point of the word it has just said, so the fleet gathers at one
point once the population agrees. This module holds the game's parts, which the ROS nodes of ``ros/`` use as they
are, and ``play_headless``, the reference sequence of a seed:

* ``PairSchedule``: which two robots meet at interaction k = 0, 1, ... A numpy Generator on
  ``SeedSequence(seed, spawn_key=(SCHEDULE_STREAM,))`` draws i uniform in 0..N-1 and then j uniform among the
  other N-1 robots (the same distribution as ``simulate``). Population round t (1-based) is interactions
  (t-1)N .. tN-1.
* ``Player``: one robot's side. It holds its memory (a state of ``game.memory_space(H)``, empty at the start) and
  its own Generator on ``SeedSequence(seed, spawn_key=(ROBOT_STREAM, robot_id))``. ``say()`` makes exactly one
  draw u = ``random()`` per interaction the robot takes part in and says word 0 iff u < q[state] (so q = 0 and
  q = 1 are exact). ``hear(own, partner)`` shifts the memory through ``NEXT`` and makes the point of ``own`` the
  robot's target.
* ``Tally``: ``simulate``'s convergence rule over the played interactions. The last ``window_factor``·N outcomes
  are kept. At the end of each population round t, once the window is full, the game has converged if the window
  holds at least ``simulate.success_need(threshold, window)`` successes. The consensus time is t. The word is the
  majority of the window's 2·window utterances, and a tie goes to the word the first robot of the window's last
  interaction said. An interaction the ROS run skips (a robot did not answer) enters neither the window nor the
  success count, but it still counts towards its population round.

Every robot draws from its own stream, so the draws of different robots never interleave. A ROS run, where every
robot draws in its own process when the matchmaker names it, therefore says the same words as ``play_headless`` for
the same seed, q and settings, interaction by interaction. This holds as long as no interaction is skipped. A
skipped interaction costs the robot that did answer one draw, and from then on the run departs from the reference.

``RobotsGameConfig`` is the demo's config: the game's rules (``config.NamingGameParams``) played by
``FleetParams.num_robots`` robots (the fleet group: the count and the process layout), plus ``RobotsParams`` (the
control group, the pacing, the two points and the arrival check), with a short game by default (4 robots, at most
10 population rounds). ``fleet_policy`` resolves ``policy`` to the q
table. ``controller_config`` derives the ``RobotBaseConfig`` that the robots' controller and the kernel ``sim`` run
with, ``robot_processes`` lists the ROS processes of a run, and ``run`` is the runner (ROS, or ``play_headless``
into a run directory with ``headless``).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from consensus.errors import ConfigError
from consensus.robots.map import check_fence
from consensus.runs.processes import robot_base_overrides
from consensus.scenarios.naming_game.config import NamingGameParams
from consensus.scenarios.naming_game.game import memory_space
from consensus.scenarios.naming_game.policy import Policy
from consensus.settings import (ControlParams, FlatParams, FleetParams, LLMParams, PhysicsParams, RobotBaseConfig,
                                RunParams, SimParams, need, param)

SCHEDULE_STREAM = 0          # spawn_key of the pair schedule's generator
ROBOT_STREAM = 1             # spawn_key (ROBOT_STREAM, robot id) of each robot's generator
WORKSPACE = (-10.0, 10.0, -10.0, 10.0)   # the robots' geofence [xmin, xmax, ymin, ymax] (the kernel's default)
STATUS_PERIOD_S = 0.5        # every robot's planner/status (its position for the matchmaker's arrival check)
MAX_PERIOD_S = 60.0
MAX_ARRIVAL_TIMEOUT_S = 600.0
#: what a ROS record and a headless record must agree on, interaction by interaction
SEQUENCE_KEYS = ("round", "interaction", "i", "j", "state_i", "state_j", "word_i", "word_j", "success")


# ---------------------------------------------------------------------------------------------------- settings
@dataclass
class RobotsParams(ControlParams):
    """The fleet demo's settings: the control group (``consensus.settings.ControlParams``) plus these."""

    GROUP: ClassVar[str] = "game"     # its fields' ROS parameters: game.<name> (settings.ros_names)

    interaction_period_s: float = param(1.0,
        "the matchmaker announces one pair this often",
        bounds=(1e-3, MAX_PERIOD_S), unit="s")
    answer_timeout_s: float = param(2.0,
        "a robot's word is due this long after its pair is announced",
        bounds=(1e-3, MAX_PERIOD_S), unit="s")
    rendezvous: list[float] = param([-4.0, 0.0, 4.0, 0.0], "[xA, yA, xB, yB]: the points of word 0 and word 1",
                                    unit="m")
    arrival_tolerance_m: float = param(0.3,
        "after the game: a robot this close to its point has arrived (collision avoidance: at least the packing "
        "radius, ros/matchmaker.py)",
        bounds=(1e-3, 100.0), unit="m")
    arrival_timeout_s: float = param(30.0,
        "after the game: wait at most this long for every robot to arrive",
        bounds=(1e-3, MAX_ARRIVAL_TIMEOUT_S), unit="s")


    def _check_robots(self) -> None:
        need(self.arrival_tolerance_m > self.deadband,
             f"arrival_tolerance_m ({self.arrival_tolerance_m}) must exceed the controller's deadband "
             f"({self.deadband})")
        pts = self.rendezvous
        need(len(pts) == 4 and all(math.isfinite(v) for v in pts),
             f"rendezvous must be four numbers [xA, yA, xB, yB] (got {pts})")
        lo, hi = np.array(WORKSPACE[0::2]), np.array(WORKSPACE[1::2])
        arr = np.asarray(pts, dtype=float).reshape(2, 2)
        need(bool(((arr >= lo) & (arr <= hi)).all()), f"rendezvous points must lie in the workspace {list(WORKSPACE)} "
             f"(got {pts})")
        need(float(np.linalg.norm(arr[0] - arr[1])) > 2 * self.arrival_tolerance_m,
             f"the rendezvous points must be more than 2 * arrival_tolerance_m apart (got {pts})")

    def points(self) -> np.ndarray:
        """(2, 2): row w is the point of word w."""
        return np.asarray(self.rendezvous, dtype=float).reshape(2, 2)


@dataclass
class RobotsGameConfig(RunParams, FleetParams, NamingGameParams, RobotsParams, LLMParams, SimParams, PhysicsParams,
                       FlatParams):
    """The fleet demo's config (``config/naming_game_robots.yaml``): the naming game's rules played by a fleet of
    ``num_robots`` robots (the run, fleet, control, LLM and simulator groups are ``consensus.settings``')."""

    GROUP: ClassVar[str] = "game"     # its fields' ROS parameters: game.<name> (settings.ros_names)

    num_robots: int = param(4, "a short demo: 4 robots, ...")
    max_population_rounds: int = param(10, "... at most 10 population rounds")

    def check(self) -> None:
        need(self.num_robots >= 2, f"num_robots must be at least 2 for a naming game (got {self.num_robots})")
        need(not self.uses_llm(), "a robot fleet plays a fixed q table: extract the LLM's table first (consensus run "
             "naming-game --set policy=llm ...) and pass the run's policy.json as table:PATH")
        fleet_policy(self)            # a missing or bad table is refused before anything starts
        # the whole fleet may gather at one point: its packing must fit the (fixed) fence
        check_fence(self, WORKSPACE, widen=None)


def controller_config(cfg: RobotsGameConfig, **settings: Any) -> tuple[RobotBaseConfig, dict[str, Any]]:
    """The ``RobotBaseConfig`` of the robots' controller and of the ``sim`` in a fleet run of ``cfg``, and the
    parameters such a kernel node must get on top of the run's params file.

    The fields ``cfg`` shares with ``RobotBaseConfig`` (seed, output_dir, llm_*, the control group and the fleet
    group: num_robots, single_process, executor) are taken over; the game's ``max_population_rounds`` is not the base's
    ``max_rounds`` (planning rounds, left at 0 = unlimited). On top: 2-D, the geofence ``WORKSPACE``, status every
    ``STATUS_PERIOD_S``, and ``settings``. Validated (ConfigError). The overrides are the settings above and every
    field whose value differs from what a node reading the params file would get."""
    wanted: dict[str, Any] = dict(dim=2, workspace=list(WORKSPACE),
                                  planner_period_s=max(STATUS_PERIOD_S, cfg.control_period_s))
    return robot_base_overrides(cfg, {**wanted, **settings}, source="naming-game fleet (controller/sim settings)")


def robot_processes(cfg: RobotsGameConfig, *, use_sim_time: bool = False) -> list:
    """The ROS processes of a fleet run of ``cfg``: the simulator (``sim``: ``consensus.sims.sim_processes``; the
    kernel's ``sim`` by default, turtlesim's turtles holonomic), the robots (executable ``naming_robot``: one process
    ``/fleet``, or one ``/robot_<i>/agent`` per robot with ``single_process: false``) and ``naming_matchmaker``, which
    ends the run. Validates the controller settings first (ConfigError)."""
    from consensus.runs.processes import ProcessSpec, bag_specs, robot_specs
    from consensus.sims import sim_processes

    _, sim_overrides = controller_config(cfg, publish_clock=bool(use_sim_time))
    sim_time = {"use_sim_time": bool(use_sim_time)}
    specs = sim_processes(cfg, {**sim_overrides, "use_sim_time": False}, use_sim_time=use_sim_time)
    specs += robot_specs("naming_robot", cfg, sim_time)
    specs.append(ProcessSpec("naming_matchmaker", "matchmaker", params=sim_time, ends_run=True))
    specs += bag_specs(cfg, sim_time)              # MCAP bag of the run (always: no bag switch here)
    return specs


# ---------------------------------------------------------------------------------------------------- the policy
def fleet_policy(cfg: RobotsGameConfig) -> Policy:
    """The policy ``cfg.policy`` names (``memory_invariant:P``, ``fixed_bias:P`` or ``table:PATH[#MODEL/W0,W1]``),
    resolved as ``consensus run naming-game`` resolves it (``runner.policy_of``)."""
    from consensus.scenarios.naming_game.runner import policy_of

    pol = policy_of(cfg)
    if pol.H != cfg.memory:
        raise ConfigError(f"policy '{cfg.policy}' has memory H = {pol.H}, the run has memory {cfg.memory}")
    return pol


# ---------------------------------------------------------------------------------------------------- the game
def schedule_generator(seed: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(SCHEDULE_STREAM,)))


def robot_generator(seed: int, robot_id: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(ROBOT_STREAM, int(robot_id))))


class PairSchedule:
    """The ordered pairs (i, j), i != j, of interactions 0, 1, ... of a population of ``n`` (module docstring)."""

    def __init__(self, seed: int, n: int) -> None:
        if n < 2:
            raise ConfigError(f"a naming game needs at least 2 robots (got {n})")
        self.n = n
        self.rng = schedule_generator(seed)
        self.k = 0          # interactions drawn so far

    def next(self) -> tuple[int, int]:
        i = int(self.rng.integers(self.n))
        j = int(self.rng.integers(self.n - 1))
        self.k += 1
        return i, (j + 1 if j >= i else j)


class Player:
    """One robot's side of the game: its memory, its generator, its last word and the point it drives to."""

    def __init__(self, robot_id: int, q, H: int, seed: int, points=None) -> None:
        self.id = int(robot_id)
        self.space = memory_space(H)
        self.q = np.asarray(q, dtype=float)
        if self.q.shape != (len(self.space),):
            raise ConfigError(f"q must have {len(self.space)} entries for H = {H} (got {self.q.shape})")
        self.points = None if points is None else np.asarray(points, dtype=float).reshape(2, 2)
        self.rng = robot_generator(seed, robot_id)
        self.state = self.space.EMPTY
        self.word: int | None = None      # the word of the last interaction played
        self.played = 0                   # interactions played (memory shifts)
        self.draws = 0                    # words said (one draw each; a skipped interaction still costs one)

    @property
    def key(self) -> str:
        return self.space.keys[self.state]

    def say(self) -> int:
        """This interaction's word: one draw from the robot's generator, word 0 iff u < q[state]."""
        self.draws += 1
        return 0 if self.rng.random() < self.q[self.state] else 1

    def hear(self, own: int, partner: int) -> None:
        """The interaction is over: shift the memory by (own, partner); the target becomes the point of ``own``."""
        self.state = int(self.space.NEXT[self.state, own, partner])
        self.word = int(own)
        self.played += 1

    @property
    def target(self) -> np.ndarray | None:
        return None if self.word is None or self.points is None else self.points[self.word]


class Tally:
    """``simulate``'s convergence rule over the played interactions (module docstring)."""

    def __init__(self, n: int, threshold: float, window_factor: int) -> None:
        from consensus.scenarios.naming_game.simulate import success_need

        self.n = n
        self.window = window_factor * n
        self.need = success_need(threshold, self.window)
        self.ring: deque[tuple[int, int]] = deque(maxlen=self.window)   # (word_i, word_j) of played interactions
        self.played = 0
        self.successes = 0
        self.converged = False
        self.word = -1
        self.time: int | None = None

    def add(self, word_i: int, word_j: int) -> None:
        self.ring.append((int(word_i), int(word_j)))
        self.played += 1
        self.successes += int(word_i == word_j)

    def window_successes(self) -> int:
        return sum(a == b for a, b in self.ring)

    def end_round(self, t: int) -> bool:
        """Population round ``t`` is over: has the game converged (now or before)?"""
        if self.converged:
            return True
        if len(self.ring) == self.window and self.window_successes() >= self.need:
            zeros = sum(2 - a - b for a, b in self.ring)
            self.converged, self.time = True, int(t)
            self.word = 0 if zeros > self.window else 1 if zeros < self.window else self.ring[-1][0]
        return self.converged


def interaction_record(t: int, k: int, i: int, j: int, key_i: str, key_j: str, word_i: int, word_j: int,
                       points: np.ndarray | None) -> dict:
    """One interaction as the reference and the ROS run record it (``interactions.jsonl``); ``target_i/j`` are the
    points the two robots drive to afterwards."""
    rec = {"round": t, "interaction": k, "i": i, "j": j, "state_i": key_i, "state_j": key_j, "word_i": word_i,
           "word_j": word_j, "success": word_i == word_j}
    if points is not None:
        rec.update(target_i=[float(v) for v in points[word_i]], target_j=[float(v) for v in points[word_j]])
    return rec


def game_summary(cfg: Any, tally: Tally, rounds: int, interactions: int, players: list | None = None) -> dict:
    """The summary fields the reference and the ROS run share."""
    out = {"num_robots": cfg.num_robots, "memory": cfg.memory, "seed": cfg.seed, "policy": cfg.policy,
           "max_population_rounds": cfg.max_population_rounds, "window": tally.window, "success_need": tally.need,
           "converged": tally.converged, "word": tally.word, "consensus_time": tally.time, "rounds": rounds,
           "interactions": interactions, "played": tally.played, "successes": tally.successes,
           "success_rate": tally.successes / tally.played if tally.played else None}
    if players is not None:
        out.update(final_states=[p.key for p in players], final_words=[p.word for p in players],
                   final_targets=[None if p.target is None else [float(v) for v in p.target] for p in players])
    return out


class Played(NamedTuple):
    records: list[dict]
    summary: dict


def play_headless(cfg: Any, q) -> Played:
    """The reference game of ``cfg`` (``num_robots``, ``memory``, ``seed``, ``max_population_rounds``,
    ``threshold``, ``window_factor``; ``rendezvous`` when it has one) with policy ``q`` (a ``Policy`` or an array of
    P(word 0) per memory state): every interaction until convergence or ``max_population_rounds`` population rounds,
    as records (``interaction_record``), and the summary (``game_summary``)."""
    q = q.q if isinstance(q, Policy) else Policy(np.asarray(q, dtype=float), cfg.memory).q
    n = cfg.num_robots
    points = np.asarray(cfg.rendezvous, dtype=float).reshape(2, 2) if hasattr(cfg, "rendezvous") else None
    schedule = PairSchedule(cfg.seed, n)
    players = [Player(r, q, cfg.memory, cfg.seed, points) for r in range(n)]
    tally = Tally(n, cfg.threshold, cfg.window_factor)
    records: list[dict] = []
    t = 0
    while t < cfg.max_population_rounds and not tally.converged:
        t += 1
        for _ in range(n):
            k = schedule.k
            i, j = schedule.next()
            pi, pj = players[i], players[j]
            key_i, key_j = pi.key, pj.key
            a, b = pi.say(), pj.say()
            pi.hear(a, b)
            pj.hear(b, a)
            tally.add(a, b)
            records.append(interaction_record(t, k, i, j, key_i, key_j, a, b, points))
        tally.end_round(t)
    return Played(records, game_summary(cfg, tally, t, len(records), players))


def sequence(records: list[dict]) -> list[tuple]:
    """The part of the records a ROS run and the reference must agree on (``SEQUENCE_KEYS``)."""
    return [tuple(rec[key] for key in SEQUENCE_KEYS) for rec in records]


# ---------------------------------------------------------------------------------------------------- the runner
SCENARIO = "naming-game-robots"


def run(cfg: RobotsGameConfig, out, *, headless: bool = False, use_sim_time: bool = False, echo=print) -> dict:
    """The runner of ``consensus run naming-game-robots``: the ROS processes (``robot_processes``) until the
    matchmaker ends the run, or with ``headless`` the reference game (``play_headless``) into the same run-directory
    files (``params.yaml``, ``manifest.json``, ``interactions.jsonl``, ``summary.json``). Returns the summary."""
    from pathlib import Path

    from consensus.runs.processes import prepare_run

    if not headless:
        from consensus.runs.ros_runner import run_processes
        from consensus.sims import prepare_sim

        cfg, _ = prepare_sim(cfg, holonomic=True)        # the simulator's checks; the robots stay as they are
        specs = robot_processes(cfg, use_sim_time=use_sim_time)       # validates the controller settings first
        cfg, params = prepare_run(cfg, out, scenario=SCENARIO)
        return run_processes(specs, params, Path(cfg.output_dir), llm_base_url=cfg.llm_base_url, echo=echo)
    import json

    from consensus.runs.rundir import new_run_dir, write_json, write_manifest

    out = new_run_dir(out)
    cfg = cfg.replace(output_dir=str(out))
    (out / "params.yaml").write_text(cfg.to_ros_params_yaml())
    write_manifest(out, scenario=SCENARIO, config=cfg.to_dict(), seed=cfg.seed, backend="none", model="",
                   mode="headless")
    policy = fleet_policy(cfg)
    echo(f"naming game with robots (headless reference): N={cfg.num_robots}, H={cfg.memory}, seed {cfg.seed}, "
         f"policy {policy.name or cfg.policy} -> {out}")
    played = play_headless(cfg, policy)
    with (out / "interactions.jsonl").open("w") as fh:
        fh.writelines(json.dumps(rec) + "\n" for rec in played.records)
    summary = {**played.summary, "scenario": SCENARIO, "runtime": "headless", "words": list(policy.words),
               "word_name": policy.words[played.summary["word"]] if played.summary["converged"] else None,
               "rendezvous": cfg.points().tolist()}
    write_json(out / "summary.json", summary)
    return summary


def _fmt(value) -> str:
    return format(value, ".3f") if isinstance(value, float) else str(value)


def result_line(summary: dict) -> str:
    """One line: the outcome of a fleet run (ROS or headless)."""
    if summary.get("converged"):
        head = f"converged on word {summary['word']} ({summary.get('word_name')}) at round {summary['consensus_time']}"
    else:
        head = f"not converged after {summary.get('rounds')} rounds"
    line = f"{head}; {summary.get('interactions')} interactions, success rate {_fmt(summary.get('success_rate'))}"
    if summary.get("runtime") == "ros":
        line += (f"; skipped {summary.get('skipped')}, reference match {summary.get('reference_match')}, "
                 f"arrived {summary.get('arrived')}")
    return line
