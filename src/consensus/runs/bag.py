"""A run's MCAP bag: written from serialized (CDR) messages in rosbag2's layout, read back without ROS.

Layout (what ``ros2 bag record -s mcap`` leaves, so ``ros2 bag info/play`` and Foxglove open it): a directory
``RUN/bag/`` with one file ``bag_0.mcap`` (profile ``ros2``; per message type a schema named ``pkg/msg/Type`` with
encoding ``ros2msg`` and data = the message definition text, see ``message_definition``; per topic a channel with
message encoding ``cdr`` and the metadata ``offered_qos_profiles`` and ``topic_type_hash``; per message the
serialized bytes with log time = receive time) and ``metadata.yaml`` (``rosbag2_bagfile_information``, version 9).
The writer is ``BagWriter`` (used by the ``bag_recorder`` node, ``consensus.ros.bag_recorder``); the reader is
``read_messages`` (the mcap reader with ``mcap_ros2``'s decoder) and ``plot_bag`` redraws a run's figures from a
bag (``consensus plot BAG``).

A bag whose writer died (``kill -9``, a full disk) has no summary, no footer and no ``metadata.yaml``: no reader
opens it. ``BagWriter.flush`` (the ``bag_recorder`` calls it every second) ends the chunk in progress and hands it to
the operating system, so such a file holds every message up to the last second in whole chunks; ``repair_bag``
(``consensus bag repair DIR``, and ``consensus run`` at the end of a run whose bag writer died) copies every
message of its whole chunks into a complete MCAP file (the same schemas, channels, times and sequence numbers),
replaces the cut file with it and writes ``metadata.yaml``, so ``rosbags``, ``ros2 bag info``, Foxglove and
``consensus plot`` open it. It needs free space for one copy of the bag; the cut tail (at most the last second)
is lost.
"""
from __future__ import annotations

import errno
import io
import json
import os
import re
import shutil
import struct
import sys
from pathlib import Path
from typing import IO, Iterator, Sequence

import numpy as np
import yaml

from consensus.errors import ConfigError

METADATA_VERSION = 9                  # rosbag2_bagfile_information version written (rosbag2 >= Jazzy)
SEPARATOR = "=" * 80                   # between the definitions of a message and its dependencies
PRIMITIVES = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
              "int64", "uint64", "string", "wstring"}
_FIELD_TYPE = re.compile(r"(?:^|\n)\s*([a-zA-Z0-9_/]+)(?:\[[^\]]*\])?\s+")      # the type at a line's start
_TYPE_NAME = re.compile(r"^([a-zA-Z0-9_]+)/(?:msg/)?([a-zA-Z0-9_]+)$")
RESERVE_BYTES = 16_000_000             # what a bag leaves free on its disk (``BagWriter(reserve=True)``)
MCAP_MAGIC = b"\x89MCAP0\r\n"
BAG_DIR = "bag"                        # a run's bag: RUN/bag/ (bag_0.mcap, metadata.yaml)
#: a duration rosbag2 writes for "infinite" (RMW_DURATION_INFINITE)
INFINITE = {"sec": 9223372036, "nsec": 854775807}


# --------------------------------------------------------------------------- message definitions
def ament_prefixes() -> list[Path]:
    """The install prefixes whose ``share/<pkg>/msg`` hold message definitions: ``AMENT_PREFIX_PATH``, then the
    running Python's prefix (the PyPI wheels install there)."""
    found = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    return [*found, Path(sys.prefix)]


def _split(type_name: str) -> tuple[str, str]:
    m = _TYPE_NAME.match(type_name)
    if not m:
        raise ConfigError(f"message type '{type_name}' is not of the form pkg/msg/Type")
    return m.group(1), m.group(2)


def _msg_file(type_name: str, prefixes: Sequence[Path], ext: str = ".msg") -> Path:
    pkg, name = _split(type_name)
    for prefix in prefixes:
        path = Path(prefix) / "share" / pkg / "msg" / f"{name}{ext}"
        if path.is_file():
            return path
    raise ConfigError(f"no {ext} file for '{type_name}' under share/{pkg}/msg of {[str(p) for p in prefixes]}")


def _dependencies(text: str, package: str) -> list[str]:
    found = set()
    for m in _FIELD_TYPE.finditer(text):
        t = m.group(1)
        if t not in PRIMITIVES:
            found.add(t if "/" in t else f"{package}/{t}")
    return sorted(found)


