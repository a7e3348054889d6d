"""The disaster scenario's round clock without ROS (``consensus.scenarios.disaster.round_clock``): driven with fake
times and fake wire records through whole rounds, implicit and explicit; timeouts of silent drones at the
deadline, late, duplicate, misdirected and malformed records, the start timeout and the end of the run."""
from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from consensus.scenarios.disaster.agents import DroneReply
from consensus.scenarios.disaster.config import DisasterConfig, load_disaster_config
from consensus.scenarios.disaster.environment import Disaster, Observation, in_grid
from consensus.errors import ConfigError
from consensus.scenarios.disaster.round_clock import COUNTERS, START_TIMEOUT_S, RoundClock, flight_deadline_s

TIMEOUT = 10.0
FIELDS = {f.name for f in dataclasses.fields(DroneReply)}


def _cfg(**kw):
    base = dict(num_robots=3, rounds=2, width=6, height=6, discussion_turns=2, round_timeout_s=TIMEOUT,
                motion="teleport", round_time_s=3.0, max_agreement_turns=2, seed=1)
    base.update(kw)
    return load_disaster_config(None, **base)


def _parse(d) -> DroneReply:
    """The wire's reply parser (as ros.agent.reply_from_dict): a cell on the 6 x 6 grid or null, else ValueError."""
    if not isinstance(d, dict):
        raise ValueError("reply is not an object")
    reply = DroneReply(**{k: v for k, v in d.items() if k in FIELDS})
    action = d.get("action")
    reply.action = None if action is None else tuple(action)
    if reply.action is not None and not in_grid(reply.action, 6, 6):
        raise ValueError(f"cell {reply.action} is off the grid")
    return reply


def _clock(cfg=None, now=0.0) -> RoundClock:
    return RoundClock(cfg or _cfg(), now, parse_reply=_parse)


def _obs(r: int) -> Observation:
    return Observation(round=r, width=6, height=6, disasters=(Disaster(0, (2, 3), 8, "fire", 0, "", 0),), report=(),
                       report_text="fire at [2, 3]")


def _reply(cell, text="", calls=1) -> dict:
    return DroneReply(action=cell, message=text, llm_calls=calls).to_dict()


def _said(r, turn, i, cell=(2, 3), calls=1) -> dict:
    """A drone's discussion record, through JSON as on the wire."""
    return json.loads(json.dumps({"round": r, "turn": turn, "drone": i, "message": f"d{i} t{turn}",
                                  "reply": _reply(cell, f"d{i} t{turn}", calls)}))


def _decided(r, i, cell) -> dict:
    return json.loads(json.dumps({"round": r, "drone": i, "action": list(cell), "reply": _reply(cell, f"d{i} go")}))


CELLS = [(0, 0), (5, 5), (1, 4)]


def _start(clock, now=1.0, r=0):
    step = clock.tick(now, ready=True)
    assert step.begin_round and not step.late_start
    return clock.begin_round(now, _obs(r), CELLS, record={"positions_start": [[0.5, 0.5]] * 3})


