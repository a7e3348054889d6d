"""The disaster grid world's vocabulary (paper 2, appendix C.1): cells, disasters, report items, observations and
round outcomes, and the grid geometry. Shared by the environment, its reports and its metrics, which import this
module and not each other's internals.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

Cell = tuple[int, int]

DISASTER_KINDS: tuple[str, ...] = ("fire", "flood", "building_collapse", "chemical_spill")
INFRASTRUCTURE: tuple[str, ...] = ("power grid", "hospital", "bridge", "main road")
SEVERITY_MIN = 1
SEVERITY_MAX = 10
CASUALTIES_PER_SEVERITY = 3        # casualties at appearance: uniform integer in [0, 3 * severity]
INFRASTRUCTURE_PROB = 0.5          # probability that a new disaster puts infrastructure at risk
MAX_GRID_SIDE = 1000


@dataclass
class Disaster:
    """One disaster. ``severity`` is in [1, 10] while active and 0 once cleared."""

    id: int
    cell: Cell
    severity: int
    kind: str
    casualties: int
    infrastructure: str                      # "" = none at risk
    appeared_round: int
    first_attended_round: int | None = None  # first round a drone was on its cell at the round's end
    cleared_round: int | None = None
    high_round: int | None = None            # first round whose start saw severity >= high_severity
    high_attended_round: int | None = None   # first round >= high_round in which it was attended

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["cell"] = list(self.cell)
        return d


@dataclass(frozen=True)
class ReportItem:
    """One line of a situation report (see ``consensus.scenarios.disaster.reports``)."""

    text: str
    disaster_id: int | None                  # None: a rumour about no active disaster
    quality: str                             # "accurate" | "contradictory" | "incomplete"
    flaw: str = ""                           # "" | "trend" | "location" | "false_alarm" | "severity_missing"
                                             # | "location_missing"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Observation:
    """What a round starts with: ground truth (copies of the active disasters) and the noisy situation report."""

    round: int
    width: int
    height: int
    disasters: tuple[Disaster, ...]
    report: tuple[ReportItem, ...]
    report_text: str

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "width": self.width, "height": self.height,
                "disasters": [d.to_dict() for d in self.disasters],
                "report": [item.to_dict() for item in self.report], "report_text": self.report_text}


@dataclass
class RoundOutcome:
    """Result of ``end_round``: containment, rewards, penalties and the round's metrics."""

    round: int
    drone_cells: list[Cell]
    actions: list[Cell] | None
    attended: list[int]
    severity_before: dict[int, int]
    severity_after: dict[int, int]           # 0 for a disaster cleared this round
    cleared: list[int]
    reward_cleared: float
    penalty_uncontained: float
    misallocation_cost: float
    net_reward: float
    metrics: dict[str, Any]                  # coverage, misallocation_penalty, deviation, active, attended, cleared

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["drone_cells"] = [list(c) for c in self.drone_cells]
        d["actions"] = None if self.actions is None else [list(c) for c in self.actions]
        d["severity_before"] = {str(k): v for k, v in self.severity_before.items()}
        d["severity_after"] = {str(k): v for k, v in self.severity_after.items()}
        return d


def in_grid(cell: Sequence[int], width: int, height: int) -> bool:
    return 0 <= cell[0] < width and 0 <= cell[1] < height


def clamp_cell(cell: Sequence[float], width: int, height: int) -> Cell:
    """The nearest grid cell (coordinates rounded half to even, then clipped)."""
    return (min(max(int(round(cell[0])), 0), width - 1), min(max(int(round(cell[1])), 0), height - 1))


def neighbours(cell: Cell, width: int, height: int) -> list[Cell]:
    """The 4-neighbours of ``cell`` on the grid, in the order +x, -x, +y, -y."""
    x, y = cell
    return [c for c in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)) if in_grid(c, width, height)]


def cell_centre(cell, cell_size: float) -> np.ndarray:
    """Centre of grid cell (x, y) in metres: ((x + 0.5) s, (y + 0.5) s)."""
    return (np.asarray(cell, dtype=float) + 0.5) * cell_size