def message_definition(type_name: str, prefixes: Sequence[Path] | None = None) -> str:
    """The full ``ros2msg`` definition of ``type_name`` (``pkg/msg/Type``) as rosbag2 stores it: the type's .msg
    text, then every dependency once (depth first, in sorted order), each after a line of 80 ``=`` and a line
    ``MSG: pkg/Type``. Read from the installed ``share/<pkg>/msg/<Type>.msg`` of ``prefixes`` (default
    ``ament_prefixes()``); a missing file is a ConfigError."""
    prefixes = ament_prefixes() if prefixes is None else list(prefixes)
    seen: set[str] = set()

    def text_of(name: str, depth: int) -> str:
        if depth > 50:
            raise ConfigError(f"message definition of '{type_name}' nests too deep")
        text = _msg_file(name, prefixes).read_text(encoding="utf-8")
        out = text
        for dep in _dependencies(text, _split(name)[0]):
            if dep not in seen:
                seen.add(dep)
                out += f"\n{SEPARATOR}\nMSG: {dep}\n" + text_of(dep, depth + 1)
        return out

    return text_of(type_name, 0)


def type_hash(type_name: str, prefixes: Sequence[Path] | None = None) -> str:
    """The type's ``RIHS01_...`` hash from the installed ``<Type>.json`` (rosidl), or "" when there is none."""
    try:
        path = _msg_file(type_name, ament_prefixes() if prefixes is None else prefixes, ".json")
        pkg, name = _split(type_name)
        for entry in json.loads(path.read_text(encoding="utf-8")).get("type_hashes", []):
            if entry.get("type_name") == f"{pkg}/msg/{name}":
                return str(entry.get("hash_string", ""))
    except (ConfigError, OSError, ValueError, AttributeError):
        pass
    return ""


# --------------------------------------------------------------------------- writing
def qos_profile(*, reliable: bool = True, transient_local: bool = False, depth: int = 10,
                keep_all: bool = False) -> dict:
    """One offered QoS profile in rosbag2's metadata form (version 9: policy names, durations as sec/nsec)."""
    return {"history": "keep_all" if keep_all else "keep_last", "depth": int(depth),
            "reliability": "reliable" if reliable else "best_effort",
            "durability": "transient_local" if transient_local else "volatile",
            "deadline": dict(INFINITE), "lifespan": dict(INFINITE), "liveliness": "automatic",
            "liveliness_lease_duration": dict(INFINITE), "avoid_ros_namespace_conventions": False}


def bag_metadata(files: list[dict], topics: list[dict], *, ros_distro: str = "") -> dict:
    """``metadata.yaml``'s content. ``files``: ``{"path", "start_ns", "end_ns", "count"}`` per MCAP file;
    ``topics``: ``{"name", "type", "qos": [profile], "type_hash", "count"}`` per topic."""
    starts = [f["start_ns"] for f in files if f["count"]]
    ends = [f["end_ns"] for f in files if f["count"]]
    start, end = (min(starts), max(ends)) if starts else (0, 0)
    return {"rosbag2_bagfile_information": {
        "version": METADATA_VERSION,
        "storage_identifier": "mcap",
        "duration": {"nanoseconds": int(end - start)},
        "starting_time": {"nanoseconds_since_epoch": int(start)},
        "message_count": int(sum(f["count"] for f in files)),
        "topics_with_message_count": [
            {"topic_metadata": {"name": t["name"], "type": t["type"], "serialization_format": "cdr",
                                "offered_qos_profiles": list(t["qos"]), "type_description_hash": t["type_hash"]},
             "message_count": int(t["count"])} for t in topics],
        "compression_format": "",
        "compression_mode": "",
        "relative_file_paths": [f["path"] for f in files],
        "files": [{"path": f["path"], "starting_time": {"nanoseconds_since_epoch": int(f["start_ns"])},
                   "duration": {"nanoseconds": int(f["end_ns"] - f["start_ns"])}, "message_count": int(f["count"])}
                  for f in files],
        "custom_data": None,
        "ros_distro": ros_distro}}


