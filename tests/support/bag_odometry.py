"""What the simulator says the bodies did, read back from a run's MCAP bag (``<run>/bag``): every robot's ``odom``
(ground truth of a simulated run) and every ``cmd_vel``. The safety checks of the ROS tests are judged on this, not
on the ``state`` topic the robots broadcast."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class BagOdometry:
    closest: float                      # smallest distance between two robots' newest odometry at any odom message
    last: dict                          # topic -> the robot's last odometry position (x, y)
    fastest_cmd: float                  # the fastest linear cmd_vel sent

    @property
    def robots(self) -> int:
        return len(self.last)

    def final(self) -> np.ndarray:
        """``(n, 2)``: every robot's last odometry position, in the order of their topics."""
        return np.asarray([self.last[k] for k in sorted(self.last)])


def odometry_in_bag(run: Path) -> BagOdometry:
    from consensus.runs.bag import read_messages

    last: dict[str, tuple[float, float]] = {}
    closest, fastest = math.inf, 0.0
    for topic, _type, _t, msg in read_messages(Path(run) / "bag"):
        if topic.endswith("/odom"):
            last[topic] = (msg.pose.pose.position.x, msg.pose.pose.position.y)
            if len(last) > 1:
                p = np.asarray(list(last.values()))
                d = np.linalg.norm(p[:, None] - p[None], axis=2)[np.triu_indices(len(p), 1)]
                closest = min(closest, float(d.min()))
        elif topic.endswith("/cmd_vel"):
            fastest = max(fastest, float(np.hypot(msg.linear.x, msg.linear.y)))
    return BagOdometry(closest, last, fastest)
