"""The ROS processes of an aggregation run: [llm_server], sim, [links], topology, robots (a fleet or one each),
recorder, [bag].
The simulator's processes are those of ``sim`` (``consensus.sims.sim_processes``: the built-in ``sim``, turtlesim
and its bridge, none with real robots).

Read by ``launch/aggregation.launch.py`` and by ``consensus run aggregation`` (``runner.run_ros``) alike.
"""
from __future__ import annotations

from consensus.llm.backends import backend_spec
from consensus.runs.processes import ProcessSpec, bag_specs, link_specs, robot_specs
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.sims import sim_processes


def aggregation_processes(cfg: AggregationConfig, *, use_sim_time: bool = False) -> list[ProcessSpec]:
    sim_time = {"use_sim_time": bool(use_sim_time)}
    specs: list[ProcessSpec] = []
    if cfg.uses_llm() and backend_spec(cfg.llm_backend).local_server:
        specs.append(ProcessSpec("llm_server", "llm_server", params={"use_sim_time": False}))
    specs += sim_processes(cfg, {"use_sim_time": False, "publish_clock": bool(use_sim_time)},
                           use_sim_time=use_sim_time)
    specs += link_specs(cfg, sim_time)             # robots with a link to their driver (a Crazyflie's)
    specs.append(ProcessSpec("topology", "topology", params=sim_time))
    specs += robot_specs("robot", cfg, sim_time)
    specs.append(ProcessSpec("recorder", "recorder", params=sim_time, ends_run=True))
    specs += bag_specs(cfg, sim_time)              # MCAP bag of the run (cfg.bag)
    return specs
