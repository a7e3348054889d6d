"""A flaky OpenAI-compatible endpoint for tests and benchmarks: ``tests/support/fake_openai_server.py`` with a script
that rotates, request after request, through a good reply, an HTTP 500, garbage (text that is not a planner's JSON)
and a slow good reply.

* ``FlakyScript(slow_s=1.0)`` is the script (a callable for ``FakeOpenAIServer``); ``cycle`` changes the rotation.
  The good replies are the planner's JSON with a position drawn from the request's seed, so the same request gets
  the same position whichever endpoint or order.
* ``hold(needle)``: requests whose messages contain ``needle`` wait at the server until ``open_gate()`` (the
  ``held`` event is set when the first arrives): a test kills a process while it holds an endpoint slot, at a
  point it controls.

Run as a program it serves until interrupted and prints its URL::

    python tests/support/flaky_openai_server.py [--slow 1.0] [--cycle good,500,garbage,slow]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import threading

if __package__:                 # imported: support.flaky_openai_server
    from .fake_openai_server import Action, FakeOpenAIServer, Reply, Status, serve
else:                           # run as a script: python tests/support/flaky_openai_server.py
    from fake_openai_server import Action, FakeOpenAIServer, Reply, Status, serve

GARBAGE = "I would rather not say where to go today."
CYCLE = ("good", "500", "garbage", "slow")


class FlakyScript:
    """The rotating script (module docstring); thread-safe."""

    def __init__(self, slow_s: float = 1.0, cycle: tuple[str, ...] = CYCLE, delay_s: float = 0.02) -> None:
        unknown = set(cycle) - set(CYCLE)
        if unknown or not cycle:
            raise ValueError(f"cycle items must be among {CYCLE}, got {cycle!r}")
        self.slow_s, self.cycle, self.delay_s = slow_s, tuple(cycle), delay_s
        self.n = 0
        self.counts = {k: 0 for k in CYCLE}
        self._lock = threading.Lock()
        self._needle: str | None = None
        self.held = threading.Event()
        self._gate = threading.Event()

    def hold(self, needle: str) -> None:
        self._needle = needle
        self._gate.clear()

    def open_gate(self) -> None:
        self._gate.set()

    def good(self, body: dict, delay_s: float) -> Reply:
        digest = hashlib.sha256(str(body.get("seed")).encode()).digest()
        return Reply(json.dumps({"reasoning": "meet near the middle", "position": [float(digest[0] % 23)]}),
                     delay_s=delay_s)

    def __call__(self, body: dict) -> Action:
        if self._needle is not None and not self._gate.is_set() and self._needle in json.dumps(body["messages"]):
            self.held.set()
            self._gate.wait()
        with self._lock:
            kind = self.cycle[self.n % len(self.cycle)]
            self.n += 1
            self.counts[kind] += 1
        if kind == "500":
            return Status(500, delay_s=self.delay_s, message="flaky endpoint")
        if kind == "garbage":
            return Reply(GARBAGE, delay_s=self.delay_s)
        return self.good(body, self.slow_s if kind == "slow" else self.delay_s)


def flaky_server(slow_s: float = 1.0, cycle: tuple[str, ...] = CYCLE) -> tuple[FakeOpenAIServer, FlakyScript]:
    script = FlakyScript(slow_s, cycle)
    return FakeOpenAIServer(script), script


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--slow", type=float, default=1.0, help="seconds of a slow reply")
    ap.add_argument("--cycle", default=",".join(CYCLE), help="the rotation, from " + ",".join(CYCLE))
    args = ap.parse_args(argv)
    script = FlakyScript(args.slow, tuple(args.cycle.split(",")))
    srv = FakeOpenAIServer(script, port=args.port).start()
    print(f"flaky OpenAI server on {srv.base_url} (cycle {','.join(script.cycle)}, slow {args.slow}s)", flush=True)
    return serve(srv)


if __name__ == "__main__":
    raise SystemExit(main())
