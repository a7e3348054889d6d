"""Nothing heard on the wire is trusted (consensus.control.plausibility and the robot core that uses it): positions
outside the workspace, jumps beyond the speed limit and stamps from the future are refused and counted by kind; a
source that keeps sending them is suspect until it stops; a relocation is accepted once the old pose has aged; the
collision filter never forgets a body because a message about it was wrong; and the geofence binds the filter, so
no command takes a robot out of it, even with a spoofed neighbour or robots pushing it towards a wall."""
from __future__ import annotations

import numpy as np
import pytest

from consensus.control.avoidance import avoidance_from_config
from consensus.control.plausibility import CLEAR_S, JUMP_SLACK_M, OUTSIDE_MARGIN_M, SUSPECT_BAD, Plausibility
from consensus.control.robot_core import Heard, Nearby, RobotCore
from consensus.control.safety import Geofence
from consensus.scenarios.aggregation.config import load_config

V = 0.5


def checker(n: int = 3) -> Plausibility:
    return Plausibility(n, [-10.0, -10.0], [10.0, 10.0], V)


def config(**overrides):
    overrides.setdefault("num_robots", 4)
    overrides.setdefault("collision_avoidance", "cbf")
    return load_config(None, **overrides)


# ---- the checks ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pos", [[1000.0, 1000.0], [10.0 + OUTSIDE_MARGIN_M + 0.01, 0.0], [0.0, -11.5]])
def test_a_position_outside_the_workspace_plus_the_margin_is_refused_and_counted(pos):
    pl = checker()
    assert pl.check(0, 1.0, pos) == "outside"
    assert pl.counts == {"outside": 1, "jump": 0, "future": 0} and pl.by_source[0] == 1
    assert pl.check(0, 1.1, [10.5, 0.0]) is None          # over the fence but within the margin: a robot can be there


def test_a_jump_beyond_the_speed_limit_is_refused_until_the_old_pose_has_aged():
    pl = checker()
    assert pl.check(1, 0.0, [0.0, 0.0]) is None
    assert pl.check(1, 0.2, [0.1, 0.0]) is None            # 0.5 m/s × 0.2 s + slack
    assert pl.check(1, 0.4, [3.0, 0.0]) == "jump"           # 2.9 m in 0.2 s
    assert pl.counts["jump"] == 1
    # the allowance grows from the last accepted pose: (3 - 0.1 - slack) / v later, the relocation is plausible
    later = 0.2 + (2.9 - JUMP_SLACK_M) / V + 0.01
    assert pl.check(1, later, [3.0, 0.0]) is None
    assert pl.check(1, later + 0.1, [3.02, 0.0]) is None


def test_a_stamp_from_the_future_is_refused_but_not_before_the_clock_runs():
    pl = checker()
    assert pl.check(0, 100.0, [0.0, 0.0], stamp=101.0) == "future"
    assert pl.check(0, 100.0, [0.0, 0.0], stamp=100.4) is None   # within the tolerance (clock skew)
    assert pl.check(2, 0.0, [0.0, 0.0], stamp=55.0) is None      # sim time before the first /clock: not judged
    assert pl.counts["future"] == 1


def test_a_source_that_keeps_lying_is_suspect_until_it_has_been_quiet():
    pl = checker()
    pl.check(0, 0.0, [1.0, 1.0])
    for k in range(SUSPECT_BAD - 1):
        pl.check(0, 0.1 * (k + 1), [1000.0, 0.0])
    assert not pl.suspect(0, 0.5)                           # a glitch or two is not a liar
    pl.check(0, 0.5, [1000.0, 0.0])
    assert pl.suspect(0, 0.6) and pl.suspects(0.6) == [0]
    assert pl.check(0, 0.7, [1.05, 1.0]) is None            # its plausible states are still accepted ...
    assert pl.suspect(0, 0.5 + CLEAR_S - 0.1)               # ... but it stays suspect until quiet for CLEAR_S
    assert not pl.suspect(0, 0.5 + CLEAR_S + 0.1)
    assert pl.record(10.0) == {"implausible": {"outside": 3, "jump": 0, "future": 0}, "suspects": [],
                               "suspected": [0]}


