"""Run a sweep: trials on a worker pool, one JSONL record per trial, resume, replay.

Run directory::

    RUN_DIR/
      spec.yaml          the resolved spec (what resume compares against, what --replay/--resume read)
      manifest.json      spec, seed, study, backend, model, git revision, packages, command line
      results.jsonl      one record per finished trial (format in ``consensus.experiments.study``)
      transcripts.jsonl  every LLM request/reply of an LLM sweep (replayable)
      experiment.log     tracebacks of failed trials, warnings of the run
      report.md, *.png   written by ``consensus.experiments.report``

Execution (chosen per sweep):

* some trial uses an LLM (``Study.uses_llm``): all trials run on a thread pool of
  ``max(workers, llm.concurrency)`` threads (at most one per trial to run) sharing ONE client from
  ``make_client`` whose concurrency limit is ``llm.concurrency`` (requests in flight over the whole sweep);
* CPU only, ``workers > 1``, ``fork`` available and the study's trials are not parallel themselves
  (``Study.parallel_trial``: a numba kernel already uses every core, and forking a process whose numba threads
  are running can deadlock): a fork-based ``multiprocessing.Pool`` of
  ``min(workers, trials to run)`` processes; workers
  inherit the study and the trial list (nothing is re-imported, only indices and records cross the pipe),
  trials are handed out in chunks of ``min(64, n / (8 * workers))``;
* otherwise in this process, one after the other.

Records are appended as trials finish, by this process only, each in one write that a full disk truncates
back (the file stays valid JSONL; the error names the path and the free space left). Resume: the trials whose key
already has a record (status ok or failed; the last record of a key counts) are skipped; a cut-short
last line is dropped; ``retry_failed`` runs the failed ones again. A run directory whose ``spec.yaml``
has a different identity (``ExperimentSpec.identity``) is refused unless ``force``, which moves the old
files to ``RUN_DIR/old-<time>/``.

A trial is recorded as failed (never dropped) when ``run_trial`` raises — ``TrialFailed``: its message;
any other exception: ``"<Type>: <message>"``, traceback to ``experiment.log`` — when its result is not
JSON-serialisable, or when its LLM fell back: the study counted fallbacks in ``result["llm_fallbacks"]``
(reason ``"LLM fallback (<kinds>)"``), or the client raised ``LLMError`` to the trial (reason
``"LLM request failed: <last error>"``).

LLM requests and replay. Each trial sees the shared client through a ``TrialClient`` that rewrites every
request before it is sent:

* ``seed`` := ``call_seed(trial seed, tag, n, seed)`` — SHA-256 of the trial's seed, the request's tag
  (e.g. ``robot_2/round_5``), the number ``n`` of earlier requests of this trial with the same tag and
  the request's own seed, reduced to 31 bits (every server accepts it). The transcript key
  (``ChatRequest.key``) covers the seed, so identical prompts in different trials (or repeated in one
  trial) get different keys and replay answers each request with its own recorded reply, whatever order
  the worker pool runs the trials in. Deterministic servers (llama.cpp, vLLM, OpenAI's best effort)
  also sample reproducibly from it. It is exact as long as a trial does not send two requests with the
  same tag concurrently (the order of those two would decide ``n``);
* ``tag`` := ``"<trial key>|<tag>"``: the transcript says which trial asked. On resume, exchanges of
  trials without a record (interrupted mid-trial, or retried) are removed from ``transcripts.jsonl``
  before anything runs, so the file holds exactly the exchanges of the recorded trials.

``replay_spec(RUN_DIR)`` is the stored spec with ``llm.backend: replay`` on ``RUN_DIR/transcripts.jsonl``:
run into another directory it reproduces the records of RUN_DIR (``elapsed_s`` aside) with no network.

Ctrl-C (``KeyboardInterrupt``): finished records stay in ``results.jsonl``; running LLM trials are
stopped at their next request (``SweepStopped``, an ``LLMError``), worker processes are terminated,
and the interrupt is re-raised. Running the same command again resumes.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import multiprocessing
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from consensus.errors import ConfigError
from consensus.jsonl import AppendFile, read_records
from consensus.experiments.spec import (ExperimentSpec, dump_spec, expand, identity_diff, jsonable, load_spec_file,
                                        resolve_spec, spec_identity)
from consensus.experiments.study import LLM_FALLBACKS_KEY, Study, Trial, TrialContext, TrialFailed
from consensus.llm.base import ChatRequest, ChatResponse, LLMClient, LLMError

log = logging.getLogger(__name__)
trial_log = logging.getLogger("consensus.experiments.trials")   # tracebacks: the run's log file only
trial_log.propagate = False
trial_log.setLevel(logging.INFO)                                 # its one handler is the run's experiment.log

SPEC_FILE = "spec.yaml"
RESULTS_FILE = "results.jsonl"
TRANSCRIPTS_FILE = "transcripts.jsonl"
LOG_FILE = "experiment.log"
MAX_REASON_CHARS = 500


class SweepStopped(LLMError):
    """The sweep was interrupted: a trial's further LLM requests are refused so it ends quickly."""


