"""The disaster environment (paper 2, scenario 1): invariants, determinism, closed loop, reports, config errors."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consensus.scenarios.disaster.environment import (DISASTER_KINDS, INFRASTRUCTURE, VOLATILITY, Disaster, DisasterEnv,
                                            EnvConfig, Volatility, clamp_cell, in_grid, neighbours)
from consensus.scenarios.disaster.reports import MAX_ITEM_CHARS
from consensus.errors import ConfigError

STILL = Volatility("still", move_every=1, move_prob=0.0, severity_change_prob=0.0, severity_step_max=1,
                   spawn_scale=0.0, forced_shock=False)


def make_env(disasters, **overrides) -> DisasterEnv:
    """A frozen environment (no moves, severity changes or spawns, no report noise) holding exactly the given
    ``(cell, severity)`` disasters (white-box: they are put into the environment's lists)."""
    cfg = EnvConfig(**{"initial_disasters": 0, "p_new": 0.0, "report_noise": 0.0, **overrides})
    env = DisasterEnv(cfg, seed=0)
    env.volatility = STILL
    for i, (cell, severity) in enumerate(disasters):
        d = Disaster(id=i, cell=cell, severity=severity, kind="fire", casualties=0, infrastructure="",
                     appeared_round=0)
        env._disasters.append(d)
        env._active.append(d)
    return env


def random_cells(rng: np.random.Generator, n: int, width: int, height: int) -> list[tuple[int, int]]:
    return [(int(x), int(y)) for x, y in zip(rng.integers(width, size=n), rng.integers(height, size=n))]


def idle_cell(disasters, width: int = 10, height: int = 10) -> tuple[int, int]:
    """The first cell (x-major) without a disaster."""
    taken = {d.cell for d in disasters}
    return next((x, y) for x in range(width) for y in range(height) if (x, y) not in taken)


def play(env: DisasterEnv, rounds: int, drones: int, policy_seed: int = 0):
    """Run ``rounds`` rounds: drone j goes to disaster j for even j, every other drone to a random cell."""
    rng = np.random.default_rng(policy_seed)
    record = []
    for _ in range(rounds):
        obs = env.begin_round()
        cells = random_cells(rng, drones, env.cfg.width, env.cfg.height)
        for j, d in enumerate(obs.disasters[:drones]):
            if j % 2 == 0:
                cells[j] = d.cell
        record.append((obs, env.end_round(cells)))
    return record


# ---------------------------------------------------------------- invariants and determinism
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), volatility=st.sampled_from(sorted(VOLATILITY)),
       width=st.integers(2, 12), height=st.integers(2, 12), k=st.integers(1, 4), drones=st.integers(1, 8))
