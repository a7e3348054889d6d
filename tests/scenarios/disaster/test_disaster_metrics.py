"""Disaster metrics (paper 2, sections 3.2 and 4.2, appendix C.1) against hand-computed values."""
from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consensus.scenarios.disaster.environment import Disaster
from consensus.scenarios.disaster.metrics import (action_deviation, coverage, misallocation_penalty,
                                                  misallocation_section_4_2, mode_action,
                                        response_delays, summarize)
from scenarios.disaster.test_disaster_env import make_env

cells = st.tuples(st.integers(0, 4), st.integers(0, 4))


# ---------------------------------------------------------------- mode and deviation (section 3.2)
def test_mode_is_the_most_frequent_cell():
    assert mode_action([(0, 0), (5, 5), (5, 5)]) == (5, 5)
    assert mode_action([[1, 2], [1, 2], [3, 3]]) == (1, 2)          # lists are cells too


def test_mode_ties_go_to_the_cell_chosen_first():
    assert mode_action([(1, 1), (2, 2), (2, 2), (1, 1)]) == (1, 1)
    assert mode_action([(2, 2), (1, 1), (1, 1), (2, 2)]) == (2, 2)
    assert mode_action([(3, 0), (0, 3)]) == (3, 0)


def test_deviation_by_hand():
    assert action_deviation([(0, 0), (0, 0), (3, 4)]) == pytest.approx(7 / 3)       # paper's Manhattan distance
    assert action_deviation([(0, 0), (2, 0)]) == pytest.approx(1.0)                 # tie: mode (0,0)
    assert action_deviation([(0, 0), (4, 0), (4, 0), (0, 0), (1, 0)]) == pytest.approx(9 / 5)  # mode (0,0)
    assert action_deviation([(6, 1), (0, 0), (0, 0), (6, 1), (5, 1)]) == pytest.approx((0 + 7 + 7 + 0 + 1) / 5)
    assert action_deviation([(3, 3)] * 10) == 0.0                                   # explicit consensus


def test_empty_actions_are_an_error():
    with pytest.raises(ValueError):
        mode_action([])
    with pytest.raises(ValueError):
        action_deviation([])


@settings(max_examples=100, deadline=None)
@given(st.lists(cells, min_size=1, max_size=30))
def test_mode_and_deviation_match_a_brute_force(actions):
    counts = Counter(actions)
    best = max(counts.values())
    expected = next(a for a in actions if counts[a] == best)        # first chosen among the most frequent
    assert mode_action(actions) == expected
    dev = sum(abs(a[0] - expected[0]) + abs(a[1] - expected[1]) for a in actions) / len(actions)
    assert action_deviation(actions) == pytest.approx(dev)
    assert (action_deviation(actions) == 0.0) == (len(counts) == 1)


# ---------------------------------------------------------------- coverage and misallocation (4.2, C.1)
def test_coverage_by_hand():
    disasters = [(1, 1), (2, 2), (3, 3)]
    drones = [(1, 1), (1, 1), (3, 3), (9, 9)]
    assert coverage(disasters, drones) == pytest.approx(2 / 3)
    assert coverage(disasters, Counter(drones)) == pytest.approx(2 / 3)
    assert coverage(disasters, [(0, 0)]) == 0.0
    assert coverage([], drones) is None


def test_misallocation_is_zero_while_every_disaster_is_covered():
    disasters = [(0, 0), (5, 5)]
    assert misallocation_penalty(disasters, [(0, 0)] * 10 + [(5, 5)] + [(9, 9)] * 4, 2) == 0
    assert misallocation_penalty([], [(9, 9)] * 4, 2) == 0


def test_misallocation_counts_excess_and_idle_drones_when_a_disaster_is_uncovered():
    disasters = [(0, 0), (5, 5)]
    drones = [(0, 0)] * 4 + [(9, 9)]
    assert misallocation_penalty(disasters, drones, 2) == (4 - 2) + 1
    assert misallocation_penalty(disasters, drones, 3) == (4 - 3) + 1
    assert misallocation_penalty(disasters, Counter(drones), 2) == 3
    assert misallocation_penalty(disasters, [(0, 0), (0, 0)], 2) == 0       # at most M: not over-allocated
    assert misallocation_penalty(disasters + [(7, 7)], [(0, 0)] * 3 + [(5, 5)] * 5, 2) == 1 + 3
    assert misallocation_penalty(disasters, [(1, 1)] * 3 + [(2, 2)], 2) == 4  # every drone idle


