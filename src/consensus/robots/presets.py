"""Driver presets: how the robot base talks to one kind of robot (no ROS imports; the names are ROS type strings).

A preset says which topic and message type carry the velocity command, where the robot's pose comes from and in
which frame, the robot's own speed caps, its kinematics and what must happen before commands move it. Topic names
are relative to the robot's *driver namespace* (the ``namespace`` of its entry in the ``robots:`` map,
``consensus.robots.map``); ``Preset.cmd_topic_in`` / ``pose_topic_in`` give the absolute names.

Pose sources (``pose_source``), i.e. how every robot ends up in the one shared frame of the run:

* ``odom``: ``nav_msgs/msg/Odometry`` in the robot's own odometry frame, which starts where the robot was switched
  on. The robot base composes it with the entry's ``initial_pose`` (x, y, yaw in the shared frame, measured when
  the robots are placed): shared = initial_pose ∘ odom. Wheel odometry drifts, so this suits short runs.
* ``world_odom``: ``nav_msgs/msg/Odometry`` already in the shared frame (our builtin sim; a robot_localization or
  AMCL-corrected odometry in a common ``map`` frame; a driver fed by motion capture). Used as is.
* ``world_pose``: ``geometry_msgs/msg/PoseStamped`` in the shared frame (motion capture: crazyswarm2's
  ``/<cf>/pose``, vrpn_mocap's ``/vrpn_mocap/<body>/pose``). Used as is.

Presets (see docs/real-robots.md for the sources of each name):

* ``turtlebot3``: ``turtlebot3_node`` subscribes ``cmd_vel`` as ``geometry_msgs/msg/Twist`` (ROS 2 Humble default;
  on Jazzy with ``enable_stamped_cmd_vel: true`` set ``cmd_stamped: true`` in the map entry) and publishes ``odom``.
  Differential drive (unicycle), burger limits 0.22 m/s and 2.84 rad/s, footprint radius 0.105 m (burger).
* ``turtlebot4``: namespaced robots (``/<ns>/cmd_vel``, ``/<ns>/odom``), ``geometry_msgs/msg/TwistStamped``
  (Jazzy, the Nav2 convention; a Humble TurtleBot 4 takes Twist: set ``cmd_stamped: false``). Create 3 limits
  0.306 m/s and 1.9 rad/s, footprint radius 0.17 m.
* ``crazyflie``: crazyswarm2, through our per-drone link (``link``: ``consensus.ros.crazyflie_link``, one process
  in each drone's namespace). The robot sends ``geometry_msgs/msg/Twist`` on ``/<cf>/cmd_vel``; the link takes off
  to the flight height before the fleet moves, streams ``/<cf>/cmd_full_state`` setpoints from those velocities,
  publishes the drone's pose from ``/tf`` (``world`` -> ``<cf>``, which crazyswarm2's simulator and its hardware
  server both broadcast) as ``/<cf>/link/pose`` (``geometry_msgs/msg/PoseStamped`` in the map's frame), and lands
  the drone at the end of the run, on the e-stop and when its robot falls silent. crazyswarm2's ``vel_mux`` is not
  used: since crazyswarm2 1.0.4 it flies ``crazyflies[0]`` only, so one per drone moves one drone; and its
  simulator implements neither ``cmd_hover`` nor ``/<cf>/pose`` (docs/real-robots.md). Holonomic at a fixed height
  (single integrator), capped at 0.5 m/s. Footprint radius 0.10 m: 0.05 m of body and propellers plus 0.05 m for
  the downwash and the air pushed sideways by a neighbour.
* ``generic``: any Twist/Odometry robot (``cmd_vel``, ``odom``), with the run's kinematics and limits; footprint
  radius 0.2 m (as ``sim``).
* ``sim``: a robot of our builtin simulator (Twist ``cmd_vel``, Odometry ``odom`` in ``world``); a map of only sim
  robots keeps ``sim: builtin``, which needs namespaces ``robot_<i>`` in map order.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from consensus.control.motion import SINGLE_INTEGRATOR, UNICYCLE

TWIST = "geometry_msgs/msg/Twist"
TWIST_STAMPED = "geometry_msgs/msg/TwistStamped"
ODOMETRY = "nav_msgs/msg/Odometry"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
POSE_SOURCES = {"odom": ODOMETRY, "world_odom": ODOMETRY, "world_pose": POSE_STAMPED}


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    cmd_topic: str = "cmd_vel"        # relative to the driver namespace
    cmd_type: str = TWIST             # TWIST | TWIST_STAMPED
    cmd_frame: str = "base_link"      # header.frame_id of a stamped command (the command is in the body frame)
    pose_topic: str = "odom"
    pose_source: str = "odom"         # odom | world_odom | world_pose (module docstring)
    kinematics: str = ""              # unicycle | single_integrator | "" = the run's
    v_max: float = math.inf           # the robot's own caps [m/s], [rad/s]; the run's v_max/w_max apply too
    w_max: float = math.inf
    dim: int = 2
    takeoff: str = ""                 # what must happen before commands move the robot ("" = nothing)
    simulated: bool = False           # driven by our builtin sim
    footprint_radius_m: float = 0.2   # radius of a disc that covers the robot [m] (consensus.control.collision)
    height_m: float = 0.2             # its body's height [m] (sim: mujoco)
    mass_kg: float = 5.0              # its mass [kg] (sim: mujoco: with accel_max, the drive's force limit)
    link: str = ""                    # our executable run per robot between it and its driver ("" = none)

    @property
    def pose_type(self) -> str:
        return POSE_SOURCES[self.pose_source]

    def cmd_topic_in(self, namespace: str) -> str:
        return resolve(namespace, self.cmd_topic)

    def pose_topic_in(self, namespace: str) -> str:
        return resolve(namespace, self.pose_topic)


def resolve(namespace: str, topic: str) -> str:
    """Absolute topic name of ``topic`` in ``namespace`` (an absolute ``topic`` stays as it is)."""
    if topic.startswith("/"):
        return topic
    ns = namespace.strip("/")
    return f"/{ns}/{topic}" if ns else f"/{topic}"


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("turtlebot3", "ROBOTIS TurtleBot 3 (turtlebot3_node: Twist cmd_vel, Odometry odom)",
           kinematics=UNICYCLE, v_max=0.22, w_max=2.84, footprint_radius_m=0.105, height_m=0.192, mass_kg=1.0),
    Preset("turtlebot4", "Clearpath TurtleBot 4 (namespaced; TwistStamped cmd_vel, Odometry odom)",
           cmd_type=TWIST_STAMPED, kinematics=UNICYCLE, v_max=0.306, w_max=1.9, footprint_radius_m=0.17,
           height_m=0.342, mass_kg=3.3),
    Preset("crazyflie", "Bitcraze Crazyflie through crazyswarm2 and our crazyflie_link (Twist cmd_vel -> "
           "cmd_full_state setpoints; PoseStamped link/pose from crazyswarm2's /tf)",
           pose_topic="link/pose", pose_source="world_pose", kinematics=SINGLE_INTEGRATOR, v_max=0.5, w_max=1.0,
           takeoff="crazyflie_link takes off to its flight height before it publishes a pose (the fleet moves "
                   "after), and lands at the end of the run, on the e-stop and when its robot falls silent",
           footprint_radius_m=0.10, height_m=0.03, mass_kg=0.027, link="crazyflie_link"),
    Preset("generic", "any robot with a Twist cmd_vel and an Odometry odom (odometry from its start pose)"),
    Preset("sim", "a robot of the builtin simulator (Odometry in the shared frame 'world')",
           pose_source="world_odom", simulated=True),
)}
