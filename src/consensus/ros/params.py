"""Declared ROS parameters <-> a scenario config (``consensus.settings``), the common node entry point, and the
nodes' health counters.

Every node declares the full set of its config's fields with their defaults, so one ``/**:`` params file
configures all of them, ``ros2 param list`` shows what a node understands, and the values are validated by the
same code as the CLI's.

Health: every exception a ROS callback raises (caught by ``guarded``) and every input message (or part of one, e.g.
one pose of a PoseArray) a node drops or repairs because it is non-finite, absurd (``|v| > MAX_ABS_VALUE``) or
malformed is counted in a ``Health`` object. Each node (and each robot of a fleet process) has its own, a child of
the process-wide ``HEALTH`` (which therefore holds the process's total; ``guarded`` counts there when given no
``Health``). A robot reports its counts in ``planner/status``; the other nodes call ``publish_health(node, health)``,
which publishes the counters every second on the relative topic ``health`` (std_msgs/String, JSON, see
``Health.record``): for a node in the root namespace that is ``/health``, shared by all such nodes and told apart by
``"node"``. ``sum_health(records)`` adds records up (a run's ``callback_errors`` and ``bad_messages``); a process
must not publish ``HEALTH`` next to its children's records, or the sum counts them twice.
"""
from __future__ import annotations

import dataclasses
import gc
import inspect
import logging
import math
import os
import signal
import sys
import threading
import traceback
from collections import Counter
from typing import Any, Callable, Iterable

import rclpy
import rclpy.executors
import rclpy.task
from geometry_msgs.msg import PointStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import (InvalidParameterTypeException, InvalidParameterValueException,
                               ParameterUninitializedException)
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.serialization import deserialize_message
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import String

import typing

from consensus.errors import ConfigError
from consensus.ros import qos
from consensus.ros.cdr import odom_xy, point_stamped_xy
from consensus.ros.diagnostics import HOST, DiagnosticsPublisher
from consensus.ros.records import HealthRecord
from consensus import names

_LIST_TYPES = {str: Parameter.Type.STRING_ARRAY, float: Parameter.Type.DOUBLE_ARRAY,
               int: Parameter.Type.INTEGER_ARRAY, bool: Parameter.Type.BOOL_ARRAY}


