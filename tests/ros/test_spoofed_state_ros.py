"""A stranger on the wire (issue 28's probe, through real ROS 2 nodes): while 6 robots gather (average planner, the
default collision filter), another process publishes ``/robot_0/state`` at (1000, 1000), 90 times a second, beside
the real robot's own states — and, in a second phase, at a plausible-looking spot inside the workspace.

Judged on the simulator's ground truth (every robot's ``odom`` in the bag): no two bodies closer than their
clearance, nobody outside the geofence, the fleet gathers within 3 m of where the honest fleet gathers (the mean of
the start positions, on the complete graph), and the stranger's states are counted as implausible in the summary.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from support.bag_odometry import odometry_in_bag
from consensus.scenarios.aggregation.config import load_config

pytestmark = pytest.mark.ros

STRANGER = textwrap.dedent("""
    import sys, time
    import rclpy
    from geometry_msgs.msg import PointStamped
    rclpy.init()
    node = rclpy.create_node("stranger")
    pub = node.create_publisher(PointStamped, "/robot_0/state", 10)
    msg = PointStamped()
    msg.header.frame_id = "world"
    t0 = time.monotonic()
    while rclpy.ok():
        far = time.monotonic() - t0 < float(sys.argv[1])
        msg.point.x, msg.point.y = (1000.0, 1000.0) if far else (-8.0, 8.0)
        msg.header.stamp = node.get_clock().now().to_msg()
        pub.publish(msg)
        time.sleep(1 / 90)
""")


def test_a_stranger_publishing_a_robots_state_moves_nobody_into_danger(tmp_path):
    from consensus.control.kinematics import initial_positions
    from consensus.control.safety import Geofence
    from consensus.scenarios.aggregation.runner import run_ros

    cfg = load_config(None, num_robots=6, planner="average", duration_s=40.0, settle_s=0.0, seed=3)
    assert cfg.resolved_collision_avoidance(ros=True) == "cbf"
    stranger = subprocess.Popen([sys.executable, "-c", STRANGER, "20"], env=dict(os.environ),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        summary = run_ros(cfg, tmp_path / "run", echo=None)
    finally:
        stranger.kill()
        _, err = stranger.communicate(timeout=30)
    assert stranger.returncode is not None and "Traceback" not in err, err
    odom = odometry_in_bag(tmp_path / "run")
    clearance = summary["clearance_m"]
    assert odom.robots == 6 and odom.closest >= clearance, (odom.closest, clearance)
    fence = Geofence.from_bounds(cfg.workspace)
    final = odom.final()
    assert np.all(final >= fence.lo) and np.all(final <= fence.hi)
    honest = initial_positions(cfg).mean(axis=0)
    assert np.linalg.norm(np.asarray(summary["consensus_point"]) - honest) <= 3.0, (summary["consensus_point"], honest)
    implausible = summary["implausible"]
    assert implausible["outside"] > 100 and implausible["jump"] > 100, implausible
    assert 0 in summary["suspected_robots"]
    assert summary["bad_messages"] >= implausible["outside"]
