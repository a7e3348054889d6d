"""Run configuration of the dynamic disaster response scenario (paper 2, section 4 and appendix C.1).

One flat set of parameters shared by ``consensus run disaster``, the headless runner, the batch study and the
ROS 2 nodes: every field of ``DisasterConfig`` is a ROS parameter of the same name. The YAML file is a ROS 2
parameters file with one ``/**:`` section (``config/disaster.yaml``), read by ``load_disaster_config`` exactly like
``consensus.scenarios.aggregation.config.load_config`` reads the aggregation file (the same reader and type coercion
are used).

Baselines (paper 2, section 4.4; ``consensus.discussion.baselines``) are resolved by ``DisasterConfig.resolved()``
into the plain settings they mean:

============== ===========================================================================================
baseline       what runs
============== ===========================================================================================
none           the configured mode (implicit or explicit consensus)
single_llm     "A single LLM agent performs the task alone": ONE drone, no discussion (N = 1, so no
               misallocation is possible — the paper reports MP as "-" for it)
no_interaction implicit consensus without the discussion phase (discussion_turns = 0)
random         every drone picks a uniformly random cell (seeded), no discussion
no_diversity   implicit consensus with the low-diversity roles (one shared role prompt)
============== ===========================================================================================

A baseline always runs in implicit mode; asking for a baseline together with ``mode: explicit`` is an error.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from consensus.control.motion import SINGLE_INTEGRATOR
from consensus.discussion.config import DiscussionParams
from consensus.settings import (ControlParams, FlatParams, FleetParams, PhysicsParams, RunParams, SimParams,
                                load_flat, need, param)

#: the kinematics the drones fly with (their headless flight, packing and cells assume it)
FLIGHT_KINEMATICS = (SINGLE_INTEGRATOR,)

MOTIONS = ("teleport", "kinematic")


@dataclass
class DisasterConfig(RunParams, DiscussionParams, ControlParams, FleetParams, SimParams, PhysicsParams, FlatParams):
    """Parameters of one disaster response run (paper 2, scenario 1): the shared run, control and fleet groups of
    ``consensus.settings`` (``num_robots`` is the number of drones N: the drones are the discussion team; ``sim``: who
    flies them in a ROS run, ``SimParams``), the
    discussion group (``consensus.discussion.config.DiscussionParams``: protocol, roles, baselines, paper 2's LLM
    defaults; ``fallback_policy`` idle = the drone stays on its cell) and the scenario's own fields."""

    GROUP: ClassVar[str] = "disaster"     # its fields' ROS parameters: disaster.<name> (settings.ros_names)

    COUNT_FIELD: ClassVar[str] = "num_robots"

    num_robots: int = param(3, "N drones")
    flight_altitude_m: float = param(1.0)     # drones (sim: mujoco holds them at this altitude)
    sensor_readings: bool = param(False,
        "drones also get the disasters' exact numbers (paper 2's code); default: the noisy textual report only "
        "(docs/disaster.md \"Fidelity switches\")")

    # environment (consensus.scenarios.disaster.environment.EnvConfig; paper 2, appendix C.1); volatility: the
    # discussion group's
    width: int = param(10, "grid cells along x")
    height: int = param(10, "grid cells along y")
    max_active: int = param(3, "K: at most this many active disasters")
    p_new: float = param(0.2, "chance of a new disaster when fewer than max_active are active")
    initial_disasters: int = param(2, "active disasters at the start")
    containment_per_drone: int = param(3, "severity removed per drone on the cell per round")
    alpha: float = param(5.0, "clear reward per severity point at the clearing round's start")
    beta: float = param(2.0, "uncontained penalty per severity point and round")
    misallocation_threshold: int = param(2, "M: more than M drones on one cell while a disaster is uncovered")
    misallocation_cost: float = param(5.0, "per wasted drone and round (MP_t)")
    misallocation: str = param("section_4_2", "MP_t: section_4_2 (paper 2, 4.2) | c1 (appendix C.1's trigger)")
    high_severity: int = param(7, "response delay and MP section_4_2: disasters at or above this severity")
    report_noise: float = param(0.2, "share of contradictory or incomplete report items (<= 0.2)")

    motion: str = param("teleport",
        "teleport (the paper's; ROS: fly until on the chosen cell) | kinematic (P controller + single integrator to "
        "the cell centres for round_time_s)")
    cell_size_m: float = param(1.0, "the side of a grid cell (kinematic motion)", bounds=(1e-3, 1e3), unit="m")
    round_time_s: float = param(10.0, "flight time of one round (kinematic)", bounds=(1e-3, 3600.0), unit="s")
    target_timeout_s: float = param(10.0, "ROS: a drone without a round-clock message for this long stops")
    # LLM: the discussion group's paper-2 defaults, with a longer timeout
    llm_timeout_s: float = param(300.0,
        "embedded 1.5B on 2 cores: ~40 s per drone prompt, ~2 min when 3 share the server")

    # ROS
    round_timeout_s: float = param(600.0,
        "ROS: a drone that has not answered a phase after this long counts as failed",
        bounds=(1e-3, 86400.0), unit="s")
    # ROS, motion teleport: a flight's deadline is flight_time_factor x the round's longest straight flight (start
    # cell's centre to chosen cell's centre) at v_max + flight_slack_s (round_clock.flight_deadline_s); a drone not
    # arrived by then is a counted flight timeout and the round goes on
    flight_time_factor: float = param(2.0,
        "[1, 100] covers the P controller's slow final approach and the filter's detours",
        bounds=(1.0, 100.0))
    flight_slack_s: float = param(20.0,
        "start-up, packing into slots, drones standing off their cells' centres",
        bounds=(0.0, 3600.0), unit="s")


    # ------------------------------------------------------------------
    def env_config(self):
        """The environment part as ``consensus.scenarios.disaster.environment.EnvConfig``."""
        from consensus.scenarios.disaster.environment import EnvConfig

        mine = set(self.field_names())
        return EnvConfig(**{f.name: getattr(self, f.name) for f in fields(EnvConfig) if f.name in mine})

    # ------------------------------------------------------------------
    def grid_bounds(self) -> list[float]:
        """The geofence of the grid in metres: [0, width s, 0, height s] with s = ``cell_size_m``."""
        return [0.0, self.width * self.cell_size_m, 0.0, self.height * self.cell_size_m]

    def check(self) -> None:
        need(self.motion in MOTIONS, f"unknown motion '{self.motion}'; valid: {', '.join(MOTIONS)}")
        need(self.kinematics in FLIGHT_KINEMATICS, "the drones fly as single integrators (kinematics: "
             f"single_integrator; got '{self.kinematics}')")
        need(self.control_period_s <= self.round_time_s, "control_period_s must not exceed round_time_s")
        self.env_config().validate()
        # every drone may choose one cell: their packing must fit the grid (the drones' geofence) where the filter
        # keeps them apart
        from consensus.robots.map import check_fence

        check_fence(self, self.grid_bounds(), num_robots=self.resolved().num_robots,
                    widen="enlarge the grid (width, height, cell_size_m)")


def load_disaster_config(path=None, **overrides: Any) -> DisasterConfig:
    """Load and validate a ``/**:`` parameters file (or the defaults), then apply the non-None overrides."""
    return load_flat(DisasterConfig, path, **overrides)
