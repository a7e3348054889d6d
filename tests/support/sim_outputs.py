"""A simulator node's outputs captured without spinning: each step's serialized ``/ground_truth`` message and every
robot's newest serialized odometry (the tests of the ground-truth topic: tests/ros/test_ground_truth.py,
tests/unit/sims/test_mujoco.py)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SimOutputs:
    truth: list[bytes] = field(default_factory=list)          # every ground-truth message, in order
    odom: dict[int, bytes] = field(default_factory=dict)      # robot -> its newest odometry


def capture(sim) -> SimOutputs:
    """Replace ``sim``'s publishers' ``publish`` (a ``consensus.sims.builtin.ros.Simulator``) by recorders of what it
    sends."""
    out = SimOutputs()
    sim.truth_pub.publish = out.truth.append
    for i, pub in enumerate(sim.pubs):
        pub.publish = lambda raw, i=i: out.odom.__setitem__(i, raw)
    return out
