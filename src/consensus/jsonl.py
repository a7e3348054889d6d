"""Files written record by record (results.jsonl, transcripts.jsonl, plans.jsonl, trajectories.csv): appending a
record whole or not at all (``AppendFile``, ``append_record``), and reading JSON lines back tolerantly.

A record (one line, or one sample's lines of a CSV) goes to the file in one ``os.write`` of the whole text on a file
opened with ``O_APPEND``, with no buffer in the process: once ``append`` returns the record is in the operating
system's page cache and survives the writer's death (``kill -9``); a crash of the machine needs ``fsync``
(``sync=True``). A write that fails or comes up short (a full disk: ENOSPC, a quota: EDQUOT, a file size limit) is
truncated back to where the record started, so the file holds only whole records, and raises ``RecordWriteError``
(an ``OSError`` with the path, the reason and the free space left on the path's file system).
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import threading
from typing import Callable


class RecordWriteError(OSError):
    """A record that could not be appended (the file is left as it was before): names the path and the free
    space left on its file system."""


def free_space(path: str | os.PathLike) -> str:
    """The free space on the file system of ``path`` for a message (``"12.3 MB free"``), or ``"free space
    unknown"``."""
    where = os.fspath(path)
    for candidate in (where, os.path.dirname(where) or "."):
        try:
            free = shutil.disk_usage(candidate).free
        except OSError:
            continue
        for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if free >= size:
                return f"{free / size:.1f} {unit} free"
        return f"{free} bytes free"
    return "free space unknown"


class AppendFile:
    """``path`` opened for appending whole records (module docstring); thread-safe within the process. ``header``:
    written first when the file is new or empty (a CSV's column line)."""

    def __init__(self, path: str | os.PathLike, *, header: str = "", sync: bool = False) -> None:
        self.path = os.fspath(path)
        self.sync = sync
        self._lock = threading.Lock()
        try:
            self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise _error(self.path, exc, "cannot open it for appending") from None
        if os.fstat(self._fd).st_size:
            self._end_partial_line()
        elif header:
            self.append(header)

    def _end_partial_line(self) -> None:
        """A file whose last line was cut (a writer killed by an older version, another program) gets a newline
        first, so the next record is not glued onto the broken one."""
        with open(self.path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            cut = fh.read(1) != b"\n"
        if cut:
            self.append("")

    def append(self, text: str | bytes) -> None:
        """Append ``text`` plus a newline if it lacks one, whole or not at all."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if not data.endswith(b"\n"):
            data += b"\n"
        with self._lock:
            if self._fd is None:
                raise ValueError(f"{self.path}: appending to a closed file")
            start = os.fstat(self._fd).st_size
            try:
                view = memoryview(data)
                while view:                                   # a regular file writes all unless it cannot
                    n = os.write(self._fd, view)
                    if n <= 0:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    view = view[n:]
                if self.sync:
                    os.fsync(self._fd)
            except OSError as exc:
                try:
                    os.ftruncate(self._fd, start)             # the record is whole or not at all
                except OSError:
                    pass
                raise _error(self.path, exc, "a record could not be written; the file keeps its whole records"
                             ) from None

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> "AppendFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _error(path: str, exc: OSError, what: str) -> RecordWriteError:
    code = exc.errno if exc.errno is not None else errno.EIO
    reason = exc.strerror or os.strerror(code)
    return RecordWriteError(code, f"{reason}: {what} ({free_space(path)})", path)


def append_record(path: str | os.PathLike, record: object) -> None:
    """Append ``record`` as one JSON line to ``path``, whole or not at all (opens and closes the file)."""
    with AppendFile(path) as fh:
        fh.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))


def read_records(path: str | os.PathLike, accept: Callable[[object], bool]) -> tuple[list[dict], list[int]]:
    """``(records, bad)``: the lines that parse as JSON and pass ``accept``, in file order, and the 1-based numbers
    of the other non-empty lines (a truncated last line is what a killed writer leaves)."""
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    records: list[dict] = []
    bad: list[int] = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            bad.append(i)
            continue
        if accept(rec):
            records.append(rec)
        else:
            bad.append(i)
    return records, bad
