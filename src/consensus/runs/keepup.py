"""Whether a node keeps up with the machine it runs on (no ROS needed): what it should have handled and what it did,
and one loud warning, early, once it falls behind, instead of a record silently thinned.

* ``Shortfall``: counts of work expected and work done (messages, samples, control slots); ``check()`` returns one
  warning line, the first time that, with at least ``min_expected`` expected, more than ``max_share`` of it and at
  least ``min_lost`` units were lost; ``None`` before and after (one warning per run and watch: a loaded machine
  does not flood the log).
* ``TimerSlots``: a periodic callback's slots since its first call (``period_s``) against the calls that came: a
  starved timer skips its missed slots silently (rcl), which is a sample the record lacks.

The run's recorder (trajectory samples) and the fleet clock (commands later than 10 ms) warn with these, and
``consensus run`` echoes the warning to the console (docs/benchmarks.md, 'At the hardware's speed (issue 44)').
"""
from __future__ import annotations

#: the words of every warning (``consensus run`` echoes a node's log line holding them to the console)
BEHIND = "cannot keep up with this machine"
#: the share of a node's work that may be lost before it warns (the targets: nothing lost; one in a thousand is
#: noise at a run's ends, e.g. a message sent while a subscription was being matched)
MAX_SHARE = 0.001
#: a watch says nothing before this much work was expected (a handful of messages says nothing about the machine)
MIN_EXPECTED = 50
#: nor for fewer units lost than this: one sample a busy start-up skipped (the LLM server warming its cache on both
#: cores at a demo's start) is not a machine that cannot keep up
MIN_LOST = 3


class Shortfall:
    """Work expected and work done by one part of a node (``what``, e.g. "bag_recorder: messages")."""

    def __init__(self, what: str, *, unit: str = "messages", max_share: float = MAX_SHARE,
                 min_expected: int = MIN_EXPECTED, min_lost: int = MIN_LOST, advice: str = "",
                 missed: str = "lost") -> None:
        """``missed``: what befell the work not done ("lost", "late by more than 10 ms", ...)."""
        self.what, self.unit, self.missed, self.advice = what, unit, missed, advice
        self.max_share, self.min_expected, self.min_lost = max_share, min_expected, min_lost
        self.expected = 0
        self.done = 0
        self.warned = False
        self.by: dict[str, int] = {}            # what was lost, by source (a topic, a robot group)

    @property
    def lost(self) -> int:
        return max(self.expected - self.done, 0)

    @property
    def share(self) -> float:
        return self.lost / self.expected if self.expected else 0.0

    def add(self, expected: int, done: int, source: str | None = None) -> None:
        """``expected`` units of work came due, ``done`` of them were done (lost: the difference, by ``source``)."""
        self.expected += int(expected)
        self.done += int(done)
        if source is not None and expected > done:
            self.by[source] = self.by.get(source, 0) + int(expected - done)

    def behind(self) -> bool:
        return self.expected >= self.min_expected and self.lost >= self.min_lost and self.share > self.max_share

    def line(self, elapsed_s: float | None = None) -> str:
        """The figure: how much was lost, of what, where most."""
        when = f" in its first {elapsed_s:.1f} s" if elapsed_s is not None else ""
        text = (f"{self.what} {BEHIND}: {self.lost:,} of {self.expected:,} {self.unit} "
                f"{self.missed} ({self.share:.1%}){when}")
        if self.by:
            top = sorted(self.by.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
            text += "; most on " + ", ".join(f"{k} ({v:,})" for k, v in top)
        return text + (f"; {self.advice}" if self.advice else "")

    def check(self, elapsed_s: float | None = None) -> str | None:
        """The warning line, the first time the watch is behind; None otherwise (and ever after)."""
        if self.warned or not self.behind():
            return None
        self.warned = True
        return self.line(elapsed_s)

    def as_dict(self) -> dict:
        return {"expected": self.expected, "done": self.done, "lost": self.lost, "warned": self.warned,
                "lost_by": dict(sorted(self.by.items(), key=lambda kv: -kv[1])[:10])}


class TimerSlots:
    """A periodic callback of period ``period_s``: the slots since its first call against its calls, into a
    ``Shortfall`` (a slot is lost when a call came a whole period or more after its slot: rcl then skips it)."""

    def __init__(self, period_s: float, shortfall: Shortfall) -> None:
        self.period, self.shortfall = period_s, shortfall
        self.t0: float | None = None
        self.calls = 0

    def call(self, now: float) -> int:
        """One call at ``now`` [s]; returns the slots lost since the last call."""
        if self.t0 is None:
            self.t0 = now
        self.calls += 1
        # the slots up to now, the first included: a call a whole period late means rcl skipped a slot
        due = int((now - self.t0) / self.period + 1e-6) + 1
        lost_before = self.shortfall.lost
        expected = max(due, self.calls)
        self.shortfall.add(expected - self.shortfall.expected, self.calls - self.shortfall.done)
        return self.shortfall.lost - lost_before
