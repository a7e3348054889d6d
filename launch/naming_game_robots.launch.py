"""The naming game played by a robot fleet (paper 4, "With robots"): sim, robots, matchmaker.

    ros2 launch consensus naming_game_robots.launch.py num_robots:=6 policy:=memory_invariant:0.6 seed:=3

Arguments, processes and checks: ``consensus.runs.launch_file`` (the same for every scenario);
``ros2 launch consensus naming_game_robots.launch.py --show-args`` lists them.
"""
from consensus.runs.launch_file import launch_description


def generate_launch_description():
    return launch_description("naming-game-robots")
