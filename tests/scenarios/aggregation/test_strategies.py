"""Strategy labels, oscillation, clustering and rounds to converge (consensus.scenarios.aggregation.strategies) on
hand-built negotiation rounds."""
import math

import numpy as np
import pytest

from consensus.graphs.topology import make_graph
from consensus.scenarios.aggregation import strategies as st
from consensus.scenarios.aggregation.planners.classical import AveragePlanner, StubbornPlanner, SuggestiblePlanner
from consensus.scenarios.aggregation.headless import run_negotiation

label = st.label_update


# --- one label per paper category (numbers from paper 1, Figs. 2-3) ----------------------------------------------
def test_average_with_self_fig2a_rounded_average():
    # (39 + 65 + 87) / 3 = 63.67, the agent rounds to 64: still within 0.5
    assert label([39], [[65], [87]], [64], "round the average 63.67 to 64") == "average_with_self"
    assert label([39], [[65], [87]], [64]) == "average_with_self"


def test_average_without_self_fig2b():
    assert label([32], [[6], [94]], [50], "The average of the other people's positions is 50") == \
        "average_without_self"


def test_suggestible_and_stubborn_fig3b():
    assert label([8], [[61], [17]], [17], "Moving towards position 17.0") == "suggestible"
    assert label([61], [[8], [17]], [61], "stay in my current position") == "stubborn"


def test_erroneous_when_nothing_fits_or_out_of_range():
    # mean with self 56.67, without 65, neighbours 60 and 70: 59 is 1 away from the nearest candidate
    assert label([40], [[60], [70]], [59], "closer to the average") == "erroneous"
    assert label([40], [[60], [70]], [81], "gather at 81") == "erroneous"       # Fig. 3c: outside the range
    assert label([40], [[60], [70]], [-3]) == "erroneous"


def test_tolerance_is_inclusive_and_configurable():
    assert label([0], [[10], [20]], [10.5]) == "average_with_self"          # |10.5 - 10| = 0.5 fits
    assert label([0], [[10], [20]], [10.51]) == "erroneous"
    assert label([0], [[10], [20]], [10.51], tol=1.0) == "average_with_self"
    with pytest.raises(ValueError, match="tolerance"):
        label([0], [[1]], [1], tol=0.0)


# --- ties ------------------------------------------------------------------------------------------------------
def test_two_agents_copying_is_suggestible_unless_the_reasoning_says_average():
    # with two agents the average without self IS the other agent's state
    assert label([50], [[12]], [12]) == "suggestible"
    assert label([50], [[12]], [12], "move towards their position") == "suggestible"
    assert label([50], [[12]], [12], "the average of the other agents is 12") == "average_without_self"
    assert label([50], [[12]], [12], "I will stay flexible") == "suggestible"   # names no fitting strategy


def test_own_state_equal_to_the_averages_is_stubborn_unless_the_reasoning_says_average():
    # 50 is the own state and both averages of {40, 50, 60} / {40, 60}
    assert label([50], [[40], [60]], [50]) == "stubborn"
    assert label([50], [[40], [60]], [50], "I prefer to remain stationary") == "stubborn"
    assert label([50], [[40], [60]], [50], "The mean of all positions is 50") == "average_with_self"


def test_nearest_fitting_candidate_wins_without_a_text_signal():
    # candidates: stubborn 0, average with self 0.4, suggestible 0.8, average without self 0.8; new state 0.45
    assert label([0], [[0.8]], [0.45]) == "average_with_self"
    assert label([0], [[0.8]], [0.7]) == "suggestible"
    assert label([0], [[0.8]], [0.1]) == "stubborn"


def test_reasoning_keywords():
    assert st.named_strategies("Staying where I am") == {"stubborn"}
    assert st.named_strategies("the midpoint") == {"average_with_self", "average_without_self"}
    assert st.named_strategies("join the nearest neighbour") == {"suggestible"}
    assert st.named_strategies("meaningful") == set()                # whole words only
    assert st.named_strategies("") == set()


# --- agreed, fallback, lone agents, 2-D ---------------------------------------------------------------------------
def test_agreed_rounds_say_nothing_about_strategy():
    assert label([40], [[40.2], [39.8]], [40.1]) == "agreed"
    assert label([40], [[40.2]], [45]) == "erroneous"                 # agreement left for nowhere


def test_fallback_overrides_every_other_label():
    assert label([40], [[60], [70]], [40], fallback=True) == "fallback"
    assert label([40], [[40]], [40], fallback=True) == "fallback"


def test_agent_without_neighbours_can_only_stay():
    assert label([7], [], [7]) == "stubborn"
    assert label([7], [], [9]) == "erroneous"


def test_two_dimensional_candidates():
    own, nbs = [0, 0], [[4, 0], [0, 4]]
    assert label(own, nbs, [4 / 3, 4 / 3]) == "average_with_self"
    assert label(own, nbs, [2, 2]) == "average_without_self"
    assert label(own, nbs, [0, 4.3]) == "suggestible"
    assert label(own, nbs, [0.3, -0.3]) == "stubborn"                 # |(0.3, -0.3)| = 0.42
    assert label(own, nbs, [4, 4]) == "erroneous"


