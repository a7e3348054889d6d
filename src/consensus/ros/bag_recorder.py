"""``bag_recorder``: records every topic of a run into the MCAP bag ``RUN/bag/`` (``consensus.runs.bag``).

Once a second (steady clock; five times a second during the run's first 10 s, while its nodes come up) it looks for
new topics (``get_topic_names_and_types``) and subscribes to each with a
publisher, except ``/parameter_events`` and the topics ``bag_exclude`` matches (``BagParams``: by default the
``nearby`` relay, derived from the recorded ``state`` topics and O(n²) in size), serialized (``raw=True``: the CDR
bytes go to the file untouched), with the QoS its publishers offer (reliable only if every publisher is;
transient-local only if every publisher is, so latched topics such as ``/topology/graph`` arrive too) and depth 100.
The offered profiles go into the bag's metadata. A topic whose type has no installed .msg definition or Python class
is skipped with one warning. Each
message is stamped with its receive time on the node clock (``use_sim_time`` honoured).

Reads ``output_dir`` (and ``seed``) from the run's parameters file. On SIGINT/SIGTERM (the end of every run) or any
other exit it finishes the MCAP file and writes ``metadata.yaml``, so ``ros2 bag info RUN/bag`` and Foxglove open
it. Every ``FLUSH_PERIOD_S`` (steady clock) it ends the chunk in progress and hands it to the operating system
(``BagWriter.flush``). Killed (``kill -9``), or stopped by a full disk (the first failed write stops the writer,
logged once with the free space left), it leaves whole chunks up to the last second, which
``consensus.runs.bag.repair_bag`` turns into a readable bag (``consensus run`` does so at the end of a run whose bag
writer died; ``consensus bag repair RUN/bag`` does it by hand). It leaves room on the disk for the rest of the run's
record: once the free space falls below ``consensus.runs.bag.reserve_bytes`` (16 MB, or a tenth of a smaller file
system) it ends the bag properly there, logs it, and drops (and counts) the later messages. Its callback errors go
out on ``/health`` like every root-namespace node's.
"""
from __future__ import annotations

import importlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from consensus.errors import ConfigError
from consensus.ros import qos
from consensus.ros.health import HEALTH, Health, guarded, publish_health
from consensus.ros.params import declare_config
from consensus.ros.process import node_main
from consensus.runs.bag import BAG_DIR, BagWriter
from consensus.runs.rundir import default_run_dir
from consensus.settings import BagParams, FlatParams, RunParams

DISCOVERY_PERIOD_S = 1.0
#: the run's first seconds, when its nodes come up: new topics are looked for this often (a topic found late is a
#: bag that misses the run's start)
EARLY_DISCOVERY_PERIOD_S, EARLY_S = 0.2, 10.0
EXCLUDED = frozenset({"/parameter_events"})
FLUSH_PERIOD_S = 1.0            # what is on disk is at most this far behind (and readable after repair_bag)


@dataclass
class BagConfig(FlatParams, RunParams, BagParams):
    """What the bag recorder reads from a run's parameters file: the run directory and what to leave out."""


