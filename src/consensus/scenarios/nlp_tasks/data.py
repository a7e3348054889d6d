"""Items of paper 3's NLP tasks, read from the datasets' own file formats and sampled with a seed.

Formats (any other content is one ``ConfigError`` naming the file and what is wrong):

* ``qa``: SQuAD 2.0 JSON (``{"version": "v2.0", "data": [{"title", "paragraphs": [{"context", "qas": [{"id",
  "question", "answers": [{"text", ...}], "is_impossible"}]}]}]}``): one item per question; its gold answers are
  the ``answers`` texts (none for an unanswerable question: ``is_impossible`` true or no answers).
* ``classification``: the AG News CSV (no header; rows ``"class","title","description"``, class 1-4 = World,
  Sports, Business, Sci/Tech). The topic names are the paper's: Sci/Tech is "Science/Technology". The article is
  ``title`` and ``description`` on two lines, with the CSV's escapes undone (``\\`` -> a space, ``#36;`` -> ``$``
  and the other ``#NN;`` character references).
* ``summarization``: XSum as JSON lines (``{"document", "summary", "id"}`` per line; blank lines skipped).

``sample_items(task, path, n, seed)``: ``n`` distinct items drawn uniformly without replacement by
``numpy.random.default_rng(seed)`` in draw order (the paper: "randomly selected"); QA items also draw their
formatting instruction from the same generator (``instructions.draw_instruction``). The result is cached per
(file, size, mtime, n, seed), so the trials of one worker read the file once.
"""
from __future__ import annotations

import csv
import html
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from consensus.errors import ConfigError
from consensus.scenarios.nlp_tasks.instructions import draw_instruction

TOPICS = ("World", "Sports", "Business", "Science/Technology")     # AG News classes 1..4, the paper's names
MAX_FILE_BYTES = 512 * 1024 * 1024
_REF_RE = re.compile(r"#(\d{1,6});")


@dataclass(frozen=True)
class Item:
    """One question / article / document."""
    id: str
    text: str                             # SQuAD context, AG News article, XSum document
    question: str = ""                    # qa
    answers: tuple[str, ...] = ()         # qa: gold answers (empty: unanswerable)
    instruction: str = ""                 # qa: the formatting instruction's id
    label: str = ""                       # classification: the gold topic
    reference: str = ""                   # summarization: the gold one-sentence summary
    meta: dict = field(default_factory=dict, compare=False)


def _bad(path: Path, what: str) -> ConfigError:
    return ConfigError(f"dataset {path}: {what}")


def _read_text(path: Path) -> str:
    if not path.exists():
        raise _bad(path, "file not found")
    if not path.is_file():
        raise _bad(path, "not a file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise _bad(path, f"larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise _bad(path, "not a UTF-8 text file") from None
    except OSError as exc:
        raise _bad(path, f"cannot be read ({exc.strerror or exc})") from None


def _squad(path: Path) -> list[Item]:
    what = 'not a SQuAD 2.0 JSON file (expected {"data": [{"paragraphs": [{"context": ..., "qas": [...]}]}]})'
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise _bad(path, f"{what}: invalid JSON at line {exc.lineno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise _bad(path, what)
    items = []
    try:
        for article in data["data"]:
            for para in article["paragraphs"]:
                context = para["context"]
                for qa in para["qas"]:
                    answers = [] if qa.get("is_impossible") else [a["text"] for a in qa.get("answers") or []]
                    if not all(isinstance(x, str) for x in (context, qa["question"], qa["id"], *answers)):
                        raise TypeError("a context, question, id or answer is not a string")
                    items.append(Item(id=qa["id"], text=context, question=qa["question"].strip(),
                                      answers=tuple(answers)))
    except (KeyError, TypeError, AttributeError) as exc:
        raise _bad(path, f"{what}; question {len(items) + 1}: {type(exc).__name__} {exc}") from None
    return items


def _ag_text(s: str) -> str:
    return html.unescape(_REF_RE.sub(r"&#\1;", s.replace("\\", " "))).strip()


def _ag_news(path: Path) -> list[Item]:
    items = []
    for line, row in enumerate(csv.reader(_read_text(path).splitlines()), start=1):
        if not row:
            continue
        if len(row) != 3 or row[0].strip() not in ("1", "2", "3", "4"):
            raise _bad(path, f'line {line}: not an AG News row ("class","title","description" with class 1-4): '
                             f"{str(row)[:80]}")
        items.append(Item(id=str(line), text=f"{_ag_text(row[1])}\n{_ag_text(row[2])}",
                          label=TOPICS[int(row[0]) - 1]))
    return items


def _xsum(path: Path) -> list[Item]:
    items = []
    for line, raw in enumerate(_read_text(path).splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError:
            raise _bad(path, f"line {line}: not JSON (XSum JSON lines: {{\"document\", \"summary\", \"id\"}})") \
                from None
        if not (isinstance(rec, dict) and isinstance(rec.get("document"), str) and isinstance(rec.get("summary"), str)):
            raise _bad(path, f'line {line}: an XSum record needs the strings "document" and "summary"')
        items.append(Item(id=str(rec.get("id", line)), text=rec["document"].strip(), reference=rec["summary"].strip()))
    return items


LOADERS = {"qa": _squad, "classification": _ag_news, "summarization": _xsum}


def load_items(task: str, path: str | os.PathLike) -> list[Item]:
    """Every item of the file (ConfigError if the file is not the task's format or holds none)."""
    p = Path(path).expanduser()
    items = LOADERS[task](p)
    if not items:
        raise _bad(p, "holds no items")
    return items


@lru_cache(maxsize=16)
def _sample(task: str, path: str, stamp: tuple, n: int, seed: int) -> tuple[Item, ...]:
    items = load_items(task, path)
    if n > len(items):
        raise _bad(Path(path), f"{n} items asked, the file holds {len(items)}")
    rng = np.random.default_rng(seed)
    chosen = [items[int(i)] for i in rng.choice(len(items), size=n, replace=False)]
    if task == "qa":
        from dataclasses import replace
        chosen = [replace(item, instruction=draw_instruction(rng).id) for item in chosen]
    return tuple(chosen)


def sample_items(task: str, path: str | os.PathLike, n: int, seed: int) -> tuple[Item, ...]:
    """``n`` items drawn with ``seed`` (module docstring)."""
    p = Path(path).expanduser().resolve()
    try:
        st = p.stat()
        stamp = (st.st_size, st.st_mtime_ns)
    except OSError:
        stamp = ()
    return _sample(task, str(p), stamp, n, seed)
