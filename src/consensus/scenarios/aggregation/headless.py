"""Multi-robot aggregation without ROS (paper 1, section 4), and pure negotiation (sections 2-3).

``run_headless`` is the batch twin of the ROS launch: the same planners (``planners_from_config``)
and controllers, but a synchronous loop in one process:

* initial positions: ``cfg.initial_positions`` or uniform in ``[-init_radius, init_radius]^dim``
  from ``numpy.random.default_rng(cfg.seed)``, clipped to the workspace;
* every ``planner_period_s`` (a round) each robot plans from the positions at the round start and
  hears only its in-neighbours (``cfg.graph()``). A fallback (``meeting_point=None``) keeps the robot's
  previous meeting point, or its position at the round start in round 0;
* then ``round(planner_period_s / control_period_s)`` control steps at ``dt = control_period_s``: each
  kinematics' controller (``consensus.control.dynamics``: a P controller for a single integrator, a unicycle
  controller for a unicycle, initial yaw 0, paper 1's 2-D robot for ``point_mass_pid``: ``PointMassPID``, 15 kg, PID
  force; the paper's code uses ``planner_period_s = 2`` and ``control_period_s = 0.1``, i.e. 20 steps a round), the
  bodies moved by the world of ``cfg.sim`` (``consensus.sims.headless_world``: the kinematic world, the one the ROS
  ``sim`` node wraps, or MuJoCo's). With ``dim == 1`` robots move along x only;
* collision avoidance (``cfg.resolved_collision_avoidance(ros=False)``: ``auto`` is ``none`` here, the papers'
  point robots, unless a ``robots_file`` names real robots): with ``cbf`` every command goes through the
  barrier-certificate filter (``consensus.control.avoidance``; every robot knows every position of the same
  instant). The point mass takes no velocity: its PID is given the target whose force brings its velocity to the
  filtered set-point ``u`` (``PointMassPID.target_for_velocity``; a target at its own position would let the
  frictionless mass coast on, its PID acting on the position error only), so it brakes at its force limit, which
  the braking margin of ``d_min`` covers. The robots then pack
  around the meeting point: convergence is judged on the targets and a packing radius (``SettleWatch`` is fed
  ``agreement_measure``; ``consensus.metrics.convergence.convergence_summary`` with ``d_min``), and the summary
  holds ``collision_avoidance``, ``collision`` (``Avoidance.info()``) and ``min_pair_distance_m``;
* the number of rounds is ``rounds``, else ``cfg.max_rounds``, else ``floor(duration_s / planner_period_s)``;
  with ``cfg.settle_s > 0`` the loop ends after the round in which the spread has stayed below ``converge_tol_m``
  for ``settle_s`` (``SettleWatch``, sampled at every control step; the series end there). The summary's
  ``end_reason`` says why the run ended (``converged_and_settled``, ``max_rounds`` or ``duration``);
* with the ``llm`` planner the robots of a round are asked in parallel on a thread pool of
  ``cfg.llm_concurrency`` workers; results are used in robot order, so runs are deterministic
  whenever the client is.

Samples are taken at every control step: ``times[k] = k * control_period_s``, ``positions[k]`` the
positions at that time and ``targets[k]`` the target in force from that time on (the last sample
repeats the final target). ``targets`` is NaN where a robot has no target yet.

``run_negotiation`` is the paper's Algorithm 1 (no motion): each round every agent's new state is
the position its planner returns (a fallback keeps the current state).
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from numbers import Integral
from typing import Callable, Sequence

import numpy as np

from consensus.control.kinematics import initial_positions
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.errors import ConfigError
from consensus.graphs.topology import Graph
from consensus.llm.base import LLMClient
from consensus.control.avoidance import Avoidance, avoidance_from_config, sum_collision
from consensus.control.collision import near_identity_point
from consensus.control.fleet_core import FleetCore, NearbyBatch
from consensus.control.dynamics import dynamics_of
from consensus.sims import headless_world
from consensus.control.robot_core import Heard, RobotCore
from consensus.graphs.links import LinkModel
from consensus.metrics.convergence import SettleWatch, convergence_summary, packing_radius, spread
from consensus.control.planner import Planner, PlanRequest, PlanResult
from consensus.scenarios.aggregation.planners.factory import planners_from_config
from consensus.llm.counters import new_counters



@dataclass
class AggregationResult:
    times: np.ndarray                 # (T,)
    positions: np.ndarray             # (T, n, d)
    targets: np.ndarray               # (T, n, d), NaN before a robot's first target
    plan_log: list[dict] = field(default_factory=list)   # one entry per robot and round, see ``_log_entry``
    counters: dict = field(default_factory=new_counters)  # planner counters summed over robots
    summary: dict = field(default_factory=dict)
    world: object | None = None       # the world the bodies moved in (consensus.control.dynamics.world.World)


def count_rounds(cfg: AggregationConfig, rounds: int | None = None) -> int:
    """``rounds``, else ``cfg.max_rounds``, else ``floor(duration_s / planner_period_s)``."""
    if rounds is not None:
        if isinstance(rounds, bool) or not isinstance(rounds, Integral) or rounds < 0:
            raise ConfigError(f"rounds must be a non-negative integer (got {rounds!r})")
        return int(rounds)
    if cfg.max_rounds:
        return cfg.max_rounds
    return int(math.floor(cfg.duration_s / cfg.planner_period_s + 1e-9))


def run_headless(cfg: AggregationConfig, client: LLMClient | None = None, *, rounds: int | None = None,
                 progress: Callable[[int, int], None] | None = None) -> AggregationResult:
    """Simulate an aggregation run; ``progress(done_rounds, total_rounds)`` is called after each round.

    Every robot's decisions are its ``RobotCore`` (``consensus.control.robot_core``), the one the ROS robot node
    calls, stepped together by the fleet core (``consensus.control.fleet_core``) as in the ROS fleet process; this
    loop only simulates the bodies and the links between the robots (``consensus.graphs.links``)."""
    cfg.validate()
    n_rounds = count_rounds(cfg, rounds)
    planners = planners_from_config(cfg, client)
    graph = cfg.graph()
    n, d = cfg.num_robots, cfg.dim
    dt = cfg.control_period_s
    steps = max(1, int(round(cfg.planner_period_s / dt)))

    pos = initial_positions(cfg)
    yaw = np.zeros(n)
    dynamics = dynamics_of(cfg.kinematics)
    unicycle = dynamics.turns
    avoid = headless_avoidance(cfg)
    workers = min(cfg.llm_concurrency, n) if cfg.planner == "llm" else 1
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="planner") if workers > 1 else None
    on_mps = cfg.planner != "llm" and cfg.plans_on_meeting_points(ros=False)
    # a unicycle with the filter is filtered on its near-identity point, and here every robot knows the others'
    # points (consensus.control.robot_core: nearby_points)
    cores = [RobotCore(cfg, i, planners[i], pool=pool, avoid=headless_avoidance(cfg), meeting_points=on_mps,
                       nearby_points=unicycle) for i in range(n)]
    fleet = FleetCore(cores)          # every robot's control tick in one batched step (consensus.control.fleet_core)
    # what the robots broadcast (position, meeting point, measured speed) goes through the link model: over the
    # graph's links for planning, to everyone for the collision filter (as the ROS topology and nearby relays)
    width = 2 * d + 1
    link_kw = dict(delay_s=cfg.link_delay_s, drop_prob=cfg.link_drop_prob, rate_hz=1.0 / dt,
                   max_age_s=cfg.robot_timeout_s + cfg.link_delay_s)
    graph_links = LinkModel(n, width, seed=cfg.seed + 7919, **link_kw)
    nearby_links = LinkModel(n, width, seed=cfg.seed + 104729, **link_kw) if avoid is not None else None
    speed = np.zeros(n)
    # the world the bodies move in: the kinematic one, or a physics world (sim: mujoco) that also judges contacts
    world = headless_world(cfg, np.column_stack([pos, np.zeros((n, 3 - d))]), seed=cfg.seed)
    # paper 1's point mass without a filter: its PID acts on the goal itself, as in the paper's code
    pid_on_goal = dynamics.has_mass and avoid is None      # (MuJoCo refuses point masses: the kinematic world)

    def broadcast(t: float) -> None:
        for i, core in enumerate(cores):
            core.observe(t, pos[i], yaw[i])
        sample = np.column_stack([pos, np.array([c.own_meeting_point() for c in cores]), speed])
        graph_links.record_all(t, sample)
        if nearby_links is not None:
            if unicycle:
                sample = sample.copy()
                sample[:, :d] = near_identity_point(np.column_stack([pos, yaw]), avoid.offset)
            nearby_links.record_all(t, sample)

    total = n_rounds * steps + 1
    times = np.arange(total) * dt
    positions = np.full((total, n, d), np.nan)
    targets = np.full((total, n, d), np.nan)
    positions[0] = pos
    target = np.full((n, d), np.nan)
    plan_log: list[dict] = []
    counters = new_counters()

    settle = SettleWatch(cfg.converge_tol_m, cfg.settle_s)
    settle.update(0.0, agreement_measure(pos, target, avoid))
    end_reason = "max_rounds" if (rounds is not None or cfg.max_rounds) else "duration"
    rounds_run = n_rounds
    broadcast(0.0)
    try:
        for r in range(n_rounds):
            k0 = r * steps
            t0 = float(times[k0])
            settled = False
            values, _ = graph_links.deliver(t0, graph.adj)
            results = []
            for i, core in enumerate(cores):
                heard = values[i, graph.in_neighbors(i)]
                heard = heard[np.isfinite(heard[:, :d]).all(axis=1)]
                core.plan(t0, Heard(heard[:, :d], heard[:, d:2 * d]))
            for i, core in enumerate(cores):          # results in robot order: deterministic whenever the client is
                core.wait()
                res = core.pending.result()[1] if core.pending is not None else None
                rec = core.collect(t0)
                target[i] = core.meeting_point
                if rec is not None:
                    plan_log.append(_log_entry(t0, r, i, target[i], res))
                    results.append(res)
                    _count(counters, res)
            for k in range(k0, k0 + steps):
                t = float(times[k])
                targets[k] = target
                heard_nearby: list | NearbyBatch = [None] * n
                if nearby_links is not None:       # row i: what robot i holds of each robot (NaN: nothing)
                    nv, nt = nearby_links.deliver(t)
                    heard_nearby = NearbyBatch(nv[:, :, :d], t - nt, nv[:, :, 2 * d], np.arange(n))
                cmds = fleet.step(t, heard_nearby)
                world.set_commands(np.array([[c.vx, c.vy, c.wz] for c in cmds]))
                if pid_on_goal:
                    world.drive_to(np.array([c.goal if c.goal is not None else pos[i] for i, c in enumerate(cmds)]))
                world.advance(dt)
                pose = world.reported_poses()   # the robots see their odometry (noise, offset); the record: truth
                new = pose[:, :d]
                if unicycle:
                    yaw = pose[:, 2]
                speed = np.linalg.norm(new - pos, axis=1) / dt
                pos = new
                positions[k + 1] = world.poses()[:, :d]
                broadcast(float(times[k + 1]))
                settled = settle.update(float(times[k + 1]), agreement_measure(positions[k + 1], target, avoid))
            if progress is not None:
                progress(r + 1, n_rounds)
            if settled and r + 1 < n_rounds:
                end_reason, rounds_run = "converged_and_settled", r + 1
                break
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    end = rounds_run * steps + 1
    times, positions, targets = times[:end], positions[:end], targets[:end]
    targets[-1] = target

    summary = convergence_summary(times, positions, cfg.converge_tol_m, initial_positions=positions[0],
                                  targets=targets, d_min=None if avoid is None else avoid.d_min_m)
    summary.update(llm_calls=counters["calls"], llm_fallbacks=sum(counters["fallbacks"].values()),
                   parse_failures=counters["parse_failures"], clamped=counters["clamped"], rounds=rounds_run,
                   end_reason=end_reason, settle_s=cfg.settle_s,
                   **collision_summary(avoid, [c.avoid.info() for c in cores if c.avoid is not None]),
                   **packing_summary(cores))
    judged = world.judgement()            # a physics engine's own judgement of the bodies (not the filter's)
    if judged:
        summary.update({k: judged[k] for k in ("contacts", "contact_list", "robot_contacts", "wall_contacts",
                                               "max_penetration_m", "true_outside_geofence_m")})
    return AggregationResult(times=times, positions=positions, targets=targets, plan_log=plan_log,
                             counters=counters, summary=summary, world=world)


def packing_summary(cores: Sequence[RobotCore]) -> dict:
    """The summary's packing keys of robots with bodies: ``deadlocks`` (every robot's count summed) and
    ``agreed_robots`` (how many ended agreeing with their neighbours and in their packing)."""
    if not cores or cores[0].avoid is None:
        return {}
    return {"deadlocks": int(sum(c.counters["deadlocks"] for c in cores)),
            "agreed_robots": int(sum(c.agreed for c in cores))}


def headless_avoidance(cfg: AggregationConfig) -> Avoidance | None:
    """The fleet's collision filter of a headless run (None: point robots). With a robots file the footprint is
    the largest of the map's presets (``consensus.robots.map.fleet_footprint``)."""
    radius = None
    if cfg.robots_file:
        from consensus.robots.map import fleet_footprint

        radius = fleet_footprint(cfg)
    return avoidance_from_config(cfg, ros=False, radius=radius)


