"""Control-loop timing: how late periodic ticks start, and how late their commands go out, relative to their ideal
slots (no ROS needed).

The robot base (``consensus.ros.robot``) feeds its 10 Hz control ticks into a ``TickTimer`` (``tick()`` when the tick
starts, ``published()`` once its ``cmd_vel`` is published) and reports ``as_dict()`` in ``planner/status``'s
``control`` record; the benchmarks read the same figures, over all robots with ``merge``.
"""
from __future__ import annotations

import time
from bisect import bisect_left

import numpy as np

ON_TIME_S = 0.010   # a control tick is on time when it starts (its command is published) at most 10 ms after its slot

#: ``publish_late_hist``: how many commands went out at most this late [ms] after their slot, bin by bin (the last
#: bin: later than the last edge). Coarse and mergeable: the benchmarks add the robots' histograms up.
LATE_EDGES_MS = (1, 2, 5, 10, 20, 50, 100)

_BIN_S = 1e-4            # the fine histogram behind the percentiles: 0.1 ms bins ...
_BINS = 5000             # ... up to 500 ms (later ones fall into the last bin; the maximum is kept exactly)


class TickTimer:
    """How late periodic callbacks start, and publish, relative to their ideal slots (wall clock), in O(1) per tick.

    The slots are ``phase + k * period``. The phase is the 1st percentile of the offsets of the first
    ``WARMUP`` ticks (so one early tick before start-up load does not shift the grid for all others); from then
    on each tick is counted on time when it starts at most ``ON_TIME_S`` after its slot.

    ``published()`` marks the publish of the current tick's command: its delay from the tick's slot (the tick's
    lateness plus the work of the tick up to the publish) is what a robot feels. Only the first call after a
    ``tick()`` counts; a tick that never publishes (an exception in the step) shows as ``ticks - published``.
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
        # publish delays
        self.published_n = 0
        self.publish_on_time = 0
        self.publish_max_late = 0.0
        self._offset = 0.0                  # the current tick's offset from t0's grid
        self._pending = False               # the current tick has not published yet
        self._warmup_pub: list[float] = []  # publish offsets (tick offset + work) before the phase is known
        self._hist = np.zeros(_BINS + 1, dtype=np.int64)
        self._coarse = [0] * (len(LATE_EDGES_MS) + 1)

    def tick(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
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
        self._offset, self._pending = offset, True
        if self.phase is None:
            self._warmup.append(offset)
            if len(self._warmup) >= self.WARMUP:
                self.phase = float(np.percentile(self._warmup, 1))
                for o in self._warmup:
                    self._count(o)
                for o in self._warmup_pub:
                    self._count_publish(o)
                self._warmup, self._warmup_pub = [], []
        else:
            self._count(offset)

    def published(self, now: float | None = None) -> None:
        """The current tick's command was published (now)."""
        if not self._pending:
            return
        now = time.monotonic() if now is None else now
        self._pending = False
        offset = self._offset + max(now - self.last, 0.0)
        if self.phase is None:
            self._warmup_pub.append(offset)
        else:
            self._count_publish(offset)

    def _count(self, offset: float) -> None:
        late = max(offset - self.phase, 0.0)
        self.max_late = max(self.max_late, late)
        if late <= ON_TIME_S:
            self.on_time += 1

    def _count_publish(self, offset: float) -> None:
        late = max(offset - self.phase, 0.0)
        self.published_n += 1
        self.publish_max_late = max(self.publish_max_late, late)
        if late <= ON_TIME_S:
            self.publish_on_time += 1
        self._hist[min(int(late / _BIN_S), _BINS)] += 1
        self._coarse[bisect_left(LATE_EDGES_MS, late * 1e3)] += 1         # the first edge >= the delay

    def _publish_figures(self) -> dict:
        if self.phase is None and self._warmup_pub:        # still warming up: judge against the ticks so far
            scratch = TickTimer(self.period)
            scratch.phase = float(np.percentile(self._warmup, 1))
            for o in self._warmup_pub:
                scratch._count_publish(o)
            return scratch._publish_figures()
        n = self.published_n
        late = None
        if n:
            cum = np.cumsum(self._hist)
            late = {key: _percentile_ms(cum, q * n, self.publish_max_late)
                    for key, q in (("p50", 0.50), ("p99", 0.99), ("p999", 0.999))}
            late["max"] = round(self.publish_max_late * 1e3, 2)
        return {"published": n, "publish_on_time": self.publish_on_time, "publish_late_ms": late,
                "publish_late_hist": list(self._coarse)}

    def as_dict(self) -> dict:
        """``ticks``, ``on_time``, ``max_late_ms``, ``rate_hz`` (the ticks' start) and ``published``,
        ``publish_on_time`` (within ``ON_TIME_S`` of the slot), ``publish_late_ms`` (``p50``, ``p99``, ``p999``:
        upper bounds to 0.1 ms, and ``max``; None before the first publish) and ``publish_late_hist`` (counts by
        ``LATE_EDGES_MS``) of the commands' publish."""
        on_time, max_late = self.on_time, self.max_late
        if self.phase is None and self._warmup:            # still warming up: judge against the ticks so far
            late = np.maximum(np.asarray(self._warmup) - np.percentile(self._warmup, 1), 0.0)
            on_time, max_late = int((late <= ON_TIME_S).sum()), float(late.max())
        span = self.last - self.t0 if self.t0 is not None else 0.0
        return {"ticks": self.ticks, "on_time": on_time, "max_late_ms": round(max_late * 1e3, 2),
                "rate_hz": round((self.ticks - 1) / span, 3) if span > 0 else None, **self._publish_figures()}