# --------------------------------------------------------------------------------------------------- whole rounds
def test_an_implicit_run_goes_through_every_phase_of_every_round_and_ends():
    cfg = _cfg()
    clock = _clock(cfg)
    assert clock.state["phase"] == "waiting" and clock.state["seq"] == 1 and clock.state["round"] == -1
    assert clock.tick(0.5, ready=False) is None                       # nobody ready, start timeout not over
    seqs = [clock.state["seq"]]

    step = _start(clock, now=1.0)
    st = step.state
    assert (st["phase"], st["round"], st["turn"], st["rounds"]) == ("discuss", 0, 0, 2)
    assert st["deadline_s"] == pytest.approx(1.0 + TIMEOUT) and st["stamp"] == 1.0
    assert st["observation"] == _obs(0).to_dict() and st["cells"] == [list(c) for c in CELLS]
    assert st["heard"] == [] and st["actions"] is None and st["mode"] == "implicit" and st["strategy"] == ""
    seqs.append(st["seq"])

    for turn, t_end in ((0, 3.0), (1, 4.5)):
        for i in range(3):
            assert clock.tick(t_end - 0.5) is None                    # not everybody has spoken yet
            assert clock.on_discussion(_said(0, turn, i, cell=(2 + i, 3)))
        step = clock.tick(t_end)                                      # everybody spoke: the turn ends early
        seqs.append(step.state["seq"])
        heard = step.state["heard"]
        assert [(m["sender"], m["turn"], m["text"], m["proposal"]) for m in heard] == [
            (i, turn, f"d{i} t{turn}", [2 + i, 3]) for i in range(3)]
    assert step.state["phase"] == "decide" and step.state["deadline_s"] == pytest.approx(4.5 + TIMEOUT)

    for i, cell in enumerate([(2, 3), (2, 3), (4, 1)]):
        assert clock.on_decision(_decided(0, i, cell))
    step = clock.tick(5.0)
    assert step.decision is not None and step.mismatch is None and not step.end_round
    assert step.decision.actions == [(2, 3), (2, 3), (4, 1)]
    assert step.state["phase"] == "flight" and step.state["actions"] == [[2, 3], [2, 3], [4, 1]]
    assert step.state["observation"] is None and step.state["heard"] is None
    flight = flight_deadline_s(cfg, CELLS, [(2, 3), (2, 3), (4, 1)])  # teleport: the flight deadline's rule
    assert step.state["deadline_s"] == pytest.approx(5.0 + flight) and flight != TIMEOUT
    seqs.append(step.state["seq"])

    assert clock.tick(6.0, arrived=False) is None
    step = clock.tick(7.0, arrived=True)
    assert step.end_round and step.state is None and clock.phase == "scoring"
    assert clock.tick(8.0, ready=True, arrived=True) is None         # the node scores the round first
    step = clock.complete_round(7.5, record={"positions_end": [[2.5, 3.5]] * 3})
    assert step.begin_round and not step.done and clock.rounds_done == 1
    assert list(clock.record) == ["positions_start", "durations_s", "flight_deadline_s", "positions_end"]
    assert clock.record["flight_deadline_s"] == pytest.approx(flight, abs=1e-3)
    assert clock.record["durations_s"] == {"discuss_0": 2.0, "discuss_1": 1.5, "decide": 0.5, "flight": 2.0}
    assert clock.round_counters["replies"] == 9 and clock.round_counters["llm_calls"] == 9
    assert clock.round_counters["llm_fallbacks"] == 0
    with pytest.raises(RuntimeError):
        clock.complete_round(7.6)                                     # a round is completed once

    # round 1: turn 0 hears round 0's final messages (the action replies), then the run ends
    step = clock.begin_round(8.0, _obs(1), CELLS)
    assert [(m["sender"], m["turn"], m["text"]) for m in step.state["heard"]] == [(i, -1, f"d{i} go") for i in range(3)]
    assert clock.record == {}
    assert not clock.on_discussion(_said(0, 0, 0))                    # round 0's turn is over
    for turn in range(2):
        for i in range(3):
            clock.on_discussion(_said(1, turn, i))
        assert clock.tick(9.0 + turn).state["turn"] == (1 if turn == 0 else -1)
    for i in range(3):
        clock.on_decision(_decided(1, i, (2, 3)))
    assert clock.tick(11.0).decision.actions == [(2, 3)] * 3
    assert clock.tick(12.0, arrived=True).end_round
    step = clock.complete_round(12.0)
    assert step.done and not step.begin_round and clock.done
    assert (step.state["phase"], step.state["round"], step.state["deadline_s"]) == ("done", 1, None)
    seqs.append(step.state["seq"])
    assert clock.round_counters["replies"] == 18
    assert {k: clock.counters[k] for k in COUNTERS if clock.counters[k]} == {"late_replies": 1, "late_llm_calls": 1}
    assert seqs == sorted(set(seqs))                                  # every phase has a new seq
    assert clock.tick(100.0, ready=True, arrived=True) is None        # done stays done
    with pytest.raises(RuntimeError):
        clock.begin_round(101.0, _obs(2), CELLS)