class BagWriter:
    """Writes serialized messages into ``directory/<name>_0.mcap`` and, on ``close()``, ``metadata.yaml``.

    ``add_topic`` once per topic (schema = the type's message definition), then ``write`` per message. Chunks of
    ``chunk_size`` bytes are zstd-compressed and flushed as they fill; ``close()`` (idempotent) writes the summary
    that makes the file seekable and the metadata, so call it on every way out."""

    def __init__(self, directory: str | Path, *, chunk_size: int = 256 * 1024, ros_distro: str | None = None,
                 reserve: bool = False) -> None:
        """``reserve``: ``flush`` ends the bag properly (summary, footer, metadata.yaml) once the free space of its
        file system falls below ``reserve_bytes(...)``, leaving room for the run's summary and figures; later
        messages are dropped and counted (``stopped``)."""
        from mcap.writer import CompressionType, Writer

        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / f"{self.dir.name}_0.mcap"
        if self.path.exists() or (self.dir / "metadata.yaml").exists():
            raise ConfigError(f"{self.dir} already holds a bag")
        self._file: IO[bytes] = self.path.open("wb")
        self._writer = Writer(self._file, chunk_size=chunk_size, compression=CompressionType.ZSTD)
        self._writer.start(profile="ros2", library="consensus (mcap-python)")
        self.ros_distro = os.environ.get("ROS_DISTRO", "") if ros_distro is None else ros_distro
        self._schemas: dict[str, int] = {}
        self.topics: dict[str, dict] = {}          # name -> {"type", "qos", "type_hash", "count", "channel"}
        self.start_ns: int | None = None
        self.end_ns = 0
        self.closed = False
        self.failed: OSError | None = None         # the write that failed (a full disk): nothing is written after it
        self.dropped = 0                           # messages not written since (failed or stopped)
        self.stopped = ""                          # why the bag was ended early (the disk's reserve reached)
        self.reserve = reserve_bytes(self.dir) if reserve else 0
        self._schema_bytes = 0

    def _failed(self, exc: OSError) -> OSError:
        """The first failed write stops the writer (the file is left cut, for ``repair_bag``); one error naming
        the file and the free space left."""
        from consensus.jsonl import RecordWriteError, free_space

        self.failed = exc
        return RecordWriteError(exc.errno or 0, f"{exc.strerror or exc}: the bag stops here; `consensus bag repair "
                                f"{self.dir}` makes what it holds readable ({free_space(self.path)})", str(self.path))

    def add_topic(self, name: str, type_name: str, qos: list[dict], *, definition: str | None = None,
                  prefixes: Sequence[Path] | None = None) -> None:
        if name in self.topics:
            return
        if type_name not in self._schemas:
            text = message_definition(type_name, prefixes) if definition is None else definition
            self._schemas[type_name] = self._writer.register_schema(type_name, "ros2msg", text.encode())
            self._schema_bytes += len(text.encode())
        thash = type_hash(type_name, prefixes)
        channel = self._writer.register_channel(
            name, "cdr", self._schemas[type_name],
            {"offered_qos_profiles": yaml.safe_dump(list(qos), sort_keys=False), "topic_type_hash": thash})
        self.topics[name] = {"type": type_name, "qos": list(qos), "type_hash": thash, "count": 0, "channel": channel}

    def write(self, topic: str, data: bytes, log_time_ns: int, publish_time_ns: int | None = None) -> None:
        if self.closed or self.failed is not None:
            self.dropped += bool(self.failed is not None or self.stopped)
            return
        info = self.topics[topic]
        try:
            self._writer.add_message(info["channel"], log_time=int(log_time_ns), data=bytes(data),
                                     publish_time=int(log_time_ns if publish_time_ns is None else publish_time_ns),
                                     sequence=info["count"])
        except OSError as exc:
            raise self._failed(exc) from None
        info["count"] += 1
        self.start_ns = log_time_ns if self.start_ns is None else min(self.start_ns, log_time_ns)
        self.end_ns = max(self.end_ns, log_time_ns)

    def flush(self) -> None:
        """End the chunk in progress and hand everything written so far to the operating system (a writer killed
        after this loses nothing before it; ``repair_bag`` makes such a file readable)."""
        if not self.closed and self.failed is None:
            try:
                self._writer.flush()
            except OSError as exc:
                raise self._failed(exc) from None
            if self.reserve and shutil.disk_usage(self.dir).free < max(self.reserve, 2 * self._closing_bytes()):
                from consensus.jsonl import free_space

                self.stopped = (f"the disk's reserve for the run's record was reached ({free_space(self.dir)}, "
                                f"reserve {self.reserve / 1e6:.2f} MB): the bag ends here")
                try:
                    self.close()
                except OSError as exc:
                    raise self._failed(exc) from None

    def _closing_bytes(self) -> int:
        """About what ``close`` writes: the summary repeats every schema, plus the rosbag2 record and
        metadata.yaml (~600 bytes per topic each)."""
        return self._schema_bytes + 1200 * len(self.topics) + 4096

    def metadata(self) -> dict:
        count = sum(t["count"] for t in self.topics.values())
        files = [{"path": self.path.name, "start_ns": self.start_ns or 0, "end_ns": self.end_ns, "count": count}]
        topics = [{"name": n, **{k: t[k] for k in ("type", "qos", "type_hash", "count")}}
                  for n, t in self.topics.items()]
        return bag_metadata(files, topics, ros_distro=self.ros_distro)

    def close(self) -> dict:
        """Finish the MCAP file (summary, footer) and write ``metadata.yaml``; returns the metadata."""
        meta = self.metadata()
        if not self.closed and self.failed is not None:      # cut by a full disk: left for repair_bag
            self.closed = True
            try:
                self._file.close()
            except OSError:
                pass
        if not self.closed:
            self.closed = True
            info = meta["rosbag2_bagfile_information"]
            # the record rosbag2's MCAP plugin reads when the file is opened without metadata.yaml
            self._writer.add_metadata("rosbag2", {"serialized_metadata": yaml.safe_dump(info, sort_keys=False)})
            self._writer.finish()
            self._file.close()
            _write_metadata(self.dir / "metadata.yaml", meta)
        return meta


