"""``crazyflie_link``: one Crazyflie between its robot node and crazyswarm2 (its simulator or its hardware server).

Run one per drone, in the drone's namespace, which is its crazyswarm2 name::

    crazyflie_link --ros-args -r __ns:=/cf1 -p use_sim_time:=true

The decisions are ``consensus.robots.crazyflie.LinkCore``'s (phases WAIT -> TAKEOFF -> FLY -> LAND -> LANDED, the
leashed setpoint integrator, the timeouts that land a drone); this node decodes, calls it and carries out its actions.

* In: ``cmd_vel`` (geometry_msgs/Twist, body frame: what the robot publishes; subscribed best effort, which hears a
  reliable publisher and a ``cmd_vel_best_effort`` one alike, ``qos.COMMAND_SUB``); ``/tf`` (tf2_msgs/TFMessage:
  the transforms ``world_frame`` -> ``robot_name``; one with our child and another parent is a bad message,
  the other drones' are skipped); the fleet's e-stop (``control.estop_topic``, the robots' own parameter, so one
  params file gives both the same topic; std_msgs/Bool, latched).
* Out: ``link/pose`` (geometry_msgs/PoseStamped in ``world_frame``, stamped with the pose's own TF stamp; not
  ``pose``, which crazyswarm2's hardware server owns), published at the tick after each new pose, from the end of
  the take-off until the drone is down; ``link/status`` (std_msgs/String, JSON: phase, reason, counters, the
  node's health counts; latched; at every change and each second); ``cmd_full_state``
  (crazyflie_interfaces/FullState: the setpoint, orientation identity, ``twist.linear`` the world velocity, zero
  acceleration; reliable, as the servers subscribe); the node's ``health`` record each second.
* Services it calls (never waiting inside a callback: ``call_async``): ``takeoff``, ``notify_setpoints_stop``, then
  ``land`` once ``notify_setpoints_stop`` answered (crazyswarm2's hardware server serves each drone's services one
  at a time, in no promised order: a land taken before the notification would be ignored by the firmware while
  setpoints stream), or ``NOTIFY_WAIT_S`` after it was sent if no answer came. Never ``go_to`` (it kills
  crazyswarm2's simulator once setpoints have been streamed).

Times: a ``rate_hz`` timer on the node clock (sim time with ``use_sim_time``) calls ``LinkCore.tick``; poses and
commands are timed by the node clock when they come, not by their stamps: the timeouts compare them with the tick's
time, which is that clock, and the stamps of ``/tf`` are the server's clock (crazyswarm2's simulator's sim time; the
hardware server's wall clock, possibly another host's), which a link on another clock could not compare, and a
server that died leaves its last stamp, not a fresh one.

The end of the run (SIGINT/SIGTERM): the link lands its drone (``notify_setpoints_stop``, ``land``) and keeps
spinning until it is down (z below ``landed_z_m``) or ``land_s`` + 1 s of node time passed, then exits 0. It gives
up sooner when the node clock stands still for ``CLOCK_STALL_S`` (the simulator, which is the clock, is gone) and
at the latest after ``stop_wall_cap_s`` wall seconds.

crazyswarm2's message packages (crazyflie_interfaces, tf2_msgs) are imported when the node starts (``make drivers``).
"""
from __future__ import annotations

import json
import math
import re
import time
from types import SimpleNamespace

import rclpy
import rclpy.task
from rclpy.clock import Clock, ClockType
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node

from consensus import names
from consensus.control.controller import yaw_from_quaternion
from consensus.errors import ConfigError, ConsensusError
from consensus.robots.crazyflie import (
    FIELDS,
    LANDED,
    LANDED_AFTER_S,
    WAIT,
    Land,
    LinkCore,
    LinkParams,
    NotifySetpointsStop,
    PublishPose,
    Setpoint,
    StatusChange,
    Takeoff,
)
from consensus.ros import qos
from consensus.ros.health import HEALTH, Health, guarded, publish_health
from consensus.ros.inputs import sane
from consensus.ros.params import descriptor
from consensus.ros.process import (
    destroy_nodes,
    freeze_startup_objects,
    make_executor,
    on_stop,
    run_node,
    spin,
)

NOTIFY_WAIT_S = 0.5         # land without the notification's answer after this long (wall) [s]
CHORE_PERIOD_S = 0.1        # the steady-clock timer that sends a waiting land and the status [s]
STATUS_PERIOD_S = 1.0       # link/status at least this often [s]
STOP_MARGIN_S = 2.0         # the default stop_wall_cap_s: land_s + LANDED_AFTER_S + this [s]
CLOCK_STALL_S = 2.0         # landing at the end: the node clock standing still this long (wall) ends the wait [s]
ROBOT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INSTALL_HINT = ("crazyswarm2's message packages (crazyflie_interfaces, tf2_msgs) are not importable: `make drivers` "
                "(docs/real-robots.md)")


