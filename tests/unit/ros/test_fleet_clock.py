"""The fleet process's one clock (consensus.ros.fleet.FleetClock) and its in-process nearby sets
(consensus.ros.nearby.FleetNearby).

FleetNearby is ROS-free: its deliveries are tested directly (positions, ages, measured speeds, oneself left out, a
robot that stops sending ages out, link drops). The clock is tested in-process with rclpy: every robot's command goes
out each tick from one timer, a robot whose tick raises is counted for it alone while the others go on, the e-stop
holds through the other executor thread, and the planning rounds run after the commands.
"""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

from consensus.control.robot_core import RobotCore
from consensus.scenarios.aggregation.config import load_config


def _cfg(**kw):
    base = dict(num_robots=3, planner="average", planner_period_s=0.3, control_period_s=0.05, odom_timeout_s=0.4,
                llm_backend="openai", seed=3, collision_avoidance="cbf", robot_timeout_s=1.0)
    base.update(kw)
    return load_config(None, **base)


# ------------------------------------------------------------------------------------------------ FleetNearby
def test_fleet_nearby_hands_each_robot_the_others_with_ages_and_measured_speeds():
    from consensus.ros.nearby import FleetNearby

    cfg = _cfg()
    cores = [RobotCore(cfg, i) for i in range(3)]
    fn = FleetNearby(cores, cfg)
    first = fn.deliver(0.0)
    assert [first.robot(i).positions.shape for i in range(3)] == [(0, 2)] * 3     # nobody known yet
    for i, c in enumerate(cores):
        c.observe(1.0, [float(i), 0.0])
    fn.record()
    cores[1].observe(1.5, [1.0, 0.2])                                            # robot 1 moved 0.2 m in 0.5 s
    cores[2].observe(1.5, [2.0, 0.0])
    fn.record()
    fn.record()                                                                 # nothing new: no second sample
    got = [fn.deliver(1.6).robot(i) for i in range(3)]
    assert list(got[0].ids) == [1, 2] and list(got[1].ids) == [0, 2] and list(got[2].ids) == [0, 1]
    np.testing.assert_allclose(got[0].positions, [[1.0, 0.2], [2.0, 0.0]])
    np.testing.assert_allclose(got[0].ages, [0.1, 0.1])
    np.testing.assert_allclose(got[0].speeds, [0.4, 0.0])
    np.testing.assert_allclose(got[1].ages, [0.6, 0.1])                          # robot 0's pose is from t = 1.0
    # robot 0 stops sending: long after robot_timeout_s the others still hold its body where it was, ageing (a silent
    # robot is a body: the core widens its keep-out with the age)
    late = 1.0 + cfg.robot_timeout_s + 30.0
    batch = fn.deliver(late)
    later = [batch.robot(i) for i in range(3)]
    for i in (1, 2):
        k = list(later[i].ids).index(0)
        np.testing.assert_allclose(later[i].positions[k], [0.0, 0.0])
        assert later[i].ages[k] == pytest.approx(late - 1.0)


def test_fleet_nearby_caps_the_measured_speed_and_drops_links_like_the_relay():
    from consensus.ros.nearby import FleetNearby

    cfg = _cfg(link_drop_prob=0.5, num_robots=10)
    cores = [RobotCore(cfg, i) for i in range(10)]
    fn = FleetNearby(cores, cfg)
    for t in (0.0, 0.1):
        for i, c in enumerate(cores):
            c.observe(t, [float(i) + 10 * t, 0.0])                                 # 10 m/s: beyond any v_max
        fn.record()
    batch = fn.deliver(0.1)
    got = [batch.robot(i) for i in range(10)]
    assert max(float(n.speeds.max()) for n in got if len(n.speeds)) == pytest.approx(cfg.v_max)
    held = sum(len(n.ids) for n in got)
    assert 0 < held < 90 and fn.links.dropped > 0                                 # half of the 90 links lost


