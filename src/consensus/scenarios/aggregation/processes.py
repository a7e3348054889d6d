"""The ROS processes of an aggregation run: [llm_server], sim, topology, robots (a fleet or one each), recorder.
With ``sim: turtlesim`` the simulator is turtlesim and its bridge (``consensus.sims.turtlesim``).

Read by ``launch/aggregation.launch.py`` and by ``consensus run aggregation`` (``runner.run_ros``) alike.
"""
from __future__ import annotations

from consensus.runs.processes import ProcessSpec, bag_specs, robot_specs
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.sims import turtlesim


def aggregation_processes(cfg: AggregationConfig, *, use_sim_time: bool = False) -> list[ProcessSpec]:
    sim_time = {"use_sim_time": bool(use_sim_time)}
    specs: list[ProcessSpec] = []
    if cfg.uses_llm() and cfg.llm_backend == "embedded":
        specs.append(ProcessSpec("llm_server", "llm_server", params={"use_sim_time": False}))
    if cfg.sim == "turtlesim":
        specs += turtlesim.processes(cfg, use_sim_time=use_sim_time)
    elif cfg.sim != "none":               # none: real robots (robots_file), their drivers move them
        specs.append(ProcessSpec("sim", "sim", params={"use_sim_time": False, "publish_clock": bool(use_sim_time)}))
    specs.append(ProcessSpec("topology", "topology", params=sim_time))
    specs += robot_specs("robot", cfg, sim_time)
    specs.append(ProcessSpec("recorder", "recorder", params=sim_time, ends_run=True))
    specs += bag_specs(cfg, sim_time)              # MCAP bag of the run (cfg.bag)
    return specs