def test_an_explicit_round_waits_for_the_collective_and_replays_the_votes():
    cfg = _cfg(mode="explicit", strategy="majority", discussion_turns=1, rounds=3)
    clock = _clock(cfg)
    _start(clock)
    for i in range(3):
        clock.on_discussion(_said(0, 0, i))
    st = clock.tick(2.0).state
    assert (st["phase"], st["mode"], st["strategy"]) == ("decide", "explicit", "majority")
    assert st["deadline_s"] == pytest.approx(2.0 + (2 * 2 + 1) * TIMEOUT)   # (2 max_agreement_turns + 1) timeouts

    assert not clock.on_decision(_decided(0, 0, (1, 1)))             # no own decisions in explicit mode
    assert clock.counters["late_replies"] == 1
    assert not clock.on_collective({"round": 1, "decision": [2, 3]})  # another round's
    assert clock.counters["late_collectives"] == 1
    assert clock.tick(2.0 + 4 * TIMEOUT) is None                      # the aggregator may still be voting
    votes = [[_reply((2, 3)), _reply((2, 3)), _reply((4, 4))]]
    assert clock.on_collective({"round": 0, "decision": [2, 3], "votes": votes, "coordinator": []})
    assert not clock.on_collective({"round": 0, "decision": [0, 0], "votes": [], "coordinator": []})   # a second
    assert clock.counters["late_collectives"] == 2
    step = clock.tick(40.0)
    assert step.mismatch is None and clock.counters["replay_mismatches"] == 0
    assert step.decision.collective == (2, 3) and step.decision.actions == [(2, 3)] * 3   # all adopt it
    assert step.decision.proposals == [(2, 3), (2, 3), (4, 4)]
    assert clock.tick(41.0, arrived=True).end_round
    clock.complete_round(41.0)

    # round 1: a vote the aggregator gave up on is a timeout; it reports a decision its votes do not give:
    # counted, the replay decides
    clock.begin_round(42.0, _obs(1), CELLS)
    for i in range(3):
        clock.on_discussion(_said(1, 0, i))
    clock.tick(43.0)
    timed_out = DroneReply(fallback=True, fallback_reason="timeout").to_dict()
    votes = [[_reply((2, 3)), _reply((2, 3)), timed_out]]
    clock.on_collective({"round": 1, "decision": [5, 5], "votes": votes, "coordinator": []})
    step = clock.tick(44.0)
    assert step.mismatch == ([5, 5], [2, 3]) and clock.counters["replay_mismatches"] == 1
    assert step.decision.actions == [(2, 3)] * 3
    assert clock.record["timeouts"] == {"vote_0": 1} and clock.counters["phase_timeouts"] == 1
    clock.tick(45.0, arrived=True)
    clock.complete_round(45.0)

    # round 2: no collective at all: one timeout at the deadline, every vote failed, the drones stay
    clock.begin_round(46.0, _obs(2), CELLS)
    for i in range(3):
        clock.on_discussion(_said(2, 0, i))
    clock.tick(47.0)
    deadline = 47.0 + 5 * TIMEOUT
    assert clock.tick(deadline - 0.01) is None
    step = clock.tick(deadline)
    assert step.decision.collective is None and step.decision.actions == CELLS
    assert clock.record["timeouts"] == {"collective": 1} and clock.counters["phase_timeouts"] == 2
    assert step.decision.counters["llm_fallbacks_by_reason"] == {"timeout": 3}          # the failed votes
    clock.tick(deadline + 1, arrived=True)
    assert clock.complete_round(deadline + 1).done


def test_without_discussion_a_round_begins_with_the_decision():
    clock = _clock(_cfg(discussion_turns=0, rounds=1))
    st = _start(clock).state
    assert (st["phase"], st["turn"], st["heard"]) == ("decide", -1, [])
    assert not clock.on_discussion(_said(0, 0, 0))                    # there is no discussion
    assert clock.counters["late_replies"] == 1


