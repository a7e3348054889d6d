"""Multi-robot aggregation with LLM (or classical) planners: sim, topology, robots, recorder [, llm_server].

    ros2 launch consensus aggregation.launch.py num_robots:=4 planner:=llm llm_backend:=embedded
    ros2 launch consensus aggregation.launch.py num_robots:=10 topology:=ring planner:=average
    ros2 launch consensus aggregation.launch.py config:=/path/to/my.yaml use_sim_time:=true

Empty arguments keep the value of the config file (default: share/consensus/config/aggregation.yaml). The process
list and the merged parameter file come from ``consensus.runs.processes``, the same code ``consensus run
aggregation`` uses, so both start the same nodes with the same YAML. The run ends when the recorder exits.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration

# launch argument -> config field; '' = keep the config file's value
ARGUMENTS = {
    "num_robots": ("num_robots", "number of robots (>= 2)"),
    "topology": ("topology", "complete | ring | star | line | leader_follower | random | custom"),
    "planner": ("planner", "llm | average | average_no_self | stubborn | suggestible"),
    "llm_backend": ("llm_backend", "embedded | openai | replay"),
    "llm_model": ("llm_model", "model name (openai backend) or a .gguf path (embedded)"),
    "llm_base_url": ("llm_base_url", "OpenAI-compatible endpoint, e.g. http://localhost:11434/v1"),
    "duration_s": ("duration_s", "run length in seconds"),
    "seed": ("seed", "seed of initial positions, random graphs and link drops"),
    "fleet": ("fleet", "true: all robots in one process; false: one process per robot"),
    "output_dir": ("output_dir", "run directory (default: runs/aggregation-<time>)"),
}


def _launch_setup(context, *args, **kwargs):
    from consensus.config import load_config
    from consensus.runs.processes import aggregation_processes, prepare_run
    from consensus.runs.launch_actions import node_actions
    from consensus.runs.rundir import default_run_dir

    config_file = LaunchConfiguration("config").perform(context)
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context).lower() in ("true", "1")
    overrides = {}
    for arg, (field, _) in ARGUMENTS.items():
        value = LaunchConfiguration(arg).perform(context)
        if value != "":
            overrides[field] = value
    if use_sim_time:
        overrides["publish_clock"] = True
    # validated here, before any process starts: a bad value stops the launch with one clear message
    cfg = load_config(config_file, **overrides)
    cfg, params_file = prepare_run(cfg, cfg.output_dir or default_run_dir("aggregation"))

    return node_actions(aggregation_processes(cfg, use_sim_time=use_sim_time), params_file)


def generate_launch_description():
    default_config = os.path.join(get_package_share_directory("consensus"), "config", "aggregation.yaml")
    args = [
        DeclareLaunchArgument("config", default_value=default_config, description="the /**: parameters file"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="the sim publishes /clock and all other nodes follow it"),
    ]
    args += [DeclareLaunchArgument(name, default_value="", description=desc) for name, (_, desc) in ARGUMENTS.items()]
    return LaunchDescription(args + [OpaqueFunction(function=_launch_setup)])
