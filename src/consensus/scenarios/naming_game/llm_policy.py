"""q tables from an LLM's next-token logprobs (paper 4, "Extracting Probabilistic Policy from LLMs"), and the SI's
meta-prompting comprehension check (Table S2).

``extract_policy`` renders, for every memory state of ``memory_space(H)`` and both word orders, the SI prompt
(``prompts.render``) with the assistant turn prefilled ``{'value': '``, and asks the endpoint for one token with its
top logprobs. The answer is the first token after the prefill.

* **Prefill.** llama.cpp's server continues a final assistant message (checked with xllamacpp 2026.10: the
  generated tokens start right after ``{'value': '``; the returned *content* repeats the prefill). vLLM does so
  when asked with ``extra_body={"continue_final_message": True, "add_generation_prompt": False}``. OpenAI does not
  continue it: the model writes ``{'value': 'F'; ...`` from the start. The first reply decides (mode "auto"): if the
  generated tokens contain ``'value':`` the endpoint ignored the prefill ("parsed" mode, every request then asks
  for ``PARSE_TOKENS`` tokens and the answer position is the first token after ``{'value': '`` in the generated
  tokens; ``meta["prefill"]`` says so); otherwise the answer is the first generated token ("prefill" mode, one
  token per request).
* **Logprobs → words (the matching rule).** A top-logprob token matches a word when, after dropping its leading
  whitespace and at most one leading ``'``, it is non-empty and either a prefix of the word (a word split into
  several tokens is matched by its first token; "wi" matches "wife") or the word followed by a non-alphanumeric
  character ("F'" matches "F"). Matching is case-sensitive. A token matching both words (a common prefix, e.g.
  "he" for he/her) goes to the word it equals exactly, else it is ambiguous and ignored (counted). A word's logit
  w is the log of the summed probability of its matching tokens (one token: its logprob; the constant that separates
  logprobs from logits cancels in eq. 9).
* **Eq. 9.** P(word 0) = e^{w₀/T} / (e^{w₀/T} + e^{w₁/T}) at the temperature T (0.5 in the paper; T = 0 gives the
  argmax). The logprobs are temperature-independent (OpenAI's; llama.cpp's default pre-sampling probabilities,
  checked: the same numbers at T = 0.5, 1 and 2; vLLM's default raw logprobs), so T is applied here.
* **Missing words.** A word not among the top ``top_k`` tokens gets ``FLOOR_LOGPROB`` = log(machine ε) ≈ −36.04,
  the floor of the paper's code (hence the 2.2e-16 in the published tables); every logprob is clamped to it. Such
  fallbacks are counted per word; when neither word is found the order counts as ``no_word`` (P = 0.5).
* **q(state)** = the mean of P(word 0) over the two orders (the paper's code sums the per-order probabilities and
  normalises: the same).
* **Missing logprobs** (the endpoint returns none) stop the extraction with ``LogprobsUnavailable``.

Results are cached on disk as JSON lines (never pickle), one line per (state, order) appended and flushed as it
arrives, in ``cache_dir/<key>.jsonl`` where the key hashes (model, words, prompt hash, H, T, top_k): an interrupted
extraction resumes where it stopped, and a finished one is read back with no request. Requests run on
``client.concurrency`` threads, through the client's own semaphore; a tqdm bar shows progress.

``comprehension_check`` asks the SI's prompt-comprehension questions (rules, chronology, payoff statistics) about
random memories and scores the answers against the truth computed from the memory.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from consensus.errors import ConfigError
from consensus.jsonl import read_records
from consensus.llm.base import ChatRequest, LLMError
from consensus.scenarios.naming_game import prompts
from consensus.scenarios.naming_game.game import (
    PAYOFF_FAILURE,
    PAYOFF_SUCCESS,
    check_memory,
    memory_space,
    payoff,
)

log = logging.getLogger(__name__)

FLOOR_LOGPROB = math.log(np.finfo(float).eps)     # −36.04: the paper's floor (max(logprob, log eps))
TOP_K = 20                                        # OpenAI's maximum top_logprobs
PARSE_TOKENS = 16                                 # tokens asked for when the prefill is not continued
FORMAT_RETRIES = 2                                # extra tries when the answer position is not found (parsed mode)
CACHE_VERSION = 1
LOGPROB_SERVERS = (
    "OpenAI chat completions (logprobs=true, top_logprobs <= 20), vLLM's OpenAI server (logprobs / top_logprobs), "
    "llama.cpp's server, including the embedded backend (logprobs / top_logprobs or n_probs)"
)
_MARKER = re.compile(r"\{\s*'value'\s*:\s*'?\s*$")
_VALUE_SEEN = re.compile(r"'value'\s*:")


class LogprobsUnavailable(LLMError):
    """The endpoint answered without logprobs, so no policy can be read from it."""


# -- reading one reply -------------------------------------------------------------------------------------------

def _clean(token: str) -> str:
    t = token.lstrip()
    return t[1:] if t.startswith("'") else t


def _matches(clean: str, word: str) -> bool:
    if not clean:
        return False
    if word.startswith(clean):
        return True
    return clean.startswith(word) and not clean[len(word)].isalnum()


def match_words(top: Sequence[Sequence[Any]], words: Sequence[str]) -> tuple[list[float | None], int]:
    """``([w₀, w₁], ambiguous)``: each word's logit (log of the summed probability of its matching tokens; None when
    no token matches) among the ``(token, logprob)`` pairs ``top``, and the number of tokens that matched both words
    and were ignored (the rule is in the module docstring)."""
    mass: list[list[float]] = [[], []]
    ambiguous = 0
    for token, lp in top:
        if lp is None or not math.isfinite(float(lp)):
            continue
        c = _clean(str(token))
        hits = [j for j in (0, 1) if _matches(c, words[j])]
        if len(hits) == 2:
            exact = [j for j in (0, 1) if c == words[j]]
            if len(exact) != 1:
                ambiguous += 1
                continue
            hits = exact
        if hits:
            mass[hits[0]].append(float(lp))
    out: list[float | None] = []
    for lps in mass:
        if not lps:
            out.append(None)
        else:
            m = max(lps)
            out.append(m + math.log(sum(math.exp(v - m) for v in lps)))
    return out, ambiguous


def answer_position(tokens: Sequence[str], mode: str = "auto") -> tuple[int | None, str]:
    """``(index, mode)``: where the answer's first token is among the generated ``tokens``. "prefill": index 0 (the
    server continued ``{'value': '``). "parsed": the first token after ``{'value':`` and an optional quote whose
    text is more than a quote or whitespace (None if there is none). "auto" picks "parsed" when the generated text
    contains ``'value':`` (the prefill was ignored), else "prefill"."""
    if mode == "auto":
        mode = "parsed" if _VALUE_SEEN.search("".join(tokens)) else "prefill"
    if mode == "prefill":
        return (0 if tokens else None), mode
    acc = ""
    for i, tok in enumerate(tokens):
        if _MARKER.search(acc) and _clean(tok):
            return i, mode
        acc += tok
    return None, mode


def word_probability(lp: Sequence[float | None], temperature: float, floor: float = FLOOR_LOGPROB) -> float:
    """Eq. 9 for word 0 from the two words' logits (None → ``floor``; all clamped to ≥ ``floor``)."""
    w0, w1 = (max(floor, v) if v is not None else floor for v in lp)
    if temperature == 0:
        return 1.0 if w0 > w1 else 0.0 if w0 < w1 else 0.5
    return 1.0 / (1.0 + math.exp(max(-700.0, min(700.0, (w1 - w0) / temperature))))


def _positions(choice: dict) -> list[tuple[str, list[tuple[str, float]]]]:
    """The generated tokens of a reply and each position's top logprobs; [] when the reply has none."""
    content = ((choice or {}).get("logprobs") or {}).get("content") or []
    out = []
    for pos in content:
        if not isinstance(pos, dict):
            continue
        top = [(str(t.get("token", "")), t.get("logprob")) for t in pos.get("top_logprobs") or []
               if isinstance(t, dict)]
        if not top and pos.get("logprob") is not None:
            top = [(str(pos.get("token", "")), pos.get("logprob"))]
        out.append((str(pos.get("token", "")), top))
    return out


# -- the endpoint ------------------------------------------------------------------------------------------------

class _Endpoint:
    """Raw chat requests with logprobs through an ``OpenAIChatClient``'s openai client, semaphore and retry policy
    (``ChatResponse`` carries no logprobs). A ``RecordingClient`` is unwrapped: logprob requests are not
    transcribed; the extraction cache is their record."""

    def __init__(self, client: Any) -> None:
        inner = client
        while not hasattr(inner, "_client") and hasattr(inner, "inner"):
            inner = inner.inner
        need = ("_client", "_sem", "_classify", "_backoff", "max_retries", "base_url")
        if not all(hasattr(inner, a) for a in need):
            raise ConfigError(
                f"logprob extraction needs an OpenAI-compatible client (OpenAIChatClient, or llm settings with "
                f"backend openai/embedded); got {type(client).__name__} — a replay client has no logprobs, the "
                "extraction's own cache replays a finished table")
        self.client = inner
        self.base_url = inner.base_url
        self.concurrency = max(1, int(getattr(inner, "concurrency", 1)))
        self._lock = threading.Lock()
        self.requests = 0
        self.retries = 0

    def create(self, kwargs: dict) -> dict:
        import openai

        c = self.client
        attempt = 0
        while True:
            attempt += 1
            with self._lock:
                self.requests += 1
            try:
                with c._sem:
                    resp = c._client.chat.completions.create(**kwargs)
                choices = getattr(resp, "choices", None)
                if choices:
                    return choices[0].model_dump()
                retryable, desc, retry_after = False, "reply has no choices", None
            except openai.OpenAIError as exc:
                retryable, desc, retry_after = c._classify(exc)
            desc = c._scrub(desc) if hasattr(c, "_scrub") else desc
            if not retryable or attempt > c.max_retries:
                what = "failed" if not retryable else f"failed after {attempt} attempts"
                raise LLMError(f"logprob request to {self.base_url} {what}: {desc}")
            with self._lock:
                self.retries += 1
            time.sleep(c._backoff(attempt, retry_after))


def _open_client(client_or_settings: Any) -> tuple[Any, Callable[[], None]]:
    """A client and its closer: a client is used as given (not closed); llm settings (``llm_backend`` …) make one."""
    if not hasattr(client_or_settings, "llm_backend"):
        return client_or_settings, lambda: None
    from consensus.llm.backends import backend_spec, endpoint_backend
    from consensus.llm.factory import make_client

    cfg = client_or_settings
    if backend_spec(cfg.llm_backend).needs_replay_path:
        raise ConfigError(f"llm_backend '{cfg.llm_backend}' has no logprobs: extract with a backend that asks a "
                          "model (a finished extraction is replayed from its cache)")
    backend = endpoint_backend(cfg.llm_backend, getattr(cfg, "llm_base_url", ""))
    return make_client(backend, model=cfg.llm_model, base_url=cfg.llm_base_url, api_key_env=cfg.llm_api_key_env,
                       timeout_s=cfg.llm_timeout_s, max_retries=cfg.llm_max_retries, concurrency=cfg.llm_concurrency)


# -- the cache ---------------------------------------------------------------------------------------------------

def default_cache_dir() -> Path:
    """``$CONSENSUS_CACHE_DIR/q-tables`` if that is set, else ``~/.cache/consensus/q-tables``."""
    env = os.environ.get("CONSENSUS_CACHE_DIR", "").strip()
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "consensus") / "q-tables"


