"""The aggregation on turtlesim: aggregation.launch.py with ``sim`` defaulting to ``turtlesim`` (docs/turtlesim.md).

    ros2 launch consensus turtlesim.launch.py num_robots:=4 planner:=average
    ros2 launch consensus turtlesim.launch.py num_robots:=4 planner:=llm llm_backend:=embedded

Starts turtlesim_node (it needs a display), the turtlesim bridge, topology, robots and recorder; the robots use
unicycle kinematics. Arguments and checks are aggregation.launch.py's (``consensus.runs.launch_file``).
"""
from consensus.runs.launch_file import launch_description


def generate_launch_description():
    return launch_description("aggregation", sim="turtlesim")
