"""The world layer (consensus.control.dynamics): one Dynamics per kinematics, one KinematicWorld that moves N
bodies, used by the ROS sim node and both headless loops; no kinematics name compared outside it."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from consensus.control.kinematics import PointMassPID, step_single_integrator, step_unicycle
from consensus.control.motion import KINEMATICS
from consensus.control.dynamics import dynamics_names, dynamics_of
from consensus.control.dynamics.world import KinematicWorld
from consensus.settings import RobotBaseConfig

SRC = Path(__file__).resolve().parents[4] / "src" / "consensus"


def _cfg(kinematics: str, n: int = 4, dim: int = 2) -> RobotBaseConfig:
    return RobotBaseConfig(num_robots=n, dim=dim, kinematics=kinematics, seed=3)


def test_every_kinematics_has_one_dynamics():
    assert set(dynamics_names()) == set(KINEMATICS)
    with pytest.raises(ValueError, match="unknown kinematics 'hover'"):
        dynamics_of("hover")


def test_no_kinematics_name_is_compared_outside_the_dynamics_package():
    """What a kinematics means is asked of its Dynamics, never decided by comparing its name."""
    pattern = re.compile(r"kinematics\s*(==|!=)")
    hits = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py")
            if p.relative_to(SRC).parts[:2] != ("control", "dynamics")
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []


def test_the_kinematic_world_moves_each_kinematics_exactly():
    rng = np.random.default_rng(0)
    start = rng.uniform(-3, 3, (4, 2))
    cmds = [rng.uniform(-1, 1, (4, 3)) for _ in range(20)]
    dt = 0.1
    # single integrator: p += v dt, yaw kept
    w = KinematicWorld(_cfg("single_integrator"), start)
    p = start.copy()
    for c in cmds:
        w.set_commands(c)
        w.advance(dt)
        p = step_single_integrator(p, c[:, :2], dt)
    assert np.array_equal(w.poses()[:, :2], p) and np.all(w.poses()[:, 2] == 0)
    assert np.allclose(w.velocities(), np.column_stack([cmds[-1][:, :2], np.zeros(4)]))
    # unicycle: the exact arc of (v, w)
    w = KinematicWorld(_cfg("unicycle"), start)
    pose = np.column_stack([start, np.zeros(4)])
    for c in cmds:
        w.set_commands(c)
        w.advance(dt)
        pose = step_unicycle(pose, c[:, 0], c[:, 2], dt)
    assert np.array_equal(w.poses(), pose)
    twist = dynamics_of("unicycle").odom_twist(w.velocities(), w.poses()[:, 2])
    assert np.allclose(twist, np.column_stack([cmds[-1][:, 0], np.zeros(4), cmds[-1][:, 2]]))
    assert w.time == pytest.approx(20 * dt)


def test_the_point_mass_tracks_a_velocity_command_or_paper_1s_goal():
    start = np.array([[0.0, 0.0], [5.0, 5.0]])
    # a velocity set-point: the mass reaches it at its force limit and holds it
    w = KinematicWorld(_cfg("point_mass_pid", n=2), start)
    for _ in range(100):
        w.set_commands(np.array([[1.0, 0.0, 0.0], [0.0, -0.5, 0.0]]))
        w.advance(0.1)
    assert np.allclose(w.velocities()[:, :2], [[1.0, 0.0], [0.0, -0.5]], atol=1e-6)
    # with goals (paper 1's code, no filter): the PID acts on the goal, exactly as PointMassPID does
    w = KinematicWorld(_cfg("point_mass_pid", n=2), start)
    mass, p = PointMassPID(2, 2), start.copy()
    goal = np.array([[3.0, 1.0], [0.0, 0.0]])
    for _ in range(30):
        w.set_commands(np.zeros((2, 3)))
        w.drive_to(goal)
        w.advance(0.1)
        p = mass.step(p, goal, 0.1)
    assert np.array_equal(w.poses()[:, :2], p)
    # the next set_commands is a velocity set-point again; a body without a mass has no PID to take a goal
    w.set_commands(np.zeros((2, 3)))
    assert w.goals is None
    with pytest.raises(ValueError, match="no PID"):
        KinematicWorld(_cfg("single_integrator", n=2), start).drive_to(goal)


def test_a_one_dimensional_world_moves_along_x_only():
    w = KinematicWorld(_cfg("single_integrator", n=3, dim=1), np.array([[0.0], [1.0], [2.0]]))
    w.set_commands(np.ones((3, 3)))
    w.advance(0.5)
    assert np.allclose(w.poses(), [[0.5, 0, 0], [1.5, 0, 0], [2.5, 0, 0]])
