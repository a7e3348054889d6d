"""The nodes' health counters and the one guard of a ROS callback.

Every exception a ROS callback raises (caught by ``guarded``) and every input message (or part of one, e.g. one pose
of a PoseArray) a node drops or repairs because it is non-finite, absurd or malformed is counted in a ``Health``
object. Each node (and each robot of a fleet process) has its own, a child of the process-wide ``HEALTH`` (which
therefore holds the process's total; ``guarded`` counts there when given no ``Health``). A robot reports its counts
in ``planner/status``; the other nodes call ``publish_health(node, health)``, which publishes the counters every
second on the relative topic ``health`` (std_msgs/String, ``consensus.ros.records.HealthRecord``) and the node's
status on ``/diagnostics``: for a node in the root namespace that is ``/health``, shared by all such nodes and told
apart by ``"node"``. ``sum_health(records)`` adds records up (a run's ``callback_errors`` and ``bad_messages``); a
process must not publish ``HEALTH`` next to its children's records, or the sum counts them twice.
"""
from __future__ import annotations

import inspect
import logging
import threading
import traceback
from collections import Counter
from typing import Callable, Iterable

import rclpy
import rclpy.executors
import rclpy.task
from rclpy.node import Node
from std_msgs.msg import String

from consensus import names
from consensus.ros import qos
from consensus.ros.diagnostics import HOST, DiagnosticsPublisher
from consensus.ros.records import HealthRecord


class Health:
    """Counters of what went wrong in a node (thread-safe): callback exceptions (per callback name) and input
    messages dropped or repaired (per input name). A child (``parent`` given) also counts into its parent, so the
    process-wide ``HEALTH`` holds the total of the process."""

    def __init__(self, parent: "Health | None" = None, logger=None) -> None:
        self.parent = parent
        self.logger = logger                  # the node's logger (rclpy): what ``guarded`` reports goes to /rosout
        self._lock = threading.Lock()
        self.errors_by_callback: Counter = Counter()
        self.bad_by_input: Counter = Counter()
        self.extra: Callable[[], dict] | None = None   # more fields of the node's health record (e.g. suspects)

    @property
    def callback_errors(self) -> int:
        with self._lock:
            return sum(self.errors_by_callback.values())

    @property
    def bad_messages(self) -> int:
        with self._lock:
            return sum(self.bad_by_input.values())

    def count_callback_error(self, what: str) -> int:
        """Count one exception of callback ``what``; returns how many ``what`` has raised so far."""
        with self._lock:
            self.errors_by_callback[what] += 1
            n = self.errors_by_callback[what]
        if self.parent is not None:
            self.parent.count_callback_error(what)
        return n

    def count_bad_message(self, what: str, n: int = 1) -> None:
        """Count ``n`` dropped or repaired inputs (messages, or entries of one message) of input ``what``."""
        if n <= 0:
            return
        with self._lock:
            self.bad_by_input[what] += n
        if self.parent is not None:
            self.parent.count_bad_message(what, n)

    def counts(self) -> dict:
        """``{"callback_errors": n, "bad_messages": m}`` (the keys status records and summaries carry)."""
        with self._lock:
            return {"callback_errors": sum(self.errors_by_callback.values()),
                    "bad_messages": sum(self.bad_by_input.values())}

    def record(self, node: Node | str) -> dict:
        """The JSON record of the ``health`` topic: ``{"node": fully-qualified name, "callback_errors": n,
        "bad_messages": m, "errors_by_callback": {name: n}, "bad_by_input": {name: n}}``."""
        name = node if isinstance(node, str) else node.get_fully_qualified_name()
        with self._lock:
            rec = {"node": name, "callback_errors": sum(self.errors_by_callback.values()),
                   "bad_messages": sum(self.bad_by_input.values()),
                   "errors_by_callback": dict(self.errors_by_callback), "bad_by_input": dict(self.bad_by_input)}
        return rec if self.extra is None else {**self.extra(), **rec}


#: the process's health counters (``guarded`` counts here unless given another ``Health``)
HEALTH = Health()


