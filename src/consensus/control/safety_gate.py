"""What may stop a robot (no ROS): ``SafetyGate``, the safety part of ``consensus.control.robot_core.RobotCore``
(its module docstring: the rules of ``step``, "Own pose", "Silent bodies").

The gate checks every input heard from the wire before the robot uses it (its own odometry: ``accept``, by the
plausibility check of ``consensus.control.plausibility`` and the own-command check of ``consensus.control.creep``;
the planning relay's deliveries: ``check_heard``; the collision relay's: ``check_nearby``; the census:
``check_census``), holds the e-stop, and says each tick whether the robot must stop (``rules``: the e-stop, stale or
suspect odometry, no meeting point, a stale round, no or a stale nearby message). Every command the robot gives passes
through it (``issue``), so that its odometry is checked against what it was told to do."""
from __future__ import annotations

import math

import numpy as np

from consensus.control.creep import CREEP_LAG_S, CREEP_MIN_FOLLOW, CREEP_NOISE_SIGMAS, CREEP_SLACK_M, CreepWatch
from consensus.control.plausibility import Plausibility
from consensus.control.robot_state import Command, Heard, Nearby, RobotState, heard_at
from consensus.control.safety import is_stale

POSE_CLEAR_S = 3.0      # a pose source that crept is trusted again after this long without creeping [s]


