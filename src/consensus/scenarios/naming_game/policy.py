"""Naming-game policies of paper 4: the q table of an agent, baselines, and the importers of published tables.

A ``Policy`` is q(M), the probability that an agent whose memory is M says word 0 (``words[0]``, π₁ of the paper),
for every state of ``memory_space(H)`` in that order, with the two words, a name, where it came from (``source``:
``"llm:<model>"``, ``"published"``, ``"fixed_bias"``, ``"memory_invariant"``, ...) and free metadata.

Files (``load_policies`` / ``save_policies``):

* JSON, the format of ``../shared/data/naming-game/q_tables.json``: ``{"tables": [{model, model_name,
  crows_pairs_id, words, rewards, temperature, memory_size, q: {state key: q}}, ...]}``. ``save_policies`` adds
  ``name``, ``source`` and ``meta`` (the other metadata); tables without a ``source`` (the published file) load as
  ``"published"``. State keys are those of ``game.py``: ``""`` is the empty memory, ``"01"`` = one interaction where
  the agent said word 0 and its partner word 1, oldest interaction first.
* The original ``q_dicts.zip`` of the paper's repository (Ariel-Flint-Ashery/LLM-group-size), or one of its
  ``.pkl`` members. Each member ``Q_dict_<model>_ID_<CrowS-Pairs id>_<r_fail>_<r_success>_<T>tmp_BLANK_<bool>.pkl``
  is a pickled dict from state key to q. Its keys are already digit strings in the format above (the paper's
  ``get_q_dictionaries.convert_dictionary`` interleaves own and partner words, oldest first, and stores
  ``exp(logprob of input_options[0])``, so q refers to the first word of the pair's CrowS-Pairs ``differences``).
  Only such string keys are accepted: the published pickles hold nothing else, and a tuple or word-name key would
  have to guess an interleaving. The values are numpy float64 scalars or floats. The pickles do not name the words:
  they come from the CrowS-Pairs id in the file name (``PAPER_WORD_PAIRS``, the paper's eleven pairs) or from the
  ``words`` argument.

Pickles are untrusted input. They are read by an unpickler whose ``find_class`` never imports anything: it maps the
three globals a numpy float64 scalar needs (``numpy._core.multiarray.scalar`` / ``numpy.core.multiarray.scalar``,
``numpy.dtype``, and ``_codecs.encode`` of protocol-2 bytes) to local stand-ins that only decode float bytes, and
refuses every other global with a ``ConfigError`` ("refusing to unpickle os.system: ..."), before anything runs.
Zip archives are bounded (file size, member count, declared and actual unpacked sizes).

Baselines from the SI's minimal model: ``fixed_bias(p, H)`` (q = p in every state) and ``memory_invariant(p, H)``
(the binary minimal naming game with a fixed individual bias p, written as a q table, see its docstring).
``individual_bias`` is q of the empty memory; ``is_neutral`` is the Methods' test (Jensen–Shannon distance, base 2,
between (q, 1 − q) of the empty memory and the uniform distribution below 0.005).
"""
from __future__ import annotations

import io
import json
import math
import os
import pickle
import re
import struct
import sys
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from consensus.errors import ConfigError
from consensus.scenarios.naming_game.game import check_memory, check_q, memory_space, state_count

DEFAULT_WORDS = ("π1", "π2")
NEUTRAL_TOLERANCE = 0.005

# Limits of the zip / pickle importer: the published archive is 0.5 MB with 44 members of 43 kB (H = 5); H = 6
# tables are ~180 kB. Anything far beyond is refused before it is unpacked.
MAX_ARCHIVE_BYTES = 256 * 2 ** 20
MAX_ZIP_MEMBERS = 1000
MAX_MEMBER_BYTES = 16 * 2 ** 20
MAX_TOTAL_BYTES = 256 * 2 ** 20

# The paper's eleven word pairs by CrowS-Pairs id, in the order of the source's `differences` field (crows_pairs_
# stereo_sample.pkl of the paper's repository): q is the probability of the first word.
PAPER_WORD_PAIRS: dict[int, tuple[str, str]] = {
    191: ("his", "her"), 102: ("gay", "straight"), 397: ("she", "he"), 344: ("White", "Black"),
    1161: ("more", "less"), 219: ("young", "old"), 92: ("African", "White"), 349: ("Mexican", "American"),
    626: ("tall", "short"), 505: ("woman", "man"), 410: ("wife", "husband"),
}
PAPER_MODEL_NAMES = {"gpt-4o": "OpenAI GPT-4o", "llama31_70B": "Meta Llama 3.1 70B (4-bit)",
                     "phi_4": "Microsoft Phi-4", "QWQ_32B": "Qwen QwQ-32B"}

