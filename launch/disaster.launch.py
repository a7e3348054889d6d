"""Disaster response drones (paper 2, scenario 1): sim, drones, [aggregator], disaster_grid [, llm_server].

    ros2 launch consensus disaster.launch.py num_robots:=3 planner:=heuristic rounds:=10
    ros2 launch consensus disaster.launch.py planner:=llm llm_backend:=embedded mode:=explicit strategy:=majority
    ros2 launch consensus disaster.launch.py config:=/path/to/my.yaml volatility:=high use_sim_time:=true

Arguments, processes and checks: ``consensus.runs.launch_file`` (the same for every scenario);
``ros2 launch consensus disaster.launch.py --show-args`` lists them.
"""
from consensus.runs.launch_file import launch_description


def generate_launch_description():
    return launch_description("disaster")