# ---------------------------------------------------------------------------------------------
# results.jsonl
def read_results(path: str | os.PathLike) -> dict[str, dict]:
    """Records by key (the last record of a key wins), in file order. A missing file is empty.

    A malformed line is skipped with a warning (a truncated last line is what a killed run leaves).
    """
    path = Path(path)
    if not path.is_file():
        return {}
    records: dict[str, dict] = {}
    found, bad = read_records(path, lambda rec: isinstance(rec, dict) and isinstance(rec.get("key"), str)
                              and rec.get("status") in ("ok", "failed"))
    for rec in found:
        records.pop(rec["key"], None)
        records[rec["key"]] = rec
    if bad:
        log.warning("%s: skipped %d malformed line(s) %s", path, len(bad), bad[:10])
    return records


class ResultsWriter:
    """Appends record lines to results.jsonl, each whole or not at all (``consensus.jsonl.AppendFile``: one write,
    truncated back on a full disk, whose error names the path and the free space); drops a cut-short last line
    first."""

    def __init__(self, path: Path) -> None:
        _drop_partial_last_line(path)
        self._fh = AppendFile(path)

    def write(self, line: str) -> None:
        self._fh.append(line + "\n")

    def close(self) -> None:
        self._fh.close()


def _drop_partial_last_line(path: Path) -> None:
    if not path.is_file() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    log.warning("%s: dropping a cut-short last line (%d bytes)", path, len(data) - keep)
    with open(path, "r+b") as fh:
        fh.truncate(keep)


# ---------------------------------------------------------------------------------------------
# one trial
@dataclass(frozen=True)
class Outcome:
    key: str
    status: str            # "ok" | "failed"
    reason: str
    line: str              # the results.jsonl line (no newline)
    traceback: str = ""    # for experiment.log only


