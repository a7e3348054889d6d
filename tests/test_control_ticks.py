"""The controller-timing measure used by the benchmarks and the status topic."""
from __future__ import annotations

import pytest

from consensus.control import ticks
from consensus.control.ticks import TickTimer


def run(monkeypatch, times):
    clock = iter(times)
    monkeypatch.setattr(ticks.time, "monotonic", lambda: next(clock))
    t = TickTimer(0.1)
    for _ in times:
        t.tick()
    return t.as_dict()


def test_regular_ticks_are_on_time(monkeypatch):
    d = run(monkeypatch, [k * 0.1 + 0.001 * (k % 3) for k in range(150)])
    assert d["ticks"] == 150 and d["on_time"] == 150 and d["max_late_ms"] <= 2.1
    assert d["rate_hz"] == pytest.approx(10.0, rel=0.01)


def test_late_ticks_are_counted_and_an_early_first_tick_does_not_shift_the_grid(monkeypatch):
    times = [0.0] + [k * 0.1 + 0.03 for k in range(1, 150)]     # first tick 30 ms "early" vs all the others
    times[20] += 0.025                                           # one tick 25 ms late on top
    times[120] += 0.040                                          # and one after the warm-up, 40 ms late
    d = run(monkeypatch, times)
    assert d["ticks"] == 150 and d["on_time"] == 148             # all but the two late ticks
    assert d["max_late_ms"] == pytest.approx(40.0, abs=0.5)


def test_a_skipped_slot_is_not_mistaken_for_lateness_of_later_ticks(monkeypatch):
    times = [k * 0.1 for k in range(60)] + [k * 0.1 + 0.001 for k in range(61, 150)]   # slot 60 skipped
    d = run(monkeypatch, times)
    assert d["on_time"] == len(times)
