"""JSON-lines files written record by record (results.jsonl, transcripts.jsonl): reading them back tolerantly."""
from __future__ import annotations

import json
import os
from typing import Callable


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
