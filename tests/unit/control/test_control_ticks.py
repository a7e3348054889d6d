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


# ---------------------------------------------------------------------------------------------- publish delay
def feel(starts, works, period=0.1):
    """A TickTimer fed ticks starting at ``starts`` whose command is published ``works`` later (None: never)."""
    t = TickTimer(period)
    for s, w in zip(starts, works):
        t.tick(s)
        if w is not None:
            t.published(s + w)
    return t


def test_a_tick_that_starts_on_time_but_publishes_late_is_late_for_the_robot():
    starts = [k * 0.1 for k in range(300)]
    works = [0.0015] * 300
    works[150] = 0.030            # a slow step: the tick started on its slot, the command went out 30 ms later
    starts[200] += 0.008          # started 8 ms late (on time) and published 4 ms later: 12 ms after the slot
    works[200] = 0.004
    d = feel(starts, works).as_dict()
    assert d["ticks"] == 300 and d["on_time"] == 300               # every tick *started* within 10 ms
    assert d["published"] == 300 and d["publish_on_time"] == 298    # but two commands went out later than 10 ms
    assert d["publish_late_ms"]["max"] == pytest.approx(30.0, abs=0.01)
    assert d["publish_late_ms"]["p50"] == pytest.approx(1.5, abs=0.11)
    assert d["publish_late_hist"] == [0, 298, 0, 0, 1, 1, 0, 0]    # <=1 <=2 <=5 <=10 <=20 <=50 <=100 >100 ms


def test_publish_percentiles_follow_the_delays():
    starts = [k * 0.1 for k in range(1000)]
    works = [0.00105 + 0.0001 * (k % 100) for k in range(1000)]    # 1.05 ... 10.95 ms, ten of each
    works[500] = 0.2                                               # one 200 ms stall
    d = feel(starts, works).as_dict()
    late = d["publish_late_ms"]
    assert late["p50"] == pytest.approx(6.05, abs=0.1)
    assert late["p99"] == pytest.approx(10.95, abs=0.1)
    assert late["max"] == pytest.approx(200.0, abs=0.01) and late["p999"] <= late["max"]
    assert d["publish_on_time"] == 1000 - 100 - 1                  # 10.05 ... 10.95 ms are late, and the stall


def test_only_the_first_publish_of_a_tick_counts_and_a_tick_that_never_publishes_shows():
    starts = [k * 0.1 for k in range(200)]
    works = [0.001] * 200
    works[120] = None                                              # the step raised: nothing published
    t = feel(starts, works)
    t.published(starts[-1] + 0.5)                                  # a second publish of the last tick: not counted
    d = t.as_dict()
    assert d["ticks"] == 200 and d["published"] == 199
    assert d["publish_on_time"] == 199 and d["publish_late_ms"]["max"] == pytest.approx(1.0, abs=0.01)


def test_publish_figures_during_the_warm_up_are_judged_against_the_ticks_so_far():
    starts = [k * 0.1 for k in range(20)]
    works = [0.001] * 20
    works[10] = 0.025
    d = feel(starts, works).as_dict()
    assert d["published"] == 20 and d["publish_on_time"] == 19
    assert d["publish_late_ms"]["max"] == pytest.approx(25.0, abs=0.01)
    assert TickTimer(0.1).as_dict()["publish_late_ms"] is None      # nothing published yet


def test_a_late_start_before_the_phase_is_known_counts_once_it_is():
    starts = [k * 0.1 for k in range(150)]
    starts[50] += 0.040                                           # 40 ms late during the warm-up
    d = feel(starts, [0.001] * 150).as_dict()
    assert d["published"] == 150 and d["publish_on_time"] == 149
    assert d["publish_late_ms"]["max"] == pytest.approx(41.0, abs=0.01)


def test_merge_adds_robots_up():
    a = feel([k * 0.1 for k in range(150)], [0.001] * 150).as_dict()
    works = [0.001] * 150
    works[140] = 0.060
    b = feel([k * 0.1 for k in range(150)], works).as_dict()
    m = ticks.merge([a, b, {"ticks": 3, "on_time": 3, "max_late_ms": 0.0, "rate_hz": 10.0}])   # an older record
    assert m["robots"] == 2 and m["published"] == 300 and m["publish_on_time"] == 299
    assert m["share"] == pytest.approx(299 / 300)
    assert m["max_late_ms"] == pytest.approx(60.0, abs=0.01)
    assert m["within_ms"][10] == pytest.approx(299 / 300) and m["within_ms"][100] == 1.0
    assert m["within_ms"][50] == pytest.approx(299 / 300)


# ------------------------------------------------------------------ SlotGrid: which group a clock's callback steps
def test_slot_grid_steps_the_groups_in_turn_and_after_a_stall_catches_up_keeping_every_group_s_phase():
    from consensus.control.ticks import SlotGrid

    i = 0.025
    g = SlotGrid(i, 4)
    # each callback reads the timer's next call: one slot before it is due, in turn
    assert [g.due(1.0 + k * i) for k in range(1, 6)] == [[0], [1], [2], [3], [0]]
    # a stall: the callback of slot 5 came 80 ms late, rcl moved the next call past slots 6 and 7 to slot 9:
    # slots 5 to 8 are stepped now (each group once, in slot order), and the next callback is group 1 as on the grid
    assert g.due(1.0 + 9 * i) == [1, 2, 3, 0] and g.skipped == 3
    # each stepped group's own slot time, which the fleet clock judges its commands' lateness against
    assert g.times == pytest.approx([1.0 + k * i for k in (5, 6, 7, 8)])
    assert g.due(1.0 + 10 * i) == [1] and g.times == pytest.approx([1.0 + 9 * i])
    # a second callback for a slot already stepped (the next call unchanged): nothing, not the next group early
    assert g.due(1.0 + 10 * i) == [] and g.due(1.0 + 11 * i) == [2]
    # a stall longer than a period (slots 11 to 17 due): each group once, the latest four slots (14 to 17) in slot
    # order, and the grid unchanged
    assert g.due(1.0 + 18 * i) == [2, 3, 0, 1] and g.skipped == 3 + 3 + 3 and g.due(1.0 + 19 * i) == [2]


def test_slot_grid_restarts_after_a_jump_of_the_clock_and_a_caller_without_a_timer_steps_slot_by_slot():
    from consensus.control.ticks import SlotGrid

    g = SlotGrid(0.025, 2)
    assert g.due(10.025) == [0] and g.due(10.05) == [1]
    assert g.due(3.0) == [0] and g.due(3.025) == [1] and g.skipped == 0      # the clock went back (a sim restart)
    assert g.due(8.0) == [0] and g.due(8.025) == [1] and g.skipped == 0      # forward by seconds: the same
    assert [g.next_slot() for _ in range(3)] == [0, 1, 0]