# --------------------------------------------------------------------------------------------------- timeouts
def test_a_silent_drone_times_out_at_the_deadline_is_counted_and_the_round_goes_on():
    clock = _clock(_cfg(discussion_turns=1, rounds=1))
    _start(clock, now=1.0)
    clock.on_discussion(_said(0, 0, 0))
    clock.on_discussion(_said(0, 0, 1))                               # drone 2 stays silent
    assert clock.tick(1.0 + TIMEOUT - 0.01) is None                   # before the deadline the phase waits
    assert clock.counters["phase_timeouts"] == 0
    step = clock.tick(1.0 + TIMEOUT)                                  # at the deadline it ends without drone 2
    assert step.state["phase"] == "decide"
    assert [m["text"] for m in step.state["heard"]] == ["d0 t0", "d1 t0", ""]   # nothing heard from drone 2
    assert step.state["heard"][2]["proposal"] is None
    assert clock.counters["phase_timeouts"] == 1 and clock.record["timeouts"] == {"discuss_0": 1}

    # the late message is dropped and counted with its LLM calls
    assert not clock.on_discussion(_said(0, 0, 2, calls=3))
    assert clock.counters["late_replies"] == 1 and clock.counters["late_llm_calls"] == 3

    t0 = 1.0 + TIMEOUT
    clock.on_decision(_decided(0, 0, (2, 3)))
    clock.on_decision(_decided(0, 2, (4, 4)))                         # drone 1 does not decide in time
    assert clock.tick(t0 + TIMEOUT - 0.01) is None
    step = clock.tick(t0 + TIMEOUT)
    decision = step.decision
    assert decision.actions == [(2, 3), CELLS[1], (4, 4)]            # the silent drone stays on its cell
    assert decision.discussion[0][2].fallback_reason == "timeout"
    assert decision.action_replies[1].fallback_reason == "timeout"
    assert decision.counters["llm_fallbacks_by_reason"] == {"timeout": 2}
    assert clock.counters["phase_timeouts"] == 2
    assert clock.record["timeouts"] == {"discuss_0": 1, "decide": 1}
    assert not clock.on_decision(_decided(0, 1, (1, 1)))              # too late: the flight has begun
    assert clock.counters["late_replies"] == 2


def test_teleport_flights_end_on_arrival_or_time_out_and_kinematic_flights_last_round_time_s():
    cfg = _cfg(discussion_turns=0, rounds=3)
    clock = _clock(cfg)
    _start(clock, now=0.0)
    for i in range(3):
        clock.on_decision(_decided(0, i, (2, 3)))
    deadline = 1.0 + flight_deadline_s(cfg, CELLS, [(2, 3)] * 3)
    assert clock.tick(1.0).state["deadline_s"] == pytest.approx(deadline)
    assert clock.tick(deadline - 0.01, arrived=False) is None
    assert clock.tick(deadline, arrived=False).end_round              # nobody arrived: a flight timeout
    assert clock.counters["flight_timeouts"] == 1 and clock.record["timeouts"] == {"flight": 1}
    assert clock.counters["phase_timeouts"] == 0
    assert clock.record["durations_s"]["flight"] == pytest.approx(deadline - 1.0, abs=1e-3)
    assert clock.complete_round(deadline).begin_round                 # the round goes on: the next one begins

    # round 1: the drones arrive at the very tick of the deadline: an arrival, not a timeout
    clock.begin_round(deadline, _obs(1), [(2, 3)] * 3)
    for i in range(3):
        clock.on_decision(_decided(1, i, (2, 3)))
    clock.tick(deadline + 1.0)
    same = deadline + 1.0 + cfg.flight_slack_s                         # nobody moves: the deadline is the slack
    assert clock.state["deadline_s"] == pytest.approx(same)
    assert clock.tick(same, arrived=True).end_round
    assert clock.counters["flight_timeouts"] == 1 and "timeouts" not in clock.record

    kin = _clock(_cfg(discussion_turns=0, rounds=1, motion="kinematic", round_time_s=3.0))
    _start(kin, now=0.0)
    for i in range(3):
        kin.on_decision(_decided(0, i, (2, 3)))
    assert kin.tick(1.0).state["deadline_s"] == pytest.approx(4.0)
    assert kin.tick(2.0, arrived=True) is None                        # arriving does not end a kinematic flight
    assert kin.tick(4.0).end_round
    assert kin.counters["flight_timeouts"] == 0 and "timeouts" not in kin.record
    assert kin.record["durations_s"]["flight"] == 3.0


def test_the_first_round_starts_without_the_drones_after_the_start_timeout():
    clock = _clock(now=5.0)
    assert clock.tick(5.0 + START_TIMEOUT_S, ready=False) is None
    step = clock.tick(5.0 + START_TIMEOUT_S + 0.1, ready=False)
    assert step.begin_round and step.late_start
    assert _clock(now=5.0).tick(6.0, ready=True).late_start is False


