"""A node process: rclpy set up behind the package's error boundary (``run_node``), the one main of a node
(``node_main``: spin on the config's executor until done, finish, destroy), executors, stop signals, the GIL switch
intervals and the start-up garbage freeze.
"""
from __future__ import annotations

import gc
import logging
import os
import signal
import sys
from typing import Any, Callable

import rclpy
import rclpy.executors
import rclpy.task
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions


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


def _handle_stop_signal(signum, _frame) -> None:
    for fn in _on_stop:
        try:
            fn()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
    _on_stop.clear()
    rclpy.try_shutdown()          # spin() returns; the node's finally blocks run (no KeyboardInterrupt inside


def spin_node(node, kind: str, until: rclpy.task.Future | None = None,
              participants: "Participants | None" = None) -> None:
    """Spin ``node`` (and the nodes of its extra ``participants``) on the configured executor until shutdown (or
    ``until`` completes)."""
    executor = make_executor(kind)
    executor.add_node(node)
    if participants is not None:
        participants.attach(executor)
    spin(executor, until)


#: the subscriptions a node process puts on one DDS participant before it opens another (``Participants``)
SUBSCRIPTIONS_PER_PARTICIPANT = 200


class Participants:
    """The DDS participants of a node process that subscribes to many topics (the bag recorder, the recorder, a
    fleet's robots): its node's own, and one more rclpy ``Context`` (a participant) with one node
    ``<name>_<k>`` (same namespace, no parameter services, the process's ROS arguments for the context but not for
    the node) for every ``per`` further subscriptions. All nodes are spun by the process's one executor thread.

    Why: Fast DDS hands a sample that its writer sends to more than one reader (the readers of one topic in
    different processes have different entity ids, so the sample is addressed to ENTITYID_UNKNOWN) to every reader
    of the receiving participant in turn, each under its mutex (``MessageReceiver::findAllReaders``), so a sample
    costs time in proportion to all of that participant's readers. Measured on 2 cores (docs/benchmarks.md): 2,000
    odometry samples/s to a participant of 800 readers cost 64 us each, to four participants of 200 each 41 us, to
    one of 100 readers 20 us."""

    def __init__(self, node: Node, per: int = SUBSCRIPTIONS_PER_PARTICIPANT) -> None:
        self.per = per
        self.contexts = [node.context]
        self.nodes: list[Node | None] = [node]
        self.counts = [0]
        self._executor = None

    def _room(self, subscriptions: int) -> int:
        for k, count in enumerate(self.counts):
            if count + subscriptions <= self.per or count == 0:
                self.counts[k] += subscriptions
                return k
        self._open_one()
        self.counts[-1] = subscriptions
        return len(self.contexts) - 1

    def _open_one(self) -> None:
        from rclpy.context import Context

        context = Context()
        # the process's arguments (a security enclave applies to every participant); its nodes ignore the remaps
        rclpy.init(args=sys.argv, context=context, signal_handler_options=SignalHandlerOptions.NO)
        self.contexts.append(context)
        self.nodes.append(None)
        self.counts.append(0)

    def open(self, total: int) -> None:
        """Open participants up to ``total`` now, for a process that knows how many subscriptions it will make:
        a participant opened mid-run, when every other process's endpoints exist, costs every participant a
        discovery exchange at once (measured: the fleet's commands of the next second up to 200 ms late)."""
        while len(self.contexts) < total:
            self._open_one()

    def reserve_context(self, subscriptions: int):
        """The context (participant) with room for ``subscriptions`` more, for a node of the caller's own (a
        fleet's robot); opens a participant when every one is full."""
        return self.contexts[self._room(subscriptions)]

    def reserve(self, subscriptions: int) -> Node:
        """The node on which to create the next ``subscriptions`` subscriptions: the process's own node, or
        ``<name>_<k>`` of the first participant with room."""
        k = self._room(subscriptions)
        node = self.nodes[k]
        if node is None:
            main = self.nodes[0]
            node = self.nodes[k] = Node(f"{main.get_name()}_{k}", namespace=main.get_namespace(),
                                        context=self.contexts[k], start_parameter_services=False,
                                        use_global_arguments=False,
                                        parameter_overrides=[main.get_parameter("use_sim_time")])
            if self._executor is not None:
                self._executor.add_node(node)
        return node

    def attach(self, executor) -> None:
        """Spin the extra participants' nodes (now and later ones) on ``executor``."""
        self._executor = executor
        for node in self.nodes[1:]:
            if node is not None:
                executor.add_node(node)

    def close(self) -> None:
        """Destroy the extra nodes and shut their participants down (after the nodes made on them are destroyed)."""
        for node in self.nodes[1:]:
            if node is not None:
                node.destroy_node()
        for context in self.contexts[1:]:
            context.try_shutdown()
        del self.nodes[1:], self.contexts[1:], self.counts[1:]


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
    ``background``: a process that only records runs ``BACKGROUND_NICE`` nicer while it records; its ``finish()``
    runs at the usual priority on a thread started before (Linux keeps a nice value per thread), so on a loaded host
    the summary and figures of a stopped run are written within the grace a launcher gives (``ros2 launch``: 5 s
    after SIGINT, then SIGTERM) rather than at a tenth of the CPU."""
    from concurrent.futures import ThreadPoolExecutor

    from consensus.errors import ConsensusError

    def body(_args: list[str]) -> None:
        finisher = None
        if background:
            finisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="finish")
            finisher.submit(lambda: None).result()      # its thread exists now, at the usual priority
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
            spin_node(node, getattr(getattr(obj, "cfg", None), "executor", "events"), until=getattr(obj, "done", None),
                      participants=getattr(obj, "participants", None))
        finally:
            end = getattr(obj, "finish", None) or getattr(obj, "close", None)
            if callable(end):           # also on Ctrl-C: never lose what the node recorded
                if finisher is not None:
                    finisher.submit(end).result()
                else:
                    end()
            if finisher is not None:
                finisher.shutdown(wait=False)
            if getattr(obj, "participants", None) is not None:
                obj.participants.close()
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