def reserve_bytes(directory: str | Path) -> int:
    """The free space a run's bag leaves on its file system for the rest of the record (summary, figures, logs):
    ``RESERVE_BYTES``, or a quarter of a small file system."""
    try:
        total = shutil.disk_usage(directory).total
    except OSError:
        return RESERVE_BYTES
    return int(min(RESERVE_BYTES, total / 4))


# --------------------------------------------------------------------------- reading
def bag_file(path: str | Path) -> Path:
    """The MCAP file of ``path``: the file itself, or in a bag directory the first file its ``metadata.yaml``
    lists (else its only ``*.mcap``). A ConfigError says what is wrong."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise ConfigError(f"{path}: no such bag (give a .mcap file or a bag directory)")
    meta = path / "metadata.yaml"
    if meta.is_file():
        try:
            info = yaml.safe_load(meta.read_text(encoding="utf-8"))["rosbag2_bagfile_information"]
            files = [path / str(p) for p in info["relative_file_paths"]]
        except (yaml.YAMLError, KeyError, TypeError) as exc:
            raise ConfigError(f"{meta}: not a rosbag2 metadata file ({exc})") from exc
        if not files or not files[0].is_file():
            raise ConfigError(f"{meta} lists no bag file that exists")
        if len(files) > 1:
            raise ConfigError(f"{path}: bags split over several files are not supported")
        return files[0]
    found = sorted(path.glob("*.mcap"))
    if len(found) != 1:
        raise ConfigError(f"{path}: expected one .mcap file in the bag directory, found {len(found)}")
    return found[0]


def _unreadable(file: Path, exc: Exception) -> ConfigError:
    return ConfigError(f"{file}: not a readable MCAP bag: truncated, or not MCAP ({type(exc).__name__}: {exc})")


def read_messages(path: str | Path, topics: Sequence[str] | None = None) -> Iterator[tuple[str, str, int, object]]:
    """``(topic, type, log_time_ns, message)`` of every message of the bag at ``path`` (file or directory), in
    log-time order, decoded by ``mcap_ros2`` (messages are plain objects with the fields of the type). A file that
    is not MCAP, is truncated or holds undecodable messages is a ConfigError."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    file = bag_file(path)
    try:
        with file.open("rb") as stream:
            reader = make_reader(stream, decoder_factories=[DecoderFactory()])
            for schema, channel, message, decoded in reader.iter_decoded_messages(topics=topics, log_time_order=True):
                yield channel.topic, schema.name if schema else "", message.log_time, decoded
    except ConfigError:
        raise
    except (McapError, EOFError, ValueError, KeyError, IndexError, struct.error) as exc:
        raise _unreadable(file, exc) from exc