def _slug(text: str, n: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:n] or "x"


class _Cache:
    """One JSONL file per table key: a header line, then one line per (state, order), appended and flushed."""

    def __init__(self, directory: Path, header: dict) -> None:
        blob = json.dumps(header, sort_keys=True, ensure_ascii=False)
        digest = hashlib.sha256(blob.encode("utf-8")).hexdigest()
        self.header = {"kind": "naming-game-logprobs", "v": CACHE_VERSION, "key": digest, **header}
        name = f"{_slug(header['model'])}-{_slug(header['words'][0], 16)}-{_slug(header['words'][1], 16)}" \
               f"-H{header['H']}-T{header['temperature']:g}-{digest[:12]}.jsonl"
        self.path = Path(directory).expanduser() / name
        self._lock = threading.Lock()
        self._fh = None

    def load(self) -> dict[tuple[str, int], dict]:
        """The entries already in the file (malformed lines, e.g. a cut last line, are skipped)."""
        if not self.path.is_file():
            return {}
        records, bad = read_records(self.path, lambda r: isinstance(r, dict))
        if not records or records[0].get("key") != self.header["key"]:
            log.warning("cache %s has no matching header; starting it again", self.path)
            self.path.replace(self.path.with_suffix(".jsonl.stale"))
            return {}
        if bad:
            log.warning("cache %s: skipped %d malformed line(s) %s", self.path, len(bad), bad[:5])
        out = {}
        for r in records[1:]:
            if isinstance(r.get("state"), str) and r.get("order") in prompts.ORDERS and isinstance(r.get("lp"), list):
                out[(r["state"], r["order"])] = r
        return out

    def reset(self) -> None:
        self.path.unlink(missing_ok=True)

    def append(self, entry: dict) -> None:
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fresh = not self.path.is_file() or self.path.stat().st_size == 0
                needs_newline = False
                if not fresh:
                    with open(self.path, "rb") as f:
                        f.seek(-1, os.SEEK_END)
                        needs_newline = f.read(1) != b"\n"
                self._fh = open(self.path, "a", encoding="utf-8")
                if needs_newline:
                    self._fh.write("\n")
                if fresh:
                    self._fh.write(json.dumps(self.header, ensure_ascii=False, separators=(",", ":")) + "\n")
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


