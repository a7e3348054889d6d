"""The link model (consensus.graphs.links.LinkModel) that the ROS relays and the headless loop deliver through:
perfect information without delay or drop, the newest sample at least the delay old, seeded drops that keep the
previous delivery, lost senders left out after max_age_s, deliveries only over the graph's links."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consensus.graphs.links import LinkModel
from consensus.graphs.topology import make_graph

FAST = settings(max_examples=30, deadline=None, derandomize=True)
DT = 0.125          # sample period: a power of two, so times add up exactly


def sample(j: int, t: float) -> np.ndarray:
    """Sender j's sample at time t (distinct per sender and time)."""
    return np.array([100.0 * j + t, -t])


def feed(model: LinkModel, times) -> None:
    for t in times:
        model.record_all(t, np.array([sample(j, t) for j in range(model.n)]))


def test_without_delay_or_drop_every_receiver_gets_every_senders_newest_sample():
    m = LinkModel(4, 2)
    times = [k * DT for k in range(5)]
    feed(m, times)
    values, stamps = m.deliver(times[-1])
    assert values.shape == (4, 4, 2) and stamps.shape == (4, 4)
    for i in range(4):
        for j in range(4):
            if i == j:
                assert np.isnan(values[i, j]).all() and stamps[i, j] == -math.inf
            else:
                assert np.array_equal(values[i, j], sample(j, times[-1])) and stamps[i, j] == times[-1]


def test_a_delivery_between_samples_gives_the_last_one_with_its_own_time():
    m = LinkModel(2, 2)
    feed(m, [0.0, DT])
    values, stamps = m.deliver(DT + 0.06)
    assert np.array_equal(values[0, 1], sample(1, DT)) and stamps[0, 1] == DT


def test_nothing_recorded_is_nothing_delivered():
    m = LinkModel(3, 2)
    values, stamps = m.deliver(1.0)
    assert np.isnan(values).all() and np.all(stamps == -math.inf)


@pytest.mark.parametrize("delay_steps", [1, 3, 8])
@pytest.mark.parametrize("now_offset", [0.0, 0.5 * DT])
def test_with_a_delay_the_newest_sample_at_least_that_old_is_delivered(delay_steps, now_offset):
    delay = delay_steps * DT
    m = LinkModel(3, 2, delay_s=delay, rate_hz=1 / DT)
    times = [k * DT for k in range(20)]
    feed(m, times)
    now = times[-1] + now_offset
    expected = max(t for t in times if t <= now - delay)
    values, stamps = m.deliver(now)
    assert stamps[0, 1] == expected and stamps[2, 0] == expected
    assert np.array_equal(values[0, 1], sample(1, expected))
    assert now - stamps[0, 1] >= delay


def test_before_a_sample_is_the_delay_old_nothing_is_delivered():
    m = LinkModel(2, 2, delay_s=1.0)
    feed(m, [0.0, 0.5])
    values, stamps = m.deliver(0.9)
    assert np.isnan(values[0, 1]).all() and stamps[0, 1] == -math.inf
    assert m.deliver(1.0)[1][0, 1] == 0.0


@FAST
@given(delay_steps=st.integers(0, 10), count=st.integers(1, 40), extra=st.integers(0, 7))
def test_delay_rule_for_any_history(delay_steps, count, extra):
    delay = delay_steps * DT
    m = LinkModel(2, 2, delay_s=delay, rate_hz=1 / DT)
    times = [k * DT for k in range(count)]
    feed(m, times)
    now = times[-1] + extra * DT / 4
    old_enough = [t for t in times if t <= now - delay]
    _, stamps = m.deliver(now)
    assert stamps[1, 0] == (max(old_enough) if old_enough else -math.inf)


def test_a_dropped_delivery_keeps_the_previous_one_and_the_rate_is_the_drop_probability():
    n, p, rounds = 5, 0.3, 400
    m = LinkModel(n, 2, drop_prob=p, seed=11)
    off = ~np.eye(n, dtype=bool)
    prev_v, prev_t = None, None
    kept = 0
    for k in range(rounds):
        t = k * DT
        feed(m, [t])
        before = m.dropped
        values, stamps = m.deliver(t)
        if prev_t is not None:
            stale = off & (stamps < t)
            kept += int(np.count_nonzero(stale))
            assert m.dropped - before == np.count_nonzero(stale)   # every link had a new sample: stale = dropped
            # a link that did not get the new sample holds exactly what it held before (its time does not advance)
            assert np.array_equal(stamps[stale], prev_t[stale])
            assert np.array_equal(values[stale], prev_v[stale], equal_nan=True)
            assert np.all(stamps[off & ~stale] == t)
        prev_v, prev_t = values, stamps
    trials = (rounds - 1) * n * (n - 1)
    assert kept / trials == pytest.approx(p, abs=0.03)


def test_drops_are_seeded():
    def run(seed):
        m = LinkModel(4, 2, drop_prob=0.4, seed=seed)
        out = []
        for k in range(30):
            feed(m, [k * DT])
            out.append(m.deliver(k * DT)[1])
        return np.array(out)

    assert np.array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))


def test_a_sample_older_than_max_age_is_left_out():
    """A sender that stops (its process died) drops out of its receivers' sets once its last sample is older than
    max_age_s; a sender that keeps going does not."""
    max_age = 0.5
    m = LinkModel(3, 2, max_age_s=max_age)
    feed(m, [0.0])
    for k in range(1, 12):
        t = k * DT
        m.record(0, t, sample(0, t))                  # only sender 0 goes on
        m.record(2, t, sample(2, t))
        values, stamps = m.deliver(t)
        assert stamps[1, 0] == t and stamps[0, 2] == t
        if t <= max_age:
            assert stamps[0, 1] == 0.0 and np.array_equal(values[0, 1], sample(1, 0.0))
        else:
            assert stamps[0, 1] == -math.inf and np.isnan(values[0, 1]).all()
            assert stamps[2, 1] == -math.inf


