"""Every ROS name the kernel uses, in one place: topics (with their message type and QoS class), frames, the robot
namespace, and the node names of the kernel's processes.

No ROS import here (the run directory, the robots map, the Foxglove view and the process lists read the names too);
``consensus.ros.qos.profile(topic)`` turns a topic's QoS class into the rclpy profile, so a publisher and its
subscribers always agree. After aerostack2's ``as2_core/names/topics.hpp``: one namespace per subsystem, the name beside
its QoS. A scenario's protocol topics (disaster, naming game) are not here: each scenario names them with this
module's ``Topic`` in its own ``ros/protocol`` module (``TOPICS``), beside their records (the kernel imports no
scenario).

Names inside a robot's namespace are relative (``odom``, ``planner/status``): a robot node started in
``/robot_<i>`` uses them as they are; a node of the root namespace that talks to robot i uses ``topic.of(i)``.

QoS classes (``consensus.ros.qos``): ``stream`` (best effort, newest wins: odom, state, neighbors, clock),
``events`` (reliable, depth 50: records that must not be lost), ``history`` (``events`` kept for a late
subscriber: transient local, depth 50; the planning records, which a recorder started after the robots' first rounds
must still get), ``latched`` (transient local, depth 1: the graph), ``command`` (cmd_vel: reliable unless
``cmd_vel_best_effort``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

QOS_CLASSES = ("stream", "events", "history", "latched", "command")
ROBOT_PREFIX = "robot_"


def namespace(robot_id: int) -> str:
    """The namespace of robot ``robot_id`` (without the leading slash): ``robot_<i>``."""
    return f"{ROBOT_PREFIX}{int(robot_id)}"


@dataclass(frozen=True)
class Topic:
    name: str        # relative (inside a robot's or the node's namespace) or absolute (starts with "/")
    type: str        # the ROS message type, e.g. "nav_msgs/msg/Odometry"
    qos: str         # one of QOS_CLASSES
    depth: int | None = None   # the history depth, where the QoS class's own does not do (a protocol's kept records)

    def __post_init__(self) -> None:
        if self.qos not in QOS_CLASSES:
            raise ValueError(f"topic {self.name}: unknown QoS class {self.qos!r}")

    def of(self, robot_id: int) -> str:
        """The name of this per-robot topic for robot ``robot_id`` as a node outside the robots uses it:
        ``robot_<i>/<name>``, relative, so ``/robot_<i>/<name>`` from the root namespace and
        ``/<ns>/robot_<i>/<name>`` for a fleet launched in namespace ``ns`` (``namespace:=`` launch argument)."""
        if self.name.startswith("/"):
            raise ValueError(f"{self.name} is not a per-robot topic")
        return f"{namespace(robot_id)}/{self.name}"

    def in_run(self, node_namespace: str) -> str:
        """The name a node in ``node_namespace`` uses for this topic of a scenario's protocol: a relative name as it
        is; an absolute one (a channel the robots' namespaces and the run's root share) under the run's namespace
        (``namespace:=``), i.e. the node's namespace without a trailing ``robot_<i>``: ``/fleet_a/disaster/state``
        for ``/fleet_a`` and ``/fleet_a/robot_3`` alike, ``/disaster/state`` in the root namespace."""
        if not self.name.startswith("/"):
            return self.name
        return f"{split_robot_namespace(node_namespace)[0]}{self.name}"


def split_robot_namespace(namespace: str) -> tuple[str, int | None]:
    """A node's namespace as (the run's namespace, the robot's index or None): ``/fleet_a/robot_3`` ->
    ``("/fleet_a", 3)``, ``/robot_3`` -> ``("", 3)``, ``/fleet_a`` -> ``("/fleet_a", None)``, ``/`` -> ``("", None)``.
    The one reading of the ``robot_<i>`` convention (``ROBOT_PREFIX``)."""
    ns = namespace.rstrip("/")
    m = re.fullmatch(rf"(.*)/{ROBOT_PREFIX}(\d+)", ns)
    return (m.group(1), int(m.group(2))) if m else (ns, None)


# --- a robot (inside /robot_<i>): its driver, its controller, its planner --------------------------------------
ODOM = Topic("odom", "nav_msgs/msg/Odometry", "stream")             # the driver's (or sim's) pose and twist
CMD_VEL = Topic("cmd_vel", "geometry_msgs/msg/Twist", "command")     # the controller's velocity command
STATE = Topic("state", "geometry_msgs/msg/PointStamped", "stream")  # the robot's position, broadcast to the graph
NEIGHBORS = Topic("neighbors", "geometry_msgs/msg/PoseArray", "stream")   # the in-neighbours' states (topology)
# the same in-neighbours' meeting points (their position before their first round), in the
# same order and with the same header stamp as the `neighbors` message they belong to
NEIGHBOR_TARGETS = Topic("neighbor_targets", "geometry_msgs/msg/PoseArray", "stream")
# every other robot's position for collision avoidance, one point each with its age [s], measured speed and robot
# index (fields x y z age speed id; consensus.ros.nearby)
NEARBY = Topic("nearby", "sensor_msgs/msg/PointCloud2", "stream")
# the robot's meeting point (its planner's output); named `target` because users' bags and scripts read it
TARGET = Topic("target", "geometry_msgs/msg/PointStamped", "events")
PLANNER_REASONING = Topic("planner/reasoning", "std_msgs/msg/String", "history")  # one JSON record per plan
PLANNER_STATUS = Topic("planner/status", "std_msgs/msg/String", "events")         # counters, control timing

# --- the fleet (root namespace) ------------------------------------------------------------------------------------
HEALTH = Topic("health", "std_msgs/msg/String", "events")             # every root node's health record, each second
# every node's health as diagnostic_msgs (rqt_robot_monitor, diagnostic_aggregator, Foxglove; consensus.ros.diagnostics)
DIAGNOSTICS = Topic("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", "events")
ESTOP = Topic("/estop", "std_msgs/msg/Bool", "latched")               # the fleet's e-stop (default of estop_topic)
CLOCK = Topic("/clock", "rosgraph_msgs/msg/Clock", "stream")          # sim time (publish_clock)
# every robot's true pose, robot i the i-th, from a simulator that knows it (consensus.control.motion.Simulator.
# ground_truth): the run's record; a robot's own odometry may carry the sim's noise and offset knobs
GROUND_TRUTH = Topic("ground_truth", "geometry_msgs/msg/PoseArray", "stream")
TF = Topic("/tf", "tf2_msgs/msg/TFMessage", "events")                 # world -> robot_<i>/base_link
# every robot's newest position from the nearby relay of robots in separate processes (single_process: false), once a
# planning period, the same message for all (layout of NEARBY): the packing slots' assignment when `nearby` holds only
# the robots in reach (consensus.ros.nearby); a channel the robots and the run's root share
CENSUS = Topic("/census", "sensor_msgs/msg/PointCloud2", "latched")
# an operator's word that robot <data>'s silent body is gone (lifted away, switched off): the nearby relay stops sending
# its last position until it speaks again (consensus.ros.nearby); shared by the robots' namespaces and the run's root
CLEAR_BODY = Topic("/clear_body", "std_msgs/msg/Int32", "events")
# an operator's meeting point for the whole fleet, approved by a human (`consensus mcp`'s suggest_meeting_point,
# frame world): every planning robot takes it and holds it for suggestion_hold_s (RobotCore.suggest), the topology node
# accepts it as evidence; shared by the robots' namespaces and the run's root
MEETING_POINT_SUGGESTION = Topic("/operator/meeting_point", "geometry_msgs/msg/PointStamped", "events")
TOPOLOGY_GRAPH = Topic("topology/graph", "std_msgs/msg/String", "latched")    # the communication graph (JSON)
MARKERS = Topic("markers", "visualization_msgs/msg/MarkerArray", "events")    # relative to the recorder: /markers

ROBOT_TOPICS = (ODOM, CMD_VEL, STATE, NEIGHBORS, NEIGHBOR_TARGETS, NEARBY, TARGET, PLANNER_REASONING,
                PLANNER_STATUS)
FLEET_TOPICS = (HEALTH, DIAGNOSTICS, ESTOP, CLOCK, GROUND_TRUTH, TF, CENSUS, CLEAR_BODY, MEETING_POINT_SUGGESTION,
                TOPOLOGY_GRAPH, MARKERS)


def robot_topic(robot_id: int, name: str) -> str:
    """``robot_<i>/<name>`` (relative, like ``Topic.of``): a scenario's own per-robot topic (e.g. the disaster
    drones' vote requests)."""
    return f"{namespace(robot_id)}/{name.lstrip('/')}"