HEALTH_TOPIC = names.HEALTH.name     # relative: /health for the nodes of the root namespace


HEALTH_PERIOD_S = 1.0


def publish_health(node: Node, health: Health | None = None, period_s: float = HEALTH_PERIOD_S) -> Callable[[], None]:
    """Publish ``health.record(node)`` (default: the process's ``HEALTH``) on ``node``'s relative topic ``health``
    every ``period_s`` and once right away, and the same as the node's status on ``/diagnostics``
    (``consensus.ros.diagnostics``); returns the publish function (call it once more before shutdown for the final
    counts)."""
    health = health or HEALTH
    pub = node.create_publisher(String, names.HEALTH.name, qos.profile(names.HEALTH))
    diagnostics = DiagnosticsPublisher(node)

    def publish() -> None:
        rec = HealthRecord.from_dict(health.record(node))
        pub.publish(String(data=rec.encode()))
        diagnostics.publish([(rec.node, HOST, rec.to_dict())])

    node.create_timer(period_s, guarded(publish, f"{node.get_name()}.health", health))
    publish()
    return publish


def sum_health(records: Iterable[dict]) -> dict:
    """``{"callback_errors", "bad_messages"}`` summed over health records (``health`` topic records or status
    records carrying those keys); a record without them, or with a non-integer value, adds nothing."""
    out = {"callback_errors": 0, "bad_messages": 0}
    for rec in records:
        if not isinstance(rec, dict):
            continue
        for key in out:
            value = rec.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                out[key] += value
    return out


def _report(health: Health | None, line: str, detail: str = "") -> None:
    """One line through the node's logger (to /rosout and the console) when ``health`` has one, else Python's
    logging; ``detail`` (a traceback) goes to Python's logging at debug level only."""
    logger = health.logger if health is not None else None
    if logger is not None:
        logger.error(line)
    else:
        logging.getLogger("consensus.ros").error(line)
    if detail:
        logging.getLogger("consensus.ros").debug(detail)


def guarded_record(fn: Callable, what: str, health: Health) -> Callable:
    """A subscription callback for a JSON record (std_msgs/String): a malformed record (``ValueError``,
    ``LookupError``, ``TypeError`` out of ``fn``) is counted as a bad message and reported through the node's
    logger, any other exception as a callback error (``guarded``); nothing reaches the executor."""
    def cb(msg) -> None:
        try:
            fn(msg)
        except (ValueError, LookupError, TypeError) as exc:
            health.count_bad_message(what)
            if health.logger is not None:
                health.logger.warning(f"bad message ({what}): {exc}")
    return guarded(cb, what, health)


def guarded(fn: Callable, what: str, health: Health | None = None) -> Callable:
    """Wrap a ROS callback so that no exception reaches the executor; every exception is counted in ``health``
    (default: the process's ``HEALTH``) under ``what``, so a run can report it (``callback_errors``).

    rclpy's EventsExecutor crashes the process (SIGSEGV) when a callback raises with a single node registered
    (ros2/rclpy#1641, fixed upstream after 9.1.2); an error in one message or tick is logged (the first five times
    and every 1000th, per wrapped callback), counted, and the node goes on.
    """
    failures = {"n": 0}

    def call(*args):
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - see docstring
            if not rclpy.ok():
                return None       # shutting down: publishers are already gone
            (health or HEALTH).count_callback_error(what)
            failures["n"] += 1
            if failures["n"] <= 5 or failures["n"] % 1000 == 0:
                _report(health, f"{what} failed ({failures['n']} times so far): {type(exc).__name__}: {exc}",
                        traceback.format_exc())
            return None

    # rclpy looks at the callback's signature (a timer callback with a parameter gets a TimerInfo), so the
    # wrapper of a callback takes exactly as many arguments as the wrapped function
    params = inspect.signature(fn).parameters.values()
    if any(p.kind == p.VAR_POSITIONAL for p in params) or len(params) > 1:
        return lambda *args: call(*args)   # not a ROS callback: a fleet clock's per-robot parts
    if len(params) == 0:
        return lambda: call()
    return lambda msg: call(msg)