# -- the result --------------------------------------------------------------------------------------------------

@dataclass
class LLMPolicyResult:
    """An extracted q table: ``q[i]`` = P(words[0]) in state ``keys[i]`` (memory_space(H) order), the per-order
    probabilities ``p_by_order[order, i]``, and ``meta`` (counts, mode, cache path, timings)."""

    q: np.ndarray
    p_by_order: np.ndarray
    keys: list[str]
    words: tuple[str, str]
    H: int
    temperature: float
    model: str
    meta: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """Plain JSON-ready form, like the published tables (``q`` keyed by state; empty key = empty memory)."""
        return {"model": self.model, "words": list(self.words), "rewards": [PAYOFF_FAILURE, PAYOFF_SUCCESS],
                "temperature": self.temperature, "memory_size": self.H,
                "q": {k: float(v) for k, v in zip(self.keys, self.q)}, "meta": self.meta}

    def to_policy(self):
        """A ``policy.Policy`` (when that module is available)."""
        from consensus.scenarios.naming_game.policy import Policy

        return Policy(q=self.q.copy(), H=self.H, words=tuple(self.words), name=f"{self.model}/{','.join(self.words)}",
                      source=f"llm:{self.model}", meta=dict(self.meta))


# -- extraction --------------------------------------------------------------------------------------------------

