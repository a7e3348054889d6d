"""Disaster response drones (paper 2, scenario 1): sim, drones, [aggregator], disaster_grid [, llm_server].

    ros2 launch consensus disaster.launch.py drones:=3 planner:=heuristic rounds:=10
    ros2 launch consensus disaster.launch.py planner:=llm backend:=embedded mode:=explicit strategy:=majority
    ros2 launch consensus disaster.launch.py config:=/path/to/my.yaml volatility:=high use_sim_time:=true

Empty arguments keep the value of the config file (default: share/consensus/config/disaster.yaml). The process
list and the parameters file come from ``consensus.runs.disaster_processes``, the same code ``consensus run
disaster`` uses, so both start the same nodes with the same YAML. The run ends when the disaster_grid node exits
after its last round (its run directory holds summary.json).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration

# launch argument -> config field; '' = keep the config file's value
ARGUMENTS = {
    "drones": ("num_drones", "number of drones N (paper: 3 to 100)"),
    "planner": ("planner", "heuristic | llm | random"),
    "mode": ("mode", "implicit (own choices) | explicit (one collective cell)"),
    "strategy": ("strategy", "explicit: majority | averaging | decentralized | decentralized_feedback | "
                             "spoke_wheel | spoke_wheel_feedback"),
    "roles": ("roles", "role diversity: low | medium | high"),
    "baseline": ("baseline", "none | single_llm | no_interaction | random | no_diversity"),
    "volatility": ("volatility", "low | moderate | high"),
    "rounds": ("rounds", "rounds T (paper: 20 or 30)"),
    "seed": ("seed", "seed of the environment and the start cells"),
    "backend": ("llm_backend", "embedded | openai | replay"),
    "model": ("llm_model", "model name (openai) or a .gguf path (embedded)"),
    "base_url": ("llm_base_url", "OpenAI-compatible endpoint, e.g. http://localhost:11434/v1"),
    "motion": ("motion", "teleport (fly until on the chosen cell) | kinematic (fly round_time_s)"),
    "out": ("output_dir", "run directory (default: runs/disaster-<time>)"),
}


def _launch_setup(context, *args, **kwargs):
    from consensus.disaster.config import load_disaster_config
    from consensus.runs.disaster_processes import disaster_processes, prepare_disaster_run
    from consensus.runs.launch_actions import node_actions
    from consensus.runs.rundir import default_run_dir

    config_file = LaunchConfiguration("config").perform(context)
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context).lower() in ("true", "1")
    fleet = LaunchConfiguration("fleet").perform(context).lower() not in ("false", "0")
    overrides = {}
    for arg, (field, _) in ARGUMENTS.items():
        value = LaunchConfiguration(arg).perform(context)
        if value != "":
            overrides[field] = value
    # validated here, before any process starts: a bad value stops the launch with one clear message
    cfg = load_disaster_config(config_file or None, **overrides)
    cfg, params_file = prepare_disaster_run(cfg, cfg.output_dir or default_run_dir("disaster"))

    return node_actions(disaster_processes(cfg, fleet=fleet, use_sim_time=use_sim_time), params_file)


def generate_launch_description():
    default_config = os.path.join(get_package_share_directory("consensus"), "config", "disaster.yaml")
    args = [
        DeclareLaunchArgument("config", default_value=default_config, description="the /**: parameters file"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="the sim publishes /clock and all other nodes follow it"),
        DeclareLaunchArgument("fleet", default_value="true",
                              description="true: all drones in one process; false: one process per drone"),
    ]
    args += [DeclareLaunchArgument(name, default_value="", description=desc) for name, (_, desc) in ARGUMENTS.items()]
    return LaunchDescription(args + [OpaqueFunction(function=_launch_setup)])
