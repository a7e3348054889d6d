"""``sim: none``: no simulator; real robots (a robots_file) or another driver move the robots."""
from __future__ import annotations

from consensus.control.motion import Simulator

SIM = Simulator(
    "none", "no simulator: real robots (robots_file) or another driver move them", "consensus.sims.none:processes")


def processes(cfg, params: dict, *, use_sim_time: bool = False) -> list:
    """Nothing to start."""
    return []
