"""crazyswarm2's simulator as the simulator of a run (``sim: crazyswarm2``): the pure parts, no ROS.

crazyswarm2's ``launch.py backend:=sim`` merges its ``crazyflies.yaml``, ``server.yaml`` and a URDF into one params
file for ``/crazyflie_server`` (and starts teleop and joystick nodes by default); here the server gets that file
written from the robots file (``server_parameters``), the smallest one it accepts (measured):

* ``robots.<cf>``: every enabled Crazyflie entry, named by its namespace (the link's ``robot_name``, the ``/tf``
  child frame and crazyswarm2's topic prefix), at its ``initial_pose`` on the floor;
* ``all.reference_frame``: the map's ``frame``;
* ``sim``: backend ``none`` (the state follows each setpoint exactly; ``np``, the firmware's own controller through
  its Python bindings, ran at 0.08× real time with 4 drones on 2 cores), ``max_dt`` 0.1 s (one 0.1 s step per
  0.1 s of wall time: real time, 6 % of a core; ``max_dt: 0`` steps as fast as it can, a whole core, and starved
  the other nodes), ``visualizations.rviz`` (what broadcasts the drones' poses on ``/tf``; no window) and
  ``record_states`` (every drone's pose at 10 Hz in ``RUN/crazyswarm2_states/<stamp>/csv/<cf>.csv``, the driver's
  own ground truth, appended as it flies).

The server is the run's clock (it publishes ``/clock``: ``Simulator.sim_time = "required"``) and stops after our
nodes (``STOP_LAST``), once the links have landed the drones.
"""
from __future__ import annotations

from consensus.errors import ConfigError
from consensus.runs import drivers
from consensus.runs.processes import STOP_LAST, ProcessSpec

PACKAGE, EXECUTABLE = drivers.CRAZYFLIE_SERVER      # where runs.drivers looks for it
NODE = "crazyflie_server"
BACKENDS = ("none", "np")
MAX_DT_S = 0.1
STATES_DIR = "crazyswarm2_states"
ROBOT_TYPE = "cf21"
#: the smallest robot description the server accepts (``$NAME`` is each drone's name)
ROBOT_DESCRIPTION = '<robot name="$NAME"/>'


def _entries(cfg):
    from consensus.robots.map import simulated_entries
    from consensus.sims.crazyswarm2 import SIM

    return simulated_entries(cfg, SIM)


def server_parameters(cfg, out_dir: str, backend: str = "none") -> dict:
    """The ``/crazyflie_server``'s ``ros__parameters`` for the Crazyflies of ``cfg``'s robots file (module
    docstring); ``out_dir``: the run directory (its record of the states)."""
    if backend not in BACKENDS:
        raise ConfigError(f"sim 'crazyswarm2': backend {backend!r} is not one of {', '.join(BACKENDS)}")
    entries = _entries(cfg)
    robots = {e.namespace: {"enabled": True, "uri": f"radio://0/80/2M/E7E7E7E7{i + 1:02X}",
                            "initial_position": [float(e.initial_pose[0]), float(e.initial_pose[1]), 0.0],
                            "type": ROBOT_TYPE}
              for i, e in enumerate(entries)}
    return {
        "fileversion": 3,
        "robots": robots,
        "robot_types": {ROBOT_TYPE: {"big_quad": False}},
        "all": {"reference_frame": entries[0].frame},          # the map's frame
        "sim": {"max_dt": MAX_DT_S, "backend": backend, "controller": "none" if backend == "none" else "mellinger",
                "visualizations": {"rviz": {"enabled": True},
                                   "record_states": {"enabled": True, "output_dir": f"{out_dir}/{STATES_DIR}",
                                                     "logging_time": 0.1, "file_formats": ["csv"]}}},
        "robot_description": ROBOT_DESCRIPTION,
    }


def prepare(cfg):
    """Check that the run can start: a robots file of Crazyflies, each in a namespace of its own (crazyswarm2's
    name of the drone), and crazyswarm2's simulator installed. Nothing of ``cfg`` changes."""
    for e in _entries(cfg):
        if not e.namespace:
            raise ConfigError(f"{cfg.robots_file}: crazyflie '{e.name}' needs a namespace (crazyswarm2's name of the "
                              f"drone, e.g. cf1)")
    missing = drivers.crazyswarm2_available()
    if missing:
        raise ConfigError(f"sim 'crazyswarm2': {missing}; {drivers.INSTALL_HINT}")
    return cfg, {}


def processes(cfg, params: dict | None = None, *, use_sim_time: bool = False) -> list[ProcessSpec]:
    """crazyswarm2's server with the parameters of ``server_parameters`` (it is the clock: never ``use_sim_time``
    itself)."""
    tree = server_parameters(cfg, cfg.output_dir or ".")
    tree["use_sim_time"] = False
    return [ProcessSpec(EXECUTABLE, NODE, package=PACKAGE, params_tree=tree, stop_stage=STOP_LAST)]