def descriptor(name: str, doc: str, bounds: tuple | None, runtime: bool, kind: type) -> ParameterDescriptor:
    """The ROS descriptor of config field ``name``: its documented meaning, its range (where the config declares
    one) and read-only unless a running node applies a change of it."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange

    when = "changeable at run time" if runtime else "read-only: set at start (params file, launch argument)"
    desc = ParameterDescriptor(description=f"{doc or name} ({when})", read_only=not runtime)
    if bounds is not None and kind in (int, float):
        lo, hi = bounds
        desc.additional_constraints = f"{lo:g} <= {name} <= {hi:g}"
        if kind is float:
            desc.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)]
        else:
            desc.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=1)]
    return desc


def config_descriptors(cls: type, runtime: Iterable[str] = ()) -> dict[str, ParameterDescriptor]:
    """Every field of the config class ``cls`` -> its ROS descriptor (``descriptor``): the range is the field's
    ``RANGES`` entry (``FlatParams.field_ranges``), the one source the CLI, launch arguments and studies check too,
    so a node never refuses a value that ``consensus run`` accepted."""
    types = cls.field_types()
    docs, ranges, runtime = cls.field_docs(), cls.field_ranges(), set(runtime)
    return {f.name: descriptor(f.name, docs.get(f.name, ""), ranges.get(f.name), f.name in runtime, types[f.name])
            for f in dataclasses.fields(cls)}


def declare_config(node: Node, cls: type, runtime: Iterable[str] = (), uses: Iterable[str] | None = None):
    """Declare the fields of the config dataclass ``cls`` (a ``consensus.settings.FlatParams``) that ``node`` reads
    (``uses``, plus ``runtime``; default: every field) as its parameters, defaults from the dataclass (an empty list
    typed by the field's annotation), descriptors from the fields' documented meaning and ranges
    (``FlatParams.field_docs``/``field_ranges``), every parameter read-only except ``runtime`` (the ones this node
    applies when they change: its ``add_on_set_parameters_callback``); and return the validated config. ``ros2
    param set`` of a read-only parameter is refused with the reason, and ``ros2 param list`` shows what the node
    uses. A field the node does not declare still takes this node's value from the parameters file or ``-p``
    (rclpy's parameter overrides of the node), so the whole config (and a manifest written from it) is the run's."""
    values: dict = {}
    types = cls.field_types()
    descriptors = config_descriptors(cls, runtime)
    names = [f.name for f in dataclasses.fields(cls)]
    declared = set(names) if uses is None else set(uses) | set(runtime)
    if declared - set(names):
        raise ValueError(f"{cls.__name__} has no field(s) {', '.join(sorted(declared - set(names)))}")
    overrides = getattr(node, "_parameter_overrides", {}) or {}
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        if f.name not in declared:
            given = overrides.get(f.name)
            value = default if given is None else given.value
            values[f.name] = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "tolist") else value
            continue
        desc = descriptors[f.name]
        if not node.has_parameter(f.name):
            try:
                if isinstance(default, list) and not default:
                    (item,) = typing.get_args(types[f.name]) or (str,)
                    node.declare_parameter(f.name, _LIST_TYPES[item], desc)
                else:
                    node.declare_parameter(f.name, default, desc)
            except (InvalidParameterValueException, InvalidParameterTypeException) as exc:
                # a params-file or -p value outside the declared range, or of the wrong type: bad input, one line
                raise ConfigError(f"node '{node.get_fully_qualified_name()}' parameters: {f.name}: "
                                  f"{' '.join(str(exc).split())}") from None
        try:
            value = node.get_parameter(f.name).value
        except ParameterUninitializedException:
            value = default
        values[f.name] = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "tolist") else value
    return cls.from_dict(values, source=f"node '{node.get_fully_qualified_name()}' parameters")


def make_executor(kind: str):
    """rclpy's EventsExecutor ("events") or the SingleThreadedExecutor ("single").

    Measured on 2 cores (docs/benchmarks.md): the SingleThreadedExecutor rebuilds its wait set on every wake-up,
    which costs a whole core at ~30 robots' traffic; the EventsExecutor handles 100 robots at a fraction of that.
    """
    if kind == "events":
        try:
            from rclpy.experimental import EventsExecutor
            return EventsExecutor()
        except ImportError:       # older rclpy: fall back, and say so
            logging.getLogger(__name__).warning("rclpy has no EventsExecutor; using SingleThreadedExecutor")
    return rclpy.executors.SingleThreadedExecutor()


def spin(executor, until: rclpy.task.Future | None = None) -> None:
    """Spin until rclpy shuts down or ``until`` completes. (rclpy 9's EventsExecutor.spin() processes nothing
    when called directly; spin_until_future_complete works for it and for the standard executors alike.)"""
    future = until or rclpy.task.Future()
    while rclpy.ok() and not future.done():
        executor.spin_until_future_complete(future, timeout_sec=1.0)


_on_stop: list[Callable[[], None]] = []


def on_stop(fn: Callable[[], None]) -> None:
    """Register ``fn`` to run first when SIGINT/SIGTERM arrives (e.g. send robots a zero velocity)."""
    _on_stop.append(fn)


#: the largest absolute value a position (m) or velocity (m/s, rad/s) read from the wire may have; anything beyond
#: (e.g. a forged 1e308, which overflows to inf in the first arithmetic) is dropped as a bad message like NaN
MAX_ABS_VALUE = 1e6


def sane(*values: float) -> bool:
    """All of ``values`` finite and within ``MAX_ABS_VALUE`` (what an input must be to be used)."""
    return all(math.isfinite(v) and abs(v) <= MAX_ABS_VALUE for v in values)


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


def decode_or_count(raw: bytes, msg_type, health: "Health", what: str):
    """The message in the serialized bytes ``raw``, or None - counted as a bad message of ``what`` - when they do
    not decode (the nodes' fast CDR paths in ``consensus.ros.cdr`` fall back to this)."""
    try:
        return deserialize_message(raw, msg_type)
    except Exception:  # noqa: BLE001 - undecodable bytes are a bad message, not a callback error
        health.count_bad_message(what)
        return None


#: message type -> (the fast decoder of its serialized bytes, its (x, y) read from a message object)
_XY_READERS: dict[type, tuple[Callable[[bytes], tuple[float, float] | None], Callable[[Any], tuple[float, float]]]] = {
    PointStamped: (point_stamped_xy, lambda m: (m.point.x, m.point.y)),
    Odometry: (odom_xy, lambda m: (m.pose.pose.position.x, m.pose.pose.position.y)),
}


def read_xy(raw_or_msg: Any, msg_type: type, health: "Health", what: str) -> tuple[float, float] | None:
    """The (x, y) position of a geometry_msgs/PointStamped or nav_msgs/Odometry (``msg_type``), given as its
    serialized bytes (a ``raw=True`` subscription: the fast decoders of ``consensus.ros.cdr``, deserialize_message
    where they cannot read the buffer) or as the message; None - counted as a bad message of ``what`` in ``health``
    - when the bytes do not decode or the position is not ``sane`` (non-finite, or beyond ``MAX_ABS_VALUE``)."""
    fast, of_msg = _XY_READERS[msg_type]
    if isinstance(raw_or_msg, (bytes, bytearray, memoryview)):
        xy = fast(raw_or_msg)
        if xy is None:
            msg = decode_or_count(raw_or_msg, msg_type, health, what)
            if msg is None:
                return None
            xy = of_msg(msg)
    else:
        xy = of_msg(raw_or_msg)
    if sane(*xy):
        return xy
    health.count_bad_message(what)
    return None


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


def _handle_stop_signal(signum, _frame) -> None:
    for fn in _on_stop:
        try:
            fn()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
    _on_stop.clear()
    rclpy.try_shutdown()          # spin() returns; the node's finally blocks run (no KeyboardInterrupt inside
    #                               a callback, which the EventsExecutor turns into a crash)


def spin_node(node, kind: str, until: rclpy.task.Future | None = None) -> None:
    """Spin ``node`` alone on the configured executor until shutdown (or ``until`` completes)."""
    executor = make_executor(kind)
    executor.add_node(node)
    spin(executor, until)


def freeze_startup_objects() -> None:
    """Collect once and move every object made during start-up (imports, the nodes, their messages) out of the
    garbage collector's reach (``gc.freeze``): a full collection then scans only what the run made since, instead
    of pausing the executor thread for every module and message class the process holds."""
    gc.collect()
    gc.freeze()


#: the niceness a process that only records (the run's recorder, the bag recorder) adds to its own: on a busy host
#: the robots' control, the sim and the planners take the CPU first, and the recorders catch up from their
#: subscriptions' queues (measured at 100 robots on 2 cores, docs/benchmarks.md; their lost messages are counted)
BACKGROUND_NICE = 10


def node_main(name: str, make: Callable[[Node], Any], *, before: Callable[[Node], None] | None = None,
              background: bool = False) -> int:
    """The main of a node executable, written once: ``run_node`` (rclpy, the error boundary), ``Node(name)``,
    ``before(node)`` (e.g. a parameter set before anything reads it), then ``obj = make(node)`` spun on the executor
    its config names (``obj.cfg.executor``) until ``obj.done`` (a Future, where the node ends the run) or shutdown.
    Afterwards, also after Ctrl-C, ``obj.finish()`` (or ``obj.close()``) writes what the node holds, the node is
    destroyed, and a failure the node recorded (``obj.error``) becomes the run's error (exit status 1).
    ``background``: a process that only records runs ``BACKGROUND_NICE`` nicer."""
    from consensus.errors import ConsensusError

    def body(_args: list[str]) -> None:
        if background:
            try:
                os.nice(BACKGROUND_NICE)
            except OSError:                     # a host that refuses it: the process runs at the usual priority
                pass
        node = Node(name)
        if before is not None:
            before(node)
        obj = make(node)
        freeze_startup_objects()
        try:
            spin_node(node, getattr(getattr(obj, "cfg", None), "executor", "events"), until=getattr(obj, "done", None))
        finally:
            end = getattr(obj, "finish", None) or getattr(obj, "close", None)
            if callable(end):
                end()                   # also on Ctrl-C: never lose what the node recorded
            node.destroy_node()
        if getattr(obj, "error", ""):
            raise ConsensusError(obj.error)

    return run_node(body, name)


#: the GIL switch interval of every node process (Python's default is 5 ms): a thread that runs Python code (an
#: LLM worker parsing a reply, the client's HTTP stack) holds the GIL for up to this long before the executor thread
#: that a timer woke gets it, so the default alone could make a 10 Hz control tick 5-15 ms late; measured with
#: benchmarks/bench_control_timing.py (docs/benchmarks.md)
SWITCH_INTERVAL_S = 0.001
#: ... and while a fleet clock computes and publishes its commands (``consensus.ros.fleet.FleetClock``): the control
#: step keeps the GIL against the planner's threads for up to this long (a tick's step is a few ms), then the
#: interval is 1 ms again. Measured with bench_control_timing (20 robots, up to 16 LLM calls in flight): commands
#: published within 10 ms of their slot 99.66 % (max 12.4 ms) with 1 ms throughout, 100 % (max 9.2 ms) with this
CONTROL_SWITCH_INTERVAL_S = 0.02


def run_node(body: Callable[[list[str]], None], name: str) -> int:
    """Run a node's ``body(args)`` with rclpy set up. What it raises goes through the package's one error boundary
    (``consensus.errors.error_boundary``): bad input is one line and exit status 2, a failure 1, never a traceback;
    a stop signal or an external shutdown is a normal exit (0)."""
    from consensus.errors import error_boundary

    logging.basicConfig(level=logging.INFO, format=f"[{name}] %(levelname)s %(message)s")
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    args = rclpy.utilities.remove_ros_args(sys.argv)
    rclpy.init(args=sys.argv, signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGINT, _handle_stop_signal)
    signal.signal(signal.SIGTERM, _handle_stop_signal)

    def run() -> int:
        try:
            body(args)
        except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
            pass
        return 0

    try:
        return error_boundary(run, f"[{name}]")
    finally:
        if rclpy.ok():
            rclpy.try_shutdown()
