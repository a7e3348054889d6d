"""``SpinningNode``: a test's own ROS node in a context of its own, spun by a thread while the test starts and watches
a run in other processes (``with SpinningNode(...) as watch:``); destroyed and its context shut down on exit. The
driver tests (tests/ros/test_driver_sims.py, tests/ros/test_crazyflie_link_sim.py) subclass it with their
subscriptions."""
from __future__ import annotations

import threading


class SpinningNode:
    """``self.node`` (named ``name``, on sim time when ``use_sim_time``), spun every ``period_s`` by a thread between
    ``__enter__`` and ``__exit__``."""

    def __init__(self, name: str, *, use_sim_time: bool = False, period_s: float = 0.05) -> None:
        import rclpy
        from rclpy.node import Node
        from rclpy.parameter import Parameter

        self.rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node(name, context=self.context,
                         parameter_overrides=[Parameter("use_sim_time", value=use_sim_time)])
        self.period_s = period_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)

    def _spin(self) -> None:
        from rclpy.executors import SingleThreadedExecutor

        ex = SingleThreadedExecutor(context=self.context)
        ex.add_node(self.node)
        while not self.stop.is_set():
            ex.spin_once(timeout_sec=self.period_s)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.node.destroy_node()
        self.rclpy.try_shutdown(context=self.context)
