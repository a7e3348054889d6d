"""Print the positions turtlesim itself publishes on /turtle<1..N>/pose, one JSON line every PERIOD seconds
({"1": [x, y], ...}), until SIGINT/SIGTERM. Run with turtlesim's environment (tests/unit/sims/test_turtlesim.py):

    python tests/support/turtlesim_watch.py N PERIOD
"""
import json
import signal
import sys
import time

import rclpy
from rclpy.node import Node
from turtlesim.msg import Pose


def main() -> None:
    n, period = int(sys.argv[1]), float(sys.argv[2])
    rclpy.init()
    signal.signal(signal.SIGTERM, lambda *_: rclpy.try_shutdown())
    node = Node("turtle_watch")
    latest: dict[str, list[float]] = {}
    for i in range(1, n + 1):
        node.create_subscription(Pose, f"/turtle{i}/pose",
                                 lambda m, k=str(i): latest.__setitem__(k, [m.x, m.y]), 10)
    next_print = time.monotonic()
    try:
        while rclpy.ok():
            rclpy.spin_once(node, timeout_sec=0.05)
            if time.monotonic() >= next_print and latest:
                print(json.dumps(latest), flush=True)
                next_print += period
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass
    finally:
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
