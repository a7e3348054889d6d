"""The aggregation headless loop moves its bodies in the world layer (consensus.control.dynamics.world), as the ROS
sim does."""
from __future__ import annotations

import numpy as np
import pytest

from consensus.control.dynamics.world import KinematicWorld
from consensus.scenarios.aggregation.config import AggregationConfig


@pytest.mark.parametrize("kinematics", ["single_integrator", "unicycle", "point_mass_pid"])
def test_the_headless_loop_moves_its_bodies_in_the_kinematic_world(kinematics, monkeypatch):
    """The aggregation loop's positions are the world's: a run replayed with a recording world gives the same
    samples, and every step went through it."""
    from consensus.scenarios.aggregation import headless

    calls = []

    class Recording(KinematicWorld):
        def advance(self, seconds):
            calls.append(seconds)
            return super().advance(seconds)

    monkeypatch.setattr(headless, "headless_world", lambda cfg, start, seed=0: Recording(cfg, start, seed=seed))
    cfg = AggregationConfig(num_robots=4, kinematics=kinematics, planner="average", max_rounds=2, seed=5)
    res = headless.run_headless(cfg)
    steps = len(res.times) - 1
    assert len(calls) == steps and isinstance(res.world, Recording)
    assert np.array_equal(res.positions[-1], res.world.poses()[:, :2])