def call_seed(trial_seed: int, tag: str, n: int, seed: int | None) -> int:
    """The per-request seed (module docstring): 31 bits of SHA-256 over (trial seed, tag, n, seed)."""
    blob = json.dumps([trial_seed, tag, n, seed], separators=(",", ":"), ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(blob.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


class TrialClient:
    """One trial's view of the shared client: per-call seed and tag, error counts, stop on interrupt."""

    def __init__(self, shared: LLMClient, trial: Trial, stop: threading.Event) -> None:
        self._shared = shared
        self._trial = trial
        self._stop = stop
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()
        self.calls = 0
        self.errors = 0
        self.last_error = ""

    @property
    def model(self) -> str:
        return self._shared.model

    def complete(self, req: ChatRequest) -> ChatResponse:
        if self._stop.is_set():
            raise SweepStopped("the sweep was interrupted")
        with self._lock:
            n = self._seen[req.tag]
            self._seen[req.tag] += 1
            self.calls += 1
        stamped = replace(req, seed=call_seed(self._trial.seed, req.tag, n, req.seed),
                          tag=f"{self._trial.key}|{req.tag}" + (f"#{n}" if n else ""))
        try:
            return self._shared.complete(stamped)
        except Exception as exc:
            with self._lock:
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, LLMError) else str(exc)
            raise

    def status(self) -> dict:
        return self._shared.status()

    def close(self) -> None:
        """The shared client is closed by the runner."""


def _fallback_reason(result: dict, client: TrialClient | None) -> str:
    """Why a trial whose run_trial returned counts as failed because its LLM fell back ("" if it did not)."""
    fb = result.get(LLM_FALLBACKS_KEY)
    if isinstance(fb, dict):
        kinds = sorted(str(k) for k, v in fb.items() if v)
        if kinds:
            return f"LLM fallback ({', '.join(kinds)})"
    elif fb:
        return "LLM fallback"
    if client is not None and client.errors:
        return f"LLM request failed: {client.last_error}"[:MAX_REASON_CHARS]
    return ""


def _dumps(record: dict) -> str:
    """One JSON line; numpy values and non-finite floats (-> null) go through ``jsonable`` only when present."""
    try:
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(jsonable(record), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def execute(study: Study, trial: Trial, ctx: TrialContext) -> Outcome:
    """Run one trial and build its record; never raises for the trial's own errors."""
    t0 = time.perf_counter()
    client = ctx.llm if isinstance(ctx.llm, TrialClient) else None
    result: Any = None
    tb = ""
    try:
        result = study.run_trial(trial, ctx)
        if not isinstance(result, dict):
            raise TypeError(f"run_trial returned {type(result).__name__}, expected a dict")
        reason = _fallback_reason(result, client)
        status = "failed" if reason else "ok"
    except TrialFailed as exc:
        status, reason, result = "failed", str(exc) or "TrialFailed", None
    except (Exception, SystemExit) as exc:
        status, reason, result = "failed", f"{type(exc).__name__}: {exc}", None
        tb = traceback.format_exc()
    record = {"key": trial.key, "index": trial.index, "seed": trial.seed, "params": trial.params,
              "status": status, "reason": reason[:MAX_REASON_CHARS], "result": result,
              "elapsed_s": round(time.perf_counter() - t0, 6)}
    if client is not None:
        record["llm"] = {"calls": client.calls, "errors": client.errors}
    try:
        line = _dumps(record)
    except (TypeError, ValueError) as exc:
        record.update(status="failed", reason=f"result is not JSON-serialisable: {type(exc).__name__}: {exc}"
                      [:MAX_REASON_CHARS], result=None)
        line = _dumps(record)
    return Outcome(trial.key, record["status"], record["reason"], line, tb)


def lost_outcome(trial: Trial, reason: str, elapsed_s: float = 0.0) -> Outcome:
    """The failed record of a trial whose worker was lost (killed process, lost node): no result, the reason."""
    record = {"key": trial.key, "index": trial.index, "seed": trial.seed, "params": trial.params,
              "status": "failed", "reason": reason[:MAX_REASON_CHARS], "result": None,
              "elapsed_s": round(elapsed_s, 6)}
    return Outcome(trial.key, "failed", record["reason"], _dumps(record))


# ---------------------------------------------------------------------------------------------
# execution modes
_FORK_STATE: tuple[Study, list[Trial], Path] | None = None


def _forked_trial(i: int) -> Outcome:
    study, trials, out = _FORK_STATE  # type: ignore[misc]
    return execute(study, trials[i], TrialContext(out_dir=out))


def _ignore_sigint() -> None:
    """A pool worker's signals: Ctrl-C is the parent's (it terminates the pool), and SIGTERM kills the worker at once,
    as ``Pool.terminate`` expects. A handler inherited by the fork (``consensus experiment`` turns SIGTERM into
    KeyboardInterrupt) would let a worker die in the middle of writing a result, and the pool's result thread would
    then wait for the rest of that message for ever: the parent never exits."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run_forked(todo: list[Trial], study: Study, out: Path, workers: int, sink: Callable[[Outcome], None]) -> None:
    global _FORK_STATE
    _FORK_STATE = (study, todo, out)
    chunk = max(1, min(64, len(todo) // (8 * workers)))
    pool = multiprocessing.get_context("fork").Pool(min(workers, len(todo)), initializer=_ignore_sigint)
    try:
        for outcome in pool.imap_unordered(_forked_trial, range(len(todo)), chunksize=chunk):
            sink(outcome)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
        _FORK_STATE = None


def _run_threaded(todo: list[Trial], run_one: Callable[[Trial], Outcome], threads: int,
                  sink: Callable[[Outcome], None], stop: threading.Event) -> None:
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="trial")
    pending = {pool.submit(run_one, t) for t in todo}
    try:
        while pending:
            done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            for fut in done:
                sink(fut.result())
    except BaseException:
        finished = [f for f in pending if f.done() and not f.cancelled() and f.exception() is None]
        stop.set()                              # running trials end at their next LLM request
        for fut in finished:
            sink(fut.result())
        running = sum(not f.done() for f in pending) - sum(f.cancel() for f in pending)
        if running > 0:
            log.warning("stopping: waiting for %d running trial(s) to finish their LLM request(s)", running)
        pool.shutdown(wait=True)                # their results are dropped; the client is closed after this
        raise
    pool.shutdown(wait=True)


# ---------------------------------------------------------------------------------------------
class Progress:
    """The sweep's progress on stderr, drawn by tqdm: a live bar on a terminal; elsewhere (a log, CI) one plain line
    every 10 s (tqdm's own text, without the carriage returns that would run a log's lines together)."""

    def __init__(self, label: str, total: int, done: int, enabled: bool = True, stream=None) -> None:
        from tqdm import tqdm

        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.ok = self.failed = 0
        self._last = time.monotonic()
        self.bar = tqdm(total=total, initial=done, desc=label, unit="trial", file=self.stream, dynamic_ncols=True,
                        mininterval=0.1, disable=not (enabled and self.tty), leave=True)
        self.done, self.total, self._t0, self._start_done, self.label = done, total, time.monotonic(), done, label

    def advance(self, status: str) -> None:
        self.done += 1
        self.ok += status == "ok"
        self.failed += status != "ok"
        self.bar.set_postfix_str(f"ok {self.ok} failed {self.failed}", refresh=False)
        self.bar.update(1)
        now = time.monotonic()
        if self.enabled and not self.tty and now - self._last >= 10.0:
            self._last = now
            self._line(now)

    def _line(self, now: float) -> None:
        from tqdm import tqdm

        text = tqdm.format_meter(self.done - self._start_done, self.total - self._start_done, now - self._t0,
                                 prefix=f"{self.label} ({self.done}/{self.total})", unit="trial",
                                 postfix=f"ok {self.ok} failed {self.failed}")
        self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        self.bar.close()
        if self.enabled and not self.tty:
            self._line(time.monotonic())


# ---------------------------------------------------------------------------------------------
@dataclass
class SweepResult:
    out_dir: Path
    total: int          # trials in the sweep
    skipped: int        # already recorded before this run
    ok: int             # recorded ok by this run
    failed: int         # recorded failed by this run
    elapsed_s: float
    mode: str           # "in-process" | "processes" | "threads" | "ray"


def _move_aside(out: Path) -> Path:
    dest = out / f"old-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S-%f')}"
    dest.mkdir()
    for entry in out.iterdir():
        if entry != dest and not entry.name.startswith("old-"):
            shutil.move(str(entry), dest / entry.name)
    return dest


def prepare_run_dir(out: Path, spec: ExperimentSpec, *, force: bool = False) -> None:
    """Check ``out`` against ``spec`` (module docstring) and store the spec; ConfigError if it may not be used."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a directory; choose another --out")
    stored_path = out / SPEC_FILE
    if stored_path.is_file():
        old = spec_identity(load_spec_file(stored_path))
        diff = identity_diff(old, spec.identity())
        if diff and not force:
            raise ConfigError(f"{out} holds a sweep with a different spec ({'; '.join(diff[:5])}); "
                              "use another --out, or --force to move the old results aside and start over")
        if diff:
            log.warning("--force: moved the old sweep to %s", _move_aside(out))
    elif out.is_dir() and any(out.iterdir()):
        raise ConfigError(f"{out} exists and is not an experiment run directory (no {SPEC_FILE}); "
                          "choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    tmp = stored_path.with_suffix(".tmp")
    tmp.write_text(dump_spec(spec), encoding="utf-8")
    os.replace(tmp, stored_path)


def prune_transcripts(path: Path, keep: set[str]) -> int:
    """Drop the exchanges of trials not in ``keep`` (tags ``"<trial key>|..."``); returns how many were dropped."""
    if not path.is_file():
        return 0
    kept, dropped = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        if not line.strip():
            continue
        try:
            tag = str(json.loads(line).get("tag", ""))
        except (ValueError, AttributeError):
            dropped += 1                               # a cut-short line of an interrupted run
            continue
        owners = [tag[:i] for i, ch in enumerate(tag) if ch == "|"]
        if owners and not any(o in keep for o in owners):
            dropped += 1
        else:
            kept.append(line)
    if dropped:
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        os.replace(tmp, path)
    return dropped


def _make_shared_client(spec: ExperimentSpec, out: Path) -> tuple[LLMClient, Callable[[], None]]:
    from consensus.llm.backends import backend_spec, endpoint_backend
    from consensus.llm.factory import make_client
    from consensus.llm.pool import endpoints_of

    llm = spec.llm
    backend = endpoint_backend(llm["backend"], llm["base_url"])
    return make_client(backend, model=llm["model"], base_url=llm["base_url"], api_key_env=llm["api_key_env"],
                       timeout_s=llm["timeout_s"], max_retries=llm["max_retries"], concurrency=llm["concurrency"],
                       transcripts_path=str(out / TRANSCRIPTS_FILE) if backend_spec(backend).records else None,
                       replay_path=llm["replay_path"] or None, n_ctx=llm["n_ctx"], n_parallel=llm["n_parallel"],
                       endpoints=endpoints_of(llm) if llm.get("endpoints") else None)


class RunLog:
    """Attach ``RUN_DIR/experiment.log`` to the package logger and the trial-traceback logger for one run."""

    def __init__(self, path: Path) -> None:
        self.handler = logging.FileHandler(path, encoding="utf-8")
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.loggers = (logging.getLogger("consensus"), trial_log)

    def __enter__(self) -> "RunLog":
        for lg in self.loggers:
            lg.addHandler(self.handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        for lg in self.loggers:
            lg.removeHandler(self.handler)
        self.handler.close()


class Executor(Protocol):
    """Where a sweep's trials run: ``LocalExecutor`` (this machine, the module docstring) or
    ``consensus.experiments.ray_executor.RayExecutor`` (a Ray cluster). ``run`` hands every finished trial's
    ``Outcome`` to ``sink`` (in this process) and never drops a trial: one that cannot finish gets a failed one."""

    def check(self, spec: ExperimentSpec) -> None:
        """ConfigError if this executor cannot run ``spec`` (called before anything is written)."""

    def mode(self, spec: ExperimentSpec, study: Study, todo: list[Trial]) -> str:
        """The execution mode reported in ``SweepResult.mode``."""

    def run(self, mode: str, todo: list[Trial], spec: ExperimentSpec, study: Study, out: Path,
            sink: Callable[[Outcome], None]) -> None:
        """Run ``todo`` (non-empty); Ctrl-C: keep what finished, stop the rest, re-raise."""


class LocalExecutor:
    """This machine: a thread pool (LLM sweeps), a fork pool (CPU sweeps) or this process (module docstring)."""

    def check(self, spec: ExperimentSpec) -> None:
        pass

    def mode(self, spec: ExperimentSpec, study: Study, todo: list[Trial]) -> str:
        return "threads" if spec.llm else ("processes" if spec.workers > 1 and len(todo) > 1
                                           and not study.parallel_trial
                                           and "fork" in multiprocessing.get_all_start_methods() else "in-process")

    def run(self, mode: str, todo: list[Trial], spec: ExperimentSpec, study: Study, out: Path,
            sink: Callable[[Outcome], None]) -> None:
        _dispatch(mode, todo, spec, study, out, sink)


def run_experiment(spec: ExperimentSpec, study: Study, out_dir: str | os.PathLike, *, force: bool = False,
                   retry_failed: bool = False, progress: bool = True, executor: Executor | None = None
                   ) -> SweepResult:
    """Run (or resume) the sweep ``spec`` of ``study`` into ``out_dir`` with ``executor`` (default: local)."""
    from consensus.runs.rundir import write_manifest

    if study.name != spec.study:
        raise ConfigError(f"spec is for study {spec.study!r}, got study {study.name!r}")
    executor = executor or LocalExecutor()
    executor.check(spec)
    out = Path(out_dir)
    trials = expand(spec)
    prepare_run_dir(out, spec, force=force)
    previous = read_results(out / RESULTS_FILE)
    done = {k for k, r in previous.items() if r["status"] == "ok" or (r["status"] == "failed" and not retry_failed)}
    todo = [t for t in trials if t.key not in done]
    llm = spec.llm
    write_manifest(out, scenario=spec.study, config=spec.to_dict(), seed=spec.seed,
                   backend=llm.get("backend", "none"), model=llm.get("model", ""), mode="experiment",
                   extra={"study": spec.study, "description": study.description, "trials_total": len(trials),
                          "trials_already_recorded": len(trials) - len(todo)})
    if llm:
        dropped = prune_transcripts(out / TRANSCRIPTS_FILE, done)
        if dropped:
            log.info("removed %d transcript records of unrecorded trials", dropped)
    mode = executor.mode(spec, study, todo)
    bar = Progress(spec.study, len(trials), len(trials) - len(todo), enabled=progress)
    t0 = time.monotonic()
    with RunLog(out / LOG_FILE):
        writer = ResultsWriter(out / RESULTS_FILE)

        def sink(o: Outcome) -> None:
            writer.write(o.line)
            if o.status != "ok":
                trial_log.error("trial %s failed: %s%s", o.key, o.reason, f"\n{o.traceback}" if o.traceback else "")
            bar.advance(o.status)

        try:
            if todo:
                executor.run(mode, todo, spec, study, out, sink)
        finally:
            writer.close()
            bar.finish()
    return SweepResult(out, len(trials), len(trials) - len(todo), bar.ok, bar.failed, time.monotonic() - t0, mode)


def _dispatch(mode: str, todo: list[Trial], spec: ExperimentSpec, study: Study, out: Path,
              sink: Callable[[Outcome], None]) -> None:
    if not todo:
        return
    if mode == "processes":
        _run_forked(todo, study, out, spec.workers, sink)
    elif mode == "in-process":
        for trial in todo:
            sink(execute(study, trial, TrialContext(out_dir=out)))
    else:
        client, close = _make_shared_client(spec, out)
        stop = threading.Event()
        settings = dict(spec.llm)
        try:
            _run_threaded(todo, lambda t: execute(study, t, TrialContext(llm=TrialClient(client, t, stop),
                                                                         llm_settings=settings, out_dir=out)),
                          min(max(spec.workers, spec.llm["concurrency"]), len(todo)), sink, stop)
        finally:
            close()


# ---------------------------------------------------------------------------------------------
def load_run_spec(run_dir: str | os.PathLike, studies: Mapping[str, Study]) -> ExperimentSpec:
    """The resolved spec stored in a run directory (ConfigError if it is not one)."""
    path = Path(run_dir) / SPEC_FILE
    if not path.is_file():
        raise ConfigError(f"{run_dir} is not an experiment run directory (no {SPEC_FILE})")
    return resolve_spec(load_spec_file(path), studies, source=str(path))


def replay_spec(run_dir: str | os.PathLike, studies: Mapping[str, Study]) -> ExperimentSpec:
    """The spec of ``run_dir`` answered from its transcripts (``llm.backend: replay``), no network."""
    run_dir = Path(run_dir)
    spec = load_run_spec(run_dir, studies)
    transcripts = run_dir / TRANSCRIPTS_FILE
    if not spec.llm:
        raise ConfigError(f"nothing to replay: the sweep in {run_dir} makes no LLM calls")
    if not transcripts.is_file():
        raise ConfigError(f"{transcripts} not found: the sweep in {run_dir} has no recorded LLM exchanges")
    return replace(spec, llm={**spec.llm, "backend": "replay", "replay_path": str(transcripts.resolve()),
                              "endpoints": []})


def records_in_sweep(spec: ExperimentSpec, records: Mapping[str, dict]) -> tuple[list[dict], int]:
    """The records of the sweep's trials in expansion order, and how many trials have none yet."""
    keys = [t.key for t in expand(spec)]
    found = [records[k] for k in keys if k in records]
    return found, len(keys) - len(found)
