"""Control-loop timing: how late periodic ticks start relative to their ideal slots (no ROS needed).

The robot base (``consensus.ros.robot``) feeds its 10 Hz control ticks into a ``TickTimer`` and reports
``as_dict()`` in ``planner/status``; the benchmarks read the same figures.
"""
from __future__ import annotations

import time

import numpy as np

ON_TIME_S = 0.010   # a control tick is on time when it starts at most 10 ms after its slot


class TickTimer:
    """How late periodic callbacks start relative to their ideal slots (wall clock), in O(1) per tick.

    The slots are ``phase + k * period``. The phase is the 1st percentile of the offsets of the first
    ``WARMUP`` ticks (so one early tick before start-up load does not shift the grid for all others); from then
    on each tick is counted on time when it starts at most ``ON_TIME_S`` after its slot.
    """

    WARMUP = 100

    def __init__(self, period_s: float) -> None:
        self.period = period_s
        self.t0: float | None = None
        self.last = 0.0
        self.k = 0
        self.ticks = 0
        self.on_time = 0
        self.max_late = 0.0
        self.phase: float | None = None
        self._warmup: list[float] = []

    def tick(self) -> None:
        now = time.monotonic()
        if self.t0 is None:
            self.t0 = now
        self.last = now
        # the next slot, unless we are more than a whole period past it (rcl then skips the missed slots)
        k = self.k + 1 if self.ticks else 0
        if now - self.t0 - k * self.period > self.period:
            k = int((now - self.t0) // self.period)
        self.k = k
        self.ticks += 1
        offset = now - self.t0 - k * self.period
        if self.phase is None:
            self._warmup.append(offset)
            if len(self._warmup) >= self.WARMUP:
                self.phase = float(np.percentile(self._warmup, 1))
                for o in self._warmup:
                    self._count(o)
                self._warmup = []
        else:
            self._count(offset)

    def _count(self, offset: float) -> None:
        late = max(offset - self.phase, 0.0)
        self.max_late = max(self.max_late, late)
        if late <= ON_TIME_S:
            self.on_time += 1

    def as_dict(self) -> dict:
        on_time, max_late = self.on_time, self.max_late
        if self.phase is None and self._warmup:            # still warming up: judge against the ticks so far
            late = np.maximum(np.asarray(self._warmup) - np.percentile(self._warmup, 1), 0.0)
            on_time, max_late = int((late <= ON_TIME_S).sum()), float(late.max())
        span = self.last - self.t0 if self.t0 is not None else 0.0
        return {"ticks": self.ticks, "on_time": on_time, "max_late_ms": round(max_late * 1e3, 2),
                "rate_hz": round((self.ticks - 1) / span, 3) if span > 0 else None}
