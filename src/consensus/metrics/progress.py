"""How far a run is from consensus, for the person watching it: the rounds done, the time a round takes, and an
estimate of the time left.

``ProgressEstimate`` is fed, once per progress line, the run time, the rounds every robot has reached (the
slowest robot's round counter, which counts a round when it starts: a fleet round is under way once its last robot
has begun it) and the disagreement the run judges
(the meeting points' spread with bodies, else the positions' spread). From the rounds it measures the time per
round (the last ``window`` rounds' completion times); from the disagreement at each round's completion it fits the
geometric rate a round shrinks it by (consensus rules contract the spread by a roughly constant factor a round:
paper 1, Fig. 4), and the rounds left until the tolerance follow:

    rounds_left = log(tol / d) / log(rate),        time_left = rounds_left * time_per_round

No estimate (``None``, shown as "n/a") before two rounds are done, while the disagreement does not shrink, or
when it is not a number. It is an estimate for a person, never a decision: nothing in a run reads it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Estimate:
    rounds: int                      # rounds every robot has reached (the slowest robot's round counter)
    s_per_round: float | None        # seconds per round (recent rounds)
    rate: float | None               # the disagreement's factor per round (< 1: shrinking)
    left_s: float | None             # estimated seconds to consensus (0 when within the tolerance)

    def text(self) -> str:
        """The progress line's part: ``rounds 5 (12.3 s/round), consensus in ~40 s`` (or ``n/a``)."""
        per = "n/a" if self.s_per_round is None else f"{self.s_per_round:.1f} s/round"
        eta = "n/a" if self.left_s is None else f"~{self.left_s:.0f} s"
        return f"rounds {self.rounds} ({per}), consensus in {eta}"


class ProgressEstimate:
    """Rounds, time per round and time to consensus (module docstring)."""

    def __init__(self, tol: float, window: int = 4) -> None:
        if not (tol > 0 and math.isfinite(tol)):
            raise ValueError(f"tolerance must be a positive number, got {tol!r}")
        self.tol = float(tol)
        self.window = max(2, int(window))
        self._done: list[tuple[int, float, float]] = []        # (round, time it completed, disagreement then)

    def update(self, t: float, rounds_done: int, disagreement: float) -> Estimate:
        rounds_done = max(0, int(rounds_done))
        if rounds_done > (self._done[-1][0] if self._done else 0) and math.isfinite(t):
            self._done.append((rounds_done, float(t), float(disagreement)))
            del self._done[:-(self.window + 1)]
        return Estimate(rounds_done, self._per_round(), self._rate(), self._left(disagreement))

    def _per_round(self) -> float | None:
        if len(self._done) < 2:
            return None
        (r0, t0, _), (r1, t1, _) = self._done[0], self._done[-1]
        return (t1 - t0) / (r1 - r0)

    def _rate(self) -> float | None:
        pts = [(r, d) for r, _, d in self._done if math.isfinite(d) and d > 0]
        if len(pts) < 2 or pts[-1][0] == pts[0][0]:
            return None
        (r0, d0), (r1, d1) = pts[0], pts[-1]
        return (d1 / d0) ** (1.0 / (r1 - r0))

    def _left(self, d: float) -> float | None:
        if not math.isfinite(d):
            return None
        if d <= self.tol:
            return 0.0
        per, rate = self._per_round(), self._rate()
        if per is None or rate is None or not 0 < rate < 1:
            return None
        return math.log(self.tol / d) / math.log(rate) * per