def topics_of(path: str | Path) -> dict[str, str]:
    """topic -> message type of the bag at ``path`` (from the file's summary)."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader

    file = bag_file(path)
    try:
        with file.open("rb") as stream:
            summary = make_reader(stream).get_summary()
    except (McapError, EOFError, ValueError, struct.error) as exc:
        raise _unreadable(file, exc) from exc
    if summary is None:
        raise ConfigError(f"{file}: the MCAP file has no summary (the recording was cut off)")
    return {ch.topic: summary.schemas[ch.schema_id].name if ch.schema_id in summary.schemas else ""
            for ch in summary.channels.values()}


STATE_TYPE = "geometry_msgs/msg/PointStamped"
_ROBOT_INDEX = re.compile(r"(\d+)$")


def _robot_order(ns: str) -> tuple:
    m = _ROBOT_INDEX.search(ns)
    return (0, int(m.group(1)), ns) if m else (1, 0, ns)


def trajectories(path: str | Path, rate_hz: float = 5.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """The robots' trajectories in a bag: every ``/<robot>/state`` (PointStamped) and ``/<robot>/target`` topic,
    sampled at ``rate_hz`` on the log-time axis from the moment every robot has sent a state (as the recorder
    does), each robot's newest value at or before the sample (NaN for a target before its first). Returns
    ``times (T,)`` in s, ``positions (T, n, 2)``, ``targets (T, n, 2)`` and the robots' namespaces."""
    types = topics_of(path)
    robots = sorted((t[: -len("/state")] for t, ty in types.items() if t.endswith("/state") and ty == STATE_TYPE),
                    key=_robot_order)
    if not robots:
        raise ConfigError(f"{path}: the bag has no robot state topics (/<robot>/state, {STATE_TYPE}); it has "
                          f"{', '.join(sorted(types)) or 'no topics'}")
    index = {f"{ns}/state": (0, i) for i, ns in enumerate(robots)}
    index.update({f"{ns}/target": (1, i) for i, ns in enumerate(robots) if types.get(f"{ns}/target") == STATE_TYPE})
    samples: list[list[list[tuple[int, float, float]]]] = [[[] for _ in robots], [[] for _ in robots]]
    for topic, _type, t_ns, msg in read_messages(path, topics=list(index)):
        kind, i = index[topic]
        x, y = float(msg.point.x), float(msg.point.y)
        if np.isfinite(x) and np.isfinite(y):
            samples[kind][i].append((t_ns, x, y))
    firsts = [s[0][0] for s in samples[0] if s]
    if not firsts:
        raise ConfigError(f"{path}: the bag's state topics hold no messages")
    t0, t1 = max(firsts), max(s[-1][0] for s in samples[0] if s)      # from when every robot has reported
    grid = t0 + np.arange(0, (t1 - t0) * 1e-9 * rate_hz + 1) / rate_hz * 1e9
    out = np.full((2, len(grid), len(robots), 2), np.nan)
    for kind in (0, 1):
        for i, s in enumerate(samples[kind]):
            if not s:
                continue
            arr = np.asarray(s, dtype=float)
            k = np.searchsorted(arr[:, 0], grid, side="right") - 1
            ok = k >= 0
            out[kind, ok, i] = arr[k[ok], 1:]
    return (grid - t0) * 1e-9, out[0], out[1], robots


