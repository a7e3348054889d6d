"""``sim: turtlebot3_fake``: ROBOTIS's TurtleBot 3 fake node (turtlebot3_simulations' ``turtlebot3_fake_node``),
one per robot of a robots file whose robots are ``turtlebot3``s, driven by our unchanged robot nodes through the
preset's topics (docs/real-robots.md). ``core`` holds the process factory and the checks; nothing of ours sits
between the robots and the fake nodes, so there is no ``ros`` module."""
from consensus.control.motion import Simulator

SIM = Simulator(
    "turtlebot3_fake", "ROBOTIS's turtlebot3_fake_node per TurtleBot 3 of the robots file (make drivers)",
    "consensus.sims.turtlebot3_fake.core:processes", prepare="consensus.sims.turtlebot3_fake.core:prepare",
    headless=False, drives=("turtlebot3",), sim_time="forbidden")
