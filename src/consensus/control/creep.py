"""Own odometry against the robot's own commands (no ROS): ``CreepWatch``, the part of a robot core's own-pose check
that the plausibility check of ``consensus.control.plausibility`` (a track per source) cannot see: a stream that
moves where the robot's commands could not have taken it (``consensus.control.robot_core``, "Own pose"; the safety
gate, ``consensus.control.safety_gate``, holds the robot still while its pose is suspect)."""
from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque

CREEP_WINDOW_S = 5.0    # own odometry is checked against the robot's own commands over this window [s]
CREEP_SLACK_M = 0.3     # what odometry may stray from where the commands could take the robot [m]
CREEP_LAG_S = 0.5       # the longest the robot may answer its commands late [s]
CREEP_MIN_FOLLOW = 0.5  # the least share of its commanded motion a robot makes over the window
CREEP_NOISE_SIGMAS = 6.0    # plus this many standard deviations of the odometry's noise (odom_noise_m, each axis)
CREEP_SAMPLE_S = 0.1    # the window keeps one odometry sample per this long [s]


class CreepWatch:
    """Own odometry against the robot's own commands (``robot_core``, "Own pose"). ``command(now, v, w, yaw)``
    records each command (a world-frame velocity ``v``, or a unicycle's speed ``v`` along ``yaw`` turning at ``w``),
    held until the next; ``pose(now, p)`` checks each accepted pose and says whether the odometry *crept*: over the
    last ``window_s`` its displacement ``D`` is farther than the tolerance from every ``c C_s``, ``C_s`` being the
    commands' integral over the same window delayed by ``s`` (``LAG_STEPS`` delays from 0 to ``lag_s``: a robot
    answers its commands late) and ``c`` in ``[min_follow, 1]`` (it may fall short of them: an acceleration limit,
    wheels that slip; not much more: a pose that stays put while the robot is commanded on is no pose to trust). The
    tolerance is ``slack_m`` plus the delay steps' width times the fastest command of the window. A creep restarts the
    window at that pose. Plain floats (2-D; a 1-D robot's y is 0): every odometry message comes through here."""

    LAG_STEPS = 5

    def __init__(self, slack_m: float, lag_s: float, min_follow: float, window_s: float = CREEP_WINDOW_S) -> None:
        self.slack, self.lag, self.min_follow, self.window = float(slack_m), float(lag_s), float(min_follow), \
            float(window_s)
        self._shifts = [self.lag * k / (self.LAG_STEPS - 1) for k in range(self.LAG_STEPS)]
        # the command log: start times, the integral there, and each command (vx, vy, w, yaw, speed, unicycle)
        self._t: list[float] = []
        self._i: list[tuple[float, float]] = []
        self._c: list[tuple[float, float, float, float, float, bool]] = []
        self._first = 0                               # entries before it are older than any check needs
        self._peak = 0.0                              # the fastest command since the last sample
        self._samples: deque = deque()                # (t, (x, y), fastest command since the one before)
        self.last_bad = -math.inf                     # when the odometry last crept
        self.residual = 0.0                           # the last check's distance and tolerance [m]
        self.tolerance = 0.0

    def command(self, now: float, v, w: float = 0.0, yaw: float | None = None) -> None:
        now = float(now)
        start = self._integral(now) if self._t else (0.0, 0.0)
        if yaw is None:
            vx, vy = (float(v[0]), float(v[1]) if len(v) > 1 else 0.0)
            cmd = (vx, vy, 0.0, 0.0, math.hypot(vx, vy), False)
        else:
            cmd = (float(v), 0.0, float(w), float(yaw), abs(float(v)), True)
        if self._t and self._t[-1] >= now:            # a second command in one instant replaces the first
            self._t.pop(), self._i.pop(), self._c.pop()
        self._t.append(now)
        self._i.append(start)
        self._c.append(cmd)
        self._peak = max(self._peak, cmd[4])
        keep = now - self.window - 2.0 * self.lag - 1.0
        while self._first + 1 < len(self._t) and self._t[self._first + 1] < keep:
            self._first += 1
        if self._first > 256:                         # drop what is no longer read
            del self._t[: self._first], self._i[: self._first], self._c[: self._first]
            self._first = 0

    def _integral(self, t: float) -> tuple[float, float]:
        """The commands' integral from the first command to ``t`` (0 before it)."""
        k = bisect_right(self._t, t, self._first) - 1
        if k < self._first:
            return self._i[self._first] if self._t else (0.0, 0.0)
        (ix, iy), (vx, vy, w, yaw, _, unicycle) = self._i[k], self._c[k]
        dt = t - self._t[k]
        if not unicycle:
            return ix + vx * dt, iy + vy * dt
        if abs(w) < 1e-9:                             # a unicycle: along its heading, or its arc
            return ix + vx * dt * math.cos(yaw), iy + vx * dt * math.sin(yaw)
        return (ix + vx / w * (math.sin(yaw + w * dt) - math.sin(yaw)),
                iy - vx / w * (math.cos(yaw + w * dt) - math.cos(yaw)))

    def pose(self, now: float, pos) -> bool:
        now = float(now)
        p = (float(pos[0]), float(pos[1]) if len(pos) > 1 else 0.0)
        samples = self._samples
        horizon = now - self.window - self.lag
        while len(samples) > 1 and samples[1][0] < horizon:
            samples.popleft()
        ref, peak = None, max(self._peak, self._c[-1][4] if self._c else 0.0)
        for smp in samples:
            if smp[0] >= horizon:
                peak = max(peak, smp[2])
            if ref is None and smp[0] >= now - self.window:
                ref = smp
        if ref is None and samples:
            ref = samples[-1]                         # odometry came back after a gap: the pose before it
        bad = False
        if ref is not None:
            dx, dy = p[0] - ref[1][0], p[1] - ref[1][1]
            best = math.inf
            for s in self._shifts:
                (ax, ay), (bx, by) = self._integral(ref[0] - s), self._integral(now - s)
                best = min(best, _off_segment(dx, dy, bx - ax, by - ay, self.min_follow))
            self.residual = best
            self.tolerance = self.slack + self.lag / (self.LAG_STEPS - 1) * peak
            bad = best > self.tolerance
        if bad:
            self.last_bad = now
            samples.clear()
            samples.append((now, p, peak))            # the window restarts here (its fastest command kept)
            self._peak = 0.0
        elif not samples or now - samples[-1][0] >= CREEP_SAMPLE_S:
            samples.append((now, p, self._peak))
            self._peak = 0.0
        return bad

    def restart(self, now: float, pos) -> None:
        """The window starts anew at this pose (a relocation judged elsewhere), its fastest command kept."""
        peak = max([self._peak, *(smp[2] for smp in self._samples)])
        self._samples.clear()
        self._samples.append((float(now), (float(pos[0]), float(pos[1]) if len(pos) > 1 else 0.0), peak))
        self._peak = 0.0


def _off_segment(dx: float, dy: float, cx: float, cy: float, lo: float) -> float:
    """The distance of ``(dx, dy)`` from the points ``c (cx, cy)``, ``c`` in ``[lo, 1]``."""
    cc = cx * cx + cy * cy
    k = 1.0 if cc <= 1e-18 else min(max((dx * cx + dy * cy) / cc, lo), 1.0)
    return math.hypot(dx - k * cx, dy - k * cy)

