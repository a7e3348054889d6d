"""``sim``: a kinematic simulator of N robots (single integrator, unicycle, or paper 1's point mass).

Subscribes ``/robot_<i>/cmd_vel`` (geometry_msgs/Twist), publishes ``/robot_<i>/odom`` (nav_msgs/Odometry, frame
``world``) at ``sim_rate_hz`` from one timer, after them ``ground_truth`` (geometry_msgs/PoseArray, frame ``world``,
the same stamp: every robot's true pose, robot i the i-th; ``names.GROUND_TRUTH``, what the recorder records), and
``/clock`` when ``publish_clock`` is true (then start the other nodes with ``use_sim_time:=true``). A robot whose
last command is older than 0.5 s stops (like turtlesim). Initial positions come from ``initial_positions`` or are
drawn with ``seed`` exactly as in the headless runner.
The simulator always runs on the wall clock: it is the source of sim time, not a consumer.
The bodies move in a ``consensus.control.dynamics.world.KinematicWorld`` (each kinematics' ``Dynamics``: the same world
the headless loops move them in). With ``kinematics: point_mass_pid`` each robot is paper 1's 15 kg point mass
(``consensus.control.kinematics.PointMassPID``): its command is a world-frame velocity set-point, which the PID force
of the paper's code reaches at the mass's force limit (``PointMassPID.target_for_velocity``).

A command with a non-finite or absurd (``|v| > MAX_ABS_VALUE``) velocity, or undecodable, is ignored (the robot keeps
its last valid command) and counted (``bad_messages``), as is every exception of a callback (``callback_errors``); the
node's health record goes out on ``/health`` every second (``consensus.ros.health.publish_health``).
"""
from __future__ import annotations

import math
import time

import numpy as np
from geometry_msgs.msg import PoseArray, Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock

from consensus.control.dynamics import dynamics_of
from consensus.ros import qos
from consensus.ros.cdr import CdrTemplate, pose_array_bytes, twist_values
from consensus.settings import RobotBaseConfig
from consensus.ros.health import HEALTH, Health, guarded, publish_health
from consensus.ros.inputs import decode_or_count, sane
from consensus.ros.params import declare_config
from consensus.ros.process import node_main
from consensus.control.kinematics import initial_positions
from consensus import names

CMD_TIMEOUT_S = 0.5


#: the fields the simulator reads (its parameters: ``declare_config(uses=...)``)
USES = ("num_robots", "dim", "workspace", "seed", "executor", "kinematics", "kp", "sim_rate_hz", "publish_clock",
        "init_radius", "initial_positions", "robots_file")


