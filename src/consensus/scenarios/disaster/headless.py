"""Dynamic disaster response without ROS (paper 2, scenario 1): the batch twin of the ROS launch.

``run_disaster_headless(cfg)`` runs ``cfg.rounds`` rounds of

    obs = env.begin_round()                         environment update, spawn, situation report
    decision = rounds.run_round(drones, obs, cells)  discussion turns, then the implicit or explicit action phase
    cells = motion(cells, decision.actions)          where each drone is at the round's end
    outcome = env.end_round(cells, decision.actions) containment, rewards, penalties, metrics

with the drones of ``agents.make_drones`` for the baseline-resolved config (``DisasterConfig.resolved``).
Drones start on cells drawn uniformly from ``numpy.random.default_rng([seed, 11])`` (the environment draws from its
own ``default_rng(seed)``). With an LLM team the drones of one phase are asked in parallel on a thread pool of
``llm_concurrency`` workers; results are used in drone order, so a run is deterministic whenever the client is.

Motion:

* ``teleport`` (the paper): each drone is on its chosen cell at the round's end;
* ``kinematic``: a drone flies for ``round_time_s`` from its position towards the centre of its chosen cell,
  ``((x + 0.5) s, (y + 0.5) s)`` with ``s = cell_size_m``, steps of ``control_period_s``. Each drone is the robot
  core a ROS drone runs (``consensus.control.robot_core.RobotCore`` with the drones' controller settings,
  ``drone_control.controller_config``: P controller with ``kp``, ``v_max``, ``deadband``, the grid as the
  geofence, the safety rules), stepped by the fleet core, its body a single integrator of the kinematic world
  (``consensus.control.dynamics.world``); it attends the cell it is in at the round's end, ``(floor(px / s),
  floor(py / s))`` clipped to the grid. A far cell takes more than one round. The positions of every step go to
  ``trajectories.csv`` (with each drone's goal). Collision avoidance (``collision_avoidance``; ``auto`` is ``none``
  here, as in the paper): with ``cbf`` every drone filters its command (``consensus.control.avoidance``), knowing
  every position of the same instant; drones that start on one cell stand on a circle around its centre
  (``start_positions``). Each drone is sent to its cell by the ROS drones' own flight command
  (``drone_control.fly_to_cell``): the k drones sent to one cell take the k slots centred on it, as the ROS drones
  do (the same core and command: they pack into the same slots), and a drone attends its chosen cell within the
  grid node's radius of its centre (``metrics.CellSlots.attend_radius``; ``attended_cells``), even over a
  neighbouring cell. The summary then holds ``collision_avoidance``, ``clearance_m``, ``collision`` (the
  drones' filter counters summed) and ``min_pair_distance_m`` (the closest two drones came, from the
  trajectories).

The filter needs velocities: with ``teleport`` there are none, and it does not apply (``collision_avoidance`` is
reported as ``none``).

Run directory (``out_dir``; the layout of ``consensus.runs.rundir``)::

    manifest.json       config, seed, scenario, backend, model, git revision, packages, command
    params.yaml         the /**: parameters file of the run (what the ROS nodes would be started with)
    rounds.jsonl        one line per round: observation (disasters, report), cells at the start, the decision
                        (messages, proposals, votes, actions, every reply, counters), cells at the end, outcome
    transcripts.jsonl   every LLM exchange (LLM runs whose client this function created; replay with --replay)
    trajectories.csv    kinematic runs: t, robot, x, y, target_x, target_y
    summary.json        the metrics of consensus.scenarios.disaster.metrics.summarize (coverage_rate,
                        misallocation_penalty, response_delay, net_reward, mean_deviation, series, ...), LLM
                        counters (llm_calls, llm_fallbacks, llm_fallbacks_by_reason, tokens, ...), the settings
    coverage_deviation.png/.svg   CR(t) and d̄(t) over the rounds
"""
from __future__ import annotations

import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from consensus.control.avoidance import Avoidance, avoidance_from_config, sum_collision
from consensus.control.fleet_core import FleetCore, NearbyBatch
from consensus.control.robot_core import RobotCore
from consensus.control.dynamics.world import KinematicWorld
from consensus.metrics.convergence import arrival_radius, min_pair_distance_series
from consensus.scenarios.disaster import metrics
from consensus.scenarios.disaster.drone_control import controller_config, fly_to_cell
from consensus.scenarios.disaster.environment import cell_centre
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.scenarios.disaster.environment import DisasterEnv
from consensus.scenarios.disaster.plots import plot_run
from consensus.scenarios.disaster.rounds import add_round_counters, run_round
from consensus.llm.base import LLMClient
from consensus.scenarios.disaster.agents import Cell, make_coordinator, make_drones
from consensus.runs.rundir import new_run_dir, write_json, write_manifest, write_trajectories
from consensus.settings import RobotBaseConfig


