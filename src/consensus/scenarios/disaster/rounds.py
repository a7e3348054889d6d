"""One round of the disaster response team: ``consensus.discussion.rounds`` (the protocol, described there) with
grid cells as actions, shared by the headless runner and the ROS 2 nodes.

Implicit: every drone moves to its own choice; a drone without a usable choice stays on its cell. Explicit: the
collective decision is a cell (``kind="categorical"``; majority ties go to the cell voted first, averaging rounds the
mean cell half up per axis) and every drone moves there; if every vote failed the drones stay. A ROS drone node
calls ``drone.discuss``/``drone.act``/``drone.propose`` for itself with ``inbox_for``; an aggregator node calls
``explicit_decision`` with proposers that forward to the drones.
"""
from __future__ import annotations

from typing import Callable, Sequence

from consensus.discussion import rounds as protocol
from consensus.discussion.rounds import (RoundDecision, add_round_counters, inbox_for,  # noqa: F401
                                         message_of, round_counters)
from consensus.discussion.replies import InboxMessage
from consensus.scenarios.disaster.agents import Cell


def _cell(decision) -> Cell:
    return int(decision[0]), int(decision[1])


def explicit_decision(drones: Sequence, obs, cells: Sequence[Cell | None], heard: Sequence[InboxMessage],
                      strategy: str, *, coordinator=None, max_turns: int = 5, map_fn: Callable = map):
    """Explicit action phase: the drones' votes aggregated by ``strategy`` (consensus.decision)."""
    return protocol.explicit_decision(drones, obs, cells, heard, strategy, kind="categorical",
                                      coordinator=coordinator, max_turns=max_turns, map_fn=map_fn)


def run_round(drones: Sequence, obs, cells: Sequence[Cell | None], *, mode: str = "implicit",
              strategy: str = "majority", discussion_turns: int = 1, coordinator=None, max_agreement_turns: int = 5,
              previous: Sequence[InboxMessage] = (), map_fn: Callable = map) -> RoundDecision:
    """One round for ``drones`` at ``cells`` (drone order); ``previous`` = last round's ``final_messages``."""
    if len(cells) != len(drones):
        raise ValueError(f"{len(drones)} drones but {len(cells)} cells")
    return protocol.run_round(drones, obs, cells, mode=mode, strategy=strategy, discussion_turns=discussion_turns,
                              coordinator=coordinator, max_agreement_turns=max_agreement_turns, previous=previous,
                              map_fn=map_fn, kind="categorical", normalize=_cell)