# ------------------------------------------------------------------------------------------------ the clock (ROS)
class ToPoint:
    """A planner that always answers ``point``."""

    dim = 2

    def __init__(self, point) -> None:
        self.point = np.asarray(point, dtype=float)

    def plan(self, req):
        from consensus.control.planner import PlanResult

        return PlanResult(meeting_point=self.point.copy(), reasoning="to the point")

    def reset(self) -> None:
        pass


def _robots(cfg, point=(1.0, 1.0)):
    """The fleet node and ``cfg.num_robots`` robots (planner: to ``point``) on their own nodes."""
    from rclpy.node import Node

    from consensus.ros.robot import RobotNode

    main = Node("fleet")
    nodes = [Node("agent", namespace=f"robot_{i}") for i in range(cfg.num_robots)]
    return main, nodes, [RobotNode(nodes[i], cfg, i, ToPoint(point), None) for i in range(cfg.num_robots)]


@pytest.mark.ros
def test_one_clock_steps_every_robot_and_a_failing_robot_fails_alone(ros):
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import Bool, String

    from consensus.ros.fleet import FleetClock
    from consensus.ros.robot import RobotNode
    from consensus import names
    from consensus.ros import qos

    cfg = _cfg()
    main = Node("fleet")
    nodes = [Node("agent", namespace=f"robot_{i}") for i in range(3)]
    robots = [RobotNode(nodes[i], cfg, i, ToPoint((3.0 * i, 2.0)), None) for i in range(3)]

    def broken(*_args):
        raise RuntimeError("bug in robot 2's tick")

    robots[2].prepare = broken
    clock = FleetClock(main, cfg, robots, nearby_in_process=True)
    assert not any(list(n.timers) for n in nodes)             # the robots have no timer: the clock ticks them
    assert all(r._nearby_sub is None for r in robots)
    assert all(r._estop_sub is None for r in robots)          # the process's one e-stop subscription serves all
    drv = Node("driver")
    odom = [drv.create_publisher(Odometry, f"/robot_{i}/odom", 10) for i in range(3)]
    estop = drv.create_publisher(Bool, cfg.estop_topic, qos.profile(names.ESTOP))
    cmds: dict[int, list] = {i: [] for i in range(3)}
    status: list[dict] = []
    for i in range(3):
        drv.create_subscription(Twist, f"/robot_{i}/cmd_vel", lambda m, i=i: cmds[i].append(m.linear.y), 50)
    drv.create_subscription(String, "/robot_0/planner/status", lambda m: status.append(json.loads(m.data)), 50)
    ex = SingleThreadedExecutor()
    for n in (main, *nodes, drv):
        ex.add_node(n)

    def publish_odom():
        for i, pub in enumerate(odom):
            msg = Odometry()
            msg.pose.pose.position.x, msg.pose.pose.orientation.w = 3.0 * i, 1.0
            pub.publish(msg)

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            publish_odom()
            ex.spin_once(timeout_sec=0.01)

    try:
        spin(1.5)
        assert clock.ticks >= 15
        assert len(cmds[0]) >= 10 and len(cmds[1]) >= 10            # every tick, from the one timer
        assert any(abs(v) > 1e-3 for v in cmds[0])                   # planned and moving (+y: linear.y)
        assert robots[2].health.errors_by_callback.get("robot_2.control", 0) >= 10
        assert robots[0].health.callback_errors == 0 == robots[1].health.callback_errors
        assert status and status[-1]["round"] >= 2                   # planning rounds from the clock
        assert robots[0].timing.as_dict()["published"] >= 10         # the publish delay is measured per robot
        # the robots heard each other through the process (FleetNearby), not a relay
        assert robots[0].core.counters["stale_stops"] == 0
        estop.publish(Bool(data=True))
        spin(0.5)
        n0 = len(cmds[0])
        spin(0.5)
        assert robots[0].core.estopped and len(cmds[0]) > n0 and all(v == 0.0 for v in cmds[0][n0:])
        assert all(r.core.estopped for r in robots)
    finally:
        for n in (main, *nodes, drv):
            n.destroy_node()


