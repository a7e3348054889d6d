"""Textual situation reports of the disaster environment (paper 2, appendices B.1 and C.1).

Every round the report has one item per active disaster (in id order), e.g.::

    Dispatch alert: fire at sector (3,4), severity 8 (rising), 12 casualties reported, power grid at risk.

The trend compares the severity with the previous report ("newly reported", "rising", "falling", "steady").
The report is plain data built from fixed templates (no text from agents or LLMs); an item is at most
``MAX_ITEM_CHARS`` characters and a report has at most K + 1 items.

Noise ("up to 20% of these messages may be contradictory or incomplete", C.1). Each disaster item, and then one
possible extra rumour per round, is flawed when a draw ``rng.random() < report_noise`` succeeds AND the running
budget allows it: after the item, ``noisy <= report_noise * total`` must hold, counted over all items reported so
far in the run. So at every point of a run at most ``report_noise`` of the items are flawed (on average somewhat
fewer); a single round may have a larger share. A flawed disaster item is, with equal probability:

- contradictory: ``trend`` — a wrong trend with the true severity (rising or steady at severity >= 5 is
  "reported under control", falling or steady below 5 is "reported to be intensifying"), or ``location`` — the
  disaster is placed on a wrong neighbouring cell;
- incomplete: ``severity_missing`` ("severity unknown", no trend) or ``location_missing`` ("location unconfirmed").

The extra rumour is contradictory (``false_alarm``): a disaster reported on a cell where there is none
(``disaster_id`` None). Every item records its ``quality`` and ``flaw``; all draws use the environment's rng.

Reading a report (``read_report``): what a drone without sensor readings knows, taken from the items' *text* only
(as an LLM reads it; never ``disaster_id``, ``quality`` or ``flaw``). Each "Dispatch alert" with a location becomes a
``ReportedDisaster`` (id = the item's position); "severity unknown" gives ``severity`` None; an item is
``uncertain`` when its text shows it ("severity unknown", "reported under control", "reported to be
intensifying"). Items without a location and "Unconfirmed rumour" items are left out (nowhere to go, unconfirmed).
A location error looks like an accurate item and is believed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from consensus.scenarios.disaster.world import DISASTER_KINDS, Cell, Disaster, ReportItem, neighbours

MAX_ITEM_CHARS = 160
CONTRADICTORY_FLAWS = ("trend", "location")
INCOMPLETE_FLAWS = ("severity_missing", "location_missing")


class SituationReporter:
    """Builds the report of each round and keeps the run's noise budget and the last reported severities."""

    def __init__(self, width: int, height: int, noise: float, rng: np.random.Generator) -> None:
        self.width, self.height, self.noise, self.rng = width, height, noise, rng
        self.items_total = 0
        self.items_noisy = 0
        self._last_severity: dict[int, int] = {}

    def report(self, disasters: Sequence[Disaster]) -> tuple[ReportItem, ...]:
        items = [self._item(d) for d in disasters]
        if self._may_flaw_next():
            self._count(flawed=True)
            items.append(self._false_alarm(disasters))
        self._last_severity = {d.id: d.severity for d in disasters}
        return tuple(items)

    # ------------------------------------------------------------------
    def _may_flaw_next(self) -> bool:
        """The noise draw for the next item, within the run's budget (noisy <= noise * total after it)."""
        return (self.rng.random() < self.noise
                and self.items_noisy + 1 <= self.noise * (self.items_total + 1) + 1e-9)

    def _count(self, flawed: bool) -> None:
        self.items_total += 1
        self.items_noisy += flawed

    def _trend(self, d: Disaster) -> str:
        last = self._last_severity.get(d.id)
        if last is None:
            return "newly reported"
        return "rising" if d.severity > last else "falling" if d.severity < last else "steady"

    def _item(self, d: Disaster) -> ReportItem:
        trend = self._trend(d)
        flawed = self._may_flaw_next()
        self._count(flawed)
        if not flawed:
            return ReportItem(alert_text(d, d.cell, f"severity {d.severity} ({trend})"), d.id, "accurate")
        flaw_index = int(self.rng.integers(4))
        flaw = (CONTRADICTORY_FLAWS + INCOMPLETE_FLAWS)[flaw_index]
        quality = "contradictory" if flaw in CONTRADICTORY_FLAWS else "incomplete"
        cell: Cell | None = d.cell
        severity = f"severity {d.severity} ({trend})"
        if flaw == "trend":
            calm = trend == "rising" or (trend != "falling" and d.severity >= 5)
            severity = f"severity {d.severity}, " + ("reported under control" if calm
                                                      else "reported to be intensifying")
        elif flaw == "location":
            options = neighbours(d.cell, self.width, self.height)
            cell = options[int(self.rng.integers(len(options)))]
        elif flaw == "severity_missing":
            severity = "severity unknown"
        else:
            cell = None
        return ReportItem(alert_text(d, cell, severity), d.id, quality, flaw)

    def _false_alarm(self, disasters: Sequence[Disaster]) -> ReportItem:
        taken = {d.cell for d in disasters}
        while True:                    # at most half the cells hold a disaster (EnvConfig.validate)
            cell = (int(self.rng.integers(self.width)), int(self.rng.integers(self.height)))
            if cell not in taken:
                break
        kind = DISASTER_KINDS[int(self.rng.integers(len(DISASTER_KINDS)))].replace("_", " ")
        return ReportItem(f"Unconfirmed rumour: {kind} at sector ({cell[0]},{cell[1]}).", None, "contradictory",
                          "false_alarm")