def extract_policy(
    client_or_settings: Any,
    words: Sequence[str],
    H: int,
    *,
    temperature: float = 0.5,
    model: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    resume: bool = True,
    top_k: int = TOP_K,
    floor_logprob: float = FLOOR_LOGPROB,
    extra_body: dict | None = None,
    seed: int | None = 0,
) -> LLMPolicyResult:
    """The q table of the LLM behind ``client_or_settings`` for ``words`` and memory ``H`` (see module docstring).

    ``client_or_settings``: an ``OpenAIChatClient`` (or a ``RecordingClient`` around one), or llm settings
    (``llm_backend`` openai/embedded, ``llm_model``, ``llm_base_url``, …) from which a client is made and closed.
    ``model`` overrides the client's model name (sent and part of the cache key). ``resume=False`` discards the
    cached entries of this key. ``extra_body`` is sent with every request (vLLM's prefill flags). Raises
    ``LogprobsUnavailable`` when the endpoint returns no logprobs, ``LLMError`` when requests fail (the entries
    received so far stay cached)."""
    words = prompts.check_words(words)
    H = check_memory(H)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
            math.isfinite(temperature) and temperature >= 0):
        raise ConfigError(f"temperature must be a finite number >= 0 (got {temperature!r})")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= 100:
        raise ConfigError(f"top_k must be an integer in 1..100 (got {top_k!r})")
    t0 = time.monotonic()
    client, close = _open_client(client_or_settings)
    try:
        endpoint = _Endpoint(client)
        model_name = model or getattr(client, "model", "") or "local"
        space = memory_space(H)
        cache = _Cache(Path(cache_dir) if cache_dir is not None else default_cache_dir(), {
            "model": model_name, "words": list(words), "prompt_hash": prompts.prompt_hash(words), "H": H,
            "temperature": float(temperature), "top_k": top_k})
        if not resume:
            cache.reset()
        try:
            entries = cache.load()
            cached = sum(1 for k in space.keys for o in prompts.ORDERS if (k, o) in entries)
            # all of order 0, then all of order 1, states in index order: consecutive prompts share the longest
            # prefix (the order is in the first sentence, older rounds come first), so a server's prompt cache
            # (llama.cpp keeps the previous prompt of a slot) reprocesses only the tail
            todo = [(k, o) for o in prompts.ORDERS for k in space.keys if (k, o) not in entries]
            _run(endpoint, cache, entries, todo, words, model_name, float(temperature), top_k, extra_body, seed,
                 total=2 * len(space), progress=progress, H=H)
        finally:
            cache.close()
    finally:
        close()
    return _assemble(space, entries, words, H, float(temperature), model_name, floor_logprob, {
        "requests": endpoint.requests, "retries": endpoint.retries, "cached": cached,
        "seconds": round(time.monotonic() - t0, 3), "cache_path": str(cache.path), "endpoint": endpoint.base_url,
        "top_k": top_k, "floor_logprob": floor_logprob, "prompt_hash": cache.header["prompt_hash"]})