def start_cells(cfg: DisasterConfig) -> list[Cell]:
    """The drones' start cells, uniform on the grid from ``default_rng([seed, 11])``."""
    rng = np.random.default_rng([cfg.seed, 11])
    return [(int(rng.integers(cfg.width)), int(rng.integers(cfg.height))) for _ in range(cfg.num_robots)]


def start_positions(cfg: DisasterConfig, cells: list[Cell], d_min: float | None) -> np.ndarray:
    """Where the drones start: their start cells' centres; with collision avoidance (``d_min``) the k >= 2 drones
    of one cell stand evenly on a circle around its centre, ``1.1 d_min`` apart (drones at one point would stop
    for good: the filter has no direction to push them apart)."""
    pos = cell_centre(cells, cfg.cell_size_m).reshape(len(cells), 2)
    if d_min is None:
        return pos
    groups: dict[Cell, list[int]] = {}
    for i, c in enumerate(cells):
        groups.setdefault(tuple(c), []).append(i)
    for members in groups.values():
        k = len(members)
        if k < 2:
            continue
        r = 0.55 * d_min / np.sin(np.pi / k)
        for m, i in enumerate(members):
            a = 2.0 * np.pi * m / k
            pos[i] += r * np.array([np.cos(a), np.sin(a)])
    return pos


def cells_under(positions: np.ndarray, cfg: DisasterConfig) -> list[Cell]:
    """The cell under each position: ``(floor(x / s), floor(y / s))`` clipped to the grid."""
    idx = np.floor(np.asarray(positions, dtype=float) / cfg.cell_size_m).astype(int)
    return [(int(min(max(x, 0), cfg.width - 1)), int(min(max(y, 0), cfg.height - 1))) for x, y in idx]


def attended_cells(positions: np.ndarray, goals: list[Cell] | None, cfg: DisasterConfig,
                   d_min: float | None, radii: Sequence[float] | None = None) -> list[Cell]:
    """The cell each drone attends: the cell under it (``cells_under``); with collision avoidance (``d_min``, the
    filter's) a drone within ``arrival_radius(s / 2, k, d_min)`` of its goal cell's centre, k the drones sent to
    that cell, attends its goal (drones kept ``d_min`` apart pack around a shared cell's centre and may stand over
    a neighbouring cell). ``radii`` (one per drone) replaces that radius: through ROS the drones fly to slots, and
    drone i attends its goal within ``radii[i]`` of its centre (``metrics.CellSlots.attend_radius``)."""
    under = cells_under(positions, cfg)
    if d_min is None or goals is None:
        return under
    counts = Counter(goals)
    out = []
    for i, (cell, goal) in enumerate(zip(under, goals)):
        dist = float(np.linalg.norm(np.asarray(positions[i], dtype=float) - cell_centre(goal, cfg.cell_size_m)))
        radius = radii[i] if radii is not None else arrival_radius(0.5 * cfg.cell_size_m, counts[goal], d_min)
        out.append(goal if dist <= radius else cell)
    return out


def flight_avoidance(cfg: DisasterConfig, base: RobotBaseConfig) -> Avoidance | None:
    """The collision filter of a headless kinematic flight (None: teleport, or ``none`` by the rule): that of the
    drones' controller settings ``base`` (``drone_control.controller_config``: the grid as the geofence), as a ROS
    drone's."""
    return avoidance_from_config(base, ros=False) if cfg.motion == "kinematic" else None