@pytest.mark.ros
def test_a_failing_fleet_step_is_counted_and_every_robot_steps_alone(ros):
    from consensus.ros.fleet import FleetClock

    cfg = _cfg(num_robots=2)
    main, nodes, robots = _robots(cfg)
    clock = FleetClock(main, cfg, robots, nearby_in_process=True, start=False)      # ticked here, one slot a call

    def broken(*_args):
        raise RuntimeError("bug in the batched step")

    clock.cores[0].step = broken
    try:
        for _ in range(3):
            clock.tick()
        assert clock.stats()["step_errors"] == 3
        assert all(r.timing.as_dict()["published"] == 3 for r in robots)     # each robot's own step, published
        assert all(r.health.callback_errors == 0 for r in robots)
    finally:
        for n in (main, *nodes):
            n.destroy_node()


@pytest.mark.ros
def test_a_fleet_larger_than_robots_per_step_is_stepped_in_groups_each_robot_once_a_period(ros):
    from consensus.ros.fleet import FleetClock

    cfg = _cfg(num_robots=5, robots_per_step=2, control_period_s=0.1)
    main, nodes, robots = _robots(cfg)
    clock = FleetClock(main, cfg, robots, nearby_in_process=True, start=False)
    try:
        assert clock.groups == [[0, 1], [2, 3], [4]]
        assert clock.interval == pytest.approx(cfg.control_period_s / 3)
        now = main.get_clock().now().nanoseconds * 1e-9
        for c in robots:
            c.core.observe(now, [float(c.id), 0.0])
        stepped = []
        for g in range(6):                   # two periods: each group once a period, in turn
            before = [r.timing.ticks for r in robots]
            clock.tick()
            stepped.append([i for i, r in enumerate(robots) if r.timing.ticks > before[i]])
        assert stepped == [[0, 1], [2, 3], [4]] * 2
        assert all(r.timing.ticks == 2 for r in robots)
        assert clock.stats()["groups"] == 3 and clock.stats()["step_errors"] == 0
        # the group's nearby sets are its rows: robot 4 (alone in its group) holds the other four
        assert sorted(clock._heard.robot(0).ids) == [0, 1, 2, 3]
        # a callback so late that the timer skipped a slot steps the skipped group too: no robot misses a tick
        # (the callbacks above had no timer: one slot each, slots 0 to 5. Now a timer's next calls:)
        t = main.get_clock().now().nanoseconds * 1e-9
        clock.tick(next_call=t)                           # slot 6 (group 0), the timer's next call at slot 7
        clock.tick(next_call=t + 2 * clock.interval)      # a late callback: rcl skipped slot 8; slots 7 and 8
        assert [r.timing.ticks for r in robots] == [3, 3, 3, 3, 3] and clock.stats()["skipped"] == 1
        clock.tick(next_call=t + 2 * clock.interval)      # a callback for a slot stepped already: nothing
        assert [r.timing.ticks for r in robots] == [3, 3, 3, 3, 3]
    finally:
        for n in (main, *nodes):
            n.destroy_node()


def test_groups_are_as_large_as_asked_but_at_most_one_per_min_slot_of_the_period():
    from consensus.ros.fleet import MIN_SLOT_S, slot_groups

    assert slot_groups(20, 10, 0.1) == [list(range(10)), list(range(10, 20))]
    assert slot_groups(7, 10, 0.1) == [list(range(7))]
    big = slot_groups(100, 10, 0.1)                  # 10 groups asked, 0.1 s / MIN_SLOT_S = 4 allowed
    assert len(big) == round(0.1 / MIN_SLOT_S) == 4 and [len(g) for g in big] == [25] * 4
    assert sum(big, []) == list(range(100))
    assert slot_groups(5, 1, 0.05) == [[0, 1, 2], [3, 4]]
    assert slot_groups(5, 1, 0.01) == [[0, 1, 2, 3, 4]]        # a period shorter than a slot: one group
    assert slot_groups(0, 10, 0.1) == [[]]


