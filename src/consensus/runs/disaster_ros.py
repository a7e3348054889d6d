"""``consensus run disaster`` through ROS 2 without ``ros2 launch``: the processes of
``consensus.runs.disaster_processes`` started with the run's parameters file, by the process handling of
``consensus.runs.ros_runner`` (one log per process in ``RUN/logs``, progress lines echoed, SIGINT -> SIGTERM ->
SIGKILL for every process at the end, SIGTERM of the caller stops the children too).

The run ends when the ``disaster_grid`` node exits after its last round; its run directory (see
``consensus.ros.nodes.disaster_grid``) holds ``summary.json``, which is returned.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from consensus.disaster.config import DisasterConfig
from consensus.runs.disaster_processes import disaster_processes, prepare_disaster_run
from consensus.runs.ros_runner import run_processes


def run_disaster_ros(cfg: DisasterConfig, out_dir: str | Path, *, use_sim_time: bool = False,
                     echo: Callable[[str], None] | None = None, fleet: bool = True) -> dict:
    """Run the disaster scenario through real ROS 2 processes; return summary.json's content.

    ``fleet``: all drones in one process (default) or one process per drone."""
    cfg, params_file = prepare_disaster_run(cfg, out_dir)
    return run_processes(disaster_processes(cfg, fleet=fleet, use_sim_time=use_sim_time), params_file,
                         Path(cfg.output_dir), llm_base_url=cfg.llm_base_url, echo=echo)