def _run(endpoint: _Endpoint, cache: _Cache, entries: dict, todo: list, words: tuple[str, str], model_name: str,
         temperature: float, top_k: int, extra_body: dict | None, seed: int | None, *, total: int, progress: bool,
         H: int) -> None:
    if not todo:
        return
    mode = next((e["mode"] for e in entries.values() if e.get("mode") in ("prefill", "parsed")), "auto")
    state = {"mode": mode}

    def ask(key: str, order: int) -> dict:
        entry: dict = {}
        for attempt in range(1 + FORMAT_RETRIES):
            mode_now = state["mode"]
            kwargs: dict = {"model": model_name, "messages": prompts.render(key, words, order, prefill=True),
                            "temperature": temperature, "max_tokens": 1 if mode_now == "prefill" else PARSE_TOKENS,
                            "logprobs": True, "top_logprobs": top_k}
            if seed is not None:
                kwargs["seed"] = seed + attempt
            if extra_body:
                kwargs["extra_body"] = extra_body
            positions = _positions(endpoint.create(kwargs))
            if not positions or not any(top for _, top in positions):
                raise LogprobsUnavailable(
                    f"the endpoint {endpoint.base_url} (model {model_name!r}) returned no logprobs; a q table is read "
                    f"from the first answer token's top logprobs, which these servers return: {LOGPROB_SERVERS}")
            tokens = [t for t, _ in positions]
            idx, found_mode = answer_position(tokens, mode_now)
            entry = {"state": key, "order": order, "mode": found_mode, "lp": [None, None], "ambiguous": 0,
                     "generated": "".join(tokens)[:60]}
            if idx is not None:
                lp, ambiguous = match_words(positions[idx][1], words)
                entry.update(lp=lp, ambiguous=ambiguous, top=[[t, v] for t, v in positions[idx][1]])
                return entry
            if found_mode == "prefill":
                break
        entry["mode"] = "unparsed"
        return entry

    bar = None
    if progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=total, initial=total - len(todo), desc=f"q table H={H} {','.join(words)}", unit="req")
        except ImportError:
            bar = None

    def done(entry: dict) -> None:
        entries[(entry["state"], entry["order"])] = entry
        cache.append(entry)
        if bar is not None:
            bar.update(1)

    try:
        if state["mode"] == "auto":             # the first reply decides whether the prefill is continued
            first = ask(*todo[0])
            done(first)
            state["mode"] = first["mode"] if first["mode"] in ("prefill", "parsed") else "parsed"
            if state["mode"] == "parsed":
                log.warning("%s did not continue the prefilled assistant turn; reading the answer position from "
                            "the generated tokens (%d per request)", endpoint.base_url, PARSE_TOKENS)
            todo = todo[1:]
        pool = ThreadPoolExecutor(max_workers=endpoint.concurrency, thread_name_prefix="qtable")
        error: BaseException | None = None
        try:
            futures = [pool.submit(ask, k, o) for k, o in todo]
            for fut in as_completed(futures):     # after a failure: cancel the rest, keep what is in flight
                if fut.cancelled():
                    continue
                exc = fut.exception()
                if exc is None:
                    done(fut.result())
                elif error is None:
                    error = exc
                    for f in futures:
                        f.cancel()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if error is not None:
            raise error
    finally:
        if bar is not None:
            bar.close()


