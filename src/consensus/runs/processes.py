"""The processes of a ROS run and the run directory they share — used by every scenario's launch file and runner.

A scenario lists its processes as ``ProcessSpec``s (``Scenario.processes`` in ``consensus.registry``);
``launch/<scenario>.launch.py`` turns them into ``launch_ros.actions.Node`` actions
(``consensus.runs.launch_file``) and ``consensus run <scenario>`` starts the very same executables with the very
same parameters file (``consensus.runs.ros_runner``). So a run started either way is the same set of nodes
configured by the same YAML.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from consensus.runs.rundir import new_run_dir, write_manifest


@dataclass(frozen=True)
class ProcessSpec:
    executable: str               # name under lib/consensus
    name: str                     # node name
    namespace: str = ""
    params: dict = field(default_factory=dict)   # per-process parameters on top of the run's params file
    ends_run: bool = False        # the run is over when this process exits


def prepare_run(cfg, out_dir: str | Path, *, scenario: str, extra: dict | None = None):
    """Fix the run's output directory (and the embedded server's URL), write params.yaml and manifest.json.

    ``cfg`` is a scenario config (``consensus.settings.FlatParams`` with the LLM group). Returns the final config
    and the path of the params file every node is started with."""
    out = new_run_dir(out_dir)
    changes: dict = {"output_dir": str(out)}
    if cfg.uses_llm() and cfg.llm_backend == "embedded" and not cfg.llm_base_url:
        changes["llm_base_url"] = f"http://127.0.0.1:{cfg.llm_port}/v1"
    cfg = cfg.replace(**changes)
    params = out / "params.yaml"
    params.write_text(cfg.to_ros_params_yaml())
    write_manifest(out, scenario=scenario, config=cfg.to_dict(), seed=cfg.seed,
                   backend=cfg.llm_backend if cfg.uses_llm() else "none", model=cfg.embedded_model_name(),
                   mode="ros", extra={"params_file": str(params), **(extra or {})})
    return cfg, params