# --- turtlesim (the external simulator's own names; consensus.sims.turtlesim.ros) -----------------------------------
TURTLESIM_SPAWN = "spawn"                           # turtlesim/srv/Spawn (relative: a namespaced fleet's turtlesim)
TURTLE_POSE = "pose"                                # turtlesim/msg/Pose, inside /<turtle>
TURTLE_CMD_VEL = "cmd_vel"                          # geometry_msgs/msg/Twist, inside /<turtle>
TURTLE_SET_PEN = "set_pen"                          # turtlesim/srv/SetPen, inside /<turtle>
TURTLE_TELEPORT = "teleport_absolute"               # turtlesim/srv/TeleportAbsolute, inside /<turtle>


def turtle_name(turtle: str, name: str) -> str:
    """``<turtle>/<name>`` (relative: turtlesim runs in the fleet's namespace): a name of one of its turtles."""
    return f"{turtle}/{name}"


# --- crazyswarm2 (its servers' own names, inside /<cf>) and our crazyflie_link between it and a robot ---------------
# (consensus.ros.crazyflie_link, one process per drone in /<cf>; the drone's pose comes on TF, world -> <cf>)
CF_CMD_FULL_STATE = "cmd_full_state"                # crazyflie_interfaces/msg/FullState (the link publishes)
CF_TAKEOFF = "takeoff"                              # crazyflie_interfaces/srv/Takeoff
CF_LAND = "land"                                    # crazyflie_interfaces/srv/Land
CF_NOTIFY_SETPOINTS_STOP = "notify_setpoints_stop"  # crazyflie_interfaces/srv/NotifySetpointsStop
LINK_POSE = "link/pose"           # geometry_msgs/msg/PoseStamped in the map's frame: what the drone's robot reads
LINK_STATUS = "link/status"       # std_msgs/msg/String, JSON (phase, reason, counters), latched


# --- frames --------------------------------------------------------------------------------------------------------
WORLD_FRAME = "world"


def base_link(robot_id: int) -> str:
    """Robot ``robot_id``'s body frame: ``robot_<i>/base_link``."""
    return f"{namespace(robot_id)}/base_link"


# --- node names of the kernel's processes ----------------------------------------------------------------------------
ROBOT_NODE = "agent"          # /robot_<i>/agent (one process per robot)
FLEET_NODE = "fleet"          # /fleet (all robots in one process)
SIM_NODE = "sim"
TOPOLOGY_NODE = "topology"
RECORDER_NODE = "recorder"
LINK_NODE = "link"            # /<cf>/link (crazyflie_link: one process per drone, in its crazyswarm2 name)
OPERATOR_NODE = "operator"    # /operator: consensus mcp's seat on the run's graph (consensus.ros.operator_bridge)