def _assemble(space, entries: dict, words: tuple[str, str], H: int, temperature: float, model_name: str,
              floor: float, meta: dict) -> LLMPolicyResult:
    p = np.full((2, len(space)), np.nan)
    missing = {words[0]: 0, words[1]: 0}
    no_word = ambiguous = unparsed = 0
    modes: dict[str, int] = {}
    for i, key in enumerate(space.keys):
        for order in prompts.ORDERS:
            e = entries[(key, order)]
            lp = e["lp"]
            modes[e.get("mode", "?")] = modes.get(e.get("mode", "?"), 0) + 1
            unparsed += e.get("mode") == "unparsed"
            ambiguous += int(e.get("ambiguous") or 0)
            if lp[0] is None and lp[1] is None:
                no_word += e.get("mode") != "unparsed"
            else:
                for j in (0, 1):
                    missing[words[j]] += lp[j] is None
            p[order, i] = word_probability(lp, temperature, floor)
    q = p.mean(axis=0)
    mode = "parsed" if modes.get("parsed", 0) > modes.get("prefill", 0) else "prefill"
    meta = {**meta, "states": len(space), "mode": mode, "modes": modes, "missing_word": missing,
            "no_word": no_word, "unparsed": unparsed, "ambiguous_tokens": ambiguous,
            "prefill": ("continued by the server: the answer is the first generated token" if mode == "prefill" else
                        "not supported by this endpoint (OpenAI does not continue a final assistant message): the "
                        "answer position was parsed from the generated tokens after {'value': '")}
    return LLMPolicyResult(q=q, p_by_order=p, keys=list(space.keys), words=words, H=H, temperature=temperature,
                           model=model_name, meta=meta)


def policy_from_result(result: LLMPolicyResult):
    """Adapter to ``policy.Policy`` (same as ``result.to_policy()``)."""
    return result.to_policy()


# -- meta-prompting (SI, Table S2) ---------------------------------------------------------------------------------

QUESTION_GROUPS = {"min": "rules", "max": "rules", "actions": "rules", "payoff": "rules", "round": "time",
                   "action_i": "time", "points_i": "time", "n_actions": "state", "n_points": "state"}
META_PREFILL = "{'value': "       # the paper's code: no opening quote, the answer may be a number


def _questions(key: str, words: tuple[str, str], rng: random.Random) -> list[tuple[str, str, Any]]:
    """``(type, question, truth)`` for every Table S2 question about the memory ``key`` (at least one round)."""
    rounds = prompts.history(key)
    h = len(rounds)
    i = rng.randint(1, h)
    x, y = rng.choice((0, 1)), rng.choice((0, 1))
    who = rng.choice((1, 2))
    act = rng.choice((0, 1))
    count_who = rng.choice((1, 2))
    own = [a for a, _, _ in rounds]
    partner = [b for _, b, _ in rounds]
    return [
        ("min", "Answer saying what is the lowest payoff Player 1 can get in a single round.", PAYOFF_FAILURE),
        ("max", "Answer saying what is the highest payoff Player 1 can get in a single round.", PAYOFF_SUCCESS),
        ("actions", "Answer saying all the action values Player 1 can pick.", words),
        ("payoff", f"Answer saying what is Player 1's payoff in a single round if Player 1 plays {words[x]} and "
                   f"Player 2 plays {words[y]}.", payoff(x, y)),
        ("round", "Answer saying what is the current round of the game.", h + 1),
        ("action_i", f"Answer saying which action Player {who} played in round {i}.",
         words[(own if who == 1 else partner)[i - 1]]),
        ("points_i", f"Answer saying how many points Player 1 collected in round {i}.", rounds[i - 1][2]),
        ("n_actions", f"Answer saying how many times Player {count_who} played action {words[act]} overall.",
         (own if count_who == 1 else partner).count(act)),
        ("n_points", "Answer saying what is Player 1's current total payoff.", sum(p for _, _, p in rounds)),
    ]