@settings(max_examples=100, deadline=None)
@given(st.lists(cells, max_size=4, unique=True), st.lists(cells, min_size=1, max_size=20), st.integers(1, 3))
def test_misallocation_properties(disasters, drones, m):
    mp = misallocation_penalty(disasters, drones, m)
    uncovered = any(c not in drones for c in disasters)
    assert 0 <= mp <= len(drones)
    if not uncovered:
        assert mp == 0
    else:
        idle = sum(c not in disasters for c in drones)
        assert mp == idle + sum(max(0, drones.count(c) - m) for c in disasters)


def test_section_4_2_misallocation_clause_by_clause():
    high, low = ((0, 0), 8), ((5, 5), 3)                 # high_severity 7: 8 is high, 3 is low
    mp = lambda disasters, drones: misallocation_section_4_2(disasters, drones, 7)  # noqa: E731
    # clause 1: drones on no disaster cell count, even when every disaster is attended
    assert mp([high, low], [(0, 0), (5, 5), (9, 9), (9, 9)]) == 2
    # clause 2: drones on a low-severity cell count while a high-severity disaster has no drone ...
    assert mp([high, low], [(5, 5)] * 3) == 3
    assert mp([high, low], [(5, 5)] * 3 + [(9, 9)]) == 3 + 1
    # ... and not once it has one (over-allocation beyond M is not penalised: every drone contains)
    assert mp([high, low], [(5, 5)] * 3 + [(0, 0)]) == 0
    assert mp([high, low], [(0, 0)] * 6) == 0
    # an uncovered LOW disaster does not trigger clause 2 (C.1's trigger would)
    assert mp([high, low, ((7, 7), 2)], [(5, 5)] * 2 + [(0, 0)]) == 0
    assert misallocation_penalty([(0, 0), (5, 5), (7, 7)], [(5, 5)] * 2 + [(0, 0)], 2) == 0
    assert misallocation_penalty([(0, 0), (5, 5), (7, 7)], [(5, 5)] * 4 + [(0, 0)], 2) == 2
    assert mp([high, low, ((7, 7), 2)], [(5, 5)] * 4 + [(0, 0)]) == 0
    # the threshold is inclusive (severity >= high_severity is high), and no disaster means nothing to allocate
    assert mp([((0, 0), 7), low], [(5, 5)]) == 1
    assert misallocation_section_4_2([((0, 0), 7), low], [(5, 5)], 8) == 0
    assert mp([], [(9, 9)] * 4) == 0
    assert mp([high, low], Counter([(5, 5)] * 3)) == 3


@settings(max_examples=100, deadline=None)
@given(st.lists(cells, max_size=4, unique=True), st.lists(st.integers(1, 10), min_size=4, max_size=4),
       st.lists(cells, min_size=1, max_size=20), st.integers(1, 10))
def test_section_4_2_misallocation_properties(disaster_cells, severities, drones, high):
    disasters = list(zip(disaster_cells, severities))
    mp = misallocation_section_4_2(disasters, drones, high)
    assert 0 <= mp <= len(drones)
    off = sum(c not in disaster_cells for c in drones)
    assert mp >= (off if disasters else 0)
    if not any(s >= high and c not in drones for c, s in disasters):
        assert mp == (off if disasters else 0)


# ---------------------------------------------------------------- response delay (4.2)
def _disaster(i, high_round, high_attended_round):
    return Disaster(id=i, cell=(i, 0), severity=8, kind="fire", casualties=0, infrastructure="", appeared_round=0,
                    high_round=high_round, high_attended_round=high_attended_round)


def test_response_delays_by_hand_with_censoring():
    disasters = [_disaster(0, 2, 5), _disaster(1, 4, None), _disaster(2, None, None), _disaster(3, 3, 3)]
    assert response_delays(disasters, rounds_completed=10) == [(3, False), (6, True), (0, False)]
    assert response_delays([], 10) == []


def test_response_delay_is_timed_from_becoming_high():
    env = make_env([((1, 1), 5)])
    env.begin_round()
    env.end_round([(1, 1)])                               # attended while not yet high: 5 -> 2
    env._active[0].severity = 8                           # white-box: it grows into a high-severity disaster
    for _ in range(2):
        env.begin_round()
        env.end_round([(0, 0)])
    env.begin_round()
    env.end_round([(1, 1)])
    (d,) = env.all_disasters()
    assert (d.first_attended_round, d.high_round, d.high_attended_round) == (0, 1, 3)
    assert response_delays([d], env.round) == [(2, False)]


