"""``turtlesim_bridge``: turtlesim as the robots' simulator (``sim: turtlesim``; docs/turtlesim.md).

At start it waits for turtlesim's ``/spawn`` (``SPAWN_WAIT_S``), then puts robot ``i`` on ``turtle<i+1>`` at its
initial position (``consensus.control.kinematics.initial_positions``, mapped into the window by
``consensus.sims.turtlesim.core.WindowMap``; yaw 0): ``turtle1`` is turtlesim's own, the others are spawned (a turtle
of that name that already exists is reused). Each is moved with its pen up (``teleport_absolute``), then gets its
robot's pen (``set_pen``). Then, like the built-in ``sim``:

* ``/turtle<i+1>/pose`` (turtlesim/msg/Pose) -> ``/robot_<i>/odom`` (nav_msgs/Odometry, frame ``world``, workspace
  coordinates, ``consensus.sims.turtlesim.core.odom_from_pose``), published at ``sim_rate_hz`` when a new pose came in
  (turtlesim publishes ~62 Hz); a robot whose turtle stops publishing gets no odometry (its own stale-odometry
  rule stops it);
* ``/robot_<i>/cmd_vel`` (geometry_msgs/Twist, body frame) -> ``/turtle<i+1>/cmd_vel`` in turtle units, forwarded
  as it arrives; a turtle whose robot has been silent for ``CMD_HOLD_S`` gets one zero command (turtlesim's own
  timeout, 1 s, is the backstop when the bridge is gone); nothing re-sends an old command;
* ``/clock`` from the wall clock when ``publish_clock`` is true.

turtlesim's message types are imported here only, i.e. only when a run uses this simulator. A non-finite or absurd
pose or command is dropped and counted (``bad_messages``), as is every callback exception (``callback_errors``);
the health record goes out on ``/health`` every second.
"""
from __future__ import annotations

import math
import time

from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from turtlesim.msg import Pose
from turtlesim.srv import SetPen, Spawn, TeleportAbsolute

import rclpy

from consensus.control.kinematics import initial_positions
from consensus.errors import ConsensusError
from consensus.ros import qos
from consensus.ros.health import HEALTH, Health, guarded, publish_health
from consensus.ros.inputs import sane
from consensus.ros.params import declare_config
from consensus.ros.process import node_main
from consensus.settings import RobotBaseConfig
from consensus.sims.turtlesim.core import CommandHold, WindowMap, odom_from_pose, pen, turtle_name
from consensus import names

SPAWN_WAIT_S = 30.0       # turtlesim's window may take a while to come up on a busy machine
CALL_TIMEOUT_S = 10.0
CHECK_HZ = 10.0           # how often silent robots are looked for


#: the fields the bridge reads (its parameters: ``declare_config(uses=...)``)
USES = ("num_robots", "dim", "workspace", "seed", "executor", "sim_rate_hz", "publish_clock", "init_radius",
        "initial_positions")


