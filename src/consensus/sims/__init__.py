"""Simulators and external worlds the robots can move in (turtlesim, gz sim): the pure parts (coordinate maps,
world and bridge generation); their ROS nodes live in ``consensus.ros``."""
