"""``sim: gazebo``: gz sim and its bridge (docs/gazebo.md), started through its own launch file
(``launch/gazebo.launch.py``); ``world`` generates the world and the bridge configuration and holds the gz launch
variant. Its ``consensus run`` processes would be the built-in sim's, but ``consensus run`` refuses it."""
from consensus.control.motion import Simulator

SIM = Simulator(
    "gazebo", "gz sim and its bridge (docs/gazebo.md)", "consensus.sims.builtin.processes:processes",
    launch_only="gazebo.launch.py")