def test_endpoint_ready_waits_for_the_llm_server_s_models_route_and_gives_up_after_its_timeout():
    import http.server
    import logging
    import threading

    from consensus.ros.fleet import EndpointReady

    up = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):               # noqa: N802 - http.server's name
            ok = up.is_set() and self.path == "/v1/models"
            self.send_response(200 if ok else 503)
            self.end_headers()
            self.wfile.write(b'{"data": []}' if ok else b"loading")

        def log_message(self, *_args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log = logging.getLogger("test.ready")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        assert EndpointReady.local(url) and not EndpointReady.local("https://api.openai.com/v1")
        ready = EndpointReady(url, log, poll_s=0.05)
        time.sleep(0.3)
        assert not ready()                              # still loading (503)
        up.set()
        deadline = time.monotonic() + 5
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ready() and ready.answered
        # a planner's warm-up runs once the server answers, and the robots plan only after it (issue 44)
        warming, release = threading.Event(), threading.Event()

        def warm() -> bool:
            warming.set()
            return release.wait(5)

        warmed = EndpointReady(url, log, poll_s=0.05, warm=warm)
        assert warming.wait(5) and not warmed()         # the server answered; the warm-up still runs
        release.set()
        deadline = time.monotonic() + 5
        while not warmed() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert warmed()
        never = EndpointReady(f"http://127.0.0.1:{server.server_address[1]}/nothing", log, timeout_s=0.3,
                              poll_s=0.05)
        time.sleep(0.8)
        assert never() and not never.answered           # gave up: plan anyway (fallbacks are counted)
        # consensus run waits through the same poll, and gives up at once when the server process died
        import subprocess
        import sys

        from consensus.errors import ConsensusError
        from consensus.runs.ros_runner import _wait_llm_ready

        class Dead:
            popen = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
            popen.wait()

            def tail(self):
                return "model file missing"

        t0 = time.monotonic()
        with pytest.raises(ConsensusError, match=r"exited \(code 3\):\nmodel file missing"):
            _wait_llm_ready(f"http://127.0.0.1:{server.server_address[1]}/nothing", Dead(), timeout=30)
        assert time.monotonic() - t0 < 5
        with pytest.raises(ConsensusError, match="did not answer at .*/nothing/models within 0 s"):
            _wait_llm_ready(f"http://127.0.0.1:{server.server_address[1]}/nothing",
                            type("Alive", (), {"popen": type("P", (), {"poll": lambda self: None})()})(), timeout=0.2)
    finally:
        server.shutdown()


@pytest.mark.ros
def test_robots_do_not_plan_before_the_llm_server_is_ready_but_their_commands_go_out(ros):
    from consensus.ros.fleet import FleetClock

    cfg = _cfg(num_robots=2)
    main, nodes, robots = _robots(cfg)
    ready = [False]
    clock = FleetClock(main, cfg, robots, nearby_in_process=True, start=False, ready=lambda: ready[0])
    try:
        for _ in range(3 * clock.plan_every):
            now = main.get_clock().now().nanoseconds * 1e-9
            for r in robots:
                r.core.observe(now, [float(r.id), 0.0])
            clock.tick()
        assert all(r.core.meeting_point is None for r in robots)                   # no round started
        assert all(r.timing.as_dict()["published"] == 3 * clock.plan_every for r in robots)    # stops sent
        ready[0] = True
        for _ in range(clock.plan_every + 1):
            now = main.get_clock().now().nanoseconds * 1e-9
            for r in robots:
                r.core.observe(now, [float(r.id), 0.0])
            clock.tick()
        assert all(r.core.meeting_point is not None for r in robots)               # planning began
    finally:
        for n in (main, *nodes):
            n.destroy_node()
