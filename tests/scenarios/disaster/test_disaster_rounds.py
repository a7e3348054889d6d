"""The round protocol of paper 2 (section 3.1, C.4): discussion turns, implicit actions, every explicit strategy
(consensus.decision) with scripted fake drones, failure handling and counters."""
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from consensus.scenarios.disaster.config import DisasterConfig
from consensus.scenarios.disaster.environment import Disaster, Observation, ReportItem
from consensus.scenarios.disaster.reports import alert_text
from consensus.scenarios.disaster.rounds import add_round_counters, inbox_for, run_round
from consensus.scenarios.disaster.agents import DroneAgent, DroneReply, HeuristicCoordinator, InboxMessage, make_drones
from consensus.scenarios.disaster.prompts import ROLES

CFG = DisasterConfig()
_DISASTERS = (Disaster(0, (3, 4), 8, "fire", 0, "", 0), Disaster(1, (7, 1), 5, "flood", 0, "bridge", 0))
_REPORT = tuple(ReportItem(alert_text(d, d.cell, f"severity {d.severity} (steady)"), d.id, "accurate")
                for d in _DISASTERS)
OBS = Observation(round=4, width=10, height=10, report=_REPORT, report_text="\n".join(i.text for i in _REPORT),
                  disasters=_DISASTERS)
CELLS = [(0, 0), (1, 1), (2, 2)]


class FakeDrone(DroneAgent):
    """Scripted drone: ``plan`` maps a phase to its answer (a cell, None = failed, or callable(**info) -> cell).
    Records what it was shown."""

    def __init__(self, i, *, discuss=None, act=None, vote=None):
        super().__init__(i, ROLES["responder"], CFG)
        self.plan = {"discuss": discuss, "act": act, "vote": vote}
        self.seen: list[tuple] = []

    def _answer(self, phase, **info):
        self.seen.append((phase, info))
        value = self.plan[phase]
        cell = value(**info) if callable(value) else value
        if cell is None:
            return DroneReply(action=info.get("own_cell"), fallback=True, fallback_reason="unparseable", llm_calls=2,
                              parse_failures=2)
        return DroneReply(action=tuple(cell), message=f"{phase} by {self.drone_id}", llm_calls=1, prompt_tokens=10,
                          completion_tokens=3)

    def _discuss(self, obs, inbox, turn, own_cell):
        return self._answer("discuss", inbox=list(inbox), turn=turn, own_cell=own_cell)

    def _act(self, obs, inbox, own_cell):
        return self._answer("act", inbox=list(inbox), own_cell=own_cell)

    def _vote(self, obs, inbox, own_cell, ctx, strategy):
        return self._answer("vote", inbox=list(inbox), own_cell=own_cell, ctx=ctx, strategy=strategy)


def vote_ctxs(drone):
    return [info["ctx"] for phase, info in drone.seen if phase == "vote"]


def fakes(votes=None, acts=None, discuss=(5, 5)):
    n = len(votes or acts or CELLS)
    return [FakeDrone(i, discuss=discuss, act=(acts or [None] * n)[i], vote=(votes or [None] * n)[i])
            for i in range(n)]


# --- implicit ---------------------------------------------------------------------------------------------------------
def test_implicit_two_discussion_turns_and_carry_over():
    drones = fakes(acts=[(3, 4), (7, 1), None])
    previous = [InboxMessage(0, "Response Drone", "last round", (3, 4), -1),
                InboxMessage(2, "Response Drone", "me too", (7, 1), -1)]
    d = run_round(drones, OBS, CELLS, mode="implicit", discussion_turns=2, previous=previous)
    # turn 0 reads last round's messages (not its own), turn 1 the others' turn-0 messages, the action turn 1's
    d0_turns = [info for phase, info in drones[0].seen]
    assert [m.text for m in d0_turns[0]["inbox"]] == ["me too"]
    assert [(m.sender, m.turn) for m in d0_turns[1]["inbox"]] == [(1, 0), (2, 0)]
    assert [(m.sender, m.turn) for m in d0_turns[2]["inbox"]] == [(1, 1), (2, 1)]
    assert d.actions == [(3, 4), (7, 1), (2, 2)]              # the failed drone stays on its cell
    assert d.proposals == [(3, 4), (7, 1), None]
    assert len(d.discussion) == len(d.messages) == 2 and d.aggregation is None
    assert [m.turn for m in d.final_messages] == [-1, -1, -1] and d.final_messages[0].proposal == (3, 4)
    c = d.counters
    assert (c["llm_calls"], c["llm_fallbacks"], c["llm_fallbacks_by_reason"]) == (6 + 2 + 2, 1, {"unparseable": 1})
    assert (c["prompt_tokens"], c["replies"]) == (80, 9)