def _duration(d: Duration) -> dict:
    ns = int(d.nanoseconds)
    return {"sec": ns // 1_000_000_000, "nsec": ns % 1_000_000_000}


def offered_qos(profile: QoSProfile) -> dict:
    """A publisher's QoS profile in the bag metadata's form (``consensus.runs.bag.qos_profile``)."""
    return {"history": profile.history.short_key, "depth": int(profile.depth),
            "reliability": profile.reliability.short_key, "durability": profile.durability.short_key,
            "deadline": _duration(profile.deadline), "lifespan": _duration(profile.lifespan),
            "liveliness": profile.liveliness.short_key,
            "liveliness_lease_duration": _duration(profile.liveliness_lease_duration),
            "avoid_ros_namespace_conventions": bool(profile.avoid_ros_namespace_conventions)}


def subscription_qos(offered: list[QoSProfile]) -> QoSProfile:
    """The QoS that hears every publisher of a topic (rosbag2's rule): reliable only if all publishers are,
    transient-local only if all are."""
    reliable = all(p.reliability == ReliabilityPolicy.RELIABLE for p in offered)
    latched = all(p.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in offered)
    return QoSProfile(depth=qos.RECORDER_DEPTH,
                      reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)


def message_class(type_name: str) -> type:
    """The Python class of ``pkg/msg/Type`` (ValueError for another form, ImportError/AttributeError if absent)."""
    pkg, kind, name = type_name.split("/") if type_name.count("/") == 2 else ("", "", "")
    if not (pkg and kind == "msg" and name):
        raise ValueError(f"'{type_name}' is not a message type (pkg/msg/Type)")
    return getattr(importlib.import_module(f"{pkg}.msg"), name)


class BagRecorder:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.cfg = declare_config(node, BagConfig)
        run = Path(self.cfg.output_dir) if self.cfg.output_dir else default_run_dir("bag")
        self.writer = BagWriter(run / BAG_DIR, reserve=True)
        self.health = Health(parent=HEALTH, logger=node.get_logger())
        self.subs: dict[str, object] = {}
        self.skipped: set[str] = set()
        self.exclude = re.compile(self.cfg.bag_exclude) if self.cfg.bag_exclude else None
        self.clock = node.get_clock()
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.started = self.last_discovery = time.monotonic()
        node.create_timer(EARLY_DISCOVERY_PERIOD_S, guarded(self._tick_discovery, "bag.discover", self.health),
                          clock=steady)
        node.create_timer(FLUSH_PERIOD_S, guarded(self.flush, "bag.flush", self.health), clock=steady)
        self.publish_health = publish_health(node, self.health)
        node.get_logger().info(f"recording every topic into {self.writer.path}")
        self.discover()

    def _tick_discovery(self) -> None:
        """``discover`` every ``EARLY_DISCOVERY_PERIOD_S`` during the run's first ``EARLY_S``, then every
        ``DISCOVERY_PERIOD_S``."""
        now = time.monotonic()
        if now - self.started < EARLY_S or now - self.last_discovery >= DISCOVERY_PERIOD_S - 1e-3:
            self.last_discovery = now
            self.discover()

    def discover(self) -> None:
        for name, types in self.node.get_topic_names_and_types():
            if name in self.subs or name in self.skipped or name in EXCLUDED:
                continue
            if self.exclude is not None and self.exclude.search(name):
                self.skipped.add(name)          # by request (bag_exclude): no warning
                continue
            publishers = self.node.get_publishers_info_by_topic(name)
            if not publishers:
                continue                # only subscribers so far: wait for a publisher (and its QoS)
            if len(types) != 1:
                self._skip(name, f"it has {len(types)} types ({', '.join(types)})")
                continue
            try:
                msg_cls = message_class(types[0])
                self.writer.add_topic(name, types[0], [offered_qos(p.qos_profile) for p in publishers])
            except (ConfigError, ValueError, AttributeError, ImportError) as exc:
                self._skip(name, str(exc))
                continue
            qos = subscription_qos([p.qos_profile for p in publishers])
            self.subs[name] = self.node.create_subscription(
                msg_cls, name, guarded(self._writer_of(name), "bag.write", self.health), qos, raw=True)

    def _skip(self, name: str, why: str) -> None:
        self.skipped.add(name)
        self.node.get_logger().warning(f"not recording {name}: {why}")

    def _writer_of(self, name: str):
        clock, write, wall = self.clock, self.writer.write, time.time_ns

        def cb(raw: bytes) -> None:
            # the node clock is the system clock unless sim time is active: read it without building a Time
            # (a large share of the recorder's time otherwise: docs/benchmarks.md, 'Why the code is as it is')
            write(name, raw, clock.now().nanoseconds if clock.ros_time_is_active else wall())
        return cb

    def flush(self) -> None:
        stopped = self.writer.stopped
        self.writer.flush()
        if self.writer.stopped and not stopped:
            self.node.get_logger().error(f"bag: {self.writer.stopped}; the run goes on without it")

    def close(self) -> None:
        if self.writer.stopped:
            self.node.get_logger().warning(f"bag: ended early ({self.writer.stopped}); {self.writer.dropped} "
                                           f"messages not recorded")
            return
        try:
            meta = self.writer.close()["rosbag2_bagfile_information"]
        except OSError as exc:                 # the summary did not fit on the disk
            self.writer.failed = exc
        if self.writer.failed is not None:
            self.node.get_logger().error(f"bag: writing stopped ({self.writer.failed}); {self.writer.dropped} "
                                         f"messages not recorded; `consensus bag repair {self.writer.dir}` (which "
                                         f"`consensus run` does at the end) makes the rest readable")
            return
        self.node.get_logger().info(f"bag: {meta['message_count']} messages on "
                                    f"{len(meta['topics_with_message_count'])} topics in {self.writer.dir}")


def main() -> int:
    # close(): the file is finished, metadata.yaml written
    return node_main("bag_recorder", BagRecorder, background=True)
