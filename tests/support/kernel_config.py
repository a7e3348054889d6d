"""The kernel's robot config for kernel tests, which import no scenario: ``consensus.settings.RobotBaseConfig``
(what ``RobotCore``, the fleet core, the sim and the relays read; a scenario's config composes it), and a planner
of the kernel's ``Planner`` interface (the mean of the robot's own and its neighbours' states: paper 1's average
baseline, written here so that a kernel test needs no scenario's planners)."""
from __future__ import annotations

import numpy as np

from consensus.control.planner import PlanRequest, PlanResult
from consensus.settings import RobotBaseConfig, load_flat


def robot_config(**overrides) -> RobotBaseConfig:
    """The kernel's defaults with ``overrides``, validated (a ``ConfigError`` for a bad value)."""
    return load_flat(RobotBaseConfig, None, **overrides)


class MeanPlanner:
    """Target = the mean of the robot's own state and the states it heard (its own state when it heard none)."""

    def __init__(self, dim: int = 2) -> None:
        self.dim = dim

    def plan(self, req: PlanRequest) -> PlanResult:
        states = np.vstack([np.asarray(req.own, dtype=float).reshape(1, self.dim),
                            np.asarray(req.neighbors, dtype=float).reshape(-1, self.dim)])
        return PlanResult(meeting_point=states.mean(axis=0), reasoning=f"mean of {len(states)} states")

    def reset(self) -> None:
        """Stateless."""
