"""Which ROS processes make up a disaster run, with which parameters — shared by ``launch/disaster.launch.py`` and
``consensus run disaster`` (``consensus.runs.disaster_ros``), like ``consensus.runs.processes`` for aggregation.

Processes (every one reads the run's ``/**:`` parameters file, ``DisasterConfig``; per-process parameters on top):

* ``llm_server`` (LLM teams on the embedded backend): the foundation's llama.cpp server on ``llm_port``;
* ``sim``: the foundation's simulator flies the drones (``/robot_<i>/cmd_vel`` -> ``/robot_<i>/odom``), single
  integrator, started with the drones at the centres of their start cells (``start_cells``, as headless) and the
  grid as its workspace; it publishes ``/clock`` with ``use_sim_time``. A single drone gets an idle second robot
  (the simulator's minimum is 2). Its AggregationConfig parameters come from
  ``consensus.ros.drone_agent.foundation_config`` and are validated here, before anything starts;
* ``drone``: all drones in one process (``drone_fleet``, the default) or one process per drone (``fleet=False``,
  namespace ``robot_<i>``);
* ``aggregator`` (explicit mode only);
* ``disaster_grid``: owns the environment and the round clock, writes the run directory; the run ends when it
  exits.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from consensus.config import AggregationConfig
from consensus.disaster.config import DisasterConfig
from consensus.runs.processes import ProcessSpec
from consensus.runs.rundir import new_run_dir, write_manifest
from consensus.scenarios.disaster import start_cells

EMBEDDED_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
CLOCK_TIMEOUT_S = 10.0     # a drone without a round-clock message for this long stops (its target_timeout_s)
ODOM_TIMEOUT_S = 0.5       # stale odometry: zero velocity (the sim publishes at SIM_RATE_HZ)
SIM_RATE_HZ = 20.0
STATUS_PERIOD_S = 1.0      # planner/status of every drone


def grid_bounds(cfg: DisasterConfig) -> list[float]:
    """The geofence of the grid in metres: [0, width s, 0, height s] with s = ``cell_size_m``."""
    return [0.0, cfg.width * cfg.cell_size_m, 0.0, cfg.height * cfg.cell_size_m]


def cell_centre(cell, cell_size: float) -> np.ndarray:
    """Centre of grid cell (x, y) in metres: ((x + 0.5) s, (y + 0.5) s)."""
    return (np.asarray(cell, dtype=float) + 0.5) * cell_size


def foundation_config(cfg: DisasterConfig, **settings: Any) -> tuple[AggregationConfig, dict[str, Any]]:
    """The ``AggregationConfig`` a foundation component (the drones' robot controller, ``sim``, ``llm_server``)
    runs with in a disaster run, and the parameters such a node must get on top of the disaster params file.

    A foundation node reads the disaster file's values of the fields both configs share (``seed``, ``kp``,
    ``v_max``, ``deadband``, ``control_period_s``, ``llm_*``, ...) and its own defaults for the rest. ``settings``
    on top of these defaults make the controller of the grid world: 2-D single integrator, geofence = the grid,
    ``odom_timeout_s`` = ``ODOM_TIMEOUT_S``, the round clock as the planner (``target_timeout_s`` =
    ``CLOCK_TIMEOUT_S``; status every ``STATUS_PERIOD_S``), ``num_robots`` = the (baseline-resolved) number of
    drones but at least 2 (the foundation's minimum: a single drone gets an idle second robot in the sim). The
    config is validated here (ConfigError); the overrides are the settings above and every other field whose
    value differs from what the node would read otherwise."""
    shared = {name: getattr(cfg, name) for name in AggregationConfig.field_names() if name in cfg.field_names()}
    wanted = dict(num_robots=max(2, cfg.resolved().num_drones), dim=2, kinematics="single_integrator",
                  planner="average", planner_period_s=max(STATUS_PERIOD_S, cfg.control_period_s),
                  workspace=grid_bounds(cfg), odom_timeout_s=ODOM_TIMEOUT_S, target_timeout_s=CLOCK_TIMEOUT_S,
                  sim_rate_hz=SIM_RATE_HZ)
    wanted.update(settings)
    agg = AggregationConfig.from_dict({**shared, **wanted}, source="disaster run (controller/sim settings)")
    seen = {**AggregationConfig().to_dict(), **shared}
    return agg, {k: v for k, v in agg.to_dict().items() if k in wanted or v != seen[k]}


def prepare_disaster_run(cfg: DisasterConfig, out_dir: str | Path) -> tuple[DisasterConfig, Path]:
    """Fix the run directory (and the embedded server's URL), write params.yaml and manifest.json.

    Returns the final config and the path of the parameters file every node is started with."""
    out = new_run_dir(out_dir)
    changes: dict = {"output_dir": str(out)}
    if cfg.uses_llm() and cfg.llm_backend == "embedded" and not cfg.llm_base_url:
        changes["llm_base_url"] = f"http://127.0.0.1:{cfg.llm_port}/v1"
    cfg = cfg.replace(**changes)
    params = out / "params.yaml"
    params.write_text(cfg.to_ros_params_yaml())
    run = cfg.resolved()
    write_manifest(out, scenario="disaster", config=cfg.to_dict(), seed=cfg.seed,
                   backend=cfg.llm_backend if cfg.uses_llm() else "none",
                   model=cfg.llm_model or (EMBEDDED_MODEL if cfg.uses_llm() and cfg.llm_backend == "embedded" else ""),
                   mode="ros", extra={"params_file": str(params),
                                      "resolved": {k: v for k, v in run.to_dict().items() if cfg.to_dict()[k] != v}})
    return cfg, params


def sim_params(cfg: DisasterConfig, *, use_sim_time: bool = False) -> dict:
    """The ``sim`` node's parameters on top of the disaster file: drones at their start cells' centres."""
    run = cfg.resolved()
    centres = [float(v) for cell in start_cells(run) for v in cell_centre(cell, cfg.cell_size_m)]
    if run.num_drones == 1:                              # the idle second robot of a single-drone run
        centres += centres
    _, overrides = foundation_config(cfg, initial_positions=centres, publish_clock=bool(use_sim_time))
    return {**overrides, "use_sim_time": False}


def disaster_processes(cfg: DisasterConfig, *, fleet: bool = True, use_sim_time: bool = False) -> list[ProcessSpec]:
    """The processes of a disaster run: [llm_server], sim, drone(s), [aggregator], disaster_grid."""
    run = cfg.resolved()
    sim_time = {"use_sim_time": bool(use_sim_time)}
    specs: list[ProcessSpec] = []
    if run.uses_llm() and cfg.llm_backend == "embedded":
        _, llm = foundation_config(cfg, planner="llm")
        specs.append(ProcessSpec("llm_server", "llm_server", params={**llm, "use_sim_time": False}))
    specs.append(ProcessSpec("sim", "sim", params=sim_params(cfg, use_sim_time=use_sim_time)))
    if fleet:
        specs.append(ProcessSpec("drone", "drone_fleet", params=sim_time))
    else:
        specs += [ProcessSpec("drone", "drone", namespace=f"robot_{i}", params={**sim_time, "drone_id": i})
                  for i in range(run.num_drones)]
    if run.mode == "explicit":
        specs.append(ProcessSpec("aggregator", "aggregator", params=sim_time))
    specs.append(ProcessSpec("disaster_grid", "disaster_grid", params=sim_time, ends_run=True))
    return specs