# --- whole negotiations ------------------------------------------------------------------------------------------
def test_label_rounds_of_classical_planners():
    graph = make_graph("complete", 3)
    init = np.array([[10.0], [50.0], [90.0]])
    planners = [StubbornPlanner(1), SuggestiblePlanner(1, seed=0), AveragePlanner(1)]
    states, log = run_negotiation(planners, init, graph, rounds=3)
    reasonings = [[e["reasoning"] for e in log if e["round"] == r] for r in range(3)]
    labels = st.label_rounds(states, graph.adj, reasonings=reasonings)
    assert labels[0] == ["stubborn", "suggestible", "average_with_self"]
    assert st.encode_labels(labels)[0] == "SGW"
    assert st.decode_labels(st.encode_labels(labels)) == labels
    counts = st.label_counts(labels)
    assert sum(counts.values()) == 9 and set(counts) == set(st.LABELS)


def test_label_rounds_uses_the_graph_only():
    # directed chain 0 -> 1 -> 2: agent 2 does not hear agent 0, so moving to 0's state is not "suggestible"
    graph = make_graph("line", 3, directed=True)
    states = np.array([[[0.0], [10.0], [20.0]], [[0.0], [5.0], [0.0]]])
    assert st.label_rounds(states, graph.adj)[0] == ["stubborn", "average_with_self", "erroneous"]


def test_label_rounds_checks_shapes():
    states = np.zeros((3, 2, 1))
    with pytest.raises(ValueError, match="adjacency"):
        st.label_rounds(states, np.zeros((3, 3), bool))
    with pytest.raises(ValueError, match="fallbacks"):
        st.label_rounds(states, np.ones((2, 2), bool), fallbacks=np.zeros((3, 2), bool))
    with pytest.raises(ValueError, match="states"):
        st.label_rounds(np.zeros((3, 2)), np.ones((2, 2), bool))
    assert st.label_rounds(np.zeros((1, 2, 1)), np.ones((2, 2), bool)) == []


# --- oscillation ---------------------------------------------------------------------------------------------------
def series(*rows):
    return np.asarray(rows, dtype=float)[:, :, None]


def test_two_agents_swapping_oscillate():
    s = series([0, 10], [10, 0], [0, 10], [10, 0])
    assert st.reversals(s) == [2, 2]
    assert st.oscillates(s)
    assert not st.oscillates(s, min_reversals=3)


def test_monotone_and_converging_series_do_not_oscillate():
    assert st.reversals(series([0, 10], [5, 5], [5, 5], [5, 5])) == [0, 0]
    assert st.reversals(series([0], [4], [6], [7])) == [0]
    assert not st.oscillates(series([0], [4], [6], [7]))


def test_small_moves_are_skipped_and_damped_reversals_do_not_count():
    # +10, +0.2 (insignificant, skipped), -10, +10: two reversals
    assert st.reversals(series([0], [10], [10.2], [0.2], [10.2])) == [2]
    # +12, -6 (half: counts), +1 (a sixth: damped, does not count)
    assert st.reversals(series([0], [12], [6], [7])) == [1]
    # the 3-agent star with averaging: the centre zig-zags with moves shrinking 6-fold
    graph = make_graph("star", 3)
    states, _ = run_negotiation([AveragePlanner(1) for _ in range(3)], np.array([[95.0], [63.0], [69.0]]),
                                graph, rounds=10)
    assert not st.oscillates(states)


def test_reversal_in_two_dimensions_needs_an_angle_above_90_degrees():
    perpendicular = np.array([[[0.0, 0.0]], [[5.0, 0.0]], [[5.0, 5.0]], [[0.0, 5.0]]])
    assert st.reversals(perpendicular) == [0]          # (5, 0), (0, 5), (-5, 0): successive moves at 90°
    back = np.array([[[0.0, 0.0]], [[5.0, 1.0]], [[0.0, 0.0]], [[5.0, 1.0]]])
    assert st.reversals(back) == [2]


def test_oscillates_rejects_bad_min_reversals():
    with pytest.raises(ValueError, match="min_reversals"):
        st.oscillates(series([0], [1]), min_reversals=0)


# --- clustering and convergence ----------------------------------------------------------------------------------
def test_clusters_single_linkage_in_one_dimension():
    points = np.array([[5.0], [0.0], [20.0], [0.5], [5.9], [1.4]])
    assert st.clusters(points, tol=1.0) == [[0, 4], [1, 3, 5], [2]]
    assert st.clusters(points, tol=20.0) == [[0, 1, 2, 3, 4, 5]]
    assert st.clusters(points, tol=0.1) == [[0], [1], [2], [3], [4], [5]]


def test_clusters_in_two_dimensions():
    points = np.array([[0.0, 0.0], [0.6, 0.6], [10.0, 0.0], [10.0, 0.7]])
    assert st.clusters(points, tol=1.0) == [[0, 1], [2, 3]]
    assert st.clusters(points, tol=0.8) == [[0], [1], [2, 3]]          # |(0.6, 0.6)| = 0.85


def test_rounds_to_converge():
    assert st.rounds_to_converge([10, 5, 0.5, 2, 0.3, 0.1], 1.0) == 4
    assert st.rounds_to_converge([0.5, 0.2], 1.0) == 0
    assert st.rounds_to_converge([10, 0.5, 3], 1.0) is None
    assert st.rounds_to_converge([10, 1.0], 1.0) is None               # strict: spread < tol
    assert st.rounds_to_converge([10, math.nan, 0.1], 1.0) == 2
    assert st.rounds_to_converge([], 1.0) is None
