"""Stop signals (SIGINT, SIGTERM) end a node process cleanly, however many come and whenever they come.

A Python signal handler runs on the main thread between any two bytecodes, inside an executor's callback too. The
handler only notes the stop (``consensus.ros.process``); ``spin`` returns, the ``on_stop`` functions run once, outside
any callback, and the node's finally blocks write what it holds. Before, the handler shut rclpy down itself: the
nodes were destroyed under the running callback, and a second signal arriving inside the first one's shutdown waited
for ever for the lock that one held (a recorder under ``ros2 launch``, which forwards SIGINT to a process group that
also got it, hung until SIGKILL in a CI run; py-spy showed the nested handlers)."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

pytestmark = pytest.mark.ros


def test_a_stop_signal_inside_a_callback_leaves_the_node_whole_and_ends_the_spin(ros):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import String

    from consensus.ros import process

    node = Node("stopped")
    pub = node.create_publisher(String, "out", 10)
    seen: dict = {"after_signal": None, "stops": 0}
    process.on_stop(lambda: seen.__setitem__("stops", seen["stops"] + 1))

    def tick():
        if seen["after_signal"] is not None:
            return
        process._handle_stop_signal(signal.SIGINT, None)          # as if both came while this callback ran
        process._handle_stop_signal(signal.SIGTERM, None)
        pub.publish(String(data="still here"))                    # the node and its publisher are whole
        seen["after_signal"] = (ros.ok(), seen["stops"])

    node.create_timer(0.05, tick)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        start = time.monotonic()
        process.spin(executor)
        assert time.monotonic() - start < 5 * process.STOP_POLL_S + 1.0
        assert seen["after_signal"] == (True, 0)      # rclpy up and nothing run from inside the callback
        assert seen["stops"] == 1                     # the on_stop functions ran once, when the spin ended
        assert process._stop.is_set()
    finally:
        process._stop.clear()
        process._on_stop.clear()
        executor.shutdown()
        node.destroy_node()


def test_a_burst_of_stop_signals_ends_a_node_process_cleanly(ros, tmp_path):
    """The simulator's process (``node_main``), once it publishes, gets SIGINT twice at once and SIGTERM right after:
    it exits 0 within a few seconds, with no traceback."""
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from consensus.ros import qos
    from consensus import names
    from consensus.runs.ros_runner import executable_command

    node = Node("listener")
    heard = []
    node.create_subscription(Odometry, names.ODOM.of(0), heard.append, qos.profile(names.ODOM))
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    log = tmp_path / "sim.log"
    with open(log, "w") as handle:
        proc = subprocess.Popen(executable_command("sim") + ["--ros-args", "-p", "num_robots:=2"], stdout=handle,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not heard and proc.poll() is None:
            executor.spin_once(timeout_sec=0.1)
        assert heard, log.read_text()[-2000:]               # it spins
        for sig in (signal.SIGINT, signal.SIGINT, signal.SIGTERM):
            os.kill(proc.pid, sig)
        code = proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        executor.shutdown()
        node.destroy_node()
    text = log.read_text()
    assert code == 0, text[-2000:]
    assert "Traceback" not in text, text[-2000:]
