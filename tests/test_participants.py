"""A node process's DDS participants (consensus.ros.process.Participants) and the node processes' session
(consensus.runs.ros_runner.OWN_PROCESS_GROUP): what the 100-robot figures of docs/benchmarks.md rest on."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


@pytest.mark.ros
def test_subscriptions_are_spread_over_participants_and_one_executor_spins_them_all(ros):
    from rclpy.node import Node
    from std_msgs.msg import String

    from consensus.ros.process import Participants, make_executor

    main = Node("recorder_like")
    parts = Participants(main, per=2)
    subs = [parts.reserve(1) for _ in range(5)]
    # two subscriptions per participant: the process's own node first, then <name>_1 and <name>_2 on contexts of
    # their own (participants), made when the ones before are full
    assert subs[0] is main and subs[1] is main and subs[2] is subs[3] and subs[4] is not subs[2]
    assert [n.get_name() for n in (subs[2], subs[4])] == ["recorder_like_1", "recorder_like_2"]
    assert len(parts.contexts) == 3 and subs[4].context is parts.contexts[2] and subs[2].context is not main.context
    assert parts.reserve_context(1) is parts.contexts[2] and len(parts.contexts) == 3   # room left there: no new one
    got: set[str] = set()
    for k, node in enumerate(subs):
        node.create_subscription(String, f"/topic_{k}", lambda m: got.add(m.data), 10)
    driver = Node("driver")
    pubs = [driver.create_publisher(String, f"/topic_{k}", 10) for k in range(6)]
    executor = make_executor("events")
    executor.add_node(main)
    executor.add_node(driver)
    parts.attach(executor)
    late = parts.reserve(1)        # every one full: a participant opened while spinning (as the bag recorder may)
    assert late.get_name() == "recorder_like_3" and len(parts.contexts) == 4
    late.create_subscription(String, "/topic_5", lambda m: got.add(m.data), 10)
    contexts = list(parts.contexts)
    try:
        end = time.monotonic() + 15
        while len(got) < 6 and time.monotonic() < end:
            for k, pub in enumerate(pubs):
                pub.publish(String(data=f"m{k}"))
            executor.spin_once(timeout_sec=0.05)
        assert got == {f"m{k}" for k in range(6)}
    finally:
        parts.close()
        driver.destroy_node()
        main.destroy_node()
    assert parts.contexts == [main.context] and not any(c.ok() for c in contexts[1:])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sessions and process groups as on Linux")
def test_node_processes_get_a_process_group_of_their_own_in_the_runner_s_session():
    # a session of its own would be an autogroup of its own, where nice values do not reach (sched(7))
    from consensus.runs.ros_runner import OWN_PROCESS_GROUP

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], **OWN_PROCESS_GROUP)
    try:
        assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
        assert os.getsid(child.pid) == os.getsid(0)
    finally:
        child.kill()
        child.wait()
