"""Which ROS processes make up a run, with which parameters — shared by the launch file and the pip runner.

``launch/aggregation.launch.py`` turns these specs into ``launch_ros.actions.Node`` actions; ``consensus run``
(``consensus.runs.ros_runner``) starts the very same executables with the very same parameter file. So a run
started either way is the same set of nodes configured by the same YAML.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from consensus.config import AggregationConfig
from consensus.runs.rundir import new_run_dir, write_manifest


@dataclass(frozen=True)
class ProcessSpec:
    executable: str               # name under lib/consensus
    name: str                     # node name
    namespace: str = ""
    params: dict = field(default_factory=dict)   # per-process parameters on top of the run's params file
    ends_run: bool = False        # the run is over when this process exits


def prepare_run(cfg: AggregationConfig, out_dir: str | Path) -> tuple[AggregationConfig, Path]:
    """Fix the run's output directory (and the embedded server's URL), write params.yaml and manifest.json.

    Returns the final config and the path of the params file every node is started with.
    """
    out = new_run_dir(out_dir)
    changes: dict = {"output_dir": str(out)}
    if cfg.planner == "llm" and cfg.llm_backend == "embedded" and not cfg.llm_base_url:
        changes["llm_base_url"] = f"http://127.0.0.1:{cfg.llm_port}/v1"
    cfg = cfg.replace(**changes)
    params = out / "params.yaml"
    params.write_text(cfg.to_ros_params_yaml())
    write_manifest(out, scenario="aggregation", config=cfg.to_dict(), seed=cfg.seed,
                   backend=cfg.llm_backend if cfg.planner == "llm" else "none",
                   model=cfg.llm_model or ("qwen2.5-coder-1.5b-instruct-q4_k_m" if cfg.llm_backend == "embedded"
                                           else ""),
                   mode="ros", extra={"params_file": str(params)})
    return cfg, params


def aggregation_processes(cfg: AggregationConfig, *, use_sim_time: bool = False) -> list[ProcessSpec]:
    """The processes of an aggregation run: [llm_server], sim, topology, robots (fleet or one each), recorder."""
    sim_time = {"use_sim_time": bool(use_sim_time)}
    specs: list[ProcessSpec] = []
    if cfg.planner == "llm" and cfg.llm_backend == "embedded":
        specs.append(ProcessSpec("llm_server", "llm_server", params={"use_sim_time": False}))
    specs.append(ProcessSpec("sim", "sim", params={"use_sim_time": False}))
    specs.append(ProcessSpec("topology", "topology", params=sim_time))
    if cfg.fleet:
        specs.append(ProcessSpec("fleet", "fleet", params=sim_time))
    else:
        specs += [ProcessSpec("robot", "robot", namespace=f"robot_{i}", params={**sim_time, "robot_id": i})
                  for i in range(cfg.num_robots)]
    specs.append(ProcessSpec("recorder", "recorder", params=sim_time, ends_run=True))
    return specs