class TurtlesimBridge:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.cfg = cfg = declare_config(node, RobotBaseConfig, uses=USES)
        self.health = Health(parent=HEALTH, logger=node.get_logger())
        self.map = WindowMap.for_workspace(cfg.workspace)
        n = cfg.num_robots
        self.pose: list[tuple | None] = [None] * n          # latest turtle pose, workspace coordinates
        self.fresh = [False] * n
        self.hold = CommandHold(n)
        self.t0 = time.monotonic()
        self.odom_pubs, self.turtle_pubs = [], []
        for i in range(n):
            turtle = turtle_name(i)
            node.create_subscription(Pose, names.turtle_name(turtle, names.TURTLE_POSE),
                                     guarded(self._on_pose(i), "bridge.pose", self.health),
                                     qos.STREAM)
            node.create_subscription(Twist, names.CMD_VEL.of(i),
                                     guarded(self._on_cmd(i), "bridge.cmd_vel", self.health), qos.COMMAND_SUB)
            self.odom_pubs.append(node.create_publisher(Odometry, names.ODOM.of(i), qos.profile(names.ODOM)))
            self.turtle_pubs.append(node.create_publisher(Twist, names.turtle_name(turtle, names.TURTLE_CMD_VEL),
                                                          qos.command(False)))
        self.clock_pub = (node.create_publisher(Clock, names.CLOCK.name, qos.profile(names.CLOCK)) if cfg.publish_clock
                          else None)

    # ------------------------------------------------------------------ set-up (before spinning)
    def _call(self, client, request, what: str):
        future = client.call_async(request)
        rclpy.spin_until_future_complete(self.node, future, timeout_sec=CALL_TIMEOUT_S)
        if not future.done() or future.result() is None:
            raise ConsensusError(f"turtlesim did not answer {what} within {CALL_TIMEOUT_S:.0f} s")
        return future.result()

    def place_turtles(self) -> None:
        """Spawn (or reuse) one turtle per robot at its mapped initial position, each with its robot's pen."""
        spawn = self.node.create_client(Spawn, names.TURTLESIM_SPAWN)
        if not spawn.wait_for_service(timeout_sec=SPAWN_WAIT_S):
            raise ConsensusError(f"turtlesim's /spawn did not appear within {SPAWN_WAIT_S:.0f} s "
                                 "(is turtlesim_node running, with a display?)")
        for i, (x, y) in enumerate(initial_positions(self.cfg)):
            turtle = turtle_name(i)
            tx, ty = self.map.to_turtle(float(x), float(y))
            if i > 0:
                got = self._call(spawn, Spawn.Request(x=tx, y=ty, theta=0.0, name=turtle), f"/spawn {turtle}")
                if got.name != turtle:
                    self.node.get_logger().info(f"{turtle} exists already: reusing it")
            set_pen = self.node.create_client(SetPen, names.turtle_name(turtle, names.TURTLE_SET_PEN))
            teleport = self.node.create_client(TeleportAbsolute, names.turtle_name(turtle, names.TURTLE_TELEPORT))
            for client in (set_pen, teleport):
                if not client.wait_for_service(timeout_sec=CALL_TIMEOUT_S):
                    raise ConsensusError(f"turtlesim offers no {client.srv_name}")
            self._call(set_pen, SetPen.Request(off=1), f"{turtle}/set_pen")          # move without drawing
            self._call(teleport, TeleportAbsolute.Request(x=tx, y=ty, theta=0.0), f"{turtle}/teleport_absolute")
            r, g, b, width = pen(i)
            self._call(set_pen, SetPen.Request(r=r, g=g, b=b, width=width, off=0), f"{turtle}/set_pen")
        self.node.get_logger().info(f"{self.cfg.num_robots} turtles placed (1 workspace m = "
                                    f"{self.map.scale:.3f} turtle m)")

    def start(self) -> None:
        self.node.create_timer(1.0 / self.cfg.sim_rate_hz, guarded(self.publish_odom, "bridge.odom", self.health))
        self.node.create_timer(1.0 / CHECK_HZ, guarded(self.stop_silent, "bridge.stop", self.health))
        self.publish_health = publish_health(self.node, self.health)

    # ------------------------------------------------------------------ callbacks
    def _on_pose(self, i: int):
        def cb(msg: Pose) -> None:
            try:
                odom = odom_from_pose(self.map, msg.x, msg.y, msg.theta, msg.linear_velocity, msg.angular_velocity)
            except ValueError:
                odom = None
            if odom is None or not sane(*odom):
                self.health.count_bad_message("bridge.pose")
                return
            self.pose[i] = odom
            self.fresh[i] = True
        return cb

    def _on_cmd(self, i: int):
        def cb(msg: Twist) -> None:
            vals = (msg.linear.x, msg.linear.y, msg.angular.z)
            if not sane(*vals):
                self.health.count_bad_message("bridge.cmd_vel")
                return                       # ignored: the turtle keeps its last valid command until it times out
            cmd = self.map.cmd_to_turtle(*vals)
            self._send(i, *cmd)
            self.hold.sent(i, cmd, time.monotonic())
        return cb

    def _send(self, i: int, vx: float, vy: float, wz: float) -> None:
        out = Twist()
        out.linear.x, out.linear.y, out.angular.z = float(vx), float(vy), float(wz)
        self.turtle_pubs[i].publish(out)

    def stop_silent(self) -> None:
        for i in self.hold.due(time.monotonic()):
            self._send(i, 0.0, 0.0, 0.0)

    def publish_odom(self) -> None:
        if self.clock_pub is not None:
            sim_ns = int((time.monotonic() - self.t0) * 1e9)
            clock = Clock()
            clock.clock.sec, clock.clock.nanosec = divmod(sim_ns, 1_000_000_000)
            self.clock_pub.publish(clock)
            stamp = clock.clock
        else:
            stamp = self.node.get_clock().now().to_msg()
        for i, pub in enumerate(self.odom_pubs):
            if not self.fresh[i]:
                continue
            self.fresh[i] = False
            x, y, yaw, v, w = self.pose[i]
            msg = Odometry()
            msg.header.stamp = stamp
            msg.header.frame_id = names.WORLD_FRAME
            msg.child_frame_id = names.base_link(i)
            msg.pose.pose.position.x, msg.pose.pose.position.y = x, y
            msg.pose.pose.orientation.z, msg.pose.pose.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
            msg.twist.twist.linear.x, msg.twist.twist.angular.z = v, w
            pub.publish(msg)


def _bridge(node: Node) -> "TurtlesimBridge":
    # like the built-in sim, the bridge is the source of /clock: it never waits for sim time itself
    node.set_parameters([Parameter("use_sim_time", value=False)])
    bridge = TurtlesimBridge(node)
    bridge.place_turtles()
    bridge.start()
    return bridge


def main() -> int:
    return node_main("turtlesim_bridge", _bridge)
