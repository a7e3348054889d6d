"""The built-in simulator's processes: one ``sim`` process (``consensus.sims.builtin.ros``); also gz sim's in a
``consensus run`` (which it refuses: gz sim starts through its launch file)."""
from __future__ import annotations

from consensus.runs.processes import ProcessSpec


def processes(cfg, params: dict, *, use_sim_time: bool = False) -> list[ProcessSpec]:
    """One ``sim`` process with ``params``."""
    return [ProcessSpec("sim", "sim", params=dict(params))]
