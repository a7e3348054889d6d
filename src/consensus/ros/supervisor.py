"""The end of a ROS run, written once for the three nodes that end one (the aggregation's ``recorder``, the disaster
``disaster_grid``, the naming game's ``matchmaker``): each keeps only its scenario's judgement.

* ``fleet_figures(per_robot, node_health, own, avoid)``: what every run's summary holds of its fleet, summed from the
  robots' status records, the other nodes' ``/health`` records and the ending node's own: ``callback_errors`` and
  ``bad_messages`` (``sum_health``), what was refused as implausible and who was suspect (``sum_implausible``),
  ``stale_stops``, the control ticks and their on-time share, ``collision_avoidance`` and, with the filter,
  ``clearance_m``, ``d_min_m`` and the robots' filter counters summed (``collision``).
* ``RunEnd``: the end itself, once (a second call, e.g. after Ctrl-C, returns the same summary): ``summary.json``
  (unless the scenario's writer already wrote it, plots and all: the aggregation's ``rundir.finalize``), the node's
  closing log line and the ``RESULTS <dir>`` line ``consensus run`` and ``ros2 launch`` users wait for
  (``runs.ros_runner.announce_results``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from consensus.control.avoidance import sum_collision
from consensus.control.plausibility import sum_implausible
from consensus.ros.health import Health, sum_health
from consensus.runs.rundir import write_json
from consensus.runs.ros_runner import announce_results


def fleet_figures(per_robot: list[dict], node_health: Iterable[dict], own: Health, own_name: str,
                  avoid=None) -> dict:
    """The fleet's figures of a run's summary (module docstring); ``own_name``: the ending node's name in its own
    health record."""
    others = list(node_health)
    health = sum_health([*per_robot, *others, own.counts()])
    ticks = sum(st.get("control", {}).get("ticks", 0) for st in per_robot)
    on_time = sum(st.get("control", {}).get("on_time", 0) for st in per_robot)
    out: dict[str, Any] = {"callback_errors": health["callback_errors"], "bad_messages": health["bad_messages"],
                           **sum_implausible([*per_robot, *others, own.record(own_name)]),
                           "stale_stops": int(sum(st.get("stale_stops", 0) for st in per_robot)),
                           "control_ticks": int(ticks), "control_on_time_share": (on_time / ticks) if ticks else None,
                           "collision_avoidance": "none" if avoid is None else "cbf"}
    if avoid is not None:
        out.update(clearance_m=avoid.clearance_m, d_min_m=avoid.d_min_m,
                   collision=sum_collision([st["collision"] for st in per_robot
                                            if isinstance(st.get("collision"), dict)]))
    return out


class RunEnd:
    """The end of the run a node ends (module docstring), into run directory ``out``."""

    def __init__(self, node, out: Path) -> None:
        self.node, self.out = node, Path(out)
        self.summary: dict | None = None

    @property
    def done(self) -> bool:
        return self.summary is not None

    def conclude(self, judge: Callable[[], tuple[dict, str]], *, written: bool = False) -> dict:
        """End the run once: ``judge()`` gives the summary and the closing line's verdict; the summary is written to
        ``summary.json`` (``written``: the judge wrote it) and announced. A second call returns the first summary."""
        if self.summary is not None:
            return self.summary
        summary, verdict = judge()
        if not written:
            write_json(self.out / "summary.json", summary)
        self.summary = summary
        self.node.get_logger().info(f"done: {verdict}; results in {self.out}")
        announce_results(self.out)
        return summary
