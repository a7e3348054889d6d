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
"""
from __future__ import annotations

from typing import Sequence

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
            return ReportItem(_text(d, d.cell, f"severity {d.severity} ({trend})"), d.id, "accurate")
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
        return ReportItem(_text(d, cell, severity), d.id, quality, flaw)

    def _false_alarm(self, disasters: Sequence[Disaster]) -> ReportItem:
        taken = {d.cell for d in disasters}
        while True:                    # at most half the cells hold a disaster (EnvConfig.validate)
            cell = (int(self.rng.integers(self.width)), int(self.rng.integers(self.height)))
            if cell not in taken:
                break
        kind = DISASTER_KINDS[int(self.rng.integers(len(DISASTER_KINDS)))].replace("_", " ")
        return ReportItem(f"Unconfirmed rumour: {kind} at sector ({cell[0]},{cell[1]}).", None, "contradictory",
                          "false_alarm")


def _text(d: Disaster, cell: Cell | None, severity: str) -> str:
    where = f"at sector ({cell[0]},{cell[1]})" if cell is not None else "reported, location unconfirmed"
    casualties = f"{d.casualties} casualties reported" if d.casualties else "no casualties reported"
    risk = f", {d.infrastructure} at risk" if d.infrastructure else ""
    text = f"Dispatch alert: {d.kind.replace('_', ' ')} {where}, {severity}, {casualties}{risk}."
    return text[:MAX_ITEM_CHARS]
