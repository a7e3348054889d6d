"""When a robot plans (no ROS): ``PlannerSchedule``, the planning part of
``consensus.control.robot_core.RobotCore`` (its module docstring: ``plan``, ``wait``, ``collect``).

A planning slot starts a round (a ``PlanRequest`` from what the robot heard) unless one is still running (an
overrun), the robot has no pose yet or ``max_rounds`` are done; the round runs in the thread pool, or at once
without one; ``collect`` applies a finished round (its meeting point clamped into the geofence, a fallback holding the
last one) as a ``Round``, and ``agrees`` says whether the meeting points heard for it agree with the robot's.

An operator's meeting point (``RobotCore.suggest``) puts the schedule on ``hold(until)``: no round starts before
``until`` (each slot meanwhile counts as the planner alive: ``target_timeout_s`` does not stop a robot that holds the
operator's point), and the round in flight when it came (requested before it) is dropped when it completes (counted
as ``rounds_dropped``; its LLM calls and planner errors still counted), so it cannot overwrite the operator's point."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import numpy as np

from consensus.control.planner import Planner, PlanRequest, PlanResult
from consensus.control.robot_state import Heard, RobotState


@dataclass(frozen=True)
class Round:
    """A finished planning round as applied: its request and result, whether it fell back and whether its meeting point
    was clamped."""

    request: PlanRequest
    result: PlanResult
    fallback: bool
    clamped: bool

    def record(self, robot: int, now: float, meeting_point: np.ndarray, agreed: bool) -> dict:
        """Its record (``planner/reasoning``'s schema)."""
        req, res = self.request, self.result
        return {"robot": robot, "round": req.round, "stamp": float(now),
                "target": [float(v) for v in meeting_point], "reasoning": res.reasoning[:500],
                "fallback": self.fallback,
                "fallback_reason": res.fallback_reason, "clamped": bool(self.clamped), "llm_calls": res.llm_calls,
                "agreed": agreed}


class PlannerSchedule:
    """The planning rounds of the robot whose state is ``state``: ``planner`` (None: a scenario sets the meeting
    points), run in ``pool`` (None: at once); ``meeting_points``: it plans on the neighbours' meeting points, not their
    positions."""

    def __init__(self, state: RobotState, planner: Planner | None, pool: ThreadPoolExecutor | None, *,
                 meeting_points: bool) -> None:
        self.state, self.planner, self.pool = state, planner, pool
        self.meeting_points = bool(meeting_points)
        self.round = 0
        self.pending: Future | None = None
        self.planner_error = ""                       # the last planner exception (the node logs it)
        self._heard_mps = np.empty((0, state.dim))    # the meeting points heard for the running round
        self._waiting_since: float | None = None       # since when a due round waits for news (news_wait_s)
        self.hold_until = -np.inf                      # no round starts before (an operator's meeting point: hold)
        self._drop_pending = False                     # the round in flight was requested before that point came

    def own_meeting_point(self) -> np.ndarray | None:
        """The robot's meeting point, or its position before its first round."""
        st = self.state
        if st.meeting_point is not None:
            return st.meeting_point
        return None if st.pos is None else st.pos

    def plan(self, now: float, heard: Heard) -> PlanRequest | None:
        """A planning slot; returns the request of the round it started, or None."""
        st = self.state
        if st.pos is None or self.planner is None:
            return None
        if st.cfg.max_rounds and self.round >= st.cfg.max_rounds:
            return None
        if now < self.hold_until:
            st.last_round_done = float(now)      # holding the operator's point is no late planner (target_timeout_s)
            return None
        if self.pending is not None:
            st.counters["overruns"] += 1          # the previous plan is still running (slow LLM): skip this slot
            return None
        if self._waits_for_news(now, heard):
            st.counters["news_waits"] += 1
            return None
        own_mp = self.own_meeting_point()
        if self.meeting_points:
            own, neighbors = own_mp.copy(), list(np.asarray(heard.meeting_points, dtype=float))
        else:
            own, neighbors = st.pos.copy(), list(np.asarray(heard.positions, dtype=float))
        req = PlanRequest(robot_id=st.id, own=own, neighbors=neighbors, round=self.round,
                          own_position=st.pos.copy(), neighbor_positions=list(np.asarray(heard.positions, float)),
                          own_meeting_point=own_mp.copy(),
                          neighbor_meeting_points=list(np.asarray(heard.meeting_points, float)))
        self.round += 1
        self._waiting_since = None
        self._heard_mps = np.asarray(heard.meeting_points, dtype=float).reshape(-1, st.dim)
        if self.pool is None:
            fut: Future = Future()
            fut.set_result(self._safe_plan(req))
        else:
            fut = self.pool.submit(self._safe_plan, req)
        self.pending = fut
        return req

    def hold(self, until: float) -> bool:
        """An operator's meeting point came (module docstring): no round starts before ``until``; the round in flight,
        if any, is dropped when it completes. Returns whether one was in flight."""
        self.hold_until = float(until)
        self._drop_pending = self.pending is not None
        return self._drop_pending

    def _waits_for_news(self, now: float, heard: Heard) -> bool:
        """``news_wait_s`` (rounds in step): the first round waits until every other robot was heard (a robot whose
        graph gives it fewer neighbours waits the bound once), a later one until each
        neighbour heard has a meeting point other than the one the last round used; each at most ``news_wait_s``
        (a silent or settled neighbour never holds a round up longer)."""
        wait = float(getattr(self.state.cfg, "news_wait_s", 0.0) or 0.0)
        if wait <= 0:
            return False
        if self._waiting_since is None:
            self._waiting_since = now
        if now - self._waiting_since >= wait:
            return False
        mps = np.asarray(heard.meeting_points, dtype=float).reshape(-1, self.state.dim)
        if self.round == 0:                         # every other robot of the fleet heard (a sparser graph: the bound)
            return len(mps) < max(1, int(getattr(self.state.cfg, "num_robots", 2)) - 1)
        last = self._heard_mps
        if len(mps) == 0 or mps.shape != last.shape:
            return False                           # the neighbours changed: that is news
        return bool(np.any(np.all(np.isclose(mps, last, rtol=0.0, atol=1e-9), axis=1)))

    def _safe_plan(self, req: PlanRequest) -> tuple[PlanRequest, PlanResult]:
        try:
            return req, self.planner.plan(req)
        except Exception as exc:  # noqa: BLE001 - any planner bug becomes a counted fallback, never a dead robot
            self.planner_error = f"{type(exc).__name__}: {exc}"
            return req, PlanResult(meeting_point=None, reasoning="", fallback=True,
                                   fallback_reason=f"planner_exception: {type(exc).__name__}")

    def wait(self, timeout: float | None = None) -> None:
        """Block until the running round (if any) is done."""
        if self.pending is not None:
            try:
                self.pending.exception(timeout=timeout)
            except FutureTimeout:
                pass

    def collect(self, now: float) -> Round | None:
        """Apply a finished round to the state (its meeting point, clamped into the geofence, or the last one held; the
        planner alive at ``now``), counted; None when none finished or the one that finished was dropped (``hold``)."""
        st = self.state
        fut = self.pending
        if fut is None or not fut.done():
            return None
        self.pending = None
        req, res = fut.result()
        st.counters["llm_calls"] += res.llm_calls
        if self._drop_pending:                    # requested before an operator's meeting point: not applied
            self._drop_pending = False
            st.counters["rounds_dropped"] += 1
            st.counters["planner_errors"] += int(res.fallback_reason.startswith("planner_exception"))
            st.last_round_done = float(now)
            return None
        fallback = res.fallback
        if res.fallback:
            st.counters["llm_fallbacks"] += 1
            if res.fallback_reason.startswith("planner_exception"):
                st.counters["planner_errors"] += 1
        point, clamped = res.meeting_point, res.clamped
        if point is not None:
            try:
                point, changed = st.geofence.clamp(np.asarray(point, dtype=float).reshape(st.dim))
                clamped = clamped or changed
            except ValueError:
                point = None                      # NaN/inf: hold the last meeting point
                if not res.fallback:
                    st.counters["llm_fallbacks"] += 1
                    fallback = True
        if clamped:
            st.counters["clamped"] += 1
        if point is None:
            point = st.meeting_point if st.meeting_point is not None else req.own_position.copy()  # hold; round 0: stay
        st.meeting_point = np.asarray(point, dtype=float)
        st.last_round_done = float(now)
        return Round(req, res, fallback, clamped)

    def agrees(self, point: np.ndarray, gap: float) -> bool:
        """Is every meeting point heard for the last round within ``gap`` (``packing_gap_m``) of ``point``?"""
        heard = self._heard_mps[np.isfinite(self._heard_mps).all(axis=1)]
        return bool(np.all(np.linalg.norm(heard - point, axis=1) <= gap)) if len(heard) else False