def test_no_discussion_means_no_messages_at_all():
    drones = fakes(acts=[(3, 4)] * 3)
    d = run_round(drones, OBS, CELLS, discussion_turns=0, previous=[InboxMessage(1, "r", "hi", (1, 1), -1)])
    assert [phase for phase, _ in drones[0].seen] == ["act"] and drones[0].seen[0][1]["inbox"] == []
    assert d.discussion == [] and d.actions == [(3, 4)] * 3


def test_inbox_for_excludes_own_messages():
    msgs = [InboxMessage(i, "r", str(i), None) for i in range(3)]
    assert [m.sender for m in inbox_for(1, msgs)] == [0, 2]


# --- explicit strategies ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy,votes,expected", [
    ("majority", [(3, 4), (7, 1), (7, 1)], (7, 1)),
    ("majority", [(3, 4), (7, 1), None], (3, 4)),              # tie: the cell voted first (lowest drone index)
    ("averaging", [(0, 0), (2, 4), (4, 2)], (2, 2)),
    ("averaging", [(0, 0), (1, 1), None], (1, 1)),             # mean (0.5, 0.5) rounds half up; the failure ignored
])
def test_one_turn_strategies(strategy, votes, expected):
    d = run_round(fakes(votes=votes), OBS, CELLS, mode="explicit", strategy=strategy)
    assert d.collective == expected and d.actions == [expected] * 3
    assert d.proposals == list(votes) and d.aggregation.turns == 1 and len(d.votes) == 1
    assert d.counters["vote_failures"] == sum(v is None for v in votes)


def test_every_vote_failed_drones_stay():
    d = run_round(fakes(votes=[None, None, None]), OBS, CELLS, mode="explicit", strategy="majority")
    assert d.collective is None and d.actions == CELLS and d.counters["no_decision"] == 1


def test_decentralized_revotes_until_agreement():
    converge = lambda ctx, **_: (3, 4) if ctx.turn >= 2 or ctx.agent == 0 else (ctx.agent, ctx.agent)   # noqa
    drones = fakes(votes=[converge] * 3)
    d = run_round(drones, OBS, CELLS, mode="explicit", strategy="decentralized")
    assert d.aggregation.agreed and d.aggregation.turns == 3 and d.collective == (3, 4)
    assert len(d.votes) == 3 and d.counters["vote_turns"] == 3
    ctxs = vote_ctxs(drones[1])
    assert ctxs[1].own_previous == (1, 1) and ctxs[1].others_previous == ()     # no feedback


def test_decentralized_gives_up_after_max_turns_with_the_rounded_mean():
    drones = fakes(votes=[(0, 0), (2, 4), (4, 2)])
    d = run_round(drones, OBS, CELLS, mode="explicit", strategy="decentralized", max_agreement_turns=4)
    assert (d.aggregation.turns, d.aggregation.agreed, d.aggregation.fallback) == (4, False, "average")
    assert d.collective == (2, 2)


def test_decentralized_feedback_shows_the_others_votes():
    follow = lambda ctx, **_: (7, 1) if ctx.turn else [(3, 4), (7, 1), (7, 1)][ctx.agent]   # noqa: E731
    drones = fakes(votes=[follow] * 3)
    d = run_round(drones, OBS, CELLS, mode="explicit", strategy="decentralized_feedback")
    assert d.collective == (7, 1) and d.aggregation.turns == 2
    ctx = vote_ctxs(drones[0])[1]
    assert ctx.others_previous == ((7, 1), (7, 1)) and ctx.own_previous == (3, 4)


def test_spoke_wheel_with_the_classical_coordinator():
    d = run_round(fakes(votes=[(7, 1), (7, 1), (3, 4)]), OBS, CELLS, mode="explicit", strategy="spoke_wheel",
                  coordinator=HeuristicCoordinator())
    assert d.collective == (3, 4)                    # the most severe voted disaster, not the majority
    assert len(d.coordinator) == 1 and d.coordinator[0].action == (3, 4)