def agreement_measure(pos: np.ndarray, target: np.ndarray, avoid: Avoidance | None) -> float:
    """What ``SettleWatch`` compares with ``converge_tol_m``: the positions' spread (point robots); with collision
    avoidance the targets' spread while every robot stands within the packing radius of the targets' centroid
    (inf otherwise, or before every robot has a target)."""
    if avoid is None:
        return spread(pos)
    if not np.isfinite(target).all():
        return math.inf
    radius = packing_radius(len(pos), avoid.d_min_m)
    if np.linalg.norm(pos - target.mean(axis=0), axis=1).max() > radius:
        return math.inf
    return spread(target)


def collision_summary(avoid: Avoidance | None, infos: Sequence[dict] = ()) -> dict:
    """The summary's collision keys: ``collision_avoidance`` (cbf | none) and, with the filter, ``clearance_m``
    (the distance between robot centres that the filter keeps) and ``collision`` (the robots' counters summed)."""
    if avoid is None:
        return {"collision_avoidance": "none"}
    record = avoid.info()
    if infos:
        record.update(sum_collision(list(infos)))
    return {"collision_avoidance": "cbf", "clearance_m": avoid.clearance_m, "collision": record}


def run_negotiation(planners: Sequence[Planner], initial_states: np.ndarray, graph: Graph, rounds: int, *,
                    max_workers: int = 1) -> tuple[np.ndarray, list[dict]]:
    """Paper 1's negotiation: states ``(rounds + 1, n, d)`` and the plan log (entries without ``t``)."""
    states0 = np.asarray(initial_states, dtype=float)
    if states0.ndim != 2 or not np.all(np.isfinite(states0)):
        raise ConfigError(f"initial_states must be a finite (n, d) array (got shape {states0.shape})")
    n = states0.shape[0]
    if len(planners) != n or graph.n != n:
        raise ConfigError(f"need one planner per agent and a graph on n={n} agents "
                          f"(got {len(planners)} planners, graph on {graph.n})")
    if isinstance(rounds, bool) or not isinstance(rounds, Integral) or rounds < 0:
        raise ConfigError(f"rounds must be a non-negative integer (got {rounds!r})")
    rounds = int(rounds)
    states = np.empty((rounds + 1, *states0.shape))
    states[0] = states0
    plan_log: list[dict] = []
    pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="planner") if max_workers > 1 else None
    try:
        for r in range(rounds):
            current = states[r]
            results = _plan_round(planners, graph, current, r, pool)
            for i, res in enumerate(results):
                states[r + 1, i] = res.meeting_point if res.meeting_point is not None else current[i]
                entry = _log_entry(None, r, i, states[r + 1, i], res)
                del entry["t"]
                plan_log.append(entry)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return states, plan_log