# --------------------------------------------------------------------------------------------------- ignored records
def test_records_for_another_round_phase_or_turn_or_twice_are_ignored_and_counted():
    clock = _clock(_cfg(discussion_turns=2))
    assert not clock.on_discussion(_said(0, 0, 0))                    # before round 0 began
    assert clock.counters["late_replies"] == 1
    _start(clock)
    assert not clock.on_discussion(_said(1, 0, 0))                    # another round
    assert not clock.on_discussion(_said(0, 1, 0))                    # another turn
    assert not clock.on_decision(_decided(0, 0, (2, 3)))              # another phase
    assert clock.counters["late_replies"] == 4 and clock.counters["late_llm_calls"] == 4
    assert clock.on_discussion(_said(0, 0, 0, cell=(1, 1)))
    assert not clock.on_discussion(_said(0, 0, 0, cell=(5, 5)))       # a second message: the first one counts
    assert clock.counters["late_replies"] == 5
    clock.on_discussion(_said(0, 0, 1))
    assert clock.tick(2.0) is None                                    # drone 2 has not spoken: ignored ones count not
    clock.on_discussion(_said(0, 0, 2))
    step = clock.tick(2.0)
    assert step.state["heard"][0]["proposal"] == [1, 1]
    assert clock.counters["phase_timeouts"] == 0 and clock.counters["bad_messages"] == 0


def test_malformed_records_are_counted_and_a_malformed_reply_becomes_a_failed_reply():
    clock = _clock(_cfg(discussion_turns=1, rounds=1))
    _start(clock)
    for rec in (None, [1, 2], "text", {"round": 0, "turn": 0}, {**_said(0, 0, 0), "drone": 3},
                {**_said(0, 0, 0), "drone": True}):
        assert not clock.on_discussion(rec)
    assert not clock.on_collective("not an object")
    assert clock.counters["bad_messages"] == 7 and clock.counters["late_replies"] == 0
    off_grid = {**_said(0, 0, 0), "reply": {**_reply((2, 3)), "action": [6, 0]}}
    assert clock.on_discussion(off_grid)                              # it answers the phase, but unusable
    assert clock.on_discussion({**_said(0, 0, 1), "reply": "garbage"})
    assert clock.counters["bad_messages"] == 9
    clock.on_discussion(_said(0, 0, 2))
    clock.tick(2.0)
    for i in range(3):
        clock.on_decision(_decided(0, i, (2, 3)))
    decision = clock.tick(3.0).decision
    assert [r.fallback_reason for r in decision.discussion[0]] == ["bad_message", "bad_message", ""]
    assert decision.counters["llm_fallbacks_by_reason"] == {"bad_message": 2}
    assert clock.counters["phase_timeouts"] == 0


def test_the_clock_module_imports_no_ros():
    import subprocess

    code = ("import sys; import consensus.scenarios.disaster.round_clock; "
            "print([m for m in sys.modules if m.split('.')[0] in ('rclpy', 'std_msgs', 'nav_msgs')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------------------------------- flight deadline
def test_the_flight_deadline_is_the_longest_straight_flight_at_v_max_times_a_factor_plus_a_slack():
    cfg = _cfg(v_max=2.0, cell_size_m=1.5, flight_time_factor=3.0, flight_slack_s=4.0)
    starts, goals = [(0, 0), (5, 5), (1, 1)], [(3, 4), (5, 5), (1, 2)]       # flights of 5, 0 and 1 cells
    assert flight_deadline_s(cfg, starts, goals) == pytest.approx(3.0 * 5 * 1.5 / 2.0 + 4.0)
    assert flight_deadline_s(cfg, starts, starts) == pytest.approx(4.0)     # nobody moves: the slack
    assert flight_deadline_s(cfg, [], []) == pytest.approx(4.0)
    default = load_disaster_config(None)                                    # 10 x 10 grid, 1 m/s: at most ~45 s
    assert (default.flight_time_factor, default.flight_slack_s) == (2.0, 20.0)
    assert flight_deadline_s(default, [(0, 0)], [(9, 9)]) == pytest.approx(2.0 * 9 * 2 ** 0.5 + 20.0)
    assert flight_deadline_s(default, [(0, 0)], [(9, 9)]) < default.round_timeout_s


@pytest.mark.parametrize("field, value", [("flight_time_factor", 0.5), ("flight_time_factor", 101.0),
                                          ("flight_time_factor", float("inf")), ("flight_slack_s", -1.0),
                                          ("flight_slack_s", float("nan")), ("flight_slack_s", 4000.0)])
def test_the_flight_deadline_settings_are_checked(field, value):
    with pytest.raises(ConfigError, match=field):
        load_disaster_config(None, **{field: value})
    lo, hi = DisasterConfig.field_ranges()[field]              # (the range the ROS parameter's descriptor shows)
    assert lo <= getattr(DisasterConfig(), field) <= hi