def test_interleaved_stranger_states_never_displace_the_real_robot():
    """A stranger publishing another position 18 times as often as the robot (the issue's probe, inside the
    workspace): every stranger's state is a jump from the real robot's last accepted one."""
    pl = checker()
    real = np.array([2.0, 2.0])
    accepted = []
    t = 0.0
    for k in range(200):
        t += 1 / 90
        if k % 18 == 0:
            real = real + [0.01, 0.0]
            if pl.check(0, t, real) is None:
                accepted.append(real.copy())
        assert pl.check(0, t, [-6.0, 7.0]) == "jump"
    assert len(accepted) == 12 and pl.suspect(0, t)


# ---- in the robot core ----------------------------------------------------------------------------------------------

def test_implausible_odometry_is_refused_and_the_robot_goes_stale():
    cfg = config()
    core = RobotCore(cfg, 0)
    assert core.accept(0.0, [1.0, 1.0]) is None
    core.set_target([2.0, 1.0], 0.0)
    assert core.step(0.05).reason == "ok"
    assert core.accept(0.1, [1000.0, 1000.0]) == "outside"
    assert core.accept(0.2, [8.0, -8.0]) == "jump"
    assert np.array_equal(core.pos, [1.0, 1.0])             # the last good pose stays
    stale = core.step(cfg.odom_timeout_s + 0.01)
    assert stale.reason == "stale_odom"
    assert core.status(1.0)["implausible"] == {"outside": 1, "jump": 1, "future": 0}


def test_a_neighbour_outside_the_workspace_is_not_planned_with():
    cfg = config()
    core = RobotCore(cfg, 0)
    heard = Heard(np.array([[1.0, 2.0], [1000.0, 0.0], [3.0, 3.0]]), np.array([[1.0, 2.0], [0.0, 0.0], [50.0, 3.0]]))
    checked, bad = core.check_heard(1.0, heard)
    assert bad == 2 and np.array_equal(checked.positions, [[1.0, 2.0]])
    refused, _ = core.check_heard(1.0, heard, stamp=5.0)
    assert refused is None and core.plausible.counts == {"outside": 2, "jump": 0, "future": 1}


def test_a_nearby_robot_whose_position_jumped_is_avoided_where_it_last_plausibly_was():
    cfg = config()
    core = RobotCore(cfg, 0, avoid=avoidance_from_config(cfg, ros=True))
    first, bad = core.check_nearby(1.0, Nearby.of([[2.0, 0.0], [0.0, 3.0]], ages=[0.1, 0.1], ids=[1, 2]))
    assert bad == 0 and np.array_equal(first.positions, [[2.0, 0.0], [0.0, 3.0]])
    # robot 1 "teleports" across the workspace, robot 2 claims a place far outside it
    checked, bad = core.check_nearby(1.5, Nearby.of([[-7.0, -7.0], [0.0, 900.0]], ages=[0.1, 0.1], speeds=[0.2, 0.0],
                                                   ids=[1, 2]))
    assert bad == 2 and checked.ids.tolist() == [1, 2]
    assert np.array_equal(checked.positions, [[2.0, 0.0], [0.0, 3.0]])       # the bodies are still where they were
    assert np.allclose(checked.ages, [0.6, 0.6])                              # ... and their uncertainty grows
    assert core.plausible.counts["jump"] == 1 and core.plausible.counts["outside"] == 1
    unknown, bad = core.check_nearby(2.0, Nearby.of([[0.0, -800.0]], ids=[3]))
    assert bad == 1 and len(unknown.positions) == 0                           # never heard plausibly: dropped


# ---- the geofence binds the filter ----------------------------------------------------------------------------------

def closed_loop(cores, pos, steps, dt, nearby_of):
    """Drive single-integrator cores ``steps`` ticks; ``nearby_of(i, pos, k)`` is what robot i hears at tick k.
    Returns every position of every tick (steps + 1, n, 2)."""
    track = [pos.copy()]
    for k in range(steps):
        now = k * dt
        cmds = []
        for i, core in enumerate(cores):
            core.observe(now, pos[i])
            cmds.append(core.step(now, nearby_of(i, pos, k)))
        pos = pos + dt * np.array([[c.vx, c.vy] for c in cmds])
        track.append(pos.copy())
    return np.array(track)


