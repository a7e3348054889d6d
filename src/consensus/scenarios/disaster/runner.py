"""``consensus run disaster`` through ROS 2 without ``ros2 launch``: the processes of ``processes.disaster_processes``
started with the run's parameters file by ``consensus.runs.ros_runner.run_processes``.

The run ends when the ``disaster_grid`` node exits after its last round; its run directory (see ``ros/grid.py``)
holds ``summary.json``, which is returned.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from consensus.runs.processes import prepare_run
from consensus.runs.ros_runner import run_processes
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.scenarios.disaster.processes import disaster_processes
from consensus.sims import prepare_sim


def prepare_disaster_run(cfg: DisasterConfig, out_dir: str | Path) -> tuple[DisasterConfig, Path]:
    """``consensus.runs.processes.prepare_run`` with the baseline-resolved settings recorded in the manifest, after
    the simulator's checks (``consensus.sims.prepare_sim``; the drones stay single integrators: holonomic turtles
    in turtlesim)."""
    cfg, _ = prepare_sim(cfg, holonomic=True)
    run = cfg.resolved()
    resolved = {k: v for k, v in run.to_dict().items() if cfg.to_dict()[k] != v}
    return prepare_run(cfg, out_dir, scenario="disaster", extra={"resolved": resolved})


def run_disaster_ros(cfg: DisasterConfig, out_dir: str | Path, *, use_sim_time: bool = False,
                     echo: Callable[[str], None] | None = None) -> dict:
    """Run the disaster scenario through real ROS 2 processes; return summary.json's content."""
    cfg, params_file = prepare_disaster_run(cfg, out_dir)
    return run_processes(disaster_processes(cfg, use_sim_time=use_sim_time), params_file,
                         Path(cfg.output_dir), llm_base_url=cfg.llm_base_url, echo=echo)