_MEMBER_NAME = re.compile(r"Q_dict_(?P<model>.+)_ID_(?P<id>\d+)_(?P<fail>-?\d+)_(?P<success>-?\d+)_"
                          r"(?P<temperature>\d+(?:\.\d*)?)tmp_BLANK_(?P<blank>True|False)\.pkl")
# metadata the JSON format keeps at the top level of a table; everything else goes under "meta"
_TABLE_FIELDS = ("model", "model_name", "crows_pairs_id", "rewards", "temperature")


# --------------------------------------------------------------------------------------------------- the policy
@dataclass(frozen=True, eq=False, repr=False)
class Policy:
    """q[i] = P(word 0 | memory state i), i in ``memory_space(H)`` order. Validated and read-only."""

    q: np.ndarray
    H: int
    words: tuple[str, str] = DEFAULT_WORDS
    name: str = ""
    source: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        H = check_memory(self.H)
        if not isinstance(self.name, str) or not isinstance(self.source, str):
            raise ConfigError(f"policy name and source must be strings (got {self.name!r}, {self.source!r})")
        label = f"policy {self.name!r}" if self.name else "policy"
        words = _check_words(self.words, label)
        if not isinstance(self.meta, Mapping):
            raise ConfigError(f"{label}: meta must be a mapping (got {type(self.meta).__name__})")
        object.__setattr__(self, "H", H)
        object.__setattr__(self, "words", words)
        object.__setattr__(self, "q", check_q(self.q, H, label))
        object.__setattr__(self, "meta", dict(self.meta))

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, float], H: int, words: Sequence[str] = DEFAULT_WORDS,
                     name: str = "", source: str = "", meta: Mapping | None = None) -> Policy:
        """Build from {state key: q}; every state of ``memory_space(H)`` must be present, and nothing else."""
        label = f"policy {name!r}" if name else "policy"
        if not isinstance(mapping, Mapping):
            raise ConfigError(f"{label}: expected a mapping from state key to q (got {type(mapping).__name__})")
        ms = memory_space(check_memory(H))
        bad_keys = [k for k in mapping if not isinstance(k, str)]
        if bad_keys:
            raise ConfigError(f"{label}: state keys must be strings of 0/1 digits like '0110' "
                              f"(got {type(bad_keys[0]).__name__} key {bad_keys[0]!r})")
        missing = [k for k in ms.keys if k not in mapping]
        if missing:
            raise ConfigError(f"{label}: {len(missing)} of {len(ms)} memory states (H = {ms.H}) have no q, "
                              f"e.g. {_few(missing)}")
        extra = [k for k in mapping if k not in ms.index]
        if extra:
            raise ConfigError(f"{label}: {len(extra)} keys are not memory states of H = {ms.H}, e.g. {_few(extra)}")
        values = []
        for key in ms.keys:
            v = mapping[key]
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise ConfigError(f"{label}: q[{key!r}] must be a number (got {type(v).__name__} {v!r})")
            values.append(float(v))
        return cls(np.array(values), ms.H, tuple(words), name, source, dict(meta or {}))

    def as_mapping(self) -> dict[str, float]:
        """{state key: q} in ``memory_space(H)`` order."""
        return dict(zip(memory_space(self.H).keys, self.q.tolist()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Policy):
            return NotImplemented
        return (self.H == other.H and self.words == other.words and self.name == other.name
                and self.source == other.source and self.meta == other.meta and np.array_equal(self.q, other.q))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Policy(name={self.name!r}, source={self.source!r}, H={self.H}, words={self.words!r}, "
                f"q[empty]={self.q[0]:.6g})")


def _few(items: Sequence, n: int = 5) -> str:
    shown = ", ".join(repr(x) for x in list(items)[:n])
    return shown + (", ..." if len(items) > n else "")


def _check_words(words: Any, label: str) -> tuple[str, str]:
    if isinstance(words, str) or not isinstance(words, Sequence) or len(words) != 2:
        raise ConfigError(f"{label}: words must be a pair of two strings (got {words!r})")
    w0, w1 = words
    if not isinstance(w0, str) or not isinstance(w1, str) or not w0.strip() or not w1.strip():
        raise ConfigError(f"{label}: words must be two non-empty strings (got {words!r})")
    if w0 == w1:
        raise ConfigError(f"{label}: the two words must differ (both are {w0!r})")
    return (w0, w1)


# ------------------------------------------------------------------------------------------------ baselines, bias
def fixed_bias(p: float, H: int, words: Sequence[str] = DEFAULT_WORDS) -> Policy:
    """q = p in every memory state: an agent that ignores its memory (no coordination at all)."""
    p = _probability(p)
    H = check_memory(H)
    return Policy(np.full(state_count(H), p), H, tuple(words), f"fixed_bias(p={p:g})", "fixed_bias", {"p": p})


def memory_invariant(p: float, H: int, words: Sequence[str] = DEFAULT_WORDS) -> Policy:
    """The SI's minimal naming game with binary options and a fixed individual bias p, as a q table.

    In the minimal naming game an agent's inventory starts empty (it then "invents": says word 0 with probability
    p), holds one word after a success (it says it) and both words after a failure (it says word 0 with the fixed,
    memory-invariant probability p). In the paper's symmetric game both agents speak at once and a success means
    both said the same word, so the inventory is a function of the last interaction alone: q = 1 after (0, 0),
    q = 0 after (1, 1), q = p after a failure and for the empty memory, whatever else the memory holds.
    This is an adaptation: the SI's model has a speaker and a hearer, and only the hearer learns from a failure.
    """
    p = _probability(p)
    ms = memory_space(check_memory(H))
    q = np.full(len(ms), p)
    last = np.array([k[-2:] for k in ms.keys])
    q[last == "00"] = 1.0
    q[last == "11"] = 0.0
    return Policy(q, ms.H, tuple(words), f"memory_invariant(p={p:g})", "memory_invariant", {"p": p})


def _probability(p: Any) -> float:
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(p)) or not 0.0 <= float(p) <= 1.0:
        raise ConfigError(f"p must be a probability in [0, 1] (got {p!r})")
    return float(p)


