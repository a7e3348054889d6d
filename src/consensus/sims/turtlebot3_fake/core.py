"""TurtleBot 3's fake node as the simulator of a run (``sim: turtlebot3_fake``): the pure parts, no ROS.

What the fake node is (turtlebot3_simulations 2.3.5, ``src/turtlebot3_fake_node.cpp``; measured here:
docs/real-robots.md): the real driver's topics in its namespace (``cmd_vel`` ``geometry_msgs/msg/Twist`` in,
``odom`` at 100 Hz from its own start pose, ``joint_states``, and ``tf`` on its relative topic with unprefixed
frames), exact unicycle kinematics, no speed clamping (our preset's limits are what keeps it within the burger's),
and a stop 1 s after the last command. Its five parameters (``PARAMETERS``) have no defaults, and its shipped params
file is keyed by the plain node name, which does not apply under a namespace: a namespaced node started without them
aborts. So each robot's fake node gets them here, one process per robot in the robot's driver namespace.

* ``processes``: one ``turtlebot3_fake_node`` per enabled entry of the robots file, stopped after our nodes
  (``STOP_LAST``); its death ends the run (a restarted fake node would jump back to its start pose).
* ``prepare``: the fake node is installed (``make drivers``), the run has a robots file, and its robots are all
  TurtleBot 3s (``consensus.robots.map.apply_robots_file`` keeps this sim only then). Each robot's ``initial_pose`` is
  composed with the fake node's odometry, which starts at zero where it was started (``pose_source: odom``).
* The clock: the fake node steps on a wall timer but stamps and integrates with its node clock; under
  ``use_sim_time`` without a ``/clock`` its odometry is NaN (measured), so the run is on the wall clock
  (``Simulator.sim_time = "forbidden"``).
"""
from __future__ import annotations

from consensus.errors import ConfigError
from consensus.runs import drivers
from consensus.runs.processes import STOP_LAST, ProcessSpec

PACKAGE, EXECUTABLE = drivers.TURTLEBOT3_FAKE      # where runs.drivers looks for it
NODE = "turtlebot3_fake_node"
#: the burger's wheels (turtlebot3_fake_node's param/burger.yaml) and the frames of the real driver
PARAMETERS = {"wheels.separation": 0.160, "wheels.radius": 0.033, "joint_states_frame": "base_footprint",
              "odom_frame": "odom", "base_frame": "base_footprint"}


def _entries(cfg):
    from consensus.robots.map import simulated_entries
    from consensus.sims.turtlebot3_fake import SIM

    return simulated_entries(cfg, SIM)


def prepare(cfg):
    """Check that the run can start (module docstring); nothing of ``cfg`` changes (the entries' preset sets the
    kinematics and limits)."""
    _entries(cfg)
    missing = drivers.turtlebot3_available()
    if missing:
        raise ConfigError(f"sim 'turtlebot3_fake': {missing}; {drivers.INSTALL_HINT}")
    return cfg, {}


def processes(cfg, params: dict | None = None, *, use_sim_time: bool = False) -> list[ProcessSpec]:
    """One fake node per enabled robot, in the robot's driver namespace, with the five parameters on the wall
    clock (``params``, what the built-in sim would get, is not theirs)."""
    return [ProcessSpec(EXECUTABLE, NODE, namespace=e.namespace, package=PACKAGE,
                        params={**PARAMETERS, "use_sim_time": False}, stop_stage=STOP_LAST)
            for e in _entries(cfg)]
