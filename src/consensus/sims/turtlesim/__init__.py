"""``sim: turtlesim``: ROS 2's turtlesim and our bridge (docs/turtlesim.md): ``core`` holds the pure parts (window
map, Pose -> odometry, checks, processes), ``ros`` the bridge node ``turtlesim_bridge``."""
from consensus.control.motion import Simulator

SIM = Simulator(
    "turtlesim", "ROS 2's turtlesim and our bridge (docs/turtlesim.md)", "consensus.sims.turtlesim.core:processes",
    prepare="consensus.sims.turtlesim.core:prepare", headless=False,
    executables={"turtlesim_bridge": "consensus.sims.turtlesim.ros"})