def test_a_held_delivery_ages_out_under_drops():
    m = LinkModel(2, 2, drop_prob=0.5, max_age_s=0.3, seed=0)
    for k in range(200):
        t = k * DT
        feed(m, [t])
        _, stamps = m.deliver(t)
        held = stamps[np.isfinite(stamps)]
        assert np.all(t - held <= 0.3)


@pytest.mark.parametrize("name", ["ring", "line", "star"])
def test_deliveries_follow_the_graphs_links(name):
    """Row i of the links is whom robot i hears: it gets exactly those senders, never itself."""
    n = 6
    graph = make_graph(name, n, directed=True if name in ("ring", "line") else None)
    m = LinkModel(n, 2)
    feed(m, [0.0, DT])
    values, stamps = m.deliver(DT, graph.adj)
    got = np.isfinite(values).all(axis=2)
    assert np.array_equal(got, graph.adj) and np.array_equal(np.isfinite(stamps), graph.adj)
    assert not got.diagonal().any()
    for i in range(n):
        for j in graph.in_neighbors(i):
            assert np.array_equal(values[i, j], sample(j, DT))


def test_by_default_every_other_robot_is_heard_but_never_oneself():
    m = LinkModel(4, 2)
    feed(m, [0.0])
    got = np.isfinite(m.deliver(0.0)[0]).all(axis=2)
    assert np.array_equal(got, ~np.eye(4, dtype=bool))


def test_forget_drops_what_was_held_over_removed_links():
    """A graph switched at run time: a link that no longer exists delivers nothing, even while its sender is
    silent (its old delivery is not kept), and a restored link starts from the next sample."""
    n = 4
    full = ~np.eye(n, dtype=bool)
    m = LinkModel(n, 2)
    feed(m, [0.0])
    m.deliver(0.0, full)
    keep = full.copy()
    keep[0, 1] = keep[2, 3] = False
    m.forget(keep)
    assert np.isnan(m.value[0, 1]).all() and m.stamp[0, 1] == -math.inf
    assert np.isfinite(m.value[1, 0]).all() and m.stamp[1, 0] == 0.0
    values, stamps = m.deliver(DT, keep)              # nothing new recorded
    assert np.isnan(values[0, 1]).all() and np.isnan(values[2, 3]).all()
    assert stamps[1, 0] == 0.0
    feed(m, [2 * DT])
    values, stamps = m.deliver(2 * DT, full)
    assert stamps[0, 1] == 2 * DT


def test_record_all_skips_senders_without_a_sample():
    m = LinkModel(3, 2)
    feed(m, [0.0])
    vals = np.array([sample(j, DT) for j in range(3)])
    vals[1] = np.nan
    vals[2, 0] = np.inf
    m.record_all(DT, vals)
    values, stamps = m.deliver(DT)
    assert stamps[0, 1] == 0.0 and np.array_equal(values[0, 1], sample(1, 0.0))
    assert stamps[0, 2] == 0.0 and np.array_equal(values[0, 2], sample(2, 0.0))
    assert stamps[1, 0] == DT and np.array_equal(values[1, 0], sample(0, DT))


def test_record_of_one_sender_matches_record_all():
    a, b = LinkModel(3, 2), LinkModel(3, 2)
    for t in (0.0, DT, 2 * DT):
        feed(a, [t])
        for j in range(3):
            b.record(j, t, sample(j, t))
    va, ta = a.deliver(2 * DT)
    vb, tb = b.deliver(2 * DT)
    assert np.array_equal(va, vb, equal_nan=True) and np.array_equal(ta, tb)


@pytest.mark.parametrize("kwargs", [{"delay_s": -0.1}, {"delay_s": math.inf}, {"delay_s": math.nan},
                                    {"drop_prob": 1.0}, {"drop_prob": -0.1}])
def test_bad_link_parameters_are_refused(kwargs):
    with pytest.raises(ValueError, match="link"):
        LinkModel(2, 2, **kwargs)


def test_a_delivery_to_some_receivers_updates_only_theirs_and_equals_their_rows_of_a_whole_delivery():
    n = 6
    whole, part = LinkModel(n, 2, max_age_s=0.3), LinkModel(n, 2, max_age_s=0.3)
    feed(whole, [0.0])
    feed(part, [0.0])
    v_all, t_all = whole.deliver(0.0)
    rows = [1, 4]
    v, t = part.deliver(0.0, rows=rows)
    assert v.shape == (2, n, 2) and t.shape == (2, n)
    np.testing.assert_array_equal(v, v_all[rows])
    np.testing.assert_array_equal(t, t_all[rows])
    # receivers left out hold nothing yet; the ones served hold their delivery and age it out alone
    assert np.isinf(part.stamp[[0, 2, 3, 5]]).all() and np.isfinite(part.stamp[1, [0, 2, 3, 4, 5]]).all()
    _, later = part.deliver(1.0, rows=[4])
    assert np.isinf(later).all()                      # what robot 4 held is older than max_age_s: left out
    _, other = part.deliver(0.2, rows=[1])
    assert np.isfinite(other[0, [0, 2, 3, 4, 5]]).all()
