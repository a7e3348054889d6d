"""Declared ROS parameters <-> a scenario config (``consensus.settings``), and the common node entry point.

Every node declares the full set of its config's fields with their defaults, so one ``/**:`` params file
configures all of them, ``ros2 param list`` shows what a node understands, and the values are validated by the
same code as the CLI's.
"""
from __future__ import annotations

import dataclasses
import inspect
import logging
import signal
import sys
from typing import Callable

import rclpy
import rclpy.executors
import rclpy.task
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions

import typing

from consensus.settings import RobotBaseConfig
from consensus.errors import ConfigError, ConsensusError

_LIST_TYPES = {str: Parameter.Type.STRING_ARRAY, float: Parameter.Type.DOUBLE_ARRAY,
               int: Parameter.Type.INTEGER_ARRAY, bool: Parameter.Type.BOOL_ARRAY}


def declare_config(node: Node, cls=RobotBaseConfig):
    """Declare every field of the config dataclass ``cls`` (a ``consensus.settings.FlatParams``) as a parameter
    of ``node``, defaults from the dataclass (an empty list typed by the field's annotation), and return the
    validated config."""
    values: dict = {}
    types = cls.field_types()
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        desc = ParameterDescriptor(description=f"consensus config field '{f.name}'")
        if not node.has_parameter(f.name):
            if isinstance(default, list) and not default:
                (item,) = typing.get_args(types[f.name]) or (str,)
                node.declare_parameter(f.name, _LIST_TYPES[item], desc)
            else:
                node.declare_parameter(f.name, default, desc)
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


def guarded(fn: Callable, what: str) -> Callable:
    """Wrap a ROS callback so that no exception reaches the executor.

    rclpy's EventsExecutor crashes the process (SIGSEGV) when a callback raises with a single node registered
    (ros2/rclpy#1641, fixed upstream after 9.1.2); an error in one message or tick is logged and the node goes on.
    """
    log = logging.getLogger(what)
    failures = {"n": 0}

    def call(*args):
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - see docstring
            if not rclpy.ok():
                return None       # shutting down: publishers are already gone
            failures["n"] += 1
            if failures["n"] <= 5 or failures["n"] % 1000 == 0:
                log.exception("%s failed (%d times so far)", what, failures["n"])
            return None

    # rclpy looks at the callback's signature (a timer callback with a parameter gets a TimerInfo), so the
    # wrapper takes exactly as many arguments as the wrapped function
    if len(inspect.signature(fn).parameters) == 0:
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


def run_node(body: Callable[[list[str]], None], name: str) -> int:
    """Run a node's ``body(args)`` with rclpy set up, turning bad input into one clear message and exit code 2."""
    logging.basicConfig(level=logging.INFO, format=f"[{name}] %(levelname)s %(message)s")
    args = rclpy.utilities.remove_ros_args(sys.argv)
    rclpy.init(args=sys.argv, signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGINT, _handle_stop_signal)
    signal.signal(signal.SIGTERM, _handle_stop_signal)
    try:
        body(args)
        return 0
    except ConfigError as exc:
        print(f"[{name}] configuration error: {exc}", file=sys.stderr)
        return 2
    except ConsensusError as exc:
        print(f"[{name}] error: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        return 0
    finally:
        if rclpy.ok():
            rclpy.try_shutdown()