def test_response_delay_counts_a_never_attended_disaster_until_the_run_end():
    env = make_env([((1, 1), 9), ((5, 5), 3)])
    outcomes = []
    for _ in range(4):
        env.begin_round()
        outcomes.append(env.end_round([(5, 5)]))
    s = summarize(outcomes, env.all_disasters(), env.round)
    assert s["response_delay"] == 4.0 and s["response_censored"] == 1 and s["response_delay_disasters"] == 1


# ---------------------------------------------------------------- a whole scripted run
SCRIPT = [
    [(1, 1)] * 4,                        # d0 cleared (8 - 12): +40; d1 uncovered: -14; MP c1 2 (excess) -> -10
    [(5, 5), (0, 0), (0, 0), (0, 0)],    # d1 7 -> 4: -8; all covered: MP c1 0; mode (0,0): d̄ = 10/4
    [(9, 9)] * 4,                        # d1 uncovered: -8; 4 idle drones: MP 4 -> -20
]


def scripted_run(**cfg):
    env = make_env([((1, 1), 8), ((5, 5), 7)], **cfg)
    outcomes = []
    for drones in SCRIPT:
        env.begin_round()
        outcomes.append(env.end_round(drones))
    return summarize(outcomes, env.all_disasters(), env.round), outcomes


def test_summarize_a_scripted_run_by_hand():
    s, outcomes = scripted_run(misallocation="c1")
    assert [o.net_reward for o in outcomes] == [40 - 14 - 10, -8.0, -8 - 20]
    assert s["rounds"] == 3
    assert s["coverage_rate"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert s["misallocation_penalty"] == pytest.approx((2 + 0 + 4) / 3)
    assert s["misallocation_share"] == pytest.approx((2 / 4 + 0 + 4 / 4) / 3)
    assert s["response_delay"] == pytest.approx((0 + 1) / 2)           # d0 attended at once, d1 one round later
    assert (s["response_delay_disasters"], s["response_censored"]) == (2, 0)
    assert s["net_reward"] == pytest.approx(16 - 8 - 28)
    assert (s["reward_cleared"], s["penalty_uncontained"], s["misallocation_cost"]) == (40.0, 30.0, 30.0)
    assert s["mean_deviation"] == pytest.approx(2.5 / 3)
    assert (s["disasters_appeared"], s["disasters_cleared"]) == (2, 1)
    assert s["series"] == {"coverage": [0.5, 1.0, 0.0], "misallocation": [2, 0, 4], "deviation": [0.0, 2.5, 0.0],
                           "net_reward": [16.0, -8.0, -28.0], "active": [2, 1, 1]}
    json.dumps(s)


def test_scripted_run_with_the_section_4_2_misallocation():
    s, outcomes = scripted_run()
    # round 0: all 4 on the high d0 while the high d1 (7) waits: no drone off a disaster or on a low one -> 0;
    # round 1: 3 drones off every disaster -> 3; round 2: d1 is low (4) now, 4 drones off every disaster -> 4
    assert s["series"]["misallocation"] == [0, 3, 4]
    assert [o.net_reward for o in outcomes] == [40 - 14, -8.0 - 15, -8 - 20]
    assert s["misallocation_share"] == pytest.approx((0 + 3 / 4 + 4 / 4) / 3)


def test_rounds_without_disasters_are_left_out_of_coverage():
    env = make_env([((1, 1), 2)])
    outcomes = []
    for _ in range(3):
        env.begin_round()
        outcomes.append(env.end_round([(1, 1)]))          # cleared in round 0, nothing afterwards
    s = summarize(outcomes, env.all_disasters(), env.round)
    assert s["series"]["coverage"] == [1.0, None, None]
    assert s["coverage_rate"] == 1.0
    assert s["response_delay"] is None                    # never high-severity


def test_deviation_uses_the_chosen_actions_not_the_positions():
    env = make_env([((1, 1), 9)])
    env.begin_round()
    out = env.end_round([(1, 1), (1, 1)], actions=[(1, 1), (4, 1)])
    assert out.metrics["deviation"] == pytest.approx(1.5)     # tie -> (1,1) first: distances 0 and 3
    assert out.metrics["coverage"] == 1.0


def test_summarize_of_no_rounds():
    env = make_env([])
    s = summarize([], env.all_disasters(), env.round)
    assert s["rounds"] == 0 and s["coverage_rate"] is None and s["mean_deviation"] is None
    assert s["net_reward"] == 0.0 and s["series"]["coverage"] == []
