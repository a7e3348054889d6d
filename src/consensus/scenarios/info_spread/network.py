"""The misinformation network of paper 2's scenario 2 (appendix C.2): graph, node states, spread, adversary, reports.

* Graph: ``networkx.barabasi_albert_graph(nodes, attach, seed=seed)`` (scale-free; 50 nodes, m = 3 by default).
* States: ``UNAWARE`` (0), ``INFORMED`` (1), ``MISINFORMED`` (2). ``initial_misinformed`` nodes, drawn uniformly
  without replacement, start misinformed (paper: "2-5 random nodes").
* A round ``step(checked)`` after the defenders chose the set ``checked`` (the union of their fact-checks):

  1. **fact-check** (ours; the paper leaves it open): every checked node becomes ``INFORMED`` (a misinformed node
     is corrected, an unaware node is inoculated);
  2. **spread** (C.2): each misinformed node infects each neighbour with probability ``p_spread`` (0.1 / 0.2 / 0.3
     at low / moderate / high volatility) unless the neighbour was fact-checked this round; an informed neighbour
     is infected with ``p_spread * (1 - informed_resistance)`` (ours). Infections use the states at the start of
     the spread (no chains within a round);
  3. **injection** (C.2, "may inject a new rumor into k_new = 1-2 additional nodes"): on the adversary's schedule,
     ``k_new`` uniform in {1, 2} nodes that are not misinformed and not checked this round become misinformed, each
     with a text snippet for the next report. Schedule (ours within C.2's words): low "only every 4 rounds" = after
     rounds 4, 8, ...; moderate "every 2-3 rounds" = gaps drawn uniformly from {2, 3}; high "nearly every round" =
     each round with probability ``high_injection_p`` (0.8).

  The nodes that became misinformed in a step form that round's *cohort* (the containment time follows it).
* Report (``observe``): the previous step's rumour snippets, then one detection item per misinformed node that is
  seen (probability ``detection``). A share ``report_noise`` of the items is misleading: a snippet names a decoy
  node instead of the infected one, a detection becomes either a false alarm about a node that is not misinformed
  or a false all-clear about a misinformed one ("was already vaccinated with correct info"). The defenders see the
  counts of each state (the "network state"), the reported nodes and the graph itself, never the true labels.

Every random draw comes from ``numpy.random.default_rng([seed, 21])`` (the graph from ``seed``): a run is a function
of its seed and the defenders' choices.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from consensus.extras import require

if TYPE_CHECKING:
    import networkx as nx

UNAWARE, INFORMED, MISINFORMED = 0, 1, 2
STATE_NAMES = ("unaware", "informed", "misinformed")

CLAIMS = ("vaccines contain microchips", "the city water supply is poisoned", "the election was moved to next week",
          "the main bridge will close for good", "the local bank is about to collapse",
          "the new 5G mast causes headaches", "the school closures are permanent")
SNIPPETS = ("Breaking: Node #{node} says '{claim}', {k} neighbors are starting to share the rumor.",
            "Secret leak: Node #{node} claims {claim}.",
            "Weather update forwarded by Node #{node}: 'storm warning, and by the way {claim}'.",
            "Node #{node} shares a 'partly true' post: officials confirmed a meeting, and {claim}.")
DETECTION = "Suspicious rumor detected at Node #{node}."
FALSE_CLEAR = "Some people say Node #{node} was already vaccinated with correct info."


@dataclass(frozen=True)
class ReportItem:
    text: str
    node: int | None        # the node the item names
    kind: str               # rumour | detection | all_clear
    misleading: bool        # ground truth (never shown to the agents)

    def to_dict(self) -> dict:
        return {"text": self.text, "node": self.node, "kind": self.kind, "misleading": self.misleading}


@dataclass(frozen=True)
class Observation:
    round: int
    nodes: int
    checks: int                         # R
    counts: dict                        # state name -> number of nodes
    report: tuple[ReportItem, ...]
    graph: nx.Graph = field(repr=False, compare=False)
    previous_reported: frozenset = frozenset()   # nodes named as infected in the previous round's report

    @property
    def reported(self) -> list[int]:
        """Nodes the report names as infected (rumours and detections), first mention first."""
        return list(dict.fromkeys(i.node for i in self.report if i.kind != "all_clear" and i.node is not None))

    @property
    def cleared(self) -> set[int]:
        return {i.node for i in self.report if i.kind == "all_clear"}

    def to_dict(self) -> dict:
        return {"round": self.round, "counts": dict(self.counts), "report": [i.to_dict() for i in self.report]}


@dataclass
class StepOutcome:
    round: int
    checked: list[int]
    corrected: int                      # misinformed nodes fact-checked
    spread_infections: int
    injected: list[int]
    misinformed_share: float
    counts: dict

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class InfoNetwork:
    def __init__(self, cfg, seed: int) -> None:
        self.cfg = cfg
        nx = require("networkx", "the info-spread network")     # the 'studies' extra
        self.graph = nx.barabasi_albert_graph(cfg.nodes, cfg.attach, seed=seed)
        self.neighbours = [np.fromiter(self.graph.neighbors(i), dtype=int) for i in range(cfg.nodes)]
        self.rng = np.random.default_rng([seed, 21])
        self.state = np.full(cfg.nodes, UNAWARE, dtype=np.int8)
        first = self.rng.choice(cfg.nodes, size=cfg.initial_misinformed, replace=False)
        self.state[first] = MISINFORMED
        self.round = 0
        self.cohorts: list[tuple[int, list[int]]] = [(-1, sorted(int(i) for i in first))]
        self.history: list[np.ndarray] = []          # misinformed mask at the end of each step
        self._pending = [self._snippet(int(i)) for i in sorted(first)]
        self._reported: frozenset = frozenset()
        self._next_injection = self._gap(0)

    # --- adversary ---------------------------------------------------------------------------------------------------
    def _gap(self, after: int) -> int | None:
        """The round after whose step the next injection happens (None: decided per round, high volatility)."""
        v = self.cfg.volatility
        if v == "low":
            return after + 4
        if v == "moderate":
            return after + int(self.rng.integers(2, 4))
        return None

    def _injects(self, step: int) -> bool:
        if self._next_injection is None:
            return bool(self.rng.random() < self.cfg.high_injection_p)
        if step + 1 >= self._next_injection:
            self._next_injection = self._gap(step + 1)
            return True
        return False

    def _snippet(self, node: int) -> ReportItem:
        misleading = bool(self.rng.random() < self.cfg.report_noise)
        named = node
        if misleading:
            others = [i for i in range(self.cfg.nodes) if i != node]
            named = int(others[int(self.rng.integers(len(others)))])
        text = SNIPPETS[int(self.rng.integers(len(SNIPPETS)))].format(
            node=named, claim=CLAIMS[int(self.rng.integers(len(CLAIMS)))], k=len(self.neighbours[node]))
        return ReportItem(text, named, "rumour", misleading)

    # --- the round -------------------------------------------------------------------------------------------------
    def counts(self) -> dict:
        return {name: int(np.sum(self.state == k)) for k, name in enumerate(STATE_NAMES)}

    def observe(self) -> Observation:
        items = list(self._pending)
        for node in np.flatnonzero(self.state == MISINFORMED):
            if self.rng.random() >= self.cfg.detection:
                continue
            if self.rng.random() < self.cfg.report_noise:
                if self.rng.random() < 0.5:
                    items.append(ReportItem(FALSE_CLEAR.format(node=int(node)), int(node), "all_clear", True))
                else:
                    clean = np.flatnonzero(self.state != MISINFORMED)
                    if len(clean):
                        decoy = int(clean[int(self.rng.integers(len(clean)))])
                        items.append(ReportItem(DETECTION.format(node=decoy), decoy, "detection", True))
            else:
                items.append(ReportItem(DETECTION.format(node=int(node)), int(node), "detection", False))
        obs = Observation(round=self.round, nodes=self.cfg.nodes, checks=self.cfg.checks_per_agent,
                          counts=self.counts(), report=tuple(items), graph=self.graph,
                          previous_reported=self._reported)
        self._reported = frozenset(obs.reported)
        return obs

    def step(self, checked) -> StepOutcome:
        checked = sorted({int(i) for i in checked if 0 <= int(i) < self.cfg.nodes})
        mask = np.zeros(self.cfg.nodes, dtype=bool)
        mask[checked] = True
        corrected = int(np.sum(self.state[mask] == MISINFORMED))
        self.state[mask] = INFORMED
        before = self.state.copy()
        p = self.cfg.p_spread
        newly: list[int] = []
        for u in np.flatnonzero(before == MISINFORMED):
            nb = self.neighbours[u]
            draws = self.rng.random(len(nb))
            for v, x in zip(nb, draws):
                if mask[v] or self.state[v] == MISINFORMED:
                    continue
                if x < (p if before[v] == UNAWARE else p * (1.0 - self.cfg.informed_resistance)):
                    self.state[v] = MISINFORMED
                    newly.append(int(v))
        spread = len(newly)
        injected: list[int] = []
        self._pending = []
        if self._injects(self.round):
            free = np.flatnonzero((self.state != MISINFORMED) & ~mask)
            k = min(int(self.rng.integers(1, 3)), len(free))
            if k:
                injected = sorted(int(i) for i in self.rng.choice(free, size=k, replace=False))
                self.state[injected] = MISINFORMED
                self._pending = [self._snippet(i) for i in injected]
        self.cohorts.append((self.round, sorted(set(newly) | set(injected))))
        self.history.append(self.state == MISINFORMED)
        out = StepOutcome(round=self.round, checked=checked, corrected=corrected, spread_infections=spread,
                          injected=injected, misinformed_share=float(np.mean(self.state == MISINFORMED)),
                          counts=self.counts())
        self.round += 1
        return out

    def over(self) -> bool:
        """More than ``stop_share`` of the nodes misinformed (C.2: the simulation ends)."""
        return float(np.mean(self.state == MISINFORMED)) > self.cfg.stop_share