class KinematicFlight:
    """The drones' flight on their own robot cores (module docstring): each drone is the ``RobotCore`` a ROS drone
    runs (``drone_control.controller_config``), all stepped together by the fleet core, their bodies moved in the
    kinematic world; every drone knows every position of the same instant. Each drone is sent to its chosen cell by
    the ROS drones' flight command (``drone_control.fly_to_cell``: the k drones that chose one cell take the k slots
    centred on it), so headless and ROS drones pack into the same slots; with the filter a drone attends its chosen
    cell within the grid node's radius (``metrics.CellSlots.attend_radius``). Keeps every sample."""

    def __init__(self, cfg: DisasterConfig, cells: list[Cell]) -> None:
        self.cfg = cfg
        base, _ = controller_config(cfg)
        self.avoid = flight_avoidance(cfg, base)
        self.cores = [RobotCore(base, i, None, avoid=flight_avoidance(cfg, base)) for i in range(cfg.num_robots)]
        self.fleet = FleetCore(self.cores)
        self.slots = (None if self.avoid is None
                      else metrics.CellSlots(cfg.cell_size_m, self.avoid, base.packing_gap_m, base.workspace))
        self.goals: list[Cell] | None = None
        self.attend_radii: list[float] | None = None
        self.steps = max(1, int(round(cfg.round_time_s / cfg.control_period_s)))
        start = start_positions(cfg, cells, None if self.avoid is None else self.avoid.d_min_m)
        self.world = KinematicWorld(base, start, seed=cfg.seed)
        self.speed = np.zeros(cfg.num_robots)
        self.times: list[float] = [0.0]
        self.positions: list[np.ndarray] = [self.pos.copy()]
        self.targets: list[np.ndarray] = []

    @property
    def pos(self) -> np.ndarray:
        """The drones' positions ``(n, 2)`` now."""
        return self.world.poses()[:, :2]

    def cells(self) -> list[Cell]:
        return attended_cells(self.pos, self.goals, self.cfg, None if self.avoid is None else self.avoid.d_min_m,
                              self.attend_radii)

    def fly(self, goals: list[Cell]) -> list[Cell]:
        """Every drone flies ``round_time_s`` towards its chosen cell; the cells they attend at the end."""
        self.goals = [tuple(g) for g in goals]
        if self.slots is not None:
            _, self.attend_radii = self.slots.radii(self.goals)
        t = self.times[-1]
        for core, goal in zip(self.cores, self.goals):
            fly_to_cell(core, goal, self.goals, self.cfg.cell_size_m, t)
        n, dt = len(self.cores), self.cfg.control_period_s
        ids = np.arange(n)
        for _ in range(self.steps):
            pos = self.pos
            for i, core in enumerate(self.cores):
                core.observe(t, pos[i])
                core.alive(t)                       # the round clock (this loop) is alive
            nearby: list | NearbyBatch = [None] * n
            if self.avoid is not None:              # row i: every other drone's position now (NaN: itself)
                known = np.repeat(pos[None, :, :], n, axis=0)
                known[ids, ids] = np.nan
                nearby = NearbyBatch(known, np.zeros((n, n)), np.repeat(self.speed[None, :], n, axis=0), ids)
            cmds = self.fleet.step(t, nearby)
            self.targets.append(np.array([c.goal if c.goal is not None else core.meeting_point
                                          for c, core in zip(cmds, self.cores)], dtype=float))
            self.world.set_commands(np.array([[c.vx, c.vy, c.wz] for c in cmds]))
            self.world.advance(dt)
            self.speed = np.linalg.norm(self.pos - pos, axis=1) / dt
            t += dt
            self.times.append(t)
            self.positions.append(self.pos.copy())
        return self.cells()

    def collision_summary(self) -> dict:
        """``collision_avoidance`` (cbf | none), ``min_pair_distance_m`` (from every sample) and, with the filter,
        ``clearance_m`` (the distance it keeps between drone centres) and ``collision`` (the drones' filter counters
        summed)."""
        mins = min_pair_distance_series(np.asarray(self.positions))
        out: dict = {"collision_avoidance": "none" if self.avoid is None else "cbf",
                     "min_pair_distance_m": float(np.nanmin(mins)) if np.isfinite(mins).any() else None}
        if self.avoid is not None:
            record = self.avoid.info()
            record.update(sum_collision([c.avoid.info() for c in self.cores]))
            out.update(clearance_m=self.avoid.clearance_m, collision=record)
        return out

    def write(self, path: Path) -> None:
        targets = self.targets + [self.targets[-1] if self.targets else self.positions[0]]
        write_trajectories(path, np.asarray(self.times), np.asarray(self.positions), np.asarray(targets))


def _client(cfg: DisasterConfig, out: Path | None):
    from consensus.llm.from_config import client_from_config     # duck-typed: planner and llm_* fields

    return client_from_config(cfg, out / "transcripts.jsonl" if out is not None else None)


