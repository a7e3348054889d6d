"""Numbers in and out of LLM text: reading a position (or any JSON object) out of a reply, and ``format_number``
for the numbers a prompt shows (at most 2 decimals, shared by every scenario's prompts).

``parse_position`` never raises. It tries, in order:

1. JSON: the first ``{...}`` in the reply (fences and surrounding prose are fine; nested
   objects are searched too) that decodes to an object with a "position" key. Its verdict
   is final: a JSON position of the wrong size is an error, not a reason to guess.
   A reply that is only a JSON number or list (``5``, ``[1, -2]``) is read as well.
2. Lenient: the paper's "Reasoning: ..., Position: ..." format and close variants
   ("Position: (x, y)", "Position: [x, y]", "my position is x"). The LAST "position"
   marker followed by a value wins. Unlike the paper's code, minus signs (also the
   unicode minus "−"), decimals and exponents are kept.

The result is rejected (``position`` None, ``error`` set) for the wrong number of values,
NaN/inf, or a magnitude above ``max_abs``. Only the first ``MAX_TEXT_CHARS`` characters of a
reply are searched.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

MAX_TEXT_CHARS = 20_000
MAX_REASONING_CHARS = 500
_MAX_JSON_STARTS = 1_000     # "{" positions tried by the JSON stage (bounds adversarial replies)

_NUM = r"[-+\u2212]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+\u2212]?\d+)?|nan|inf(?:inity)?)"
_NUM_RE = re.compile(_NUM, re.IGNORECASE)
_MARKER_RE = re.compile(r"\bposition\b", re.IGNORECASE)
_REASONING_RE = re.compile(r"\breasoning\b\s*[\"'*_`]*\s*[:=]?\s*[\"'*_`]*\s*", re.IGNORECASE)
# what may stand between the marker and its value: punctuation and a few filler words
_FILL = r"[\s:=*\"'`_]*"
_SEP_RE = re.compile(_FILL + r"(?:(?:is|will\s+be|would\s+be|be|at|to|of|now|new|final|chosen)\b" + _FILL + r"){0,3}",
                     re.IGNORECASE)
_BRACKETED_RE = re.compile(r"[(\[]\s*(" + _NUM + r"(?:\s*[,;]\s*" + _NUM + r")*)\s*[)\]]", re.IGNORECASE)
_COMMA_RE = re.compile(r"\s*,\s*")
_REASONING_JUNK = " \t\r\n*_`\"'{[(,;:"
_FENCE_RE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


@dataclass
class ParseOutcome:
    position: np.ndarray | None
    reasoning: str = ""
    method: str = ""        # "json" | "lenient" | "" (failed)
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.position is not None


def parse_position(text: Any, dim: int, *, max_abs: float = 1e6) -> ParseOutcome:
    """The position (shape (dim,)) and reasoning in ``text``; never raises."""
    try:
        return _parse(text, dim, max_abs)
    except Exception as exc:  # a parser must not take a robot down; say what happened instead
        return ParseOutcome(None, error=f"parser error: {type(exc).__name__}")


def _parse(text: Any, dim: int, max_abs: float) -> ParseOutcome:
    if not isinstance(text, str):
        return ParseOutcome(None, error=f"reply is not text ({type(text).__name__})")
    if not text.strip():
        return ParseOutcome(None, error="empty reply")
    text = text[:MAX_TEXT_CHARS]

    found = _from_json(text)
    if found is not None:
        value, reasoning = found
        return _finish(value, reasoning, "json", dim, max_abs)

    found_lenient = _from_markers(text)
    if found_lenient is not None:
        tokens, reasoning = found_lenient
        return _finish(tokens, reasoning, "lenient", dim, max_abs)
    return ParseOutcome(None, error="no position found")


# --- JSON stage -----------------------------------------------------------------------------------
def json_objects(text: str, max_starts: int = _MAX_JSON_STARTS) -> Iterator[dict]:
    """The JSON objects in ``text``, trying every "{" from the left (at most ``max_starts`` of them, which bounds the
    work an adversarial reply can cause); text around and between objects is ignored."""
    decoder = json.JSONDecoder()
    start, tries = text.find("{"), 0
    while start != -1 and tries < max_starts:
        tries += 1
        try:
            obj, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            yield obj
        start = text.find("{", start + 1)


def _from_json(text: str) -> tuple[Any, str] | None:
    """(position value, reasoning) of the first JSON object holding a "position" key."""
    bare = _FENCE_RE.sub("", text.strip())
    if bare[:1] in "[-0123456789.":
        try:
            whole = json.loads(bare)
        except (ValueError, RecursionError):
            whole = None
        if isinstance(whole, (list, int, float)) and not isinstance(whole, bool):
            return whole, ""
    for obj in json_objects(text):
        keys = {str(k).lower(): k for k in obj}
        if "position" in keys:
            reasoning = obj.get(keys["reasoning"], "") if "reasoning" in keys else ""
            return obj[keys["position"]], reasoning if isinstance(reasoning, str) else str(reasoning)
    return None


# --- lenient stage --------------------------------------------------------------------------------
def _from_markers(text: str) -> tuple[list[str], str] | None:
    """(number tokens, reasoning) after the last "position" marker that is followed by a value."""
    for marker in reversed(list(_MARKER_RE.finditer(text))):
        pos = _SEP_RE.match(text, marker.end()).end()
        bracketed = _BRACKETED_RE.match(text, pos)
        if bracketed:
            tokens = _NUM_RE.findall(bracketed.group(1))
        else:
            tokens = _bare_numbers(text, pos)
        if tokens:
            return tokens, _reasoning_before(text, marker.start())
    return None


def _bare_numbers(text: str, pos: int) -> list[str]:
    """A number, or comma-separated numbers, starting at ``pos`` (as in "Position: 3, -4")."""
    tokens: list[str] = []
    while True:
        m = _NUM_RE.match(text, pos)
        if not m or (m.end() < len(text) and (text[m.end()].isalnum() or text[m.end()] == "_")):
            break
        tokens.append(m.group(0))
        comma = _COMMA_RE.match(text, m.end())
        if not comma:
            break
        pos = comma.end()
    return tokens


def _reasoning_before(text: str, end: int) -> str:
    head = text[:end]
    markers = list(_REASONING_RE.finditer(head))
    if markers:
        head = head[markers[-1].end():]
    return head.strip(_REASONING_JUNK)


# --- validation -------------------------------------------------------------------------------
def _to_float(value: Any) -> float:
    if isinstance(value, bool) or value is None:
        raise ValueError("not a number")
    if isinstance(value, str):
        value = value.strip().replace("\u2212", "-")
    return float(value)     # OverflowError for huge ints, ValueError for junk


def _values(raw: Any, dim: int) -> list[Any]:
    """The list of scalar values held by a JSON "position" value or a token list."""
    if isinstance(raw, dict):
        keys = {str(k).lower(): k for k in raw}
        axes = ("x", "y")[:dim]
        if all(a in keys for a in axes):
            return [raw[keys[a]] for a in axes]
        raise ValueError("position object needs x (and y) keys")
    if isinstance(raw, str):
        tokens = _NUM_RE.findall(raw)
        if not tokens:
            raise ValueError("position text holds no number")
        return tokens
    if isinstance(raw, (list, tuple)):
        return list(raw)
    return [raw]


def _finish(raw: Any, reasoning: str, method: str, dim: int, max_abs: float) -> ParseOutcome:
    reasoning = reasoning[:MAX_REASONING_CHARS]
    try:
        values = _values(raw, dim)
        if len(values) != dim:
            raise ValueError(f"wrong dimension: expected {dim} number(s), got {len(values)}")
        floats = [_to_float(v) for v in values]
    except (ValueError, TypeError, OverflowError) as exc:
        return ParseOutcome(None, reasoning, "", f"{method}: {exc}")
    if not all(math.isfinite(v) for v in floats):
        return ParseOutcome(None, reasoning, "", f"{method}: non-finite value")
    if any(abs(v) > max_abs for v in floats):
        return ParseOutcome(None, reasoning, "", f"{method}: value beyond max_abs={max_abs:g}")
    return ParseOutcome(np.asarray(floats, dtype=float), reasoning, method, "")


def format_number(value: float, decimals: int = 2) -> str:
    """Compact number with at most ``decimals`` decimals: 3.0 -> "3", -3.256 -> "-3.26", 4.10 -> "4.1"."""
    if not math.isfinite(value):
        raise ValueError(f"cannot put a non-finite number in a prompt: {value}")
    text = f"{value:.{int(decimals)}f}".rstrip("0").rstrip(".") if decimals > 0 else f"{value:.0f}"
    return "0" if text in ("-0", "") else text
