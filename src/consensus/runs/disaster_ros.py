"""``consensus run disaster`` through ROS 2 without ``ros2 launch``: the processes of
``consensus.runs.disaster_processes`` started with the run's parameters file, by the process handling of
``consensus.runs.ros_runner`` (one log per process in ``RUN/logs``, progress lines echoed, SIGINT -> SIGTERM ->
SIGKILL for every process at the end, SIGTERM of the caller stops the children too).

The run ends when the ``disaster_grid`` node exits after its last round; its run directory (see
``consensus.ros.nodes.disaster_grid``) holds ``summary.json``, which is returned.
"""
from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Callable

from consensus.disaster.config import DisasterConfig
from consensus.errors import ConsensusError
from consensus.runs.disaster_processes import disaster_processes, prepare_disaster_run
from consensus.runs.ros_runner import LLM_READY_TIMEOUT_S, _Proc, _raise_interrupt, _wait_llm_ready, stop_all


def run_disaster_ros(cfg: DisasterConfig, out_dir: str | Path, *, use_sim_time: bool = False,
                     echo: Callable[[str], None] | None = None, fleet: bool = True) -> dict:
    """Run the disaster scenario through real ROS 2 processes; return summary.json's content.

    ``fleet``: all drones in one process (default) or one process per drone."""
    cfg, params_file = prepare_disaster_run(cfg, out_dir)
    out = Path(cfg.output_dir)
    log_dir = out / "logs"
    log_dir.mkdir(exist_ok=True)
    specs = disaster_processes(cfg, fleet=fleet, use_sim_time=use_sim_time)
    procs: list[_Proc] = []
    interrupted = False
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for spec in specs:
            proc = _Proc(spec, params_file, log_dir, echo)
            procs.append(proc)
            if spec.executable == "llm_server":
                if echo:
                    echo("starting the embedded LLM (the first start assembles and verifies the model) ...")
                _wait_llm_ready(cfg.llm_base_url, proc, LLM_READY_TIMEOUT_S)
        grid = next(p for p in procs if p.spec.ends_run)
        while grid.popen.poll() is None:
            for p in procs:
                code = p.popen.poll()
                if code is not None and code != 0 and not p.spec.ends_run:
                    raise ConsensusError(f"process '{p.spec.namespace}/{p.spec.name}' exited with code {code}:\n"
                                         f"{p.tail()}")
            time.sleep(0.2)
        if grid.popen.returncode != 0:
            raise ConsensusError(f"the disaster_grid node failed (code {grid.popen.returncode}):\n{grid.tail()}")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        stop_all(procs)
        for p in procs:
            p.thread.join(timeout=2)
            p.log.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    summary_path = out / "summary.json"
    if not summary_path.exists():
        raise ConsensusError(f"the run ended without a summary{' (interrupted)' if interrupted else ''}; "
                             f"see the logs in {log_dir}")
    return json.loads(summary_path.read_text())