def wall_core(cfg, i, target):
    core = RobotCore(cfg, i, avoid=avoidance_from_config(cfg, ros=True))
    core.observe(0.0, [0.0, 0.0])
    core.set_target(target, 0.0)
    return core


def test_a_robot_pushed_towards_a_wall_by_others_stays_inside_the_geofence():
    """Robot 0 holds its target at the wall (9.6, 0); three robots that do not filter (people, or robots without the
    filter) walk straight at it from inside and stop only 0.3 m from it. Robot 0's filter gives way towards the wall,
    never through it (squeezed, it stops: an infeasible step)."""
    cfg = config(num_robots=4, target_timeout_s=1e3)
    fence = Geofence.from_bounds(cfg.workspace)
    core = wall_core(cfg, 0, [9.6, 0.0])
    me = np.array([9.6, 0.0])
    pushers = np.array([[7.0, 0.0], [7.5, 1.2], [7.5, -1.2]])
    dt = cfg.control_period_s
    lo, hi = core.avoid.bounds
    mine = []
    for k in range(400):
        now = k * dt
        core.observe(now, me)
        cmd = core.step(now, Nearby.of(pushers, speeds=[0.3] * 3, ids=[1, 2, 3]))
        me = me + dt * np.array([cmd.vx, cmd.vy])
        mine.append(me.copy())
        to_me = me - pushers
        dist = np.linalg.norm(to_me, axis=1, keepdims=True)
        pushers = pushers + np.where(dist > 0.3, dt * 0.3 * to_me / np.maximum(dist, 1e-9), 0.0)
    mine = np.array(mine)
    assert np.all(mine <= hi + 1e-6) and np.all(mine >= lo - 1e-6)
    assert np.all(mine <= fence.hi) and np.all(mine >= fence.lo)
    assert core.avoid.info()["interventions"] > 0
    assert mine[:, 0].max() > 9.65                                           # it was pushed towards the wall


def test_a_spoofed_neighbour_cannot_push_a_robot_out_of_the_geofence():
    """Robot 1's nearby message claims robot 0 right beside it on the inside, closing in, every other tick (a
    stranger's state relayed as robot 0's): robot 1 backs off towards the fence but never crosses it, and it still
    avoids the real robot 0."""
    cfg = config(num_robots=2, target_timeout_s=1e3)
    cores = [wall_core(cfg, 0, [8.0, 0.0]), wall_core(cfg, 1, [9.5, 0.0])]
    pos = np.array([[8.0, 0.0], [9.5, 0.0]])

    def nearby_of(i, p, k):
        other = p[1 - i]
        if i == 1 and k % 2:
            other = p[1] - [0.3 + 0.01 * (k % 20), 0.0]                  # the spoof, ever closer on the inside
        return Nearby.of([other], ids=[1 - i])

    track = closed_loop(cores, pos, 200, cfg.control_period_s, nearby_of)
    lo, hi = cores[1].avoid.bounds
    assert np.all(track[:, 1] <= hi + 1e-6)
    assert np.linalg.norm(track[:, 0] - track[:, 1], axis=1).min() >= cores[0].avoid.clearance_m - 1e-6


def test_checking_many_positions_at_once_gives_what_checking_each_gives():
    """check_many (a whole nearby message per tick) decides, counts and remembers as check does one by one."""
    rng = np.random.default_rng(4)
    one, many = checker(12), checker(12)
    for step in range(30):
        ids = rng.permutation(12)[: rng.integers(1, 12)]
        t = step * 0.1 - rng.uniform(0, 0.3, len(ids))
        xy = rng.uniform(-13, 13, (len(ids), 2))
        kinds = many.check_many(ids, t, xy)
        assert [one.check(int(j), float(tj), p) or "" for j, tj, p in zip(ids, t, xy)] == list(kinds)
    assert one.counts == many.counts and np.array_equal(one.by_source, many.by_source)
    assert np.array_equal(one.last_t, many.last_t) and np.allclose(one.last, many.last, equal_nan=True)