def plot_bag(path: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Redraw a run's figures from its bag into ``out_dir`` (default: ``plots/`` beside the bag directory or file):
    ``paths.png``, ``planned_vs_actual.png`` and ``spread.png``. Returns the PNG paths."""
    from consensus.runs.plots import plot_paths, plot_planned_vs_actual, plot_spread

    path = Path(path)
    times, pos, tgt, robots = trajectories(path)
    if len(times) < 2:
        raise ConfigError(f"{path}: the bag spans less than one sample of the robots' states")
    base = path.parent if path.is_file() else path
    out = Path(out_dir) if out_dir is not None else base / "plots"
    out.mkdir(parents=True, exist_ok=True)
    labels = [ns.strip("/") or ns for ns in robots]
    title = f"Replayed from {bag_file(path).name}"
    return [plot_paths(times, pos, tgt, out / "paths.png", title=title, labels=labels),
            plot_planned_vs_actual(times, pos, tgt, out / "planned_vs_actual.png", title=title, labels=labels),
            plot_spread(times, pos, out / "spread.png", title=title)]


# --------------------------------------------------------------------------- repairing a bag whose writer died
def _bag_parts(path: Path) -> tuple[Path, Path]:
    """``(directory, mcap file)`` of a bag given as its directory or its file; a cut bag has no metadata.yaml, so
    its directory's only ``*.mcap`` is the file."""
    path = Path(path)
    if path.is_file():
        return path.parent, path
    if not path.is_dir():
        raise ConfigError(f"{path}: no such bag (give a bag directory or its .mcap file)")
    try:
        return path, bag_file(path)
    except ConfigError:
        found = sorted(path.glob("*.mcap"))
        if len(found) != 1:
            raise ConfigError(f"{path}: expected one .mcap file in the bag directory, found {len(found)}") from None
        return path, found[0]


def bag_is_cut(path: str | Path) -> bool:
    """Whether the bag at ``path`` (its directory or .mcap file) has an MCAP file without its summary and footer."""
    path = Path(path)
    files = sorted(path.glob("*.mcap")) if path.is_dir() else [path]
    return any(not _complete(f) for f in files)


def _complete(file: Path) -> bool:
    """The MCAP file has its summary and footer (a reader can open it)."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader

    try:
        with file.open("rb") as stream:
            return make_reader(stream).get_summary() is not None
    except (McapError, EOFError, ValueError, KeyError, IndexError, struct.error, OSError):
        return False


def _metadata_from_summary(file: Path) -> dict:
    """``metadata.yaml``'s content for a complete MCAP file, from its summary (counts, times, channel metadata)."""
    from mcap.reader import make_reader

    with file.open("rb") as stream:
        summary = make_reader(stream).get_summary()
    stats = summary.statistics
    counts = dict(stats.channel_message_counts) if stats else {}
    total = int(stats.message_count) if stats else 0
    files = [{"path": file.name, "start_ns": stats.message_start_time if stats else 0,
              "end_ns": stats.message_end_time if stats else 0, "count": total}]
    topics = []
    for cid, ch in summary.channels.items():
        schema = summary.schemas.get(ch.schema_id)
        topics.append({"name": ch.topic, "type": schema.name if schema else "", "qos": _qos_of(ch.metadata),
                       "type_hash": ch.metadata.get("topic_type_hash", ""), "count": int(counts.get(cid, 0))})
    return bag_metadata(files, topics, ros_distro=os.environ.get("ROS_DISTRO", ""))


def _metadata_ok(path: Path) -> bool:
    try:
        return isinstance(yaml.safe_load(path.read_text(encoding="utf-8"))["rosbag2_bagfile_information"], dict)
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return False


def _qos_of(metadata: dict) -> list:
    try:
        qos = yaml.safe_load(metadata.get("offered_qos_profiles", "") or "[]")
    except yaml.YAMLError:
        return []
    return qos if isinstance(qos, list) else []


def repair_bag(path: str | Path) -> dict:
    """Make the bag at ``path`` (its directory or .mcap file) readable (module docstring). Returns ``{"file",
    "repaired"``: False when the file was complete (a missing metadata.yaml is written all the same),
    ``"messages"``: recovered, ``"dropped"``: messages of channels whose definition was in the cut tail``}``. A file
    that is not MCAP is a ConfigError; so is a copy that does not fit on the disk (the bag is left as it was)."""
    from mcap.records import Channel, Header, Message, Metadata, Schema
    from mcap.stream_reader import StreamReader
    from mcap.writer import CompressionType, Writer

    directory, file = _bag_parts(Path(path))
    meta_path = directory / "metadata.yaml"
    if _complete(file):
        if not _metadata_ok(meta_path):
            _write_metadata(meta_path, _metadata_from_summary(file))
        return {"file": str(file), "repaired": False, "messages": None, "dropped": 0}
    size = file.stat().st_size
    tmp = file.with_name(file.name + ".repair")
    schemas: dict[int, int] = {}
    channels: dict[int, int] = {}
    topics: dict[int, dict] = {}
    schema_names: dict[int, str] = {}
    count = dropped = 0
    start_ns: int | None = None
    end_ns = 0
    header = None
    with file.open("rb") as src:
        reader = StreamReader(src, validate_crcs=True, record_size_limit=size + 1)
        try:
            with tmp.open("wb") as out:
                writer = None
                records = iter(reader.records)
                while True:
                    try:
                        rec = next(records)
                    except StopIteration:
                        break
                    except Exception:  # noqa: BLE001 - the cut: a record that ends beyond the file or fails its CRC
                        break
                    if isinstance(rec, Header):
                        header = rec
                        writer = Writer(out, chunk_size=256 * 1024, compression=CompressionType.ZSTD)
                        writer.start(profile=rec.profile or "ros2", library=rec.library or "consensus")
                    elif writer is None:
                        break
                    elif isinstance(rec, Schema) and rec.id not in schemas:
                        schemas[rec.id] = writer.register_schema(rec.name, rec.encoding, rec.data)
                        schema_names[rec.id] = rec.name
                    elif isinstance(rec, Channel) and rec.id not in channels:
                        channels[rec.id] = writer.register_channel(rec.topic, rec.message_encoding,
                                                                   schemas.get(rec.schema_id, 0), dict(rec.metadata))
                        topics[rec.id] = {"name": rec.topic, "type": schema_names.get(rec.schema_id, ""),
                                          "qos": _qos_of(rec.metadata), "count": 0,
                                          "type_hash": rec.metadata.get("topic_type_hash", "")}
                    elif isinstance(rec, Message):
                        if rec.channel_id not in channels:
                            dropped += 1
                            continue
                        writer.add_message(channels[rec.channel_id], log_time=rec.log_time, data=rec.data,
                                           publish_time=rec.publish_time, sequence=rec.sequence)
                        topics[rec.channel_id]["count"] += 1
                        count += 1
                        start_ns = rec.log_time if start_ns is None else min(start_ns, rec.log_time)
                        end_ns = max(end_ns, rec.log_time)
                    elif isinstance(rec, Metadata) and rec.name != "rosbag2":
                        writer.add_metadata(rec.name, dict(rec.metadata))
                if writer is None or header is None:
                    raise ConfigError(f"{file}: not an MCAP file (no MCAP header); nothing to repair")
                files = [{"path": file.name, "start_ns": start_ns or 0, "end_ns": end_ns, "count": count}]
                meta = bag_metadata(files, list(topics.values()), ros_distro=os.environ.get("ROS_DISTRO", ""))
                writer.add_metadata("rosbag2", {"serialized_metadata": yaml.safe_dump(
                    meta["rosbag2_bagfile_information"], sort_keys=False)})
                writer.finish()
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise ConfigError(f"{file}: cannot write the repaired copy {tmp.name} ({exc.strerror or exc})"
                                  ) from None
            return _repair_in_place(file, meta_path)      # a full disk: no room for a copy
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    os.replace(tmp, file)
    _write_metadata(meta_path, meta)
    return {"file": str(file), "repaired": True, "messages": count, "dropped": dropped}


def _repair_in_place(file: Path, meta_path: Path) -> dict:
    """The repair of a bag on a full disk: the cut tail (from the first record that is not whole and valid: a cut
    chunk, or a chunk whose message indexes were not all written) is truncated away, which frees its bytes, and the
    MCAP summary and footer are appended after the whole chunks (schemas, channels, statistics, chunk indexes, as
    ``mcap``'s writer lays them out; the rosbag2 record is left to metadata.yaml). When even that does not fit,
    the newest whole chunks are given up, one at a time, until it does. A whole chunk whose message indexes were cut
    is given up too (the copy keeps it): the repair keeps nearly every message the copy keeps, in about half the
    copy's time (measured: docs/benchmarks.md, 'Why the code is as it is')."""
    from mcap.data_stream import ReadDataStream, RecordBuilder
    from mcap.opcode import Opcode
    from mcap.records import Channel, Chunk, ChunkIndex, DataEnd, Footer, Schema, Statistics
    from mcap.stream_reader import MAGIC_SIZE, breakup_chunk

    size = file.stat().st_size
    schemas: dict[int, Schema] = {}
    channels: dict[int, Channel] = {}
    chunks: list[tuple[ChunkIndex, list]] = []          # whole chunks with their message indexes, in file order
    with file.open("r+b") as fh:
        pos = good = MAGIC_SIZE
        pending: tuple[ChunkIndex, list] | None = None       # a chunk waiting for its message indexes
        fh.seek(pos)
        while pos + 9 <= size:
            op, length = struct.unpack("<BQ", fh.read(9))
            if pos + 9 + length > size:
                break
            body = fh.read(length)
            if op == Opcode.MESSAGE_INDEX and pending is not None:
                cid = struct.unpack_from("<H", body)[0]
                pending[0].message_index_offsets[cid] = pos
                pending[0].message_index_length += 9 + length
                pos += 9 + length
                if set(pending[0].message_index_offsets) >= {m.channel_id for m in _messages(pending[1])}:
                    chunks.append(pending)
                    pending, good = None, pos
                continue
            if pending is not None or op in (Opcode.DATA_END, Opcode.FOOTER):
                break                                           # a chunk without all its indexes: the cut
            if op == Opcode.CHUNK:
                try:
                    chunk = Chunk.read(ReadDataStream(io.BytesIO(body)))
                    inner = breakup_chunk(chunk, validate_crc=True)
                except Exception:  # noqa: BLE001 - a chunk whose bytes were never all written
                    break
                index = ChunkIndex(message_start_time=chunk.message_start_time,
                                   message_end_time=chunk.message_end_time, chunk_start_offset=pos,
                                   chunk_length=9 + length, message_index_offsets={}, message_index_length=0,
                                   compression=chunk.compression, compressed_size=len(chunk.data),
                                   uncompressed_size=chunk.uncompressed_size)
                pos += 9 + length
                pending = (index, inner)
                if not _messages(inner):
                    chunks.append(pending)
                    pending, good = None, pos
                continue
            if op in (Opcode.SCHEMA, Opcode.CHANNEL):
                rec = (Schema if op == Opcode.SCHEMA else Channel).read(ReadDataStream(io.BytesIO(body)))
                (schemas if op == Opcode.SCHEMA else channels).setdefault(rec.id, rec)
            pos += 9 + length
            good = pos
        for _, inner in chunks:
            for rec in inner:
                if isinstance(rec, Schema):
                    schemas.setdefault(rec.id, rec)
                elif isinstance(rec, Channel):
                    channels.setdefault(rec.id, rec)
        while True:
            counts: dict[int, int] = {}
            times = [m.log_time for _, inner in chunks for m in _messages(inner)]
            for _, inner in chunks:
                for m in _messages(inner):
                    counts[m.channel_id] = counts.get(m.channel_id, 0) + 1
            t_start, t_end = (min(times), max(times)) if times else (0, 0)
            b = RecordBuilder()
            DataEnd(data_section_crc=0).write(b)
            summary_start = good + b.count
            for schema in schemas.values():
                schema.write(b)
            for channel in channels.values():
                channel.write(b)
            Statistics(message_count=len(times), schema_count=len(schemas), channel_count=len(channels),
                       attachment_count=0, metadata_count=0, chunk_count=len(chunks), message_start_time=t_start,
                       message_end_time=t_end, channel_message_counts=dict(counts)).write(b)
            for index, _ in chunks:
                index.write(b)
            Footer(summary_start=summary_start, summary_offset_start=0, summary_crc=0).write(b)
            topics = [{"name": ch.topic, "type": schemas[ch.schema_id].name if ch.schema_id in schemas else "",
                       "qos": _qos_of(ch.metadata), "type_hash": ch.metadata.get("topic_type_hash", ""),
                       "count": counts.get(cid, 0)} for cid, ch in channels.items()]
            meta = bag_metadata([{"path": file.name, "start_ns": t_start, "end_ns": t_end, "count": len(times)}],
                                topics, ros_distro=os.environ.get("ROS_DISTRO", ""))
            try:
                fh.truncate(good)
                fh.seek(good)
                fh.write(b.end() + MCAP_MAGIC)
                fh.flush()
                os.fsync(fh.fileno())
                _write_metadata(meta_path, meta)             # room for it too, or one chunk less
                break
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) or not chunks:
                    fh.truncate(good)
                    raise ConfigError(f"{file}: the bag's summary does not fit on the disk ({exc.strerror}); "
                                      f"free some space and run `consensus bag repair {file.parent}`") from None
                good = chunks.pop()[0].chunk_start_offset           # give up the newest chunk and try again
    return {"file": str(file), "repaired": True, "messages": len(times), "dropped": 0, "in_place": True}


def _messages(records: list) -> list:
    from mcap.records import Message

    return [r for r in records if isinstance(r, Message)]


def _write_metadata(path: Path, meta: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(yaml.safe_dump(meta, sort_keys=False), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