def _percentile_ms(cum: np.ndarray, rank: float, max_late: float) -> float:
    """The delay of the ``rank``-th command by the fine histogram's cumulative counts: the upper edge of its bin
    [ms] (never above the maximum)."""
    b = int(np.searchsorted(cum, rank, side="left"))
    return round(min((b + 1) * _BIN_S, max_late) * 1e3, 2)


def merge(records: list[dict]) -> dict:
    """The publish figures of several robots' ``control`` records (``as_dict()``) together: ``published``,
    ``publish_on_time`` and its ``share``, ``max_late_ms`` (of the publish), the summed ``hist`` and the share of
    commands within each edge of ``LATE_EDGES_MS`` (``within_ms``). Records without the publish figures (an older
    robot) are left out; ``robots`` says how many were merged."""
    recs = [r for r in records if isinstance(r, dict) and "publish_late_hist" in r]
    published = sum(int(r.get("published", 0)) for r in recs)
    on_time = sum(int(r.get("publish_on_time", 0)) for r in recs)
    hist = [0] * (len(LATE_EDGES_MS) + 1)
    for r in recs:
        for b, c in enumerate(r["publish_late_hist"][: len(hist)]):
            hist[b] += int(c)
    cum = np.cumsum(hist)
    return {"robots": len(recs), "published": published, "publish_on_time": on_time,
            "share": on_time / published if published else 0.0,
            "max_late_ms": max(((r.get("publish_late_ms") or {}).get("max", 0.0) for r in recs), default=0.0),
            "hist": hist,
            "within_ms": {e: (float(cum[b]) / published if published else 0.0) for b, e in enumerate(LATE_EDGES_MS)}}


class SlotGrid:
    """Which groups a clock steps when its periodic timer fires: ``groups`` groups, one per slot, slots ``interval``
    apart, group ``k % groups`` at slot ``k`` — so every group keeps its phase in the period for good.

    ``due(next_call)`` takes the time the timer fires next, read in its callback (rcl has already moved it past
    every slot that is due, skipping the ones a late callback missed), and gives the groups of the slots before
    it that are not stepped yet, in slot order: one in the usual case; after a stall the skipped slots' groups too
    (at most each group once: the latest ``groups`` slots), counted in ``skipped``; none for a callback whose slot
    was stepped already. Reading the slot from the timer, not from the time the callback ran, keeps the grid
    exact: a grid restarted at every stall would move every group's slots for the rest of the run, and one guessed
    from the callback's time steps a group a slot early when the callback comes just at the next slot (measured:
    docs/benchmarks.md, 'Why the code is as it is'). A timer whose
    next call jumps (backwards, or forwards by more than ``max_jump_s``: a sim time reset, a paused sim) starts
    the grid anew there."""

    def __init__(self, interval: float, groups: int, max_jump_s: float = 1.0) -> None:
        self.interval, self.groups, self.max_jump_s = interval, groups, max_jump_s
        self._origin: float | None = None       # the time of slot 0
        self._next = 0                          # the first slot not stepped yet
        self._last_call = 0.0
        self.skipped = 0                        # slots not stepped at their own time (stepped late, or left out)
        self.times: list[float] = []            # the slot times of the groups ``due`` returned last (the timer's clock)

    def due(self, next_call: float) -> list[int]:
        if (self._origin is None or next_call < self._last_call - self.interval / 2
                or next_call - self._last_call > self.max_jump_s):
            self._origin = next_call - (self._next + 1) * self.interval
        self._last_call = next_call
        last = round((next_call - self._origin) / self.interval) - 1       # the last slot before the next call
        if last < self._next:
            return []
        first = max(self._next, last - self.groups + 1)
        self.skipped += last - self._next
        self._next = last + 1
        self.times = [self._origin + k * self.interval for k in range(first, last + 1)]
        return [k % self.groups for k in range(first, last + 1)]

    def next_slot(self) -> int:
        """The group of the next slot, stepped now (a caller without a timer: one slot a call)."""
        self._next += 1
        return (self._next - 1) % self.groups