def answer_value(text: str) -> str:
    """The value part of a reply ``{'value': X; 'reason': ...}`` (the prefill may or may not be repeated)."""
    at = [m.end() for m in _VALUE_SEEN.finditer(text)]
    rest = text[at[-1]:] if at else text
    return re.split(r";|'reason'|\}|\n", rest, maxsplit=1)[0].strip()


def _has_word(value: str, word: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(word) + r"(?!\w)", value, flags=re.IGNORECASE) is not None


def score_answer(qtype: str, truth: Any, value: str, words: tuple[str, str]) -> bool:
    """Numbers: the first integer in the value equals the truth. action_i: the right word is named and the other
    is not. actions: both words are named."""
    if qtype == "actions":
        return all(_has_word(value, w) for w in words)
    if qtype == "action_i":
        other = words[1] if truth == words[0] else words[0]
        return _has_word(value, truth) and not _has_word(value, other)
    m = re.search(r"[-+]?\d+", value.replace(",", ""))
    return m is not None and int(m.group()) == int(truth)


def comprehension_check(client: Any, words: Sequence[str], H: int, n: int = 100, seed: int = 0, *,
                        temperature: float = 0.5, max_tokens: int = 24, progress: bool = False) -> dict:
    """The SI's meta-prompting: ``n`` random memories (1..H rounds, random word order), every Table S2 question
    about each, asked with the naming-game system prompt and the question as the user turn (assistant prefilled
    ``{'value': ``). Returns ``accuracy`` per question type, ``by_group`` (rules/time/state), ``overall``,
    ``asked``/``correct``/``errors`` counts and every ``record``. Failed requests count as wrong (``errors``)."""
    words = prompts.check_words(words)
    H = check_memory(H)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"n must be a positive integer (got {n!r})")
    rng = random.Random(seed)
    jobs = []
    for agent in range(n):
        h = rng.randint(1, H)
        key = "".join(rng.choice("01") for _ in range(2 * h))
        order = rng.choice(prompts.ORDERS)
        for qtype, question, truth in _questions(key, words, rng):
            jobs.append({"agent": agent, "state": key, "order": order, "type": qtype, "question": question,
                         "truth": list(truth) if isinstance(truth, tuple) else truth})

    def ask(job: dict) -> dict:
        msgs = prompts.render(job["state"], words, job["order"], question=job["question"])
        msgs.append({"role": "assistant", "content": META_PREFILL})
        req = ChatRequest(messages=tuple(msgs), temperature=temperature, max_tokens=max_tokens, seed=seed,
                          tag=f"meta/{job['agent']}/{job['type']}")
        try:
            text = client.complete(req).text
        except LLMError as exc:
            return {**job, "answer": None, "value": "", "correct": False, "error": str(exc)[:200]}
        value = answer_value(text)
        return {**job, "answer": text, "value": value, "correct": score_answer(job["type"], job["truth"], value, words)}

    inner = client
    while not hasattr(inner, "concurrency") and hasattr(inner, "inner"):
        inner = inner.inner
    workers = max(1, int(getattr(inner, "concurrency", 1)))
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(jobs), desc="comprehension", unit="q")
    records = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="meta") as pool:
        for rec in pool.map(ask, jobs):
            records.append(rec)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    asked = {q: 0 for q in QUESTION_GROUPS}
    correct = {q: 0 for q in QUESTION_GROUPS}
    for r in records:
        asked[r["type"]] += 1
        correct[r["type"]] += bool(r["correct"])
    groups: dict[str, list[int]] = {}
    for q, g in QUESTION_GROUPS.items():
        groups.setdefault(g, [0, 0])
        groups[g][0] += correct[q]
        groups[g][1] += asked[q]
    return {"accuracy": {q: correct[q] / asked[q] for q in QUESTION_GROUPS if asked[q]},
            "by_group": {g: c / a for g, (c, a) in groups.items() if a},
            "overall": sum(correct.values()) / max(1, sum(asked.values())),
            "asked": asked, "correct": correct, "errors": sum(1 for r in records if r.get("error")),
            "n": n, "seed": seed, "words": list(words), "H": H, "records": records}