def _interfaces() -> SimpleNamespace:
    """The message and service classes of crazyswarm2 and TF, imported when a link starts (not at import)."""
    try:
        from crazyflie_interfaces.msg import FullState
        from crazyflie_interfaces.srv import Land as LandSrv
        from crazyflie_interfaces.srv import NotifySetpointsStop as NotifySrv
        from crazyflie_interfaces.srv import Takeoff as TakeoffSrv
        from tf2_msgs.msg import TFMessage
    except ImportError as exc:
        raise ConsensusError(f"{INSTALL_HINT} ({exc})") from None
    from geometry_msgs.msg import PoseStamped, Twist
    from std_msgs.msg import Bool, String
    return SimpleNamespace(FullState=FullState, LandSrv=LandSrv, NotifySrv=NotifySrv, TakeoffSrv=TakeoffSrv,
                           TFMessage=TFMessage, PoseStamped=PoseStamped, Twist=Twist, Bool=Bool, String=String)


def _declare(node: Node, name: str, default, doc: str, unit: str = "", bounds: tuple | None = None):
    """Declare one read-only parameter with its description and range; a bad value is one ConfigError line."""
    desc = descriptor(name, f"{doc} [{unit}]" if unit else doc, bounds, False, type(default))
    try:
        node.declare_parameter(name, default, desc)
    except (InvalidParameterValueException, InvalidParameterTypeException) as exc:
        raise ConfigError(f"node '{node.get_fully_qualified_name()}' parameters: {name}: "
                          f"{' '.join(str(exc).split())}") from None
    return node.get_parameter(name).value


def declare_link_parameters(node: Node) -> tuple[LinkParams, str, str, str, float]:
    """The link's parameters (declared, described, ranged): ``(LinkParams, robot_name, world_frame, estop_topic,
    stop_wall_cap_s)``."""
    robot = _declare(node, "robot_name", "",
                     "the drone's crazyswarm2 name = its TF child frame (empty: the last part of the namespace)")
    robot = robot.strip("/") or node.get_namespace().rstrip("/").rsplit("/", 1)[-1]
    if not ROBOT_NAME.fullmatch(robot):
        raise ConfigError(f"node '{node.get_fully_qualified_name()}': robot_name {robot!r} is not a crazyswarm2 name "
                          "(start the link in the drone's namespace, -r __ns:=/cf1, or set robot_name)")
    world = _declare(node, "world_frame", names.WORLD_FRAME,
                     "the TF parent frame of the drone's pose (crazyswarm2's reference_frame; the map's frame)")
    if not world.strip("/"):
        raise ConfigError(f"node '{node.get_fully_qualified_name()}': world_frame must not be empty")
    estop = _declare(node, "control.estop_topic", names.ESTOP.name,
                     "the fleet's e-stop (std_msgs/Bool, latched): true lands the drone for good; the robots' own "
                     "parameter, so one params file gives both the same topic")
    values = {name: _declare(node, name, float(getattr(LinkParams, name)), doc, unit, bounds)
              for name, (doc, unit, bounds) in FIELDS.items()}
    try:
        params = LinkParams(**values)
    except ConfigError as exc:
        raise ConfigError(f"node '{node.get_fully_qualified_name()}' parameters: {exc}") from None
    cap = _declare(node, "stop_wall_cap_s", params.land_s + LANDED_AFTER_S + STOP_MARGIN_S,
                   "at the end of the run, wait at most this long (wall clock) for the drone to land before exiting "
                   "(default: land_s + 1 s + 2 s)", "s", (1.0, 600.0))
    return params, robot, world.strip("/"), estop, float(cap)


