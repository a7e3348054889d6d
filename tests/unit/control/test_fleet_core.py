"""The fleet core (consensus.control.fleet_core): every robot's command from one batched step equals the robot core's
own ``step`` to 1e-6, tick after tick on random scenes (both kinematics with bodies, robots without a filter, stops,
groups packing at a point, deadlock escapes, ages and speeds), with the same counters; and it stays decentralised
(robot i's command depends only on what robot i heard)."""
from __future__ import annotations

import numpy as np
import pytest

from consensus.control.avoidance import avoidance_from_config
from consensus.control.fleet_core import FleetCore
from consensus.control.kinematics import step_single_integrator, step_unicycle
from consensus.control.robot_core import Nearby, RobotCore
from support.kernel_config import robot_config


def _fleet(seed: int, n: int, kinematics: str, avoid: str = "cbf") -> tuple[list[RobotCore], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    cfg = robot_config(num_robots=n, collision_avoidance=avoid, kinematics=kinematics, seed=seed)
    cores = []
    for i in range(n):
        av = avoidance_from_config(cfg, ros=True)
        cores.append(RobotCore(cfg, i, avoid=av, kinematics=kinematics))
    lo, hi = (np.asarray(b, dtype=float) for b in cfg.workspace_bounds())
    pos = rng.uniform(lo + 1.0, lo + 0.35 * (hi - lo), size=(n, 2))     # crowded: many rows bind
    yaw = rng.uniform(-np.pi, np.pi, n)
    return cores, pos, yaw


def _setup(cores, pos, yaw, rng, now=0.0):
    n = len(cores)
    centre = pos.mean(axis=0)
    group = tuple(range(n))
    for i, core in enumerate(cores):
        core.observe(now, pos[i], yaw[i])
        kind = i % 5
        if kind == 0:
            core.set_meeting_point(centre, now, group=group[: max(2, n // 2)] if i < n // 2 else None)
        elif kind == 1:
            core.set_meeting_point(pos[(i + 3) % n], now)             # through the crowd
        elif kind == 2:
            core.set_meeting_point(centre + rng.normal(0, 0.3, 2), now, group=group)   # packs with everyone
        else:
            core.set_meeting_point(rng.uniform(pos.min(axis=0), pos.max(axis=0)), now)
    cores[1].set_estop(True)
    cores[-1].goals.escape_until = 5.0                              # escaping a deadlock: the nominal turned right


def _nearby(pos, yaw, rng, n, kinematics, offset):
    """What each robot heard: the others' positions (a unicycle's centres), some left out, aged, with speeds."""
    out = []
    for i in range(n):
        ids = np.array([j for j in range(n) if j != i and rng.random() > 0.15])
        if i == 2:
            out.append(None)                                  # nothing heard yet: stops
            continue
        if not len(ids):
            out.append(Nearby.of(np.empty((0, 2))))
            continue
        out.append(Nearby.of(pos[ids] + rng.normal(0, 0.01, (len(ids), 2)), rng.uniform(0, 0.3, len(ids)),
                             rng.uniform(0, 0.5, len(ids)), ids))
    return out


def _move(cmds, pos, yaw, kinematics, now, dt, *fleets):
    """The bodies driven by ``cmds`` for ``dt``; every fleet's cores observe the new poses."""
    v = np.array([[c.vx, c.vy] for c in cmds])
    if kinematics == "unicycle":
        pose = step_unicycle(np.column_stack([pos, yaw]), v[:, 0], np.array([c.wz for c in cmds]), dt)
        pos, yaw = pose[:, :2], pose[:, 2]
    else:
        pos = step_single_integrator(pos, v, dt)
    for cores in fleets:
        for i, core in enumerate(cores):
            core.observe(now, pos[i], yaw[i])
    return pos, yaw


@pytest.mark.parametrize("kinematics,avoid,seed,n", [("single_integrator", "cbf", 1, 12),
                                                     ("single_integrator", "cbf", 2, 40),
                                                     ("unicycle", "cbf", 3, 16),
                                                     ("point_mass_pid", "cbf", 4, 10),
                                                     ("single_integrator", "none", 5, 8)])
def test_fleet_step_equals_each_robot_core_step_to_1e_6(kinematics, avoid, seed, n):
    rng_a, rng_b = np.random.default_rng(seed + 100), np.random.default_rng(seed + 100)
    cores_a, pos, yaw = _fleet(seed, n, kinematics, avoid)
    cores_b, _, _ = _fleet(seed, n, kinematics, avoid)
    _setup(cores_a, pos, yaw, rng_a)
    _setup(cores_b, pos, yaw, rng_b)
    fleet = FleetCore(cores_b)
    dt, moved, filtered = 0.1, 0, 0
    offset = cores_a[0].avoid.offset if cores_a[0].avoid is not None else 0.0
    for k in range(1, 40):
        now = k * dt
        nb = _nearby(pos, yaw, np.random.default_rng(seed * 1000 + k), n, kinematics, offset)
        a = [c.step(now, nb[i]) for i, c in enumerate(cores_a)]
        b = fleet.step(now, nb)
        for i in range(n):
            assert a[i].reason == b[i].reason, (k, i)
            np.testing.assert_allclose([b[i].vx, b[i].vy, b[i].wz], [a[i].vx, a[i].vy, a[i].wz], atol=1e-6,
                                       err_msg=f"tick {k}, robot {i}")
            if a[i].goal is None:
                assert b[i].goal is None
            else:
                np.testing.assert_allclose(b[i].goal, a[i].goal, atol=1e-9)
        moved += sum(abs(c.vx) + abs(c.vy) > 1e-6 for c in a)
        pos, yaw = _move(a, pos, yaw, kinematics, now, dt, cores_a, cores_b)
    for ca, cb in zip(cores_a, cores_b):
        assert ca.counters == cb.counters
        assert ca.slot == cb.slot
        if ca.avoid is not None:
            assert ca.avoid.counters.as_dict() == cb.avoid.counters.as_dict()
            filtered += ca.avoid.counters.interventions
    assert moved > 0                                           # the scenes drove robots, not only stopped them
    if avoid == "cbf":
        assert filtered > 0                                    # ... and the filter changed commands
        assert sum(c.avoid.counters.qp_solves for c in cores_a) > 0 or kinematics == "point_mass_pid"


def test_fleet_step_is_decentralised():
    """Robot 0's command depends only on what robot 0 heard: changing what robot 1 heard changes nothing of it."""
    cores, pos, yaw = _fleet(7, 6, "single_integrator")
    rng = np.random.default_rng(7)
    _setup(cores, pos, yaw, rng)
    cores[1].set_estop(False)
    nb = _nearby(pos, yaw, np.random.default_rng(8), 6, "single_integrator", 0.0)
    import copy

    first = FleetCore(copy.deepcopy(cores)).step(0.1, nb)
    nb2 = list(nb)
    nb2[1] = Nearby.of(pos[[0]] + 0.01, [0.0], [0.0], [0])     # robot 1 now hears robot 0 right next to it
    second = FleetCore(copy.deepcopy(cores)).step(0.1, nb2)
    assert (first[0].vx, first[0].vy) == (second[0].vx, second[0].vy)
    assert (first[1].vx, first[1].vy) != (second[1].vx, second[1].vy)


@pytest.mark.parametrize("kinematics,seed,n", [("single_integrator", 11, 30), ("unicycle", 12, 12),
                                               ("point_mass_pid", 13, 8)])
def test_the_dense_batch_path_equals_the_per_robot_lists(kinematics, seed, n):
    """A fleet process hands the fleet core dense arrays (NearbyBatch: no per-robot Nearby): the same commands,
    goals, slots and counters as the same sets given robot by robot."""
    from consensus.control.fleet_core import NearbyBatch

    cores_a, pos, yaw = _fleet(seed, n, kinematics)
    cores_b, _, _ = _fleet(seed, n, kinematics)
    _setup(cores_a, pos, yaw, np.random.default_rng(seed))
    _setup(cores_b, pos, yaw, np.random.default_rng(seed))
    fa, fb = FleetCore(cores_a), FleetCore(cores_b)
    dt, qp = 0.1, 0
    for k in range(1, 30):
        now = k * dt
        rng = np.random.default_rng(seed * 100 + k)
        held = (rng.random((n, n)) > 0.2) & ~np.eye(n, dtype=bool)         # some robots not heard
        positions = np.where(held[:, :, None], pos[None, :, :] + rng.normal(0, 0.01, (n, n, 2)), np.nan)
        batch = NearbyBatch(positions, np.where(held, rng.uniform(0, 0.3, (n, n)), np.inf),
                            rng.uniform(0, 0.5, (n, n)), np.arange(n))
        a = fa.step(now, [batch.robot(i) for i in range(n)])
        b = fb.step(now, batch)
        for i in range(n):
            assert a[i].reason == b[i].reason
            np.testing.assert_allclose([b[i].vx, b[i].vy, b[i].wz], [a[i].vx, a[i].vy, a[i].wz], atol=1e-9)
        pos, yaw = _move(a, pos, yaw, kinematics, now, dt, cores_a, cores_b)
    for ca, cb in zip(cores_a, cores_b):
        assert (ca.counters, ca.slot) == (cb.counters, cb.slot)
        assert ca.avoid.counters.as_dict() == cb.avoid.counters.as_dict()
        qp += ca.avoid.counters.qp_solves
    assert qp > 0 or kinematics == "point_mass_pid"
    assert any(c.slot is not None for c in cores_a)                        # the packing assignment ran too


def test_a_robot_that_heard_the_relay_but_no_other_robot_yet_is_a_row_not_an_error():
    """single_process:=false at start-up: robot 0's relay message lists no other robot yet (an empty ``Nearby``); the
    batch keeps it as heard-but-empty (a CI run logged 'fleet.step failed: cannot reshape array of size 0')."""
    from consensus.control.fleet_core import NearbyBatch
    from consensus.control.robot_core import Nearby

    empty = Nearby(np.zeros((0, 2)), np.zeros(0), np.zeros(0), np.zeros(0, dtype=int))
    one = Nearby(np.array([[1.0, 2.0]]), np.array([0.1]), np.array([0.0]), np.array([3]))
    batch = NearbyBatch.of([empty, None, one], 2)
    assert batch.positions.shape == (3, 1, 2) and batch.heard.tolist() == [True, False, True]
    assert len(batch.robot(0).positions) == 0 and batch.robot(1) is None
    assert batch.robot(2).positions.tolist() == [[1.0, 2.0]] and batch.robot(2).ids.tolist() == [3]
