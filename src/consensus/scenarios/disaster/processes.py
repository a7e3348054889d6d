"""Which ROS processes make up a disaster run, with which parameters — shared by ``launch/disaster.launch.py`` and
``consensus run disaster`` (``consensus.scenarios.disaster.runner``), like ``consensus.runs.processes`` for aggregation.

Processes (every one reads the run's ``/**:`` parameters file, ``DisasterConfig``; per-process parameters on top):

* ``llm_server`` (LLM teams on the embedded backend): the kernel's llama.cpp server on ``llm_port``;
* the simulator of ``sim`` (``consensus.sims.sim_processes``): by default the kernel's ``sim`` flies the drones
  (``/robot_<i>/cmd_vel`` -> ``/robot_<i>/odom``), single integrator, started with the drones at the centres of
  their start cells (``start_cells``, as headless) and the grid as its workspace; it publishes ``/clock`` with
  ``use_sim_time``. Its ``RobotBaseConfig`` parameters come from ``controller_config`` and are validated here,
  before anything starts; ``sim: turtlesim`` gives the same parameters to the turtlesim bridge (holonomic turtles);
* ``drone``: all drones in one process (node ``/fleet``, ``single_process: true``) or one process per drone (node
  ``/robot_<i>/agent``);
* ``aggregator`` (explicit mode only);
* ``disaster_grid``: owns the environment and the round clock, writes the run directory; the run ends when it
  exits.
"""
from __future__ import annotations


from consensus.llm.backends import backend_spec
from consensus.robots.map import fleet_avoidance
from consensus.runs.processes import ProcessSpec, bag_specs, robot_specs
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.scenarios.disaster.drone_control import controller_config
from consensus.scenarios.disaster.headless import start_cells, start_positions
from consensus.sims import sim_processes

def sim_params(cfg: DisasterConfig, *, use_sim_time: bool = False) -> dict:
    """The ``sim`` node's parameters on top of the disaster file: drones at their start cells' centres (with
    collision avoidance, drones sharing a start cell on a circle around it: ``headless.start_positions``)."""
    run = cfg.resolved()
    avoid = fleet_avoidance(controller_config(cfg)[0], ros=True)
    start = start_positions(run, start_cells(run), None if avoid is None else avoid.d_min_m)
    centres = [float(v) for v in start.ravel()]
    _, overrides = controller_config(cfg, initial_positions=centres, publish_clock=bool(use_sim_time),
                                     floor_cell_m=cfg.cell_size_m)
    return {**overrides, "use_sim_time": False}


def disaster_processes(cfg: DisasterConfig, *, use_sim_time: bool = False) -> list[ProcessSpec]:
    """The processes of a disaster run: [llm_server], the simulator (``sim``), drone(s), [aggregator],
    disaster_grid."""
    run = cfg.resolved()
    sim_time = {"use_sim_time": bool(use_sim_time)}
    specs: list[ProcessSpec] = []
    if run.uses_llm() and backend_spec(cfg.llm_backend).local_server:
        _, llm = controller_config(cfg)
        specs.append(ProcessSpec("llm_server", "llm_server", params={**llm, "use_sim_time": False}))
    specs += sim_processes(cfg, sim_params(cfg, use_sim_time=use_sim_time), use_sim_time=use_sim_time)
    specs += robot_specs("drone", cfg, sim_time, num_robots=run.num_robots)
    if run.mode == "explicit":
        specs.append(ProcessSpec("aggregator", "aggregator", params=sim_time))
    specs.append(ProcessSpec("disaster_grid", "disaster_grid", params=sim_time, ends_run=True))
    specs += bag_specs(cfg, sim_time)              # MCAP bag of the run (always: DisasterConfig has no bag switch)
    return specs
