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
import threading
from typing import Any, Callable

import rclpy
import rclpy.executors
import rclpy.task
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions


def make_executor(kind: str):
    """rclpy's EventsExecutor ("events") or the SingleThreadedExecutor ("single").

    The SingleThreadedExecutor rebuilds its wait set on every wake-up, which a large fleet's traffic makes cost a
    whole core; the EventsExecutor does not (measured: docs/benchmarks.md, 'Why the code is as it is').
    """
    if kind == "events":
        try:
            from rclpy.experimental import EventsExecutor
            return EventsExecutor()
        except ImportError:       # older rclpy: fall back, and say so
            logging.getLogger(__name__).warning("rclpy has no EventsExecutor; using SingleThreadedExecutor")
    return rclpy.executors.SingleThreadedExecutor()


#: how often a spinning process looks whether a stop signal came (``spin``): the longest a stop waits
STOP_POLL_S = 0.2

_stop = threading.Event()            # set by SIGINT/SIGTERM (``_handle_stop_signal``)


def spin(executor, until: rclpy.task.Future | None = None) -> None:
    """Spin until rclpy shuts down, ``until`` completes, or a stop signal came (then the ``on_stop`` functions run,
    here, outside any callback). (rclpy 9's EventsExecutor.spin() processes nothing when called directly;
    spin_until_future_complete works for it and for the standard executors alike.)"""
    future = until or rclpy.task.Future()
    while rclpy.ok() and not future.done() and not _stop.is_set():
        executor.spin_until_future_complete(future, timeout_sec=STOP_POLL_S)
    if _stop.is_set():
        _run_on_stop()


_on_stop: list[Callable[[], None]] = []


def on_stop(fn: Callable[[], None]) -> None:
    """Register ``fn`` to run first when SIGINT/SIGTERM stops the spinning (e.g. send robots a zero velocity)."""
    _on_stop.append(fn)


def _run_on_stop() -> None:
    while _on_stop:
        fn = _on_stop.pop(0)
        try:
            fn()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass


def _handle_stop_signal(signum, _frame) -> None:
    """Only note the stop: ``spin`` returns within ``STOP_POLL_S``, then the node's finally blocks write what it holds
    and ``run_node`` shuts rclpy down. A Python signal handler runs on the main thread between any two bytecodes, in
    the middle of an executor's callback too: shutting rclpy down here would destroy the nodes under a running
    callback, and a second signal (``ros2 launch`` forwards SIGINT to a process group that also got it) coming inside
    the first one's ``rclpy.try_shutdown`` would wait for ever for the lock that one holds (the incident:
    docs/benchmarks.md, 'Why the code is as it is')."""
    _stop.set()


def destroy_nodes(executor, nodes) -> None:
    """Take ``nodes`` off ``executor``, shut it down, then destroy them. Destroying a node still added to an
    EventsExecutor leaves its entities' event callbacks pointing into the executor while the node's publishers and
    subscriptions go away: a SIGSEGV inside ``destroy_node`` when the other processes' entities go away at the same
    time (rclpy issue 1644 is the same race; the events executor's design asks for ``remove_node`` first; the
    incident: docs/benchmarks.md, 'Why the code is as it is')."""
    for node in nodes:
        try:
            executor.remove_node(node)
        except Exception:  # noqa: BLE001 - a node never added, or an executor already down: destroy it all the same
            pass
    try:
        executor.shutdown()
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass
    for node in nodes:
        node.destroy_node()


def control_thread_priority(priority: int) -> tuple[bool, str]:
    """Run the calling thread (a robot process's control thread) under SCHED_FIFO at ``priority`` (0: leave it),
    so that no ordinary process on the host delays a control slot; threads it starts later get the usual
    scheduling (SCHED_RESET_ON_FORK). Allowed for root, with CAP_SYS_NICE or an rtprio limit (limits.conf); refused,
    the thread keeps the usual scheduling. Returns whether the thread runs as asked (``priority`` 0 included) and
    what happened, for the log. At 100 robots on 2 cores it keeps the commands within 10 ms of their slot where the
    usual scheduling lets a few slip (measured: docs/benchmarks.md, 'Why the code is as it is')."""
    if priority <= 0:
        return True, "usual scheduling (control_priority 0)"
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(priority))
    except (OSError, AttributeError) as exc:          # no permission (or no such policy on this platform)
        return False, (f"usual scheduling: SCHED_FIFO {priority} refused ({getattr(exc, 'strerror', None) or exc}; "
                       f"allow it with an rtprio limit, or set control_priority 0)")
    return True, f"SCHED_FIFO {priority}"


def freeze_startup_objects() -> None:
    """Collect once and move every object made during start-up (imports, the nodes, their messages) out of the
    garbage collector's reach (``gc.freeze``): a full collection then scans only what the run made since, instead
    of pausing the executor thread for every module and message class the process holds."""
    gc.collect()
    gc.freeze()


#: the niceness a process that only records (the run's recorder, the bag recorder) adds to its executor thread's:
#: on a busy host the robots' control, the sim and the planners take the CPU first, and the recorders catch up from
#: their subscriptions' queues, which are deep for that (``qos.RECORDER_DEPTH``). It takes effect because the node
#: processes share the runner's session (``runs.ros_runner.OWN_PROCESS_GROUP``): with an autogroup per process it
#: would have none (measured: docs/benchmarks.md, 'Why the code is as it is')
BACKGROUND_NICE = 10


def node_main(name: str, make: Callable[[Node], Any], *, before: Callable[[Node], None] | None = None,
              background: bool = False) -> int:
    """The main of a node executable, written once: ``run_node`` (rclpy, the error boundary), ``Node(name)``,
    ``before(node)`` (e.g. a parameter set before anything reads it), then ``obj = make(node)`` spun on the executor
    its config names (``obj.cfg.executor``) until ``obj.done`` (a Future, where the node ends the run) or shutdown.
    Afterwards, also after Ctrl-C, ``obj.finish()`` (or ``obj.close()``) writes what the node holds, the node is
    destroyed, and a failure the node recorded (``obj.error``) becomes the run's error (exit status 1).
    ``background``: a process that only records runs its executor thread ``BACKGROUND_NICE`` nicer while it records
    (its DDS threads, made with the node, keep the usual priority); its ``finish()``
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
        node = Node(name)
        if before is not None:
            before(node)
        obj = make(node)
        if background:
            # after the node is made: its DDS threads (which take the samples off the transport and answer the
            # writers' heartbeats) keep the usual priority; the executor thread, niced, takes the samples from the
            # readers' queues when the host has time
            try:
                os.nice(BACKGROUND_NICE)
            except OSError:                     # a host that refuses it: the process runs at the usual priority
                pass
        freeze_startup_objects()
        executor = make_executor(getattr(getattr(obj, "cfg", None), "executor", "events"))
        executor.add_node(node)
        try:
            spin(executor, getattr(obj, "done", None))
        finally:
            end = getattr(obj, "finish", None) or getattr(obj, "close", None)
            if callable(end):           # also on Ctrl-C: never lose what the node recorded
                if finisher is not None:
                    finisher.submit(end).result()
                else:
                    end()
            if finisher is not None:
                finisher.shutdown(wait=False)
            destroy_nodes(executor, [node])
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
#: interval is 1 ms again, so that no LLM client's thread pushes a command past its slot (measured with
#: bench_control_timing: docs/benchmarks.md, 'Why the code is as it is')
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