class FailingCoordinator:
    def __init__(self):
        self.log = []

    def prepare(self, obs, roles=()):
        self.roles = roles

    def merge(self, proposals, turn):
        self.log.append(DroneReply(fallback=True, fallback_reason="llm_error", llm_calls=1))
        return None


def test_spoke_wheel_coordinator_failure_falls_back_to_majority_and_is_counted():
    coord = FailingCoordinator()
    d = run_round(fakes(votes=[(7, 1), (7, 1), (3, 4)]), OBS, CELLS, mode="explicit", strategy="spoke_wheel",
                  coordinator=coord)
    assert d.collective == (7, 1) and d.aggregation.fallback == "majority"
    assert d.counters["coordinator_failures"] == 1 and d.counters["llm_fallbacks_by_reason"] == {"llm_error": 1}
    assert coord.roles == ["Response Drone"] * 3


def test_spoke_wheel_feedback_shows_the_plan_until_accepted():
    accept = lambda ctx, **_: ctx.coordinator_plan if ctx.turn else [(7, 1), (0, 0), (3, 4)][ctx.agent]  # noqa
    drones = fakes(votes=[accept] * 3)
    d = run_round(drones, OBS, CELLS, mode="explicit", strategy="spoke_wheel_feedback",
                  coordinator=HeuristicCoordinator())
    assert d.collective == (3, 4) and d.aggregation.turns == 2 and d.aggregation.agreed
    assert vote_ctxs(drones[1])[1].coordinator_plan == (3, 4)


def test_explicit_votes_read_the_discussion():
    drones = fakes(votes=[(3, 4)] * 3)
    run_round(drones, OBS, CELLS, mode="explicit", strategy="majority", discussion_turns=1)
    vote_info = [info for phase, info in drones[2].seen if phase == "vote"][0]
    assert [(m.sender, m.proposal) for m in vote_info["inbox"]] == [(0, (5, 5)), (1, (5, 5))]
    assert vote_info["own_cell"] == (2, 2) and vote_info["strategy"] == "majority"


# --- real drones, parallel map, bookkeeping ---------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["majority", "averaging", "decentralized", "decentralized_feedback",
                                      "spoke_wheel", "spoke_wheel_feedback"])
def test_heuristic_team_adopts_one_cell(strategy):
    cfg = DisasterConfig(mode="explicit", strategy=strategy, roles="high", num_robots=5)
    coordinator = HeuristicCoordinator() if strategy.startswith("spoke") else None
    d = run_round(make_drones(cfg), OBS, [(0, 0)] * 5, mode="explicit", strategy=strategy, coordinator=coordinator)
    assert len(set(d.actions)) == 1 and d.actions[0] == d.collective
    # high roles 0-4: medical/scout, infrastructure/fire, logistics/recon, medical/hazmat vote for the fire at (3, 4),
    # infrastructure/evacuation for the flood at (7, 1) with its bridge at risk (5 + 6 > 8)
    if strategy in ("averaging", "decentralized"):     # the rounded mean of 4 votes for (3, 4) and 1 for (7, 1)
        assert d.collective == (4, 3) and d.aggregation.fallback == ("average" if strategy != "averaging" else "")
    else:
        assert d.collective in {(3, 4), (7, 1)}
    json.dumps(d.to_dict())


def test_parallel_map_gives_the_same_round():
    cfg = DisasterConfig(num_robots=6, roles="high")
    serial = run_round(make_drones(cfg), OBS, [(i, i) for i in range(6)], discussion_turns=2)
    with ThreadPoolExecutor(4) as pool:
        parallel = run_round(make_drones(cfg), OBS, [(i, i) for i in range(6)], discussion_turns=2, map_fn=pool.map)
    assert serial.to_dict() == parallel.to_dict()


def test_run_round_checks_its_input():
    with pytest.raises(ValueError, match="mode"):
        run_round(fakes(), OBS, CELLS, mode="telepathic")
    with pytest.raises(ValueError, match="cells"):
        run_round(fakes(), OBS, CELLS[:2])


def test_add_round_counters_sums_numbers_and_reasons():
    total = add_round_counters({}, {"llm_calls": 3, "llm_fallbacks_by_reason": {"off_grid": 1}})
    add_round_counters(total, {"llm_calls": 2, "llm_fallbacks_by_reason": {"off_grid": 2, "llm_error": 1}})
    assert total == {"llm_calls": 5, "llm_fallbacks_by_reason": {"off_grid": 3, "llm_error": 1}}
