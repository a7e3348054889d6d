"""Start-up of a scenario's robot executable: one robot per process, or the whole fleet in one process.

* One robot per process: run in namespace ``robot_<i>`` (or set the parameter ``robot_id``); the node is
  ``/robot_<i>/agent``.
* Fleet (the scalable mode): run in the root namespace with ``robot_id`` -1 (the default). The process holds one
  parameter node (``/fleet``) and one Node per robot (``/robot_<i>/agent``, parameter services off) on one
  executor: rclpy's EventsExecutor keeps a far larger fleet's control ticks on time than the SingleThreadedExecutor
  or one process per robot does (measured: docs/benchmarks.md, 'Why the code is as it is'). LLM calls of all robots
  share one bounded thread pool of ``llm_concurrency`` workers and one LLM client, never the executor thread.

**One clock** (``FleetClock``, issue 29). Every robot process, a fleet or a single robot (N = 1), has one control
timer, on the main node, on the executor thread of the robots' subscriptions (a subscription callback only stores
the newest bytes; the timer's event waits behind at most a few of them). Each tick reads every robot's newest
odometry and planning result, computes every command in one step (``consensus.control.fleet_core.FleetCore``: the
robot cores, the collision filters' QPs batched), publishes them, then the outputs of finished planning rounds,
and starts the planning rounds due (an LLM round runs on the thread pool; a classical one is computed in place):
planning never delays a command, and while the commands are computed and published the LLM clients' threads
cannot take the GIL from the clock every millisecond (``CONTROL_SWITCH_INTERVAL_S``). Each robot plans every
``planner_period_s``, the robots' slots spread evenly over the period's ticks (robot j of n at tick j·k // n of
the k ticks of a period), so no tick carries the whole fleet's planning. A fleet larger than ``robots_per_step``
(``FleetParams``) is stepped in groups, each with its own control slot in the period (``FleetClock``): a robot's
command then waits for its group's work only. With an LLM server on this host (the run's ``llm_server``, perhaps
still loading its model), the robots start planning once it answers (``EndpointReady``), whoever started them
(``ros2 launch`` starts every node at once); their commands (stops until a first plan) go out meanwhile. In a
fleet process each robot's ``nearby`` set comes from the odometry the process already receives
(``consensus.ros.nearby.FleetNearby``), not from a relay.

A scenario supplies how to read its config from the node, how to build the robots' planners (a ``Planner``, a
drone's planner, a naming-game player, ...) from one LLM client, and how to attach a robot (a
``consensus.ros.robot.RobotNode``) to a node.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np
import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.timer import TimerInfo
from geometry_msgs.msg import PointStamped
from std_msgs.msg import Bool

from consensus.control.fleet_core import FleetCore, NearbyBatch
from consensus.control.ticks import ON_TIME_S, SlotGrid
from consensus.errors import ConfigError
from consensus.robots.map import fleet_reach
from consensus.settings import ControlParams, runtime_fields
from consensus.llm.endpoint import is_local_url, models_url, wait_for_models
from consensus.llm.from_config import client_from_config
from consensus.ros import diagnostics, qos
from consensus.ros.nearby import FleetNearby
from consensus.ros.params import changed_fields
from consensus.ros.health import HEALTH, Health, guarded
from consensus.ros.robot import SUGGESTION_APPLIED
from consensus.ros.process import (CONTROL_SWITCH_INTERVAL_S, SWITCH_INTERVAL_S, control_thread_priority,
                                   destroy_nodes, freeze_startup_objects, make_executor, on_stop, run_node, spin)
from consensus.runs.keepup import Shortfall
from consensus.runs.processes import ROBOT_NODE
from consensus import names



namespace = names.namespace          # robot_<i> (consensus.names)


def robot_namespace(node: Node) -> int | None:
    """``i`` when ``node`` runs in a robot's namespace (``.../robot_<i>``: ``/robot_3``, or ``/fleet_a/robot_3`` in a
    fleet launched with ``namespace:=fleet_a``), else None (a fleet process, in the root or a fleet's namespace)."""
    return names.split_robot_namespace(node.get_namespace())[1]


def robot_ids(node: Node, num_robots: int) -> list[int]:
    """The robots this process runs: ``robot_id``, else the namespace's ``robot_<i>``, else all (fleet)."""
    rid = node.declare_parameter("robot_id", -1).value
    if rid < 0:
        own = robot_namespace(node)
        if own is None:
            return list(range(num_robots))
        rid = own
    if not 0 <= rid < num_robots:
        raise ConfigError(f"robot_id {rid} out of range for num_robots={num_robots}")
    return [rid]


def planners_with_llm(cfg: Any, build: Callable[[Any], list], prefix: str = "planner"):
    """``build(client)`` with the run's LLM client (None when the scenario needs no LLM; exchanges recorded to
    ``<output_dir>/transcripts.jsonl``). Returns the planners, the thread pool for LLM calls (None without an
    LLM), the client's status function and a close function."""
    transcripts = Path(cfg.output_dir) / "transcripts.jsonl" if cfg.output_dir else None
    if transcripts is not None:
        os.makedirs(transcripts.parent, exist_ok=True)
    client, close_client = client_from_config(cfg, transcripts)
    planners = build(client)
    if client is None:
        return planners, None, None, close_client
    pool = ThreadPoolExecutor(max_workers=cfg.llm_concurrency, thread_name_prefix=prefix)

    def close() -> None:
        pool.shutdown(wait=False, cancel_futures=True)
        close_client()

    return planners, pool, client.status, close


def _runtime_settings(node: Node, cfg: Any, robots: list):
    """The parameter callback of a robot process's main node (``/robot_<i>/agent``, or ``/fleet`` for all its
    robots): a change of a runtime field of ``ControlParams`` (``runtime_fields``: kp, v_max, w_max, deadband) is
    validated like the config and applied to every robot from its next control tick on (``RobotNode.set_limits``); a
    bad value is refused with the config's reason. ``v_max`` may not rise above its launch value (the robots' and the
    relays' plausibility checks and the nearby sets' speeds use that one), and with one process per robot no change
    may widen the nearby relay's reach (``consensus.robots.map.fleet_reach``: a lower ``w_max`` moves a unicycle's
    filtered point further ahead), which the relay computed at launch. Every other parameter is read-only
    (``declare_config``)."""
    from rcl_interfaces.msg import SetParametersResult

    current = [cfg]
    # the nearby relay's reach, as the relay computed it at launch (one process per robot)
    launch_reach = fleet_reach(cfg) if not cfg.single_process and cfg.nearby_horizon_s > 0 else None

    def on_set(params) -> SetParametersResult:
        changes = changed_fields(type(cfg), params, runtime_fields(ControlParams))
        if not changes:
            return SetParametersResult(successful=True)
        try:
            new = current[0].replace(**changes)
        except ConfigError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        if new.v_max > cfg.v_max:
            return SetParametersResult(successful=False, reason=(
                f"v_max may not rise above its launch value {cfg.v_max:g} m/s: the plausibility checks of the robots "
                f"and the relays judge the robots' speed by it"))
        if launch_reach is not None:
            before, after = launch_reach, fleet_reach(new)
            if after is not None and (after[0] > before[0] + 1e-9 or after[1] > before[1] + 1e-9):
                return SetParametersResult(successful=False, reason=(
                    f"this change widens the nearby relay's reach (d_min {before[0]:.3f} -> {after[0]:.3f} m, "
                    f"speed {before[1]:.3f} -> {after[1]:.3f} m/s), which the relay computed at launch"))
        for robot in robots:
            if hasattr(robot, "set_limits"):
                robot.set_limits(new)
        current[0] = new
        node.get_logger().info("controller settings changed: " + ", ".join(f"{k}={v}" for k, v in changes.items()))
        return SetParametersResult(successful=True)

    return on_set


#: the shortest time between two groups' slots: the timer's jitter under load is as long as a shorter slot (measured
#: at 100 robots: docs/benchmarks.md, 'Why the code is as it is'), so a fleet is split into at most
#: control_period_s / MIN_SLOT_S groups
MIN_SLOT_S = 0.025

PHASES = ("prepare", "step", "publish", "after")     # the parts of a fleet clock's tick (FleetClock.stats)

#: how long robots wait for a local LLM server to answer before they plan anyway (the first start of the embedded
#: model assembles and verifies ~1 GB; the CLI runner waits as long: consensus.runs.ros_runner)
LLM_READY_TIMEOUT_S = 900.0
LLM_READY_POLL_S = 1.0


class EndpointReady:
    """Whether the run's own LLM server answers yet: ``GET <base_url>/models`` polled on a thread until it returns 200
    (``ready()`` True), or until ``timeout_s`` (then True too, with one error logged: the robots plan and their
    requests fail as counted fallbacks). The robots of a process start planning only once it is ready, so ``ros2
    launch`` (which starts every node at once) and ``consensus run`` (which starts the robots after the server
    answers) behave the same: no round is lost to a server still loading its model."""

    def __init__(self, base_url: str, logger, *, timeout_s: float = LLM_READY_TIMEOUT_S,
                 poll_s: float = LLM_READY_POLL_S, warm: Callable[[], bool] | None = None) -> None:
        self.base_url, self.url = base_url, models_url(base_url)
        self.logger, self.timeout_s, self.poll_s = logger, timeout_s, poll_s
        self.warm = warm                # a planner's warm_up, run once the server answers, before the robots plan
        self._done = threading.Event()
        self.answered = False
        threading.Thread(target=self._poll, name="llm-ready", daemon=True).start()

    def __call__(self) -> bool:
        return self._done.is_set()

    def _poll(self) -> None:
        self.logger.info(f"robots plan once the LLM server answers at {self.url}")
        self.answered = wait_for_models(self.base_url, timeout_s=self.timeout_s, poll_s=self.poll_s)
        if self.answered:
            self.logger.info(f"LLM server ready at {self.url}")
            if self.warm is not None:
                # the prompt's fixed part into the server's cache before the first round (issue 44); the robots
                # stand and report meanwhile (this thread, not the executor's)
                t0 = time.monotonic()
                if self.warm():
                    self.logger.info(f"LLM warm-up: the prompt's fixed part evaluated in "
                                     f"{time.monotonic() - t0:.1f} s")
        else:
            self.logger.error(f"the LLM server at {self.url} did not answer within {self.timeout_s:.0f} s; the "
                              f"robots plan anyway (failed requests are counted fallbacks)")
        self._done.set()

    @staticmethod
    def local(base_url: str) -> bool:
        """Is ``base_url`` a server on this host (one the run may have started, perhaps still loading)?"""
        return is_local_url(base_url)


def robots_phrase(ids: list[int]) -> str:
    """``robot 3``, ``robots 0, 1, 2`` or, for more than eight, ``12 robots (0..99)``: whom a fleet's log line is
    about."""
    if len(ids) == 1:
        return f"robot {ids[0]}"
    if len(ids) <= 8:
        return "robots " + ", ".join(str(i) for i in ids)
    return f"{len(ids)} robots ({min(ids)}..{max(ids)})"


def slot_groups(n: int, per_step: int, period_s: float) -> list[list[int]]:
    """Robots ``0 .. n-1`` in the groups a clock steps one a slot: ``per_step`` robots a group (contiguous, of nearly
    equal size), but at most one group per ``MIN_SLOT_S`` of the period (then larger groups)."""
    count = max(1, min(-(-n // max(per_step, 1)), int(period_s / MIN_SLOT_S + 1e-9)))
    return [[int(j) for j in grp] for grp in np.array_split(np.arange(n), count)]


class FleetClock:
    """The one control timer of a robot process (module docstring): ``robots`` are its ``RobotNode``s, which hand
    their ticks to it (``RobotNode.join_clock``).

    A fleet of more than ``robots_per_step`` robots is stepped in groups (contiguous, of nearly equal size; at most
    one per ``MIN_SLOT_S`` of the period, so groups may be larger), each with its own control slot: the timer fires
    ``len(groups)`` times a period, and each tick steps one group (its robots' inputs, nearby sets, fleet core and
    commands, then their outputs and planning slots). Every robot is still stepped once a period, but its command
    waits only for its group's work, not the whole fleet's (at 100 robots one step of all puts the last command past
    the 10 ms bar: docs/benchmarks.md, 'Why the code is as it is').

    A process of several robots subscribes the (absolute) e-stop topic and an operator's meeting point
    (``names.MEETING_POINT_SUGGESTION``) once, for all of them: each message calls every robot's handler in turn
    (``RobotNode._on_estop``, ``RobotNode.take_suggestion``), and a suggestion is logged once per outcome."""

    def __init__(self, node: Node, cfg: Any, robots: list, *, nearby_in_process: bool, start: bool = True,
                 ready: Callable[[], bool] | None = None) -> None:
        self.node, self.robots = node, robots
        self.ready = ready              # planning starts once this says so (EndpointReady); commands never wait
        per_step = int(getattr(cfg, "robots_per_step", 0) or max(len(robots), 1))
        cfg = robots[0].cfg if robots else cfg      # the robots' controller config (a scenario's may differ)
        avoid = any(r.core.avoid is not None for r in robots)
        # one subscription of an absolute e-stop topic for the process, not one per robot: every reader of a
        # process is visited for each sample it receives (Fast DDS), so 100 robots' readers of /estop cost on
        # every odometry message (docs/benchmarks.md)
        estop = robots[0].cfg.estop_topic if robots else ""
        shared_estop = len(robots) > 1 and estop.startswith("/") and all(r.cfg.estop_topic == estop for r in robots)
        # the same for an operator's meeting point (names.MEETING_POINT_SUGGESTION): one subscription, every robot
        # that takes one called in turn, one log line for them all
        takers = [r for r in robots if getattr(r, "takes_suggestions", False)]
        shared_suggestion = len(takers) > 1
        for r in robots:
            r.join_clock(nearby_in_process=nearby_in_process and avoid, shared_estop=shared_estop,
                         shared_suggestion=shared_suggestion)
        n = len(robots)
        self.groups = slot_groups(n, per_step, cfg.control_period_s)
        self.cores = [FleetCore([robots[j].core for j in grp]) for grp in self.groups]
        self.nearby = FleetNearby([r.core for r in robots], cfg) if nearby_in_process and avoid else None
        self.plan_every = k = max(1, round(cfg.planner_period_s / cfg.control_period_s))
        # each robot plans every planner_period_s, a group's slots spread evenly over the period's ticks (robot j
        # of a group of m at its group's tick j·k // m of the k ticks of a period): a whole fleet's planning at once
        # (status, target and reasoning of every robot) would make the next slot late (docs/benchmarks.md, 'Why the
        # code is as it is')
        self._planning: list[list[list[int]]] = []
        for grp in self.groups:
            slots: list[list[int]] = [[] for _ in range(k)]
            for pos, j in enumerate(grp):
                slots[(pos * k // len(grp)) % k].append(j)
            self._planning.append(slots)
        self.ticks = 0
        # every robot's parts of a tick, each guarded (``guarded``: an exception is counted in that robot's health
        # and logged, and the other robots go on)
        self._parts = [{what: guarded(fn, f"robot_{r.id}.{'plan' if what == 'plan' else 'control'}", r.health)
                        for what, fn in (("prepare", r.prepare), ("finish", r.finish), ("flush", r.flush),
                                         ("after", r.after_control), ("plan", r.plan_tick), ("step", r.core.step))}
                       for r in robots]
        self._estops = ([guarded(r._on_estop, f"robot_{r.id}.estop", r.health) for r in robots] if shared_estop
                        else [])
        if shared_estop:
            node.create_subscription(Bool, estop, self._on_estop, qos.profile(names.ESTOP))
        self.health = Health(parent=HEALTH, logger=node.get_logger())
        self._suggestions = ([(r.id, guarded(r.take_suggestion, f"robot_{r.id}.suggestion", r.health))
                              for r in takers] if shared_suggestion else [])
        if shared_suggestion:
            node.create_subscription(PointStamped, names.MEETING_POINT_SUGGESTION.in_run(node.get_namespace()),
                                     guarded(self._on_suggestion, "fleet.suggestion", self.health),
                                     qos.profile(names.MEETING_POINT_SUGGESTION))
        self._fleet_step = guarded(self._step, "fleet.step", self.health)
        self._heard = None
        # where a tick's time goes (wall clock, from the callback's start): sums and maxima per phase [s]
        self._phase_sum = dict.fromkeys(PHASES, 0.0)
        self._phase_max = dict.fromkeys(PHASES, 0.0)
        for r in robots:
            r.clock_stats = self.stats
        self.period = cfg.control_period_s
        self.interval = self.period / len(self.groups)      # one group's slot to the next
        self.slots = SlotGrid(self.interval, len(self.groups))     # which group a callback steps (ROS clock)
        # commands later than ON_TIME_S after their slot (the tick's slot to the group's last publish), said once,
        # early: a machine too slow for the fleet (after the first second's start-up; consensus.runs.keepup)
        self.late = Shortfall("fleet: control", unit="commands", missed=f"late by more than {ON_TIME_S * 1e3:.0f} ms",
                              max_share=0.01, min_expected=20 * n,
                              advice="the machine is too slow for this fleet: fewer robots or fewer processes on "
                                     "this host")
        self.warmup_ticks = round(1.0 / self.interval)      # the first second: start-up, not the machine
        self.timer = None
        if start:
            self.start()

    def start(self) -> None:
        """Create the timer: its first tick is one slot from now (a process creates it last, after its start-up
        work, which would otherwise delay the first tick and shift the slots every tick is measured against)."""
        if self.timer is None:
            self.timer = self.node.create_timer(self.interval, self._on_timer)

    def stats(self) -> dict:
        """``robots``, ``groups`` (stepped one a slot), ``ticks`` (groups stepped), ``skipped`` (slots the timer
        skipped, whose group the next callback stepped), ``late_commands`` (commands whose group's last publish
        came more than ``ON_TIME_S`` after its slot, after the first second) and per phase of a tick (``prepare``:
        decode each robot's inputs; ``step``: the nearby sets and the fleet core; ``publish``: every command out;
        ``after``: the outputs of finished rounds, a scenario's work and the planning slots; all of one group) the
        mean and the largest wall time [ms] (the ``control`` record of each robot's ``planner/status`` carries it)."""
        n = max(self.ticks, 1)
        return {"robots": len(self.robots), "groups": len(self.groups), "ticks": self.ticks, "skipped": self.skipped,
                "late_commands": self.late.lost,
                "step_errors": self.health.errors_by_callback.get("fleet.step", 0),
                **{f"{k}_ms": {"mean": round(1e3 * self._phase_sum[k] / n, 3),
                               "max": round(1e3 * self._phase_max[k], 2)} for k in PHASES}}

    def _phase(self, name: str, t0: float) -> float:
        t = time.perf_counter()
        d = t - t0
        self._phase_sum[name] += d
        if d > self._phase_max[name]:
            self._phase_max[name] = d
        return t

    def _on_timer(self, info: TimerInfo | None = None) -> None:
        """The timer's callback (rclpy hands it the call's ``TimerInfo``: the EventsExecutor to a callback of one
        argument, the other executors to one annotated ``TimerInfo``): rcl has moved the timer's next call to the
        first slot after this call, skipping the ones a late call missed."""
        expected = info.expected_call_time.nanoseconds * 1e-9 if info is not None else 0.0
        if expected <= 0.0:             # no call times (an executor that does not give them): one slot a call
            self.tick()
            return
        late = info.actual_call_time.nanoseconds * 1e-9 - expected
        self.tick(expected + self.interval * (1 + max(0, int(late // self.interval))))

    def _judge(self, g: int, slot: float) -> None:
        """Group ``g``'s commands of the slot at ``slot`` [s, the timer's clock] went out now: late or not."""
        if self.ticks <= self.warmup_ticks:
            return
        late = self.node.get_clock().now().nanoseconds * 1e-9 - slot
        m = len(self.groups[g])
        self.late.add(m, m if late <= ON_TIME_S else 0, f"group {g}")
        warn = self.late.check()
        if warn:
            self.node.get_logger().warning(warn)

    def tick(self, next_call: float | None = None) -> None:
        """The control slots that are due, one group each (``consensus.control.ticks.SlotGrid``; ``next_call``:
        when the timer fires next [s, its clock]; None: the next slot). It never raises: each robot's failure is
        its own counted callback error, as with its own timer. A callback so late that the timer skipped slots (rcl
        skips missed ones) steps the skipped groups too, first, each at most once: every group keeps its slot in
        the period, and no robot misses a tick."""
        if next_call is None:
            self._group_tick(self.slots.next_slot())
            return
        due = self.slots.due(next_call)
        for g, slot in zip(due, self.slots.times):
            self._group_tick(g, slot)

    def _on_estop(self, msg: Bool) -> None:
        """The process's e-stop subscription: every robot's ``_on_estop`` (each guarded as its own was)."""
        for on_estop in self._estops:
            on_estop(msg)

    def _on_suggestion(self, msg: PointStamped) -> None:
        """The process's subscription of an operator's meeting point: every robot that takes one
        (``RobotNode.take_suggestion``, each guarded as its own subscription was), at one time, and one log line per
        outcome (applied, refused or dropped, with the robots it was)."""
        now = self.node.get_clock().now().nanoseconds * 1e-9
        outcomes: dict[tuple[str, str], list[int]] = {}
        for rid, take in self._suggestions:
            got = take(msg, now)
            if got is not None:                   # (None: it raised, counted and logged by its guard)
                outcomes.setdefault(got, []).append(rid)
        log = self.node.get_logger()
        for (kind, text), ids in outcomes.items():
            (log.info if kind == SUGGESTION_APPLIED else log.warning)(f"{robots_phrase(ids)}: {text}")

    @property
    def skipped(self) -> int:
        return self.slots.skipped

    def _group_tick(self, g: int, slot: float | None = None) -> None:
        """Group ``g``'s control slot (at ``slot``, the timer's clock, when known): its commands, then its outputs
        and planning slots."""
        # the commands first, without yielding the GIL to the planner's threads every 1 ms (CONTROL_SWITCH_INTERVAL_S)
        sys.setswitchinterval(CONTROL_SWITCH_INTERVAL_S)
        try:
            self._commands(g)
        finally:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        if slot is not None:
            self._judge(g, slot)
        p0 = time.perf_counter()
        for j in self.groups[g]:
            self._parts[j]["flush"]()
            self._parts[j]["after"]()
        self.ticks += 1
        # after the commands went out: the group's robots whose planning slot this is (staggered over the period)
        if self.ready is None or self.ready():
            for j in self._planning[g][(self.ticks // len(self.groups) + 1) % self.plan_every]:
                self._parts[j]["plan"]()
        self._phase("after", p0)

    def _commands(self, g: int) -> None:
        """Group ``g``'s inputs, its fleet step and its commands out."""
        group = self.groups[g]
        t = time.monotonic()
        p0 = time.perf_counter()
        now = self.node.get_clock().now().nanoseconds * 1e-9       # one clock read for the whole tick
        for j in group:
            self.robots[j].timing.tick(t)
            self._parts[j]["prepare"](now, t)
        p0 = self._phase("prepare", p0)
        cmds = self._fleet_step(g, now)
        if cmds is None:             # the batched step failed (counted, logged): each robot alone, as before it
            heard = self._heard if self._heard is not None else [self.robots[j].nearby for j in group]
            if isinstance(heard, NearbyBatch):
                heard = [heard.robot(r) for r in range(len(group))]
            cmds = [self._parts[j]["step"](now, nb) for j, nb in zip(group, heard)]
        p0 = self._phase("step", p0)
        for j, cmd in zip(group, cmds):
            if cmd is not None:
                self._parts[j]["finish"](cmd)
        self._phase("publish", p0)

    def _step(self, g: int, now: float) -> list:
        """Group ``g``'s nearby sets and its fleet core's step."""
        group = self.groups[g]
        self._heard = None
        if self.nearby is not None:
            self.nearby.record()
            self._heard = self.nearby.deliver(now, rows=group if len(self.groups) > 1 else None)
        else:
            self._heard = [self.robots[j].nearby for j in group]
        return self.cores[g].step(now, self._heard)


# rclpy's standard executors look for the class itself in the annotation (this module's annotations are strings)
FleetClock._on_timer.__annotations__["info"] = TimerInfo


def run_robots(name: str, read_config: Callable[[Node], Any], build: Callable[[Any, list[int], Any], list],
               attach: Callable[..., Any]) -> int:
    """The main of a robot executable. ``read_config(node)`` declares and validates the parameters,
    ``build(cfg, ids, client)`` makes the robots' planners, ``attach(node, cfg, robot_id, planner, pool, status)``
    returns the robot (with ``stop()``)."""

    def body(_args: list[str]) -> None:
        main_node = Node(name)
        cfg = read_config(main_node)
        ids = robot_ids(main_node, cfg.num_robots)
        fleet = robot_namespace(main_node) is None
        # a fleet process's robots in its namespace (the root, or a fleet's: namespace:=fleet_a -> /fleet_a/robot_3)
        base = main_node.get_namespace().rstrip("/")
        planners, pool, status, close = planners_with_llm(cfg, lambda client: build(cfg, ids, client))
        executor = make_executor(cfg.executor)
        robots, nodes = [], []
        sim_time = Parameter("use_sim_time", value=main_node.get_parameter("use_sim_time").value)
        no_type_service = Parameter("start_type_description_service", value=False)
        for i, planner in zip(ids, planners):
            # use_global_arguments=False: the process's `-r __node:=fleet` must not rename the robots' nodes
            # no parameter or type description services on the robots' nodes: the main node has them, and each
            # service's reader would be visited for every sample the process receives (Fast DDS)
            node = (Node(ROBOT_NODE, namespace=f"{base}/{namespace(i)}", start_parameter_services=False,
                         use_global_arguments=False, parameter_overrides=[sim_time, no_type_service])
                    if fleet else main_node)
            robots.append(attach(node, cfg, i, planner, pool, status))
            if node is not main_node:
                nodes.append(node)
                executor.add_node(node)
        main_node.add_on_set_parameters_callback(_runtime_settings(main_node, cfg, robots))
        # the one clock on the main node, on the same executor thread as the robots' subscriptions: a second
        # executor thread for the clock makes its ticks start later, the GIL, not the executor, being the queue
        # (measured: docs/benchmarks.md, 'Why the code is as it is')
        in_process = fleet and len(robots) == cfg.num_robots
        if not in_process and getattr(cfg, "single_process", False) and any(r.core.avoid is not None for r in robots):
            main_node.get_logger().error(
                "single_process: true, but this process runs only some robots: no nearby relay runs with "
                "single_process: true, so its robots will wait for the others' positions; start one robot per process "
                "with single_process: false")
        base_url = ((status() or {}).get("base_url") or "") if status is not None else ""
        # one planner's warm_up (with a shared prefix it is the primer the other slots start from, consensus.llm.slots)
        warm = next((p.warm_up for p in planners if callable(getattr(p, "warm_up", None))), None)
        ready = (EndpointReady(base_url, main_node.get_logger(), warm=warm) if EndpointReady.local(base_url)
                 else None)
        clock = FleetClock(main_node, cfg, robots, nearby_in_process=in_process, start=False, ready=ready)
        # every robot's status (and the clock's counts) on /diagnostics once a second, from its last planner/status
        robots_diagnostics = diagnostics.RobotsDiagnostics(main_node, robots, clock.health)
        main_node.create_timer(robots_diagnostics.period_s,
                               guarded(robots_diagnostics.publish, "fleet.diagnostics", clock.health))
        executor.add_node(main_node)
        on_stop(lambda: [robot.stop() for robot in robots])      # zero velocity before the context goes down
        freeze_startup_objects()
        # the thread that spins the executor is the control thread: the clock's ticks and the robots' inputs
        applied, scheduling = control_thread_priority(int(getattr(cfg, "control_priority", 0)))
        log = main_node.get_logger().info if applied else main_node.get_logger().warning
        log(f"{len(robots)} robot(s) up (executor={cfg.executor}, one clock; control thread: {scheduling})")
        clock.start()
        try:
            spin(executor)
        finally:
            if rclpy.ok():
                for robot in robots:
                    robot.stop()
            close()
            destroy_nodes(executor, [*nodes, main_node])

    return run_node(body, name)
