"""Strangers and faults for the deployed-layout safety tests (tests/ros/test_deployed_safety.py), run beside a ROS run
of one process per robot: ``python tests/support/strangers.py --events FILE SPEC [SPEC ...]`` with SPECs of the form
``kind:key=value,key=value`` (a number, a pair ``x;y`` or a name). They use rclpy and standard messages only (no
``consensus`` import: the same script runs against any version of the package), and they know the true positions
only from the simulator's ``/ground_truth``, as a stranger on the network could.

Kinds (``robot`` = k is the robot whose topics are attacked):

* ``first_state``: ``/robot_k/state`` at ``at`` (default (-8, 8)), ``hz`` (2) times a second, from the start: it is on
  the wire before robot k's own first state.
* ``creep``: once robot k's body drives (it moved ``moving`` m, 0.3), ``/robot_k/state`` at its true position plus an
  offset growing at ``speed`` m/s (5) away from the other robots' centre, ``hz`` (90) times a second, beside the real
  states, kept ``margin`` (0.5 m) inside the ``workspace``.
* ``replay``: ``/robot_k/state`` at robot k's true position of ``delay`` s ago (3), stamped then, ``hz`` (90).
* ``target``: ``/robot_k/target`` at ``at`` (default (9, 9)), ``hz`` (10), for ``for`` s (30) from when the fleet
  drives (a body moved ``moving`` m, 0.1: the robots have planned).
* ``forge_odom``: once robot k drives and the publisher has matched robot k's subscription, ``/robot_k/odom``
  (nav_msgs/Odometry, frame ``world``) at its true position plus ``(speed * t, 0)`` (``speed`` 2 m/s, t since the
  forgery began), ``hz`` (50), for ``for`` s (20), beside the simulator's own odometry.
* ``relocate``: a localisation fault, for a robot whose robots-file entry reads its pose from ``/robot_k/<topic>``
  (``topic``: the suffix, default ``odom_fault``): the simulator's ``/robot_k/odom`` is republished there displaced by
  ``offset`` (x;y); once the body has moved ``moving`` m (1.0) the displacement is removed at once (the estimate jumps
  back to the truth, as after a re-localisation).
* ``kill``: robots' processes of the run whose directory is ``out`` are killed with
  SIGKILL: ``first`` as soon as its process exists (before its first state), ``moving`` once its body drives
  (``speed`` 0.5 m/s after it moved 1 m), ``packed`` once every living body has stood still (moved less than
  ``still`` m, 0.03, in ``still_s`` s, 2) at least ``after`` s (5) after the ``moving`` kill (or ``give_up`` s, 30,
  after it: then ``packed`` is recorded false).

Every event (each stranger's start and end, each kill with its wall time) is appended to ``--events`` as one JSON
line, which the test reads. Stopped by SIGINT/SIGTERM/SIGKILL from the test.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from collections import deque


def parse_spec(text: str) -> tuple[str, dict]:
    kind, _, rest = text.partition(":")
    opts: dict = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        try:
            opts[key] = tuple(float(v) for v in value.split(";")) if ";" in value else float(value)
        except ValueError:
            opts[key] = value                      # a name (a topic suffix, the run's directory)
    return kind, opts


class Events:
    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, event: str, **fields) -> None:
        with open(self.path, "a") as fh:
            fh.write(json.dumps({"event": event, "wall": time.time(), **fields}) + "\n")


class Truth:
    """The newest ``/ground_truth`` and a short history of it (wall time, (n, 2) positions, yaws)."""

    def __init__(self, node, keep_s: float = 5.0) -> None:
        from geometry_msgs.msg import PoseArray
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        self.history: deque = deque()
        self.first: list | None = None
        self.keep_s = keep_s
        node.create_subscription(PoseArray, "/ground_truth", self._in,
                                 QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))

    def _in(self, msg) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        xy = [(p.position.x, p.position.y) for p in msg.poses]
        yaw = [2.0 * math.atan2(p.orientation.z, p.orientation.w) for p in msg.poses]
        if self.first is None:
            self.first = xy
        self.history.append((stamp, xy, yaw))
        while self.history and self.history[0][0] < stamp - self.keep_s:
            self.history.popleft()

    @property
    def now(self):
        return self.history[-1] if self.history else None

    def moved(self, k: int | None = None) -> float:
        """How far robot ``k``'s body (any robot's: the farthest, when None) is from where it was first seen."""
        if self.first is None or not self.history:
            return 0.0
        now = self.history[-1][1]
        robots = range(len(now)) if k is None else (k,)
        return max(math.dist(now[i], self.first[i]) for i in robots)

    def speed(self, k: int, span: float = 0.3) -> float:
        if len(self.history) < 2:
            return 0.0
        t1, xy1, _ = self.history[-1]
        for t0, xy0, _ in reversed(self.history):
            if t1 - t0 >= span:
                return math.dist(xy1[k], xy0[k]) / (t1 - t0)
        return 0.0

    def still(self, robots, span: float, tol: float) -> bool:
        """Whether every robot of ``robots`` moved less than ``tol`` over the last ``span`` seconds."""
        if not self.history or self.history[-1][0] - self.history[0][0] < span:
            return False
        t1, xy1, _ = self.history[-1]
        old = next(xy for t, xy, _ in self.history if t >= t1 - span)
        return all(math.dist(xy1[k], old[k]) < tol for k in robots)

    def at(self, t: float):
        """The newest sample at or before ``t`` (None if the history does not reach back that far)."""
        best = None
        for sample in self.history:
            if sample[0] <= t:
                best = sample
            else:
                break
        return best


def _stamp(msg, t: float) -> None:
    msg.header.stamp.sec = int(t)
    msg.header.stamp.nanosec = int(round((t - int(t)) * 1e9)) % 1_000_000_000


def _point(x: float, y: float, t: float):
    from geometry_msgs.msg import PointStamped

    msg = PointStamped()
    msg.header.frame_id = "world"
    _stamp(msg, t)
    msg.point.x, msg.point.y = float(x), float(y)
    return msg


def _publisher(node, type_, topic: str):
    from rclpy.qos import QoSProfile

    return node.create_publisher(type_, topic, QoSProfile(depth=10))     # reliable: matches every subscriber


def _reaches(node, pub, topic: str, namespace: str) -> bool:
    """Does ``pub`` reach the robot node in ``namespace`` (``/robot_k``)? Its subscription on ``topic`` is in the ROS
    graph and the publisher has matched every subscriber the graph shows (on a loaded machine discovery can take
    seconds: a forgery timed from its first message must start once it is delivered)."""
    subs = node.get_subscriptions_info_by_topic(topic)
    return (any(i.node_namespace == namespace and i.node_name == "agent" for i in subs)
            and pub.get_subscription_count() >= len(subs))


def first_state(node, truth, events, robot: float = 0, at=(-8.0, 8.0), hz: float = 2.0):
    from geometry_msgs.msg import PointStamped

    k = int(robot)
    pub = _publisher(node, PointStamped, f"/robot_{k}/state")
    events("first_state", robot=k, at=list(at))
    node.create_timer(1.0 / hz, lambda: pub.publish(_point(*at, time.time())))


def creep(node, truth, events, robot: float = 0, speed: float = 5.0, hz: float = 90.0, moving: float = 0.3,
          workspace=(-10.0, 10.0, -10.0, 10.0), margin: float = 0.5):
    from geometry_msgs.msg import PointStamped

    k = int(robot)
    pub = _publisher(node, PointStamped, f"/robot_{k}/state")
    lo = (workspace[0] + margin, workspace[2] + margin)
    hi = (workspace[1] - margin, workspace[3] - margin)
    state = {"t0": None, "dir": None}

    def tick():
        now = truth.now
        if now is None:
            return
        xy = now[1]
        if state["t0"] is None:
            if truth.moved(k) < moving or truth.speed(k) < 0.3:      # once it drives
                return
            others = [p for i, p in enumerate(xy) if i != k]
            cx, cy = sum(p[0] for p in others) / len(others), sum(p[1] for p in others) / len(others)
            dx, dy = xy[k][0] - cx, xy[k][1] - cy
            norm = math.hypot(dx, dy) or 1.0
            state["t0"], state["dir"] = time.time(), (dx / norm, dy / norm)
            events("creep", robot=k, speed=speed, dir=list(state["dir"]))
        off = speed * (time.time() - state["t0"])
        x = min(max(xy[k][0] + off * state["dir"][0], lo[0]), hi[0])
        y = min(max(xy[k][1] + off * state["dir"][1], lo[1]), hi[1])
        pub.publish(_point(x, y, time.time()))

    node.create_timer(1.0 / hz, tick)


def replay(node, truth, events, robot: float = 0, delay: float = 3.0, hz: float = 90.0):
    from geometry_msgs.msg import PointStamped

    k = int(robot)
    pub = _publisher(node, PointStamped, f"/robot_{k}/state")
    state = {"started": False}

    def tick():
        now = truth.now
        if now is None:
            return
        old = truth.at(now[0] - delay)
        if old is None:
            return
        if not state["started"]:
            state["started"] = True
            events("replay", robot=k, delay=delay)
        pub.publish(_point(*old[1][k], old[0]))

    node.create_timer(1.0 / hz, tick)


def target(node, truth, events, robot: float = 0, at=(9.0, 9.0), hz: float = 10.0, moving: float = 0.1, **kw):
    from geometry_msgs.msg import PointStamped

    k = int(robot)
    duration = kw.get("for", 30.0)
    pub = _publisher(node, PointStamped, f"/robot_{k}/target")
    state = {"t0": None, "done": False}

    def tick():
        if state["done"] or truth.now is None:
            return
        if state["t0"] is None:
            if truth.moved() < moving:
                return
            state["t0"] = time.time()
            events("target", robot=k, at=list(at), duration=duration)
        if time.time() - state["t0"] > duration:
            state["done"] = True
            events("target_end", robot=k)
            return
        pub.publish(_point(*at, time.time()))

    node.create_timer(1.0 / hz, tick)


def forge_odom(node, truth, events, robot: float = 0, speed: float = 2.0, hz: float = 50.0, moving: float = 0.3,
               **kw):
    from nav_msgs.msg import Odometry

    k = int(robot)
    duration = kw.get("for", 20.0)
    pub = _publisher(node, Odometry, f"/robot_{k}/odom")
    state = {"t0": None, "done": False}

    def tick():
        now = truth.now
        if state["done"] or now is None:
            return
        if state["t0"] is None:
            if truth.moved(k) < moving or truth.speed(k) < 0.3:      # once it drives
                return
            if not _reaches(node, pub, f"/robot_{k}/odom", f"/robot_{k}"):   # and the forgery reaches it
                return
            state["t0"] = time.time()
            events("forge_odom", robot=k, speed=speed, duration=duration, true_speed=truth.speed(k),
                   at=list(now[1][k]))
        elapsed = time.time() - state["t0"]
        if elapsed > duration:
            state["done"] = True
            events("forge_odom_end", robot=k)
            return
        msg = Odometry()
        msg.header.frame_id = "world"
        msg.child_frame_id = f"robot_{k}/base_link"
        _stamp(msg, time.time())
        msg.pose.pose.position.x = now[1][k][0] + speed * elapsed
        msg.pose.pose.position.y = now[1][k][1]
        msg.pose.pose.orientation.z = math.sin(now[2][k] / 2)
        msg.pose.pose.orientation.w = math.cos(now[2][k] / 2)
        pub.publish(msg)

    node.create_timer(1.0 / hz, tick)


def relocate(node, truth, events, robot: float = 0, offset=(1.5, 0.0), moving: float = 1.0, topic: str = "odom_fault"):
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    k = int(robot)
    pub = node.create_publisher(Odometry, f"/robot_{k}/{topic}", QoSProfile(depth=5,
                                                                            reliability=ReliabilityPolicy.BEST_EFFORT))
    state = {"fixed": False}

    def odom_in(msg):
        if not state["fixed"] and truth.moved(k) >= moving and truth.speed(k) >= 0.5:     # while it drives
            state["fixed"] = True
            events("relocated", robot=k, offset=list(offset), true_speed=truth.speed(k), at=list(truth.now[1][k]))
        if not state["fixed"]:
            msg.pose.pose.position.x += offset[0]
            msg.pose.pose.position.y += offset[1]
        pub.publish(msg)

    node.create_subscription(Odometry, f"/robot_{k}/odom", odom_in,
                             QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT))
    events("relocate", robot=k, offset=list(offset), topic=f"/robot_{k}/{topic}")


#: pid -> when it was first seen: a process's command line is read again only in its first second (fork, then exec),
#: so that polling /proc every 10 ms for a robot's process costs next to nothing
_SEEN: dict[int, float] = {}


def _robot_pids(out: str, robot: int, *, young_only: bool = False) -> list[int]:
    """The processes of robot ``robot`` of the run in ``out`` (their command line names both); ``young_only``: only
    those first seen less than a second ago."""
    pids = []
    now = time.monotonic()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        if young_only and now - _SEEN.setdefault(int(entry), now) > 1.0:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                args = fh.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if f"__ns:=/robot_{robot}" in args and any(out in a for a in args):
            pids.append(int(entry))
    return pids


def kill(node, truth, events, out: str = "", first: float = -1, moving: float = -1, packed: float = -1,
         speed: float = 0.5, still: float = 0.03, still_s: float = 2.0, after: float = 5.0, give_up: float = 30.0):
    from geometry_msgs.msg import PointStamped
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    first, moving, packed = int(first), int(moving), int(packed)
    t_start = time.time()
    dead: dict[int, float] = {}
    states: dict[int, int] = {}

    def heard(k):
        def cb(_msg):
            states[k] = states.get(k, 0) + 1
        return cb

    if first >= 0:
        node.create_subscription(PointStamped, f"/robot_{first}/state", heard(first),
                                 QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))

    def shoot(k: int, stage: str, young_only: bool = False, **fields) -> bool:
        pids = _robot_pids(out, k, young_only=young_only)
        if not pids:
            return False
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        dead[k] = time.time()
        events("killed", robot=k, stage=stage, pids=pids, states_heard=states.get(k, 0),
               true_speed=truth.speed(k) if truth.now else None,
               at=list(truth.now[1][k]) if truth.now else None, **fields)
        return True

    def tick():
        if first >= 0 and first not in dead:
            shoot(first, "first", young_only=True)
        if truth.now is None:
            return
        n = len(truth.now[1])
        if moving >= 0 and moving not in dead and truth.moved(moving) >= 1.0 and truth.speed(moving) >= speed:
            shoot(moving, "moving")
        if packed >= 0 and packed not in dead and (moving < 0 or moving in dead):
            since = dead.get(moving, t_start)
            living = [i for i in range(n) if i not in dead]
            if time.time() - since >= after and truth.still(living, still_s, still):
                shoot(packed, "packed", packed=True)
            elif time.time() - since > give_up:
                shoot(packed, "packed", packed=False)

    node.create_timer(0.01, tick)


KINDS = {"first_state": first_state, "creep": creep, "replay": replay, "target": target, "forge_odom": forge_odom,
         "relocate": relocate, "kill": kill}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", required=True, help="JSON-lines file of what the strangers did")
    ap.add_argument("specs", nargs="+", help="kind:key=value,...")
    args = ap.parse_args(argv)
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    events = Events(args.events)
    rclpy.init()
    node = rclpy.create_node("stranger")
    truth = Truth(node)
    for spec in args.specs:
        kind, opts = parse_spec(spec)
        KINDS[kind](node, truth, events, **opts)
    events("ready")
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("now", True))
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__("now", True))
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    while not stop["now"] and rclpy.ok():
        executor.spin_once(timeout_sec=0.1)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