class CrazyflieLink:
    """The node's part (module docstring): subscriptions, publishers, clients, the timers."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.m = m = _interfaces()
        self.params, self.robot, self.world, estop_topic, self.stop_wall_cap_s = declare_link_parameters(node)
        self.core = LinkCore(self.params)
        self.health = Health(parent=HEALTH, logger=node.get_logger())
        self.log = node.get_logger()
        self.clock = node.get_clock()
        self.landed = rclpy.task.Future()
        self.stopping = False
        self._ready_told = False
        self._notify_future = None
        self._notify_sent_at: float | None = None
        self._land: Land | None = None            # a land waiting for the notification's answer
        self._last_status = -math.inf
        node.create_subscription(m.Twist, names.CMD_VEL.name, guarded(self._on_cmd, "link.cmd_vel", self.health),
                                 qos.COMMAND_SUB)
        node.create_subscription(m.TFMessage, names.TF.name, guarded(self._on_tf, "link.tf", self.health),
                                 qos.STREAM)
        node.create_subscription(m.Bool, estop_topic, guarded(self._on_estop, "link.estop", self.health),
                                 qos.profile(names.ESTOP))
        self.pub_pose = node.create_publisher(m.PoseStamped, names.LINK_POSE, qos.profile(names.ODOM))
        self.pub_status = node.create_publisher(m.String, names.LINK_STATUS, qos.LATCHED)
        self.pub_setpoint = node.create_publisher(m.FullState, names.CF_CMD_FULL_STATE, qos.command(False))
        self.cli_takeoff = node.create_client(m.TakeoffSrv, names.CF_TAKEOFF)
        self.cli_land = node.create_client(m.LandSrv, names.CF_LAND)
        self.cli_notify = node.create_client(m.NotifySrv, names.CF_NOTIFY_SETPOINTS_STOP)
        node.create_timer(1.0 / self.params.rate_hz, guarded(self.tick, "link.tick", self.health))
        node.create_timer(CHORE_PERIOD_S, guarded(self._chores, "link.chores", self.health),
                          clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.publish_health = publish_health(node, self.health)
        self.log.info(f"link for '{self.robot}' (pose: TF {self.world} -> {self.robot}): waiting for "
                      f"{self.cli_takeoff.srv_name}; flight height {self.params.flight_height_m:g} m")
        self._publish_status()

    # ------------------------------------------------------------------------------------------------ callbacks
    def _now(self) -> float:
        return self.clock.now().nanoseconds * 1e-9

    def _on_cmd(self, msg) -> None:
        v = (msg.linear.x, msg.linear.y, msg.angular.z)
        if not sane(*v):
            self.health.count_bad_message("link.cmd_vel")     # the core counts it too (its status), and drops it
        self.core.command(self._now(), *v)                    # outside FLY: dropped and counted by the core

    def _on_tf(self, msg) -> None:
        t = None
        for tr in msg.transforms:
            if tr.child_frame_id.lstrip("/") != self.robot:
                continue                          # another drone's (crazyswarm2 sends every drone in one message)
            if tr.header.frame_id.lstrip("/") != self.world:
                self.health.count_bad_message("link.tf")      # our drone in another frame: a misconfiguration
                continue
            t = self._now() if t is None else t
            p, q = tr.transform.translation, tr.transform.rotation
            try:
                yaw = yaw_from_quaternion(q.x, q.y, q.z, q.w)
            except ValueError:                    # a zero or non-finite rotation: a bad pose, counted below
                yaw = math.nan
            pose = (p.x, p.y, p.z, yaw)
            if not sane(*pose):
                self.health.count_bad_message("link.tf")      # the core counts it too (its status), and drops it
            stamp = tr.header.stamp.sec + tr.header.stamp.nanosec * 1e-9
            if self.core.pose(t, *pose, stamp if stamp > 0 else None):
                for action in self.core.fresh_pose():          # to the robot at once, not at the next tick
                    self._do(action, t)

    def _on_estop(self, msg) -> None:
        self.core.estop(bool(msg.data), self._now())
        if msg.data and self.core.phase not in (WAIT, LANDED):
            self.tick()                           # land now, not at the next tick

    # ------------------------------------------------------------------------------------------------ the tick
    def tick(self) -> None:
        t = self._now()
        if not self._ready_told and self.cli_takeoff.service_is_ready():
            self._ready_told = True
            self.core.servers_ready(t)
        for action in self.core.tick(t):
            self._do(action, t)

    def _do(self, a, t: float) -> None:
        m = self.m
        if isinstance(a, Setpoint):
            msg = m.FullState()
            msg.header.stamp = self.clock.now().to_msg()
            msg.header.frame_id = self.world
            msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = a.pos
            msg.pose.orientation.w = 1.0
            msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = a.vel
            self.pub_setpoint.publish(msg)
        elif isinstance(a, PublishPose):
            msg = m.PoseStamped()
            stamp = a.stamp if a.stamp is not None else t
            sec = math.floor(stamp)
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(sec), min(int((stamp - sec) * 1e9), 999_999_999)
            msg.header.frame_id = self.world
            msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = a.x, a.y, a.z
            msg.pose.orientation.z, msg.pose.orientation.w = math.sin(a.yaw / 2), math.cos(a.yaw / 2)
            self.pub_pose.publish(msg)
        elif isinstance(a, Takeoff):
            req = m.TakeoffSrv.Request(height=float(a.height_m), duration=_duration(a.duration_s))
            self.cli_takeoff.call_async(req)
            self.log.info(f"takeoff(height={a.height_m:g} m, duration={a.duration_s:g} s)")
        elif isinstance(a, NotifySetpointsStop):
            if self.cli_notify.service_is_ready():
                self._notify_future = self.cli_notify.call_async(
                    m.NotifySrv.Request(remain_valid_millisecs=int(a.remain_valid_ms)))
                self._notify_sent_at = time.monotonic()
            else:
                self.log.warning(f"{self.cli_notify.srv_name} is not there: landing without it")
        elif isinstance(a, Land):
            self._land = a
            self._send_land_when_notified()
        elif isinstance(a, StatusChange):
            self.log.info(f"{a.phase}: {a.reason}")
            self._publish_status()
            if a.phase == LANDED and not self.landed.done():
                self.landed.set_result(True)

    def _send_land_when_notified(self, force: bool = False) -> None:
        """Send the waiting land once ``notify_setpoints_stop`` answered, or ``NOTIFY_WAIT_S`` after it went out, or
        at once if it could not be sent (or ``force``: the process is about to exit)."""
        if self._land is None:
            return
        waiting = self._notify_future is not None and not self._notify_future.done()
        if waiting and time.monotonic() - self._notify_sent_at < NOTIFY_WAIT_S and not force:
            return
        if waiting:
            self.log.warning(f"{self.cli_notify.srv_name} did not answer within {NOTIFY_WAIT_S:g} s: landing anyway")
        a, self._land = self._land, None
        if not self.cli_land.service_is_ready():
            self.log.error(f"{self.cli_land.srv_name} is not there: the land request may be lost")
        self.cli_land.call_async(self.m.LandSrv.Request(height=float(a.height_m), duration=_duration(a.duration_s)))
        self.log.info(f"land(height={a.height_m:g} m, duration={a.duration_s:g} s)")

    def _chores(self) -> None:
        """Steady clock (works while the sim clock stands still): a waiting land, the periodic status."""
        self._send_land_when_notified()
        if time.monotonic() - self._last_status >= STATUS_PERIOD_S:
            self._publish_status()

    def status(self) -> dict:
        return {"node": self.node.get_fully_qualified_name(), "robot": self.robot, "t": self._now(),
                **self.core.status(), **self.health.counts(),
                "bad_by_input": self.health.record(self.node)["bad_by_input"]}

    def _publish_status(self) -> None:
        self._last_status = time.monotonic()
        self.pub_status.publish(self.m.String(data=json.dumps(self.status())))

    # ------------------------------------------------------------------------------------------------ the end
    def begin_shutdown(self) -> None:
        """The end of the run (a stop signal): land now (``on_stop``: runs outside any callback)."""
        if self.stopping:
            return
        self.stopping = True
        self.core.shutdown(self._now())
        self.tick()

    def land_and_wait(self, executor) -> None:
        """Spin until the drone is LANDED, the node clock stands still for ``CLOCK_STALL_S`` or
        ``stop_wall_cap_s`` passed."""
        start = time.monotonic()
        seen, seen_at = self._now(), start
        while rclpy.ok() and not self.landed.done():
            now = time.monotonic()
            if now - start > self.stop_wall_cap_s:
                self.log.warning(f"not landed after {self.stop_wall_cap_s:g} s (phase {self.core.phase}): exiting")
                break
            executor.spin_until_future_complete(self.landed, timeout_sec=CHORE_PERIOD_S)
            t = self._now()
            if t != seen:
                seen, seen_at = t, time.monotonic()
            elif time.monotonic() - seen_at > CLOCK_STALL_S:
                self.log.warning(f"the node clock stood still for {CLOCK_STALL_S:g} s (is the simulator gone?): "
                                 f"exiting in phase {self.core.phase}")
                break
        self._send_land_when_notified(force=True)

    def finish(self) -> None:
        self._publish_status()
        self.publish_health()


def _duration(seconds: float):
    from builtin_interfaces.msg import Duration

    sec = math.floor(seconds)
    return Duration(sec=int(sec), nanosec=min(int(round((seconds - sec) * 1e9)), 999_999_999))


def main() -> int:
    def body(_args: list[str]) -> None:
        node = Node(names.LINK_NODE)
        link = CrazyflieLink(node)
        on_stop(link.begin_shutdown)
        freeze_startup_objects()
        executor = make_executor("events")
        executor.add_node(node)
        try:
            spin(executor)                      # until a stop signal (then begin_shutdown ran) or rclpy shuts down
            if link.stopping:
                link.land_and_wait(executor)
        finally:
            link.finish()
            destroy_nodes(executor, [node])

    return run_node(body, names.LINK_NODE)


if __name__ == "__main__":
    raise SystemExit(main())