class Simulator:
    """The simulator's ROS wiring around a world (``consensus.control.dynamics.world.World``). Another world
    (``consensus.sims.mujoco.ros``) keeps the wiring and replaces ``start`` (the world it makes), ``sim_ns`` (the time
    it publishes) and ``tick_period_s`` (the wall time between two steps)."""

    USES = USES

    def __init__(self, node: Node) -> None:
        self.node = node
        self.cfg = cfg = declare_config(node, RobotBaseConfig, uses=self.USES)
        self.health = Health(parent=HEALTH, logger=node.get_logger())     # this node's (also in HEALTH)
        n = cfg.num_robots
        start = initial_positions(cfg)
        self.cmd = np.zeros((n, 3))          # vx, vy, wz
        self.cmd_time = np.full(n, -math.inf)
        self.dt = 1.0 / cfg.sim_rate_hz
        self.dynamics = dynamics_of(cfg.kinematics)
        pose = np.zeros((n, 3))
        pose[:, : cfg.dim] = start
        self.world = self.start(pose)
        self.t0 = time.monotonic()
        self.pubs = []
        for i in range(n):
            node.create_subscription(Twist, names.CMD_VEL.of(i),
                                     guarded(self._on_cmd(i), "sim.cmd_vel", self.health),
                                     qos.COMMAND_SUB, raw=True)
            self.pubs.append(node.create_publisher(Odometry, names.ODOM.of(i), qos.profile(names.ODOM)))
        self.truth_pub = node.create_publisher(PoseArray, names.GROUND_TRUTH.name, qos.profile(names.GROUND_TRUTH))
        self.clock_pub = (node.create_publisher(Clock, names.CLOCK.name, qos.profile(names.CLOCK)) if cfg.publish_clock
                          else None)
        fields = {"x": "pose.pose.position.x", "y": "pose.pose.position.y", "qz": "pose.pose.orientation.z",
                  "qw": "pose.pose.orientation.w", "vx": "twist.twist.linear.x", "vy": "twist.twist.linear.y",
                  "wz": "twist.twist.angular.z"}
        # serialized once per robot; each step rewrites the numbers and publishes bytes (see consensus.ros.cdr)
        self.templates = [CdrTemplate(self._odom_msg(i), fields, stamped=True) for i in range(n)]
        node.create_timer(self.tick_period_s(), guarded(self.step, "sim.step", self.health))
        self.publish_health = publish_health(node, self.health)

    # ------------------------------------------------------------------ the world (kinematic here)
    def start(self, start: np.ndarray):
        """The world, its robots at ``start`` ((n, 3): x, y, yaw)."""
        from consensus.control.dynamics.world import KinematicWorld

        return KinematicWorld(self.cfg, start, seed=self.cfg.seed)

    def tick_period_s(self) -> float:
        """Wall seconds between two steps."""
        return self.dt

    def cmd_clock(self) -> float:
        """The clock a command's age is measured on (``CMD_TIMEOUT_S``): the wall clock here; the world's own time
        for a world that runs faster or slower than real time."""
        return time.monotonic()

    def sim_ns(self, now: float) -> int:
        """The sim time of the step at monotonic time ``now`` [ns] (published on /clock with ``publish_clock``)."""
        return int((now - self.t0) * 1e9)

    def advance(self, cmd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Move every robot by one step of ``self.dt`` under ``cmd`` ((n, 3): vx, vy, wz); the poses to publish
        ((n, 3): x, y, yaw, as the odometry reports them) and the twists ((n, 3), in the odometry's convention: the
        world frame, a unicycle's body frame)."""
        self.world.set_commands(cmd)
        self.world.advance(self.dt)
        return self.world.reported_poses(), self.dynamics.odom_twist(self.world.velocities(), self.world.poses()[:, 2])

    def true_poses(self) -> np.ndarray:
        """Every robot's true pose ((n, 3): x, y, yaw) after the last step (the odometry may carry noise)."""
        return self.world.poses()

    def _odom_msg(self, i: int) -> Odometry:
        msg = Odometry()
        msg.header.frame_id = names.WORLD_FRAME
        msg.child_frame_id = names.base_link(i)
        return msg

    def _on_cmd(self, i: int):
        def cb(raw: bytes) -> None:
            t = twist_values(raw)
            if t is None:
                msg = decode_or_count(raw, Twist, self.health, "sim.cmd_vel")
                if msg is None:
                    return
                t = (msg.linear.x, msg.linear.y, 0.0, 0.0, 0.0, msg.angular.z)
            vals = (t[0], t[1], t[5])
            if not sane(*vals):
                self.health.count_bad_message("sim.cmd_vel")
                return                        # ignore corrupt commands (the robot keeps its last valid one)
            self.cmd[i] = vals
            self.cmd_time[i] = self.cmd_clock()
        return cb

    def step(self) -> None:
        now = time.monotonic()
        cmd = np.where((self.cmd_clock() - self.cmd_time)[:, None] <= CMD_TIMEOUT_S, self.cmd, 0.0)
        pose, twist = self.advance(cmd)
        if self.clock_pub is not None:
            sim_ns = self.sim_ns(now)
            clock = Clock()
            clock.clock.sec, clock.clock.nanosec = divmod(sim_ns, 1_000_000_000)
            self.clock_pub.publish(clock)
            stamp = sim_ns
        else:
            stamp = self.node.get_clock().now().nanoseconds
        qz, qw = np.sin(pose[:, 2] / 2).tolist(), np.cos(pose[:, 2] / 2).tolist()   # yaw about z
        xs, ys = pose[:, 0].tolist(), pose[:, 1].tolist()
        cmds = twist.tolist()
        for i, (pub, tpl) in enumerate(zip(self.pubs, self.templates)):
            vx, vy, wz = cmds[i]
            pub.publish(tpl.pack(stamp, x=xs[i], y=ys[i], qz=qz[i], qw=qw[i], vx=vx, vy=vy, wz=wz))
        truth = self.true_poses()
        self.truth_pub.publish(pose_array_bytes(stamp, names.WORLD_FRAME, truth[:, :2], truth[:, 2]))


def _clock_source(node: Node) -> None:
    """The simulator is the source of /clock: it must never wait for sim time itself."""
    node.set_parameters([Parameter("use_sim_time", value=False)])


def main() -> int:
    return node_main("sim", Simulator, before=_clock_source)