def individual_bias(policy: Policy) -> float:
    """q of the empty memory: the probability that an agent says word 0 before any interaction."""
    return float(policy.q[memory_space(policy.H).EMPTY])


def jensen_shannon_distance(p: Sequence[float], r: Sequence[float]) -> float:
    """sqrt of the Jensen–Shannon divergence (base-2 logarithms, so within [0, 1]) of two distributions."""
    p, r = np.asarray(p, dtype=float), np.asarray(r, dtype=float)
    m = 0.5 * (p + r)

    def kl(a: np.ndarray) -> float:
        nz = a > 0
        return float(np.sum(a[nz] * np.log2(a[nz] / m[nz])))

    return math.sqrt(max(0.5 * kl(p) + 0.5 * kl(r), 0.0))


def is_neutral(policy: Policy, tol: float = NEUTRAL_TOLERANCE) -> bool:
    """The Methods' neutrality test: JS distance of (q, 1 − q) of the empty memory from (½, ½) below ``tol``."""
    q0 = individual_bias(policy)
    return jensen_shannon_distance((q0, 1.0 - q0), (0.5, 0.5)) < tol


# ------------------------------------------------------------------------------------------------------- files
def load_policies(path: str | os.PathLike, *,
                  words: Mapping[int, Sequence[str]] | Sequence[str] | None = None) -> list[Policy]:
    """Policies of a JSON file (our format), of the paper's ``q_dicts.zip`` or of one of its ``.pkl`` members.

    ``words`` (pickles only) overrides the word pairs: a mapping CrowS-Pairs id -> (word 0, word 1), or one pair
    for every member; by default the id in each member's name is looked up in ``PAPER_WORD_PAIRS``.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no policy file at {path}")
    if zipfile.is_zipfile(path):
        return _load_zip(path, words)
    if path.suffix == ".pkl":
        return [_policy_from_pickle(_read_bounded(path), str(path), path.name, words)]
    return _load_json(path)


def save_policies(path: str | os.PathLike, policies: Sequence[Policy]) -> Path:
    """Write ``policies`` in the JSON format ``load_policies`` reads (one table a line, atomically)."""
    path = Path(path)
    if isinstance(policies, Policy):
        policies = [policies]
    tables = []
    for i, pol in enumerate(policies):
        if not isinstance(pol, Policy):
            raise ConfigError(f"save_policies: item {i} is a {type(pol).__name__}, not a Policy")
        meta = dict(pol.meta)
        table: dict[str, Any] = {"name": pol.name, "source": pol.source}
        for key in _TABLE_FIELDS:
            if key in meta:
                table[key] = meta.pop(key)
        table.update(words=list(pol.words), memory_size=pol.H, meta=meta, q=pol.as_mapping())
        try:
            tables.append(json.dumps(table, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"save_policies: policy {pol.name!r} has metadata JSON cannot hold ({exc})") from None
    text = '{"tables":[\n' + ",\n".join(tables) + "\n]}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _load_json(path: Path) -> list[Policy]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read policy file {path}: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} is neither a zip of pickles nor valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("tables"), list):
        raise ConfigError(f"{path}: expected a JSON object with a list 'tables'")
    policies = []
    for i, table in enumerate(doc["tables"]):
        where = f"{path}: tables[{i}]"
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be an object")
        for key in ("words", "memory_size", "q"):
            if key not in table:
                raise ConfigError(f"{where} has no {key!r}")
        H = table["memory_size"]
        if isinstance(H, bool) or not isinstance(H, int):
            raise ConfigError(f"{where}: memory_size must be an integer (got {H!r})")
        words = _check_words(table["words"], where)
        meta = {k: v for k, v in table.items() if k not in ("name", "source", "words", "memory_size", "q", "meta")}
        extra = table.get("meta", {})
        if not isinstance(extra, dict):
            raise ConfigError(f"{where}: meta must be an object")
        meta.update(extra)
        name = table.get("name") or f"{table.get('model', 'policy')}:{words[0]}/{words[1]}"
        source = table.get("source") or "published"
        try:
            policies.append(Policy.from_mapping(table["q"], H, words, str(name), str(source), meta))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return policies


# ------------------------------------------------------------------------------------- zip of pickles (untrusted)
def _read_bounded(path: Path) -> bytes:
    size = path.stat().st_size
    if size > MAX_MEMBER_BYTES:
        raise ConfigError(f"{path} is {size} bytes; a q-table pickle is at most {MAX_MEMBER_BYTES}")
    return path.read_bytes()


def _load_zip(path: Path, words) -> list[Policy]:
    size = path.stat().st_size
    if size > MAX_ARCHIVE_BYTES:
        raise ConfigError(f"{path} is {size} bytes, more than the {MAX_ARCHIVE_BYTES} a q-table archive may have")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ConfigError(f"cannot open zip archive {path}: {exc}") from None
    policies = []
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ZIP_MEMBERS:
            raise ConfigError(f"{path} has {len(infos)} members; at most {MAX_ZIP_MEMBERS} are read")
        members = [i for i in infos if not i.is_dir() and i.filename.endswith(".pkl")
                   and not i.filename.startswith("__MACOSX/") and not Path(i.filename).name.startswith("._")]
        if not members:
            raise ConfigError(f"{path} holds no .pkl member (expected the paper's q_dicts/Q_dict_*.pkl)")
        total = 0
        for info in sorted(members, key=lambda i: i.filename):
            where = f"{path}:{info.filename}"
            if info.flag_bits & 0x1:
                raise ConfigError(f"{where} is encrypted")
            if info.file_size > MAX_MEMBER_BYTES:
                raise ConfigError(f"{where} would unpack to {info.file_size} bytes; the limit is {MAX_MEMBER_BYTES}")
            total += info.file_size
            if total > MAX_TOTAL_BYTES:
                raise ConfigError(f"{path} would unpack to more than {MAX_TOTAL_BYTES} bytes")
            try:
                with zf.open(info) as fh:
                    data = fh.read(MAX_MEMBER_BYTES + 1)
            except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError) as exc:
                raise ConfigError(f"cannot unpack {where}: {exc}") from None
            if len(data) > MAX_MEMBER_BYTES:
                raise ConfigError(f"{where} unpacks to more than {MAX_MEMBER_BYTES} bytes")
            policies.append(_policy_from_pickle(data, where, Path(info.filename).name, words))
    return policies


def _policy_from_pickle(data: bytes, where: str, filename: str, words) -> Policy:
    mapping = _safe_unpickle(data, where)
    if not isinstance(mapping, dict):
        raise ConfigError(f"{where}: expected a pickled dict from state key to q (got {type(mapping).__name__})")
    if not mapping:
        raise ConfigError(f"{where}: the pickled dict is empty")
    bad = next((k for k in mapping if not isinstance(k, str)), None)
    if bad is not None:
        raise ConfigError(f"{where}: state keys must be digit strings like '0110', as in the paper's q_dicts "
                          f"(got {type(bad).__name__} key {bad!r})")
    longest = max(len(k) for k in mapping)
    if longest % 2 or not 1 <= longest // 2 <= 6:
        raise ConfigError(f"{where}: the longest state key has {longest} characters; expected 2H with H from 1 to 6")
    H = longest // 2
    meta: dict[str, Any] = {"origin": where}
    match = _MEMBER_NAME.fullmatch(filename)
    if match:
        cid = int(match["id"])
        meta.update(model=match["model"], model_name=PAPER_MODEL_NAMES.get(match["model"], match["model"]),
                    crows_pairs_id=cid, rewards=[int(match["fail"]), int(match["success"])],
                    temperature=float(match["temperature"]), fill_blank=match["blank"] == "True")
    pair = _member_words(words, match, where)
    model = meta.get("model", Path(filename).stem)
    try:
        return Policy.from_mapping(mapping, H, pair, f"{model}:{pair[0]}/{pair[1]}", "published", meta)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _member_words(words, match, where: str) -> tuple[str, str]:
    if isinstance(words, Sequence) and not isinstance(words, str):
        return _check_words(words, where)
    if words is not None and not isinstance(words, Mapping):
        raise ConfigError(f"words must be a pair or a mapping CrowS-Pairs id -> pair (got {words!r})")
    if match is None:
        raise ConfigError(f"{where}: cannot tell the words: the name is not Q_dict_<model>_ID_<id>_..._BLANK_<b>.pkl;"
                          " pass words=(word 0, word 1)")
    cid = int(match["id"])
    table = {**PAPER_WORD_PAIRS, **(words or {})}
    if cid not in table:
        raise ConfigError(f"{where}: CrowS-Pairs id {cid} is not one of the paper's pairs; pass words={{{cid}: "
                          "(word 0, word 1)}")
    return _check_words(table[cid], where)


class _FloatDType:
    """Stand-in for ``numpy.dtype`` while unpickling: float dtypes only, keeps the byte order."""

    _FORMATS = {"f8": "d", "f4": "f", "f2": "e"}

    def __init__(self, spec: Any, align: Any = False, copy: Any = False) -> None:
        if spec not in self._FORMATS:
            raise ConfigError(f"refusing to unpickle numpy.dtype({spec!r}): only float scalars are accepted")
        self.format = self._FORMATS[spec]
        self.order = "<" if sys.byteorder == "little" else ">"

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, tuple) or len(state) < 2 or state[1] not in ("<", ">", "=", "|"):
            raise ConfigError(f"unexpected numpy dtype state in pickle: {state!r}")
        if state[1] in "<>":
            self.order = state[1]

    def decode(self, data: Any) -> float:
        if isinstance(data, str):       # protocol-0/Python-2 pickles carry the bytes as a latin-1 str
            data = data.encode("latin-1")
        if not isinstance(data, bytes) or len(data) != struct.calcsize(self.format):
            raise ConfigError(f"malformed numpy scalar in pickle: {data!r}")
        return float(struct.unpack(self.order + self.format, data)[0])


def _numpy_scalar(dtype: Any, data: Any = None) -> float:
    if not isinstance(dtype, _FloatDType):
        raise ConfigError("refusing to unpickle a numpy scalar that is not a float")
    return dtype.decode(data)


def _latin1_encode(text: Any, encoding: Any = "utf-8") -> bytes:
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise ConfigError(f"refusing to unpickle _codecs.encode({type(text).__name__}, {encoding!r})")
    return text.encode("latin-1")


_PICKLE_STANDINS = {
    ("numpy._core.multiarray", "scalar"): _numpy_scalar,
    ("numpy.core.multiarray", "scalar"): _numpy_scalar,
    ("numpy", "dtype"): _FloatDType,
    ("_codecs", "encode"): _latin1_encode,
}


class _RestrictedUnpickler(pickle.Unpickler):
    """Imports nothing: the few globals of a float64 scalar map to local stand-ins, any other is refused."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _PICKLE_STANDINS[(module, name)]
        except KeyError:
            raise ConfigError(f"refusing to unpickle {module}.{name}: a q-table pickle holds only a dict of "
                              "state keys and numbers") from None

    def persistent_load(self, pid: Any) -> Any:
        raise ConfigError("refusing to unpickle a persistent id: a q-table pickle holds only a dict")


def _safe_unpickle(data: bytes, where: str) -> Any:
    try:
        return _RestrictedUnpickler(io.BytesIO(data), encoding="latin-1").load()
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
            struct.error, MemoryError, RecursionError, OverflowError) as exc:
        raise ConfigError(f"{where} is not a readable q-table pickle: {type(exc).__name__}: {exc}") from None