def run_disaster_headless(cfg: DisasterConfig, client: LLMClient | None = None, out_dir: str | Path | None = None,
                          progress: Callable[[int, int], None] | None = None) -> dict:
    """Run the scenario; returns the summary (and writes the run directory when ``out_dir`` is given).

    ``client`` is used as given (not closed); without one an LLM run creates it from the config (recording
    ``transcripts.jsonl`` in ``out_dir``) and closes it at the end. ``progress(done, total)`` after each round.
    """
    cfg.validate()
    out = new_run_dir(out_dir) if out_dir is not None else None
    if out is not None:
        cfg = cfg.replace(output_dir=str(out))
    run = cfg.resolved()
    if out is not None:
        write_manifest(out, scenario="disaster", config=cfg.to_dict(), seed=cfg.seed,
                       **cfg.manifest_llm(), mode="headless",
                       extra={"resolved": {k: v for k, v in run.to_dict().items() if cfg.to_dict()[k] != v}})
        (out / "params.yaml").write_text(cfg.to_ros_params_yaml())
    with ExitStack() as stack:
        if client is None and run.uses_llm():
            client, close = _client(run, out)
            stack.callback(close)
        summary = _simulate(run, client, out, progress, stack)
    summary.update(baseline=cfg.baseline, label=cfg.baseline if cfg.baseline != "none" else summary["label"])
    if out is not None:
        title = (f"Disaster response: {summary['label']}, N={run.num_robots}, roles={run.roles}, "
                 f"volatility={run.volatility}, seed={run.seed}")
        plot_run(summary["series"], out / "coverage_deviation.png", title=title)
        summary["plots"] = ["coverage_deviation.png"]
        write_json(out / "summary.json", summary)
    return summary


def _simulate(run: DisasterConfig, client: LLMClient | None, out: Path | None, progress, stack: ExitStack) -> dict:
    env = DisasterEnv(run.env_config(), seed=run.seed)
    drones = make_drones(run, client)
    coordinator = make_coordinator(run, client)
    cells = start_cells(run)
    flight = KinematicFlight(run, cells) if run.motion == "kinematic" else None
    workers = min(run.llm_concurrency, run.num_robots) if run.planner == "llm" else 1
    map_fn = stack.enter_context(ThreadPoolExecutor(workers, thread_name_prefix="drone")).map if workers > 1 else map
    log = stack.enter_context((out / "rounds.jsonl").open("w")) if out is not None else None
    outcomes, counters, previous = [], {}, []
    t0 = time.monotonic()
    for r in range(run.rounds):
        obs = env.begin_round()
        decision = run_round(drones, obs, cells, mode=run.mode, strategy=run.strategy,
                             discussion_turns=run.discussion_turns, coordinator=coordinator,
                             max_agreement_turns=run.max_agreement_turns, previous=previous, map_fn=map_fn)
        before, previous = cells, decision.final_messages
        cells = flight.fly(decision.actions) if flight is not None else list(decision.actions)
        outcome = env.end_round(cells, decision.actions)
        outcomes.append(outcome)
        add_round_counters(counters, decision.counters)
        if log is not None:
            log.write(json.dumps({"round": r, "observation": obs.to_dict(), "cells_start": [list(c) for c in before],
                                  "decision": decision.to_dict(), "cells_end": [list(c) for c in cells],
                                  "outcome": outcome.to_dict()}, ensure_ascii=False) + "\n")
            log.flush()
        if progress is not None:
            progress(r + 1, run.rounds)
    elapsed = time.monotonic() - t0
    if flight is not None and out is not None:
        flight.write(out / "trajectories.csv")
    summary = metrics.summarize(outcomes, env.all_disasters(), env.round)
    summary.update(counters)
    summary.update(flight.collision_summary() if flight is not None else {"collision_avoidance": "none"})
    summary.update(
        label=run.mode if run.mode == "implicit" else f"explicit ({run.strategy})", planner=run.planner,
        mode=run.mode, strategy=run.strategy if run.mode == "explicit" else "", roles=run.roles,
        volatility=run.volatility, num_robots=run.num_robots, discussion_turns=run.discussion_turns,
        motion=run.motion, seed=run.seed, elapsed_s=round(elapsed, 3),
        rounds_per_s=round(run.rounds / elapsed, 2) if elapsed > 0 else None)
    return summary
