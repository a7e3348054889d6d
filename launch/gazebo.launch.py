"""Multi-robot aggregation in Gazebo (gz sim, Ionic) with ROS 2 Kilted: the run's world and ros_gz bridge are
generated into the run directory, then gz sim, the bridge, topology, robots and recorder start on sim time.

    ros2 launch consensus gazebo.launch.py num_robots:=4 planner:=average
    ros2 launch consensus gazebo.launch.py kinematics:=single_integrator gz_args:="-r -s"   # bodies, no GUI

Needs ros_gz (sudo apt install ros-kilted-ros-gz); without it the launch stops with one message saying so.
Arguments and checks: ``consensus.runs.launch_file``; generation: ``consensus.sims.gazebo.world``; docs/gazebo.md.
"""
from consensus.runs.launch_file import launch_description
from consensus.sims.gazebo.world import GAZEBO


def generate_launch_description():
    return launch_description("aggregation", variant=GAZEBO)
