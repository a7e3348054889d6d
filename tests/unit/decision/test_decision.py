"""Paper 3's aggregation layer with scripted proposers and coordinators: votes, averages, turn counts,
agreement stops, fallbacks, failure counting and the tie rule."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from consensus.decision import (ARCHITECTURES, ProposeContext, decide, average, is_cell, majority_vote,
                                   unanimous)
from consensus.errors import ConfigError


class Scripted:
    """Proposer answering script[turn] (the last entry repeats); records every context it was shown."""

    def __init__(self, *script):
        self.script = list(script)
        self.seen: list[ProposeContext] = []

    def propose(self, ctx):
        self.seen.append(ctx)
        return self.script[min(ctx.turn, len(self.script) - 1)]


class Copier:
    """Proposer that answers `first` at turn 0 and then whatever plan or majority it is shown."""

    def __init__(self, first):
        self.first = first

    def propose(self, ctx):
        if ctx.turn == 0:
            return self.first
        if ctx.coordinator_plan is not None:
            return ctx.coordinator_plan
        return majority_vote([ctx.own_previous, *ctx.others_previous])


class ScriptedCoordinator:
    def __init__(self, *plans):
        self.plans = list(plans)
        self.calls: list[tuple[list, int]] = []

    def merge(self, proposals, turn):
        self.calls.append((list(proposals), turn))
        return self.plans[min(turn, len(self.plans) - 1)]


# --- voting --------------------------------------------------------------------------------------
def test_majority_vote_counts_whole_proposals_and_ignores_failures():
    assert majority_vote(["a", None, "b", "b", None]) == "b"
    assert majority_vote([None, None]) is None
    assert majority_vote([(1, 2), (3, 4), (1, 2)]) == (1, 2)
    a, b = np.array([[1.0, 2.0]]), np.array([[1.0, 3.0]])
    assert majority_vote([b, a, a.copy()]) is a                      # first occurrence of the winner
    assert np.array_equal(majority_vote([np.array([0.0, -0.0]), np.array([1.0, 1.0]), np.array([-0.0, 0.0])]),
                          [0.0, 0.0])                                # -0.0 counts as 0.0


def test_majority_tie_goes_to_the_earliest_first_proposal():
    assert majority_vote(["b", "a", "a", "b"]) == "b"
    assert majority_vote([None, "c", "a", "b"]) == "c"               # all differ: first valid one
    assert majority_vote([(2, 2), (1, 1), (1, 1), (2, 2), (3, 3)]) == (2, 2)


def test_average_numeric_allocation_and_cells():
    assert average([1.0, None, 2.0], "numeric") == pytest.approx(1.5)
    assert isinstance(average([1, 2], "numeric"), float)
    np.testing.assert_allclose(average([np.array([0.0, 2.0]), np.array([1.0, 4.0])], "numeric"), [0.5, 3.0])
    alloc = average([np.zeros((2, 3)), None, np.full((2, 3), 3.0)], "allocation")
    np.testing.assert_allclose(alloc, np.full((2, 3), 1.5))
    assert average([(0, 0), (1, 1)], "categorical") == (1, 1)       # 0.5 rounds half up
    assert average([(0, 0), (1, 0), (1, 0)], "categorical") == (1, 0)   # 0.667 -> 1
    assert average([(0, 4), (0, 5), (1, 5)], "categorical") == (0, 5)   # x 0.333 -> 0, y 4.667 -> 5
    assert average([None], "categorical") is None
    with pytest.raises(ConfigError, match="labels cannot be averaged"):
        average(["World", "Sports"], "categorical")
    with pytest.raises(ValueError, match="different shapes"):
        average([np.zeros(2), np.zeros(3)], "numeric")
    with pytest.raises(ConfigError, match="kind"):
        average([1.0], "text")


def test_cells_and_unanimity():
    assert is_cell((1, 2)) and is_cell([np.int64(1), 2]) and not is_cell((True, 1)) and not is_cell((1.0, 2))
    assert unanimous([np.ones((2, 2)), np.ones((2, 2)) + 1e-12], "allocation")
    assert not unanimous([np.ones((2, 2)), np.ones((2, 3))], "allocation")
    assert not unanimous([1.0, None], "numeric") and not unanimous([], "numeric")
    assert unanimous(["x", "x"], "categorical") and not unanimous(["x", "y"], "categorical")


# --- one-turn architectures ----------------------------------------------------------------------
def test_single_asks_only_agent_zero():
    agents = [Scripted(5.0), Scripted(7.0), Scripted(7.0)]
    out = decide("single", agents, kind="numeric")
    assert (out.decision, out.turns, out.proposals) == (5.0, 1, [[5.0]])
    assert agents[1].seen == [] and agents[2].seen == []


def test_single_failure_uses_failed_value():
    out = decide("single", [Scripted(None), Scripted(1.0)], kind="numeric", failed_value=0.0)
    assert (out.decision, out.failures) == (0.0, 1)


def test_majority_and_averaging_one_turn():
    agents = [Scripted("a"), Scripted("b"), Scripted("b")]
    out = decide("majority", agents, kind="categorical")
    assert (out.decision, out.turns, out.agreed, out.fallback) == ("b", 1, False, "")
    assert [ctx for a in agents for ctx in a.seen] == [ProposeContext(agent=i, turn=0) for i in range(3)]
    out = decide("averaging", [Scripted(1.0), Scripted(None), Scripted(3.0)], kind="numeric")
    assert (out.decision, out.failures) == (2.0, 1)


def test_failed_value_takes_part_in_the_vote():
    zeros = np.zeros((1, 2))
    plan = np.array([[1.0, 2.0]])
    agents = [Scripted(plan), Scripted(None), Scripted(None)]
    out = decide("majority", agents, kind="allocation", failed_value=zeros)
    assert out.decision is zeros and out.failures == 2                # two zero plans outvote one plan
    out = decide("majority", agents, kind="allocation")
    assert out.decision is plan and out.failures == 2                 # without failed_value they are ignored
    out = decide("averaging", agents, kind="allocation", failed_value=zeros)
    np.testing.assert_allclose(out.decision, plan / 3)


# --- decentralized -------------------------------------------------------------------------------
def test_decentralized_stops_at_consensus_and_shows_only_own_previous():
    a = Scripted(1.0, 2.0, 3.0)
    b = Scripted(2.0, 2.0, 9.0)
    out = decide("decentralized", [a, b], kind="numeric", max_turns=5)
    assert (out.turns, out.agreed, out.decision, out.fallback) == (2, True, 2.0, "")
    assert out.proposals == [[1.0, 2.0], [2.0, 2.0]]
    assert a.seen[1] == ProposeContext(agent=0, turn=1, own_previous=1.0)   # nothing of the others
    assert b.seen[1].others_previous == () and b.seen[1].history == ()


def test_decentralized_agreement_at_turn_zero_is_one_turn():
    out = decide("decentralized_feedback", [Scripted("x"), Scripted("x")], kind="categorical")
    assert (out.turns, out.agreed, out.decision) == (1, True, "x")


def test_decentralized_without_consensus_averages_the_last_turn():
    agents = [Scripted(np.array([[0.0, 2.0]])), Scripted(np.array([[2.0, 2.0]]))]
    out = decide("decentralized", agents, kind="allocation", max_turns=5)
    assert (out.turns, out.agreed, out.fallback) == (5, False, "average")
    np.testing.assert_allclose(out.decision, [[1.0, 2.0]])
    cells = decide("decentralized", [Scripted((0, 0)), Scripted((3, 1))], kind="categorical", max_turns=2)
    assert (cells.decision, cells.fallback, cells.turns) == ((2, 1), "average", 2)   # (1.5, 0.5) rounds up


def test_decentralized_labels_fall_back_to_a_seeded_random_choice():
    def run(seed):
        agents = [Scripted("a"), Scripted(None), Scripted("b"), Scripted("c")]
        return decide("decentralized", agents, kind="categorical", max_turns=3, rng=np.random.default_rng(seed))
    outs = [run(seed) for seed in range(20)]
    assert all(o.fallback == "random" and o.turns == 3 and o.failures == 3 for o in outs)
    assert {o.decision for o in outs} == {"a", "b", "c"}               # failed (None) is never chosen
    assert [o.decision for o in outs] == [run(seed).decision for seed in range(20)]


def test_decentralized_feedback_shows_others_and_history():
    a, b, c = Scripted(1.0, 5.0), Scripted(2.0, 5.0), Scripted(3.0, 5.0)
    out = decide("decentralized_feedback", [a, b, c], kind="numeric")
    assert (out.turns, out.agreed, out.decision) == (2, True, 5.0)
    assert b.seen[1] == ProposeContext(agent=1, turn=1, own_previous=2.0, others_previous=(1.0, 3.0),
                                       history=((1.0, 2.0, 3.0),))


def test_decentralized_feedback_lets_agents_converge():
    agents = [Copier("x"), Copier("y"), Copier("y"), Copier("z")]
    out = decide("decentralized_feedback", agents, kind="categorical")
    assert (out.turns, out.agreed, out.decision) == (2, True, "y")
    plain = decide("decentralized", agents, kind="categorical", max_turns=4, rng=np.random.default_rng(1))
    assert (plain.turns, plain.agreed) == (4, False)                   # own previous only: nobody moves


def test_failed_agent_blocks_consensus_unless_replaced():
    agents = [Scripted(1.0), Scripted(1.0), Scripted(None)]
    out = decide("decentralized", agents, kind="numeric", max_turns=3)
    assert (out.turns, out.agreed, out.failures, out.decision) == (3, False, 3, 1.0)
    agents = [Scripted(0.0), Scripted(0.0), Scripted(None)]
    out = decide("decentralized", agents, kind="numeric", max_turns=3, failed_value=0.0)
    assert (out.turns, out.agreed, out.failures) == (1, True, 1)


def test_custom_agree():
    agents = [Scripted(1.0, 2.0), Scripted(1.4, 2.1)]
    close = lambda props: max(props) - min(props) <= 0.2             # noqa: E731
    out = decide("decentralized", agents, kind="numeric", agree=close)
    assert (out.turns, out.agreed, out.decision) == (2, True, 2.0)


# --- spoke & wheel -------------------------------------------------------------------------------
def test_spoke_wheel_merges_once():
    coord = ScriptedCoordinator(9.0)
    out = decide("spoke_wheel", [Scripted(1.0), Scripted(None), Scripted(3.0)], kind="numeric",
                    coordinator=coord, failed_value=0.0)
    assert (out.decision, out.turns, out.coordinator_plans, out.failures) == (9.0, 1, [9.0], 1)
    assert coord.calls == [([1.0, 0.0, 3.0], 0)]                        # the coordinator sees the replacement


@pytest.mark.parametrize("kind,props,expected", [
    ("numeric", [1.0, 2.0, 6.0], 3.0),
    ("categorical", ["a", "b", "b"], "b"),
])
def test_spoke_wheel_coordinator_failure_falls_back(kind, props, expected):
    out = decide("spoke_wheel", [Scripted(p) for p in props], kind=kind, coordinator=ScriptedCoordinator(None))
    assert (out.decision, out.coordinator_failures) == (expected, 1)
    assert out.fallback == ("average" if kind == "numeric" else "majority")


def test_spoke_wheel_feedback_stops_when_spokes_accept_the_plan():
    coord = ScriptedCoordinator(4.0, 7.0)
    agents = [Copier(1.0), Copier(2.0), Copier(9.0)]
    out = decide("spoke_wheel_feedback", agents, kind="numeric", coordinator=coord)
    assert (out.turns, out.agreed, out.decision, out.coordinator_plans) == (2, True, 4.0, [4.0])
    assert [c[1] for c in coord.calls] == [0]


def test_spoke_wheel_feedback_runs_max_turns_and_keeps_the_last_plan():
    coord = ScriptedCoordinator(4.0, 5.0, 6.0)
    spokes = [Scripted(1.0), Scripted(2.0)]
    out = decide("spoke_wheel_feedback", spokes, kind="numeric", coordinator=coord, max_turns=3)
    assert (out.turns, out.agreed, out.decision) == (3, False, 6.0)
    assert out.coordinator_plans == [4.0, 5.0, 6.0]
    assert [ctx.coordinator_plan for ctx in spokes[0].seen] == [None, 4.0, 5.0]
    assert spokes[1].seen[2] == ProposeContext(agent=1, turn=2, own_previous=2.0, coordinator_plan=5.0)


def test_spoke_wheel_feedback_coordinator_failures_are_counted_each_turn():
    coord = ScriptedCoordinator(None)
    out = decide("spoke_wheel_feedback", [Scripted(1.0, 2.0), Scripted(3.0, 4.0)], kind="numeric",
                    coordinator=coord, max_turns=2)
    assert (out.coordinator_failures, out.decision, out.fallback) == (2, 3.0, "average")


# --- general -------------------------------------------------------------------------------------
def test_bad_arguments_are_config_errors():
    with pytest.raises(ConfigError, match="architecture"):
        decide("debate", [Scripted(1.0)], kind="numeric")
    with pytest.raises(ConfigError, match="kind"):
        decide("single", [Scripted(1.0)], kind="text")
    with pytest.raises(ConfigError, match="coordinator"):
        decide("spoke_wheel", [Scripted(1.0)], kind="numeric")
    with pytest.raises(ConfigError, match="max_turns"):
        decide("decentralized", [Scripted(1.0)], kind="numeric", max_turns=0)
    with pytest.raises(ConfigError, match="at least one"):
        decide("majority", [], kind="numeric")


def test_map_fn_runs_a_turn_in_parallel_in_agent_order():
    agents = [Scripted(float(i)) for i in range(8)]
    with ThreadPoolExecutor(4) as pool:
        out = decide("averaging", agents, kind="numeric", map_fn=pool.map)
    assert out.proposals == [[float(i) for i in range(8)]] and out.decision == 3.5


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_architecture_returns_the_unanimous_answer(architecture):
    agents = [Scripted((3, 4)) for _ in range(5)]
    out = decide(architecture, agents, kind="categorical", coordinator=ScriptedCoordinator((3, 4)))
    assert out.decision == (3, 4) and out.failures == 0 and out.turns <= 2


def test_a_hundred_cell_votes_give_the_plurality_cell():
    """100 agents voting for grid cells: the decision is the cell most of them named (its speed is not asserted: a timed
    assertion here failed on a busy machine)."""
    from collections import Counter

    rng = np.random.default_rng(0)
    cells = [tuple(int(v) for v in rng.integers(0, 10, 2)) for _ in range(100)]
    agents = [Scripted(c) for c in cells]
    out = decide("majority", agents, kind="categorical")
    top = Counter(cells).most_common()
    assert out.decision in {c for c, n in top if n == top[0][1]} and out.failures == 0