def alert_text(d: Disaster, cell: Cell | None, severity: str) -> str:
    """The "Dispatch alert" item of ``d`` placed on ``cell`` (None: unconfirmed) with the ``severity`` wording."""
    where = f"at sector ({cell[0]},{cell[1]})" if cell is not None else "reported, location unconfirmed"
    casualties = f"{d.casualties} casualties reported" if d.casualties else "no casualties reported"
    risk = f", {d.infrastructure} at risk" if d.infrastructure else ""
    text = f"Dispatch alert: {d.kind.replace('_', ' ')} {where}, {severity}, {casualties}{risk}."
    return text[:MAX_ITEM_CHARS]


_ITEM_RE = re.compile(
    r"Dispatch alert: (?P<kind>[a-z_ ]+?) at sector \((?P<x>\d+),(?P<y>\d+)\), "
    r"(?:severity (?P<severity>\d+)(?: \((?P<trend>[a-z ]+)\)|, (?P<claim>reported [a-z ]+))?|severity unknown)"
    r"(?:, (?:(?P<casualties>\d+) casualties reported|no casualties reported))?"
    r"(?:, (?P<infrastructure>[a-z ]+) at risk)?\.")


@dataclass(frozen=True)
class ReportedDisaster:
    """A disaster as one report item states it (the attributes a heuristic drone scores, like ``Disaster``'s)."""

    id: int                       # position of the item in the report
    cell: Cell
    severity: int | None          # None: "severity unknown"
    kind: str
    casualties: int
    infrastructure: str
    new: bool                     # "newly reported"
    uncertain: bool               # the text shows a doubt (unknown severity, a claimed trend)


def read_report(items: Sequence[Any]) -> tuple[ReportedDisaster, ...]:
    """The located disaster alerts of a report (``ReportItem`` s or their texts); see the module docstring."""
    out = []
    for i, item in enumerate(items):
        m = _ITEM_RE.fullmatch(getattr(item, "text", item))
        if m is None:
            continue
        sev = m["severity"]
        out.append(ReportedDisaster(
            id=i, cell=(int(m["x"]), int(m["y"])), severity=None if sev is None else int(sev),
            kind=m["kind"].replace(" ", "_"), casualties=int(m["casualties"] or 0),
            infrastructure=m["infrastructure"] or "", new=m["trend"] == "newly reported",
            uncertain=sev is None or m["claim"] is not None))
    return tuple(out)