class SafetyGate:
    """The input checks and stop rules of the robot whose state is ``state`` (moving as ``dynamics`` says; with
    bodies, ``avoid``: it then never moves before it knows where the others are). ``n_robots``: the fleet's robots
    (the plausibility check's sources); ``nearby_horizon``: how long a relay that sends only the robots in reach
    covers (0: a robot fed in its process); ``keep_s``: how long a robot left out of the newest nearby message is
    kept at its last plausible position."""

    def __init__(self, state: RobotState, dynamics, avoid, *, n_robots: int, nearby_horizon: float,
                 keep_s: float) -> None:
        cfg = state.cfg
        self.state, self.dynamics, self.avoid = state, dynamics, avoid
        self.estopped = False
        self.nearby_horizon, self.keep_s = float(nearby_horizon), float(keep_s)
        self.nearby_stamp: float | None = None       # when the newest nearby message was sent
        # own odometry against own commands (``accept``); the simulated robot's lag and noise widen the tolerance
        self.creep = CreepWatch(
            CREEP_SLACK_M + CREEP_NOISE_SIGMAS * math.sqrt(2.0) * float(getattr(cfg, "odom_noise_m", 0.0) or 0.0),
            CREEP_LAG_S + float(getattr(cfg, "actuator_lag_s", 0.0) or 0.0), CREEP_MIN_FOLLOW)
        # a point mass's velocity command is no velocity it follows (it reaches it late, and the frictionless mass
        # coasts on a zero command): its odometry is checked for jumps and staleness only. A node whose commands do
        # not reach the robot (a dry run) turns the check off too.
        self.watch_creep = dynamics.watches_creep
        # what the robot hears from the wire (its odometry: source ``id``; nearby robots: their ids)
        self.plausible = Plausibility.for_workspace(max(int(n_robots), state.id + 1), cfg.workspace,
                                                    max(float(cfg.v_max), state.v_max), state.dim)
        # each nearby robot's speed with its last plausible position (the position and when it was sent are the
        # plausibility check's ``last`` and ``last_t``)
        self._nb_speed = np.zeros(self.plausible.n)

    # ------------------------------------------------------------------ own pose
    def observe(self, now: float, pos, yaw: float = 0.0) -> None:
        """An accepted pose at time ``now`` (odometry that passed the caller's checks)."""
        st = self.state
        st.pos = np.asarray(pos, dtype=float).reshape(st.dim).copy()
        st.yaw = float(yaw)
        st.odom_stamp = float(now)

    def accept(self, now: float, pos, yaw: float = 0.0, stamp: float | None = None) -> str | None:
        """A pose heard from the wire (``RobotCore.accept``): observed when plausible (returns None), else counted
        and refused (returns its kind); an observed one is checked against the robot's own commands."""
        st = self.state
        p = np.asarray(pos, dtype=float).reshape(st.dim)
        relocated = self._relocations()
        kind = self.plausible.check(st.id, now, p, stamp)
        if kind is None:
            self.observe(now, p, yaw)
            if self._relocations() != relocated:
                self.creep.restart(now, p)        # a relocation the plausibility check took: the window starts anew
            elif self.watch_creep and self.creep.pose(now, p):
                st.counters["odom_creeps"] += 1
        return kind

    def _relocations(self) -> int:
        """How often the plausibility check relocated this robot's own track (a steady stream elsewhere)."""
        got = getattr(self.plausible, "relocations", None)
        return 0 if got is None else int(got[self.state.id])

    def pose_suspect(self, now: float) -> bool:
        """Can the robot not trust its own pose at ``now``: its odometry is a suspect source (implausible jumps,
        ``consensus.control.plausibility``) or crept against its commands within the last ``POSE_CLEAR_S``?"""
        return self.plausible.suspect(self.state.id, now) or now - self.creep.last_bad < POSE_CLEAR_S

    def odom_stale(self, now: float) -> bool:
        """Is the robot's odometry missing or older than ``odom_timeout_s``?"""
        return is_stale(self.state.odom_stamp, now, self.state.cfg.odom_timeout_s)

    def broadcast_pose(self, now: float) -> tuple[np.ndarray, float] | None:
        """What the robot's node broadcasts as its ``state`` (``RobotCore.broadcast_pose``), or None."""
        st = self.state
        if st.pos is None or st.odom_stamp is None or self.odom_stale(now):
            return None
        if self.pose_suspect(now):
            return None
        return st.pos.copy(), float(st.odom_stamp)

    # ------------------------------------------------------------------ what the relays delivered
    def _future(self, now: float, stamp: float | None) -> bool:
        """A delivery stamped in the future: counted, to be refused whole."""
        if self.plausible.future(stamp, now):
            self.plausible.count("future", None, now)
            return True
        return False

    def check_heard(self, now: float, heard: Heard, stamp: float | None = None) -> tuple[Heard | None, int]:
        """The planning relay's delivery, checked (``RobotCore.check_heard``)."""
        if self._future(now, stamp):
            return None, len(heard.positions)
        bad = self.plausible.outside(heard.positions) | self.plausible.outside(heard.meeting_points)
        self.plausible.count("outside", None, now, int(bad.sum()))
        if not bad.any():
            return heard, 0
        return Heard(heard.positions[~bad], heard.meeting_points[~bad]), int(bad.sum())

    def check_nearby(self, now: float, nearby: Nearby, stamp: float | None = None) -> tuple[Nearby | None, int]:
        """The collision relay's delivery, checked per robot (``RobotCore.check_nearby``)."""
        if self._future(now, stamp):
            return None, len(nearby.positions)
        st = self.state
        self.nearby_stamp = heard_at(now, stamp)
        pos = np.array(nearby.positions, dtype=float).reshape(-1, st.dim)
        ages, speeds, ids = (np.array(nearby.ages, dtype=float), np.array(nearby.speeds, dtype=float),
                             np.array(nearby.ids, dtype=int))
        # each position as it was when sent: a delivery's age is part of the elapsed time (own id: outside only)
        check_ids = np.where(ids == st.id, -1, ids)
        kinds = self.plausible.check_many(check_ids, now - ages, pos)
        good = kinds == ""
        known = (check_ids >= 0) & (check_ids < self.plausible.n)
        acc = good & known
        self._nb_speed[ids[acc]] = speeds[acc]
        bad = ~good
        n_bad = int(bad.sum())
        keep = good.copy()
        last, sent = self.plausible.last, self.plausible.last_t
        for k in np.flatnonzero(bad & known):             # a known body stays where it last plausibly was, ageing
            j = ids[k]
            if np.isfinite(sent[j]):
                pos[k], ages[k] = last[j], now - sent[j]
                speeds[k], keep[k] = max(self._nb_speed[j], speeds[k]), True
        missing = self._left_out(now, ids[known])
        if not len(missing):
            return (nearby, 0) if not n_bad else (Nearby(pos[keep], ages[keep], speeds[keep], ids[keep]), n_bad)
        return Nearby(np.concatenate([pos[keep], last[missing]]), np.concatenate([ages[keep], now - sent[missing]]),
                      np.concatenate([speeds[keep], self._nb_speed[missing]]),
                      np.concatenate([ids[keep], missing])), n_bad

    def _left_out(self, now: float, present: np.ndarray) -> np.ndarray:
        """The robots (ids) with a plausible position sent at most ``keep_s`` ago that ``present`` does not hold."""
        sent = self.plausible.last_t
        with np.errstate(invalid="ignore"):
            held = np.isfinite(sent) & (now - sent <= self.keep_s)
        held[self.state.id] = False
        held[present] = False
        return np.flatnonzero(held)

    def check_census(self, now: float, census: Nearby,
                     stamp: float | None = None) -> tuple[Nearby, float, int] | None:
        """The relay's census, checked (``RobotCore.check_census``): None when refused whole (stamped in the
        future), else the census less the robots outside the workspace plus the margin (counted as ``outside``),
        when it counts as sent, and how many were left out."""
        if self._future(now, stamp):
            return None
        pos = np.array(census.positions, dtype=float).reshape(-1, self.state.dim)
        bad = self.plausible.outside(pos)
        self.plausible.count("outside", None, now, int(bad.sum()))
        keep = ~bad
        checked = Nearby(pos[keep], np.asarray(census.ages, dtype=float)[keep],
                         np.asarray(census.speeds, dtype=float)[keep], np.asarray(census.ids, dtype=int)[keep])
        return checked, heard_at(now, stamp), int(bad.sum())

    # ------------------------------------------------------------------ the rules of a tick
    def set_estop(self, engage: bool) -> bool:
        """Engage or release the e-stop; True when this changed it."""
        engage = bool(engage)
        changed = engage != self.estopped
        if engage and changed:
            self.state.counters["estops"] += 1
        self.estopped = engage
        return changed

    def round_stale(self, now: float) -> bool:
        """Has no round completed (and no scenario clock said it is alive) for ``target_timeout_s``?"""
        return is_stale(self.state.last_round_done, now, self.state.cfg.target_timeout_s)

    def rules(self, now: float, nearby: Nearby | None) -> Command | None:
        """The safety rules of a control tick, in order (``RobotCore.rules``): the stop command of the first that
        holds (counted), or None when the robot may drive."""
        st = self.state
        counters = st.counters
        if self.estopped:
            return self.stop(now, "estopped")
        if self.odom_stale(now):
            if st.odom_stamp is not None:
                counters["stale_stops"] += 1
            return self.stop(now, "stale_odom")
        if self.pose_suspect(now):
            counters["pose_suspect_stops"] += 1
            return self.stop(now, "pose_suspect")
        if st.meeting_point is None:
            return self.stop(now, "no_plan")
        if self.round_stale(now):
            counters["stale_stops"] += 1
            return self.stop(now, "no_round")
        if self.avoid is not None and nearby is None:
            return self.stop(now, "no_nearby")      # bodies: never move before knowing where the others are
        if self.nearby_stale(now):
            counters["stale_stops"] += 1            # the relay's reach covered only this long (consensus.ros.nearby)
            return self.stop(now, "stale_nearby")
        return None

    def nearby_stale(self, now: float) -> bool:
        """Is the newest ``nearby`` message (from a relay that sends only the robots in reach) older than
        ``nearby_horizon_s``? Never for a robot fed in its process (the fleet clock, the headless loop)."""
        return (self.avoid is not None and self.nearby_horizon > 0 and self.nearby_stamp is not None
                and now - self.nearby_stamp > self.nearby_horizon)

    def stop(self, now: float, reason: str) -> Command:
        """The zero command, for ``reason``."""
        self.state.last_speed = 0.0
        return self.issue(now, Command(reason=reason))

    def issue(self, now: float, cmd: Command) -> Command:
        """Every command the robot gives goes through here: its world-frame velocity is what its odometry is
        checked against (``CreepWatch``)."""
        self.dynamics.record_command(self.creep, now, cmd.vx, cmd.vy, cmd.wz, self.state.yaw)
        return cmd

    def state_name(self, now: float, llm_state: str | None, blocked: bool) -> str:
        """``RobotCore.state``: ``blocked`` is the goal's (no slot it can reach)."""
        if self.estopped:
            return "estopped"
        if self.state.pos is None:
            return "waiting"
        if self.odom_stale(now) or self.pose_suspect(now):
            return "pose_suspect"
        if self.state.counters["stale_stops"] and (self.round_stale(now) or self.nearby_stale(now)):
            return "stopped"
        if blocked:
            return "blocked"
        return "degraded" if llm_state in ("retrying", "down") else "ok"