# ---------------------------------------------------------------------------------------------
def _plan_round(planners: Sequence[Planner], graph: Graph, states: np.ndarray, round_index: int,
                pool: ThreadPoolExecutor | None) -> list[PlanResult]:
    """Every robot plans from the same snapshot ``states``; results in robot order."""
    snapshot = np.array(states, dtype=float)   # a private copy: planners cannot alter the states or each other's
    requests = [PlanRequest(robot_id=i, own=snapshot[i], neighbors=list(snapshot[graph.in_neighbors(i)]),
                            round=round_index)
                for i in range(len(planners))]
    if pool is None:
        return [planners[i].plan(requests[i]) for i in range(len(planners))]
    return list(pool.map(lambda i: planners[i].plan(requests[i]), range(len(planners))))


def _log_entry(t: float | None, round_index: int, robot: int, applied: np.ndarray, res: PlanResult) -> dict:
    """Plan log entry; ``target`` is the target applied (the held one after a fallback)."""
    return {"t": t, "round": round_index, "robot": robot, "target": [float(v) for v in applied],
            "reasoning": res.reasoning, "fallback": res.fallback, "fallback_reason": res.fallback_reason,
            "clamped": res.clamped}


def _count(counters: dict, res: PlanResult) -> None:
    counters["plans"] += 1
    counters["calls"] += res.llm_calls
    counters["parse_failures"] += int(res.extra.get("parse_failures", 0))
    counters["clamped"] += int(res.clamped)
    if res.fallback:
        reason = res.fallback_reason or "unknown"
        counters["fallbacks"][reason] = counters["fallbacks"].get(reason, 0) + 1
