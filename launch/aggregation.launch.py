"""Multi-robot aggregation with LLM (or classical) planners: sim, topology, robots, recorder [, llm_server].

    ros2 launch consensus aggregation.launch.py num_robots:=4 planner:=llm llm_backend:=embedded
    ros2 launch consensus aggregation.launch.py num_robots:=10 topology:=ring planner:=average
    ros2 launch consensus aggregation.launch.py config:=/path/to/my.yaml use_sim_time:=true

Arguments, processes and checks: ``consensus.runs.launch_file`` (the same for every scenario);
``ros2 launch consensus aggregation.launch.py --show-args`` lists them.
"""
from consensus.runs.launch_file import launch_description


def generate_launch_description():
    return launch_description("aggregation")