def test_invariants_hold_in_every_round(seed, volatility, width, height, k, drones):
    k = min(k, width * height // 2)
    cfg = EnvConfig(width=width, height=height, max_active=k, volatility=volatility, initial_disasters=k,
                    p_new=0.5)
    env = DisasterEnv(cfg, seed)
    for _ in range(15):
        (obs, out), = play(env, 1, drones, policy_seed=seed + env.round)
        cells = [d.cell for d in obs.disasters]
        assert len(obs.disasters) <= k
        assert len(set(cells)) == len(cells)
        assert all(in_grid(c, width, height) for c in cells)
        assert all(1 <= d.severity <= 10 for d in obs.disasters)
        assert all(d.kind in DISASTER_KINDS and d.infrastructure in ("",) + INFRASTRUCTURE for d in obs.disasters)
        assert all(0 <= d.casualties <= 3 * 10 for d in obs.disasters)
        # closed loop: severity_after = severity_before - 3 * drones on the cell, cleared at <= 0
        counts = {c: out.drone_cells.count(c) for c in cells}
        for d in obs.disasters:
            expected = d.severity - 3 * counts[d.cell]
            assert out.severity_after[d.id] == max(expected, 0)
            assert (d.id in out.cleared) == (expected <= 0)
            assert (d.id in out.attended) == (counts[d.cell] > 0)
        assert out.reward_cleared == pytest.approx(5.0 * sum(out.severity_before[i] for i in out.cleared))
        assert out.penalty_uncontained == pytest.approx(2.0 * sum(v for v in out.severity_after.values() if v > 0))
        assert out.net_reward == pytest.approx(out.reward_cleared - out.penalty_uncontained - out.misallocation_cost)
        assert {d.id for d in env.active()} == {d.id for d in obs.disasters} - set(out.cleared)


def test_same_seed_same_run_other_seed_other_run():
    cfg = EnvConfig(volatility="high")

    def run(seed):
        env = DisasterEnv(cfg, seed)
        record = play(env, 20, 5)
        return [(o.to_dict(), r.to_dict()) for o, r in record], env.snapshot()

    first, again, other = run(7), run(7), run(8)
    assert first == again
    assert first[0] != other[0] and first[1] != other[1]
    json.dumps(first)                            # observations, outcomes and snapshots are JSON-able


def test_disasters_never_share_a_cell_on_a_crowded_grid():
    cfg = EnvConfig(width=2, height=2, max_active=2, initial_disasters=2, volatility="high", p_new=1.0)
    env = DisasterEnv(cfg, 3)
    for obs, _ in play(env, 60, 1):
        cells = [d.cell for d in obs.disasters]
        assert len(set(cells)) == len(cells) and all(in_grid(c, 2, 2) for c in cells)
    assert len(env.all_disasters()) > 2          # clearing and re-spawning happened


@pytest.mark.parametrize("name", ["low", "moderate", "high"])
def test_volatility_presets_bound_moves_and_severity_steps(name):
    vol = VOLATILITY[name]
    env = DisasterEnv(EnvConfig(volatility=name, initial_disasters=3, p_new=0.0), 11)
    previous = None
    changes = shocks = 0
    for t in range(60):
        obs = env.begin_round()
        now = {d.id: d for d in obs.disasters}
        if previous is not None:
            shocked = False
            for i, d in now.items():
                before = previous[i]
                step = abs(d.severity - before.severity)
                assert step <= vol.severity_step_max
                changes += step > 0
                if d.cell != before.cell:
                    assert t % vol.move_every == 0
                    assert abs(d.cell[0] - before.cell[0]) + abs(d.cell[1] - before.cell[1]) == 1
                    shocked = True
            shocks += shocked
            if vol.forced_shock:
                assert shocked
        env.end_round([idle_cell(obs.disasters)])   # nobody attends: no disaster is cleared
        previous = now
    assert changes > 0 and shocks > 0


def test_high_volatility_spawns_when_nothing_moves():
    env = make_env([((5, 5), 5)], volatility="high")
    env.volatility = Volatility("forced", move_every=1, move_prob=0.0, severity_change_prob=0.0,
                                severity_step_max=1, spawn_scale=0.0, forced_shock=True)
    counts = []
    for _ in range(3):
        obs = env.begin_round()
        counts.append(len(obs.disasters))
        env.end_round([idle_cell(obs.disasters)])
    assert counts == [1, 2, 3]                             # forced shock: a spawn while fewer than K are active
    before = {d.id: d.cell for d in env.active()}
    after = {d.id: d.cell for d in env.begin_round().disasters}
    assert sum(before[i] != after[i] for i in before) == 1  # K active: exactly one forced move


def test_first_round_has_no_update_and_initial_disasters():
    env = DisasterEnv(EnvConfig(initial_disasters=3), 5)
    initial = [(d.id, d.cell, d.severity) for d in env.active()]
    obs = env.begin_round()
    assert obs.round == 0 and len(obs.disasters) == 3
    assert [(d.id, d.cell, d.severity) for d in obs.disasters] == initial
    assert [d.high_round for d in obs.disasters] == [0 if d.severity >= 7 else None for d in obs.disasters]
    assert all(d.appeared_round == 0 for d in obs.disasters)
    assert all(3 <= d.severity <= 9 for d in obs.disasters)


# ---------------------------------------------------------------- closed loop
def test_containment_reduces_severity_by_three_per_drone_and_clearing_pays_alpha_times_start_severity():
    env = make_env([((2, 3), 8), ((7, 7), 4)])
    env.begin_round()
    out = env.end_round([(2, 3), (7, 7), (0, 0)])
    assert out.severity_before == {0: 8, 1: 4}
    assert out.severity_after == {0: 5, 1: 1}
    assert out.cleared == [] and out.attended == [0, 1]
    assert out.penalty_uncontained == 2.0 * (5 + 1)
    assert out.misallocation_cost == 5.0                  # section 4.2: the drone on (0, 0) is off every disaster
    obs = env.begin_round()
    assert {d.id: d.severity for d in obs.disasters} == {0: 5, 1: 1}   # the effect persists (closed loop)
    out = env.end_round([(2, 3), (2, 3), (7, 7)])
    assert out.cleared == [0, 1]
    assert out.severity_after == {0: 0, 1: 0}
    assert out.reward_cleared == 5.0 * (5 + 1)             # alpha * severity at the round's start
    assert out.penalty_uncontained == 0.0
    assert out.net_reward == 30.0
    assert env.active() == []
    assert [(d.first_attended_round, d.cleared_round) for d in env.all_disasters()] == [(0, 1), (0, 1)]


def test_containment_per_drone_and_rewards_follow_the_config():
    env = make_env([((1, 1), 9)], containment_per_drone=4, alpha=2.0, beta=1.5)
    env.begin_round()
    out = env.end_round([(1, 1)])
    assert out.severity_after == {0: 5} and out.penalty_uncontained == 1.5 * 5
    env.begin_round()
    out = env.end_round([(1, 1), (1, 1)])
    assert out.cleared == [0] and out.reward_cleared == 2.0 * 5


def test_penalties_accumulate_while_disasters_are_uncontained():
    env = make_env([((1, 1), 6), ((8, 8), 3)])
    nets = []
    for _ in range(4):
        env.begin_round()
        out = env.end_round([(4, 4)])                      # one drone on an empty cell
        assert out.penalty_uncontained == 2.0 * (6 + 3)
        assert out.metrics["misallocation_penalty"] == 1   # the idle drone while disasters are uncovered
        assert out.misallocation_cost == 5.0
        nets.append(out.net_reward)
    assert nets == [-23.0] * 4


def test_misallocation_cost_counts_excess_and_idle_drones():
    drones = [(1, 1)] * 4 + [(0, 0)]                      # 4 on one disaster (2 over M), 1 idle, (8,8) uncovered
    env = make_env([((1, 1), 9), ((8, 8), 9)], misallocation="c1")
    env.begin_round()
    out = env.end_round(drones)
    assert out.metrics["misallocation_penalty"] == 2 + 1
    assert out.misallocation_cost == 5.0 * 3
    assert out.metrics["coverage"] == 0.5
    env = make_env([((1, 1), 9), ((8, 8), 9)])            # section 4.2: only the idle drone (both are high-severity)
    env.begin_round()
    out = env.end_round(drones)
    assert out.metrics["misallocation_penalty"] == 1 and out.misallocation_cost == 5.0
    env = make_env([((1, 1), 4), ((8, 8), 9)])            # ... plus the 4 on a low-severity one while (8,8) waits
    env.begin_round()
    assert env.end_round(drones).metrics["misallocation_penalty"] == 1 + 4


def test_end_round_validates_cells_and_protocol():
    env = make_env([((1, 1), 5)])
    with pytest.raises(RuntimeError):
        env.end_round([(1, 1)])
    env.begin_round()
    with pytest.raises(RuntimeError):
        env.begin_round()
    for bad in ([(10, 0)], [(-1, 2)], [(1.5, 2)], [(1,)], [], ["ab"]):
        with pytest.raises(ValueError):
            env.end_round(bad)
    with pytest.raises(ValueError, match="actions has 1 entries for 2 drones"):
        env.end_round([(1, 1), (2, 2)], actions=[(1, 1)])
    out = env.end_round([np.array([1, 1]), [2, 2]], actions=[(1, 1), (5, 5)])   # numpy ints and lists are fine
    assert out.drone_cells == [(1, 1), (2, 2)] and out.actions == [(1, 1), (5, 5)]
    assert out.metrics["deviation"] == pytest.approx(4.0)  # mode (1,1): distances 0 and 8


def test_grid_helpers():
    assert clamp_cell((-3.2, 11.7), 10, 10) == (0, 9)
    assert clamp_cell((4.4, 5.6), 10, 10) == (4, 6)
    assert in_grid((9, 0), 10, 10) and not in_grid((10, 0), 10, 10) and not in_grid((0, -1), 10, 10)
    assert neighbours((0, 0), 3, 3) == [(1, 0), (0, 1)]
    assert sorted(neighbours((1, 1), 3, 3)) == [(0, 1), (1, 0), (1, 2), (2, 1)]


# ---------------------------------------------------------------- reports
def test_accurate_report_items_state_the_truth_and_the_trend():
    env = DisasterEnv(EnvConfig(volatility="high", report_noise=0.0, initial_disasters=3), 4)
    last: dict[int, int] = {}
    rng = np.random.default_rng(0)
    for _ in range(30):
        obs = env.begin_round()
        assert len(obs.report) == len(obs.disasters)
        assert obs.report_text == "\n".join(item.text for item in obs.report)
        for d, item in zip(obs.disasters, obs.report):
            assert item.quality == "accurate" and item.flaw == "" and item.disaster_id == d.id
            trend = ("newly reported" if d.id not in last else "rising" if d.severity > last[d.id]
                     else "falling" if d.severity < last[d.id] else "steady")
            assert f"at sector ({d.cell[0]},{d.cell[1]}), severity {d.severity} ({trend})" in item.text
            assert d.kind.replace("_", " ") in item.text
            assert (f"{d.infrastructure} at risk" in item.text) == bool(d.infrastructure)
        last = {d.id: d.severity for d in obs.disasters}
        env.end_round(random_cells(rng, 2, 10, 10))


def test_report_noise_is_bounded_recorded_and_used():
    env = DisasterEnv(EnvConfig(volatility="high", report_noise=0.2, initial_disasters=3), 9)
    rng = np.random.default_rng(1)
    total = noisy = 0
    flaws = set()
    for _ in range(300):
        obs = env.begin_round()
        truth = {d.id: d for d in obs.disasters}
        for item in obs.report:
            assert len(item.text) <= MAX_ITEM_CHARS
            total += 1
            noisy += item.quality != "accurate"
            flaws.add(item.flaw)
            _check_item(item, truth, env.cfg)
        assert noisy <= 0.2 * total + 1e-9                 # the bound holds at every point of the run
        snap = env.snapshot()
        assert (snap["report_items_total"], snap["report_items_noisy"]) == (total, noisy)
        env.end_round(random_cells(rng, 3, 10, 10))
    assert noisy / total > 0.1                             # the noise is actually applied
    assert flaws == {"", "trend", "location", "severity_missing", "location_missing", "false_alarm"}


def _check_item(item, truth, cfg):
    """Each flaw says what its name says."""
    cell = re.search(r"sector \((\d+),(\d+)\)", item.text)
    cell = (int(cell[1]), int(cell[2])) if cell else None
    if item.flaw == "false_alarm":
        assert item.disaster_id is None and item.quality == "contradictory"
        assert cell not in {d.cell for d in truth.values()}
        return
    d = truth[item.disaster_id]
    quality = {"": "accurate", "trend": "contradictory", "location": "contradictory",
               "severity_missing": "incomplete", "location_missing": "incomplete"}[item.flaw]
    assert item.quality == quality
    if item.flaw == "location":
        assert cell in neighbours(d.cell, cfg.width, cfg.height)
    elif item.flaw == "location_missing":
        assert cell is None and "location unconfirmed" in item.text
    else:
        assert cell == d.cell
    if item.flaw == "severity_missing":
        assert "severity unknown" in item.text
    else:
        assert f"severity {d.severity}" in item.text
    if item.flaw == "trend":
        assert "under control" in item.text or "intensifying" in item.text


def test_zero_noise_gives_only_accurate_items():
    env = DisasterEnv(EnvConfig(report_noise=0.0, volatility="high"), 2)
    for obs, _ in play(env, 40, 2):
        assert all(item.quality == "accurate" for item in obs.report)


# ---------------------------------------------------------------- config
@pytest.mark.parametrize("field, value, fragment", [
    ("width", 1, "width must be in [2, 1000]"),
    ("height", 0, "height must be in [2, 1000]"),
    ("width", 2.5, "width must be an integer"),
    ("max_active", 0, "max_active must be in [1, 50]"),
    ("max_active", 51, "max_active must be in [1, 50]"),
    ("volatility", "extreme", "unknown volatility 'extreme'"),
    ("p_new", 1.5, "p_new must be in [0, 1]"),
    ("p_new", -0.1, "p_new must be in [0, 1]"),
    ("p_new", float("nan"), "p_new must be a finite number"),
    ("initial_disasters", 4, "initial_disasters must be in [0, max_active=3]"),
    ("containment_per_drone", 0, "containment_per_drone must be >= 1"),
    ("alpha", -1.0, "alpha must be >= 0"),
    ("beta", -0.5, "beta must be >= 0"),
    ("misallocation_cost", -5.0, "misallocation_cost must be >= 0"),
    ("misallocation_threshold", 0, "misallocation_threshold must be >= 1"),
    ("high_severity", 11, "high_severity must be in [1, 10]"),
    ("report_noise", 0.25, "report_noise must be in [0, 0.2]"),
    ("report_noise", -0.01, "report_noise must be in [0, 0.2]"),
    ("report_noise", True, "report_noise must be a finite number"),
    ("new_severity_min", 10, "new_severity_min <= new_severity_max"),
    ("new_severity_max", 11, "new_severity_max <= 10"),
])
def test_bad_config_raises_one_clear_error(field, value, fragment):
    cfg = EnvConfig(**{field: value})
    with pytest.raises(ConfigError) as err:
        cfg.validate()
    assert fragment in str(err.value)
    with pytest.raises(ConfigError):
        DisasterEnv(cfg, 0)


def test_default_config_is_valid_and_matches_the_paper():
    cfg = EnvConfig()
    cfg.validate()
    assert (cfg.width, cfg.height, cfg.max_active, cfg.p_new, cfg.alpha, cfg.beta, cfg.misallocation_threshold,
            cfg.containment_per_drone, cfg.report_noise) == (10, 10, 3, 0.2, 5.0, 2.0, 2, 3, 0.2)
    assert [VOLATILITY[v].severity_step_max for v in ("low", "moderate", "high")] == [1, 2, 3]
    assert [VOLATILITY[v].move_every for v in ("low", "moderate", "high")] == [3, 2, 1]
