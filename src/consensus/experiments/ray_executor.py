"""Run a sweep's trials on a Ray cluster (``consensus experiment ... --executor ray [--ray-address ADDR]``).

The same spec, the same trials, the same derived seeds and the same record lines as the local executor
(``consensus.experiments.runner``): only where ``execute`` runs changes. The driver (the ``consensus experiment``
process) keeps the run directory: it alone writes ``results.jsonl`` and ``transcripts.jsonl``, so resume,
``--retry-failed``, replay and the report work on a Ray run exactly as on a local one.

* **Workers.** One Ray actor (``TrialWorker``, ``num_cpus=1``) per CPU of the cluster, at most one per trial to
  run, created once per sweep with the study; the driver hands trials to the least busy ready worker (``execute``
  on the worker, the record line back) within one budget for the sweep. CPU sweeps: one trial per worker at a time.
  LLM sweeps: ``max(workers, llm.concurrency)`` trials plus one per worker (it waits at the broker, so no request
  slot idles while the driver hands out the next trial), as threads of the workers (the first worker up may run
  them all; later ones take their share as trials finish), each worker with one ``PooledClient`` on the sweep's
  endpoint(s) (``consensus.llm.pool``) whose per-endpoint limits and back-off are held by one broker actor
  (``SlotBrokerActor``) for the whole sweep (one ``--base-url``: the broker holds the sweep's in-flight limit with
  no endpoint-wide back-off, and each request backs off on its own between retries, as the local executor's client
  does). A worker sends the transcript records of a trial with its record; the driver appends them.
  Replay: the driver reads ``transcripts.jsonl`` and sends each trial its own exchanges, so no worker needs the
  file. ``Study.parallel_trial`` studies get ``NUMBA_NUM_THREADS=1`` per worker (the workers are the parallelism;
  their results do not depend on the thread count).
* **The broker.** An async actor around a ``SlotBroker``: an ask for a slot waits on the actor's event loop, not in
  one of its call slots, so a release is never queued behind waiting asks; each ask waits at most
  ``BROKER_WAIT_S`` and the worker asks again. Slots are leases of their worker: when the driver learns that a
  worker died it gives back every slot the worker held (``release_owner``), and a lease nobody gives back expires
  after ``2 * llm.timeout_s + 30`` s. A broker whose process dies is restarted by Ray (empty: the releases of
  leases it granted before are ignored); a worker that gets no answer from it for ``BROKER_LOST_S`` fails its
  requests with one ``LLMError`` naming the broker (the trials are recorded as failed; ``--retry-failed`` runs
  them again).
* **Code.** The study's code reaches the workers through the job's runtime environment (``py_modules`` of
  ``ray.init``; Ray takes local code at the job level only): the ``consensus`` package of the driver, and the
  top-level package or module that defines the study's ``run_trial`` when it lives outside ``consensus`` (a study
  defined in ``__main__`` is pickled by value). A
  worker node needs Python 3.11 with the pinned wheels (requirements/base.txt and requirements/ray.txt, or the
  Docker image), not the ``consensus`` package itself. ``TrialContext.out_dir`` is None on a worker (no shared
  file system is assumed).
* **Lost workers.** A trial whose worker process dies (killed, out of memory, its node lost) is recorded as
  failed with the reason ``"Ray worker lost (<error>): <detail>"`` — never dropped; ``--retry-failed`` runs it
  again — and the actor is replaced; a replacement that cannot be placed leaves its trials to the others.
* **Timeouts.** Every ``ray.get`` has a timeout, in the driver and in the workers.
* **Ctrl-C.** The records of finished trials are written, the actors are killed (their running trials are
  dropped, to be run by the next resume), and the interrupt is re-raised.
* **Connection.** ``address`` None: a Ray instance on this machine for this sweep (started and stopped here,
  unless ``RAY_ADDRESS`` names a cluster), ``"auto"``: the cluster this machine belongs to (``ray start``), or
  ``HOST:PORT`` of a head node. Already connected (``ray.init`` called by the caller): that connection.
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from consensus.errors import ConfigError, ConsensusError
from consensus.experiments.runner import (TRANSCRIPTS_FILE, Outcome, TrialClient, execute, lost_outcome,
                                          trial_log)
from consensus.experiments.spec import ExperimentSpec
from consensus.extras import require
from consensus.experiments.study import Study, Trial, TrialContext
from consensus.llm.backends import starts_local_server
from consensus.llm.base import LLMError

log = logging.getLogger(__name__)

#: how long the sweep waits for a worker when every worker is gone and none can be placed
NO_WORKER_TIMEOUT_S = 120.0
POLL_S = 0.25
#: the longest one ask for an endpoint slot waits at the broker before the worker asks again
BROKER_WAIT_S = 1.0
#: how long past that a worker waits for the broker's answer to one call
BROKER_CALL_S = 10.0
#: a worker whose broker has not answered (dead, restarting, unreachable) for this long fails its LLM requests
BROKER_LOST_S = 30.0
#: one endpoint (``--base-url``, no ``llm.endpoints``): no endpoint-wide back-off (nowhere to fail over to; the local
#: executor has none either) but each request's own, as the local ``OpenAIChatClient`` retries
SINGLE_RETRY_BACKOFF_S = 0.5
#: ``ray.get`` of a result that ``ray.wait`` reported ready (it may still have to travel from another node)
RESULT_TIMEOUT_S = 120.0


def runtime_env(study: Study) -> dict[str, Any]:
    """The job's runtime environment (``ray.init``): ``py_modules`` with consensus and the study's own code."""
    import consensus

    modules = [str(Path(consensus.__file__).resolve().parent)]
    name = getattr(study.run_trial, "__module__", "") or ""
    top = name.split(".")[0]
    if top and top not in ("consensus", "__main__") and top in sys.modules:
        mod = sys.modules[top]
        path = getattr(mod, "__path__", None)
        source = list(path)[0] if path else getattr(mod, "__file__", None)
        if source:
            modules.append(str(Path(source).resolve()))
    return {"py_modules": modules}


def actor_env(study: Study) -> dict[str, Any]:
    """The workers' own runtime environment (on top of the job's): one numba thread for parallel trials."""
    return {"env_vars": {"NUMBA_NUM_THREADS": "1"}} if study.parallel_trial else {}


def lost_reason(exc: BaseException) -> str:
    """One line from a Ray error about a dead worker: its type, first line and Ray's exit detail."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    detail = next((ln for ln in lines if "exit detail" in ln.lower() or "node" in ln.lower() and "died" in ln.lower()),
                  "")
    if "Worker exit detail:" in detail:
        detail = detail[detail.index("Worker exit detail:"):]
    reason = f"Ray worker lost ({type(exc).__name__}): {first}"
    if detail and detail != first:
        reason += f" {detail}"
    return reason[:400]


class SlotBrokerActor:
    """The sweep's ``SlotBroker`` as an async Ray actor (module docstring): asks wait on its event loop."""

    def __init__(self, concurrency: list[int], lease_s: float, backoff_s: float = 1.0) -> None:
        from consensus.llm.pool import SlotBroker

        self.core = SlotBroker(concurrency, backoff_s=backoff_s, lease_s=lease_s)
        self.token = secrets.token_hex(8)          # a restarted broker knows nothing of its predecessor's leases
        self._changed: asyncio.Condition | None = None

    def _cond(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _notify(self) -> None:
        async with self._cond():
            self._cond().notify_all()

    async def acquire(self, avoid: list[int], owner: str, wait_s: float) -> tuple[int, str] | None:
        """``(endpoint, lease)``, or None after ``wait_s`` without a free slot (the caller asks again)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            got = self.core.try_acquire(avoid, owner)
            if got is not None:
                return got[0], f"{self.token}:{got[1]}"
            left = deadline - loop.time()
            if left <= 0 or owner in self.core.dead:
                return None
            hint = self.core.retry_in(avoid)
            async with self._cond():
                try:
                    await asyncio.wait_for(self._cond().wait(), min(left, hint) if hint is not None else left)
                except asyncio.TimeoutError:
                    pass

    async def release(self, index: int, ok: bool, error: str = "", lease: str = "") -> None:
        token, _, number = str(lease).partition(":")
        self.core.release(index, ok, error, int(number) if token == self.token and number.isdigit() else -1)
        await self._notify()

    async def release_owner(self, owner: str) -> int:
        n = self.core.release_owner(owner)
        await self._notify()
        return n

    async def status(self) -> list[dict]:
        return self.core.status()


class _RemoteBroker:
    """A ``consensus.llm.pool.Broker`` on the sweep's ``SlotBrokerActor``, for one worker (``owner``)."""

    def __init__(self, handle: Any, owner: str, endpoints: int) -> None:
        self.handle = handle
        self.owner = owner
        self.endpoints = endpoints
        self._lock = threading.Lock()
        self._trouble_since: float | None = None    # the broker has not answered since then
        self._trouble = ""
        self._lost = ""                             # set once it failed to answer for BROKER_LOST_S

    def _failed(self, what: str) -> None:
        with self._lock:
            now = time.monotonic()
            self._trouble_since = self._trouble_since or now
            self._trouble = what
            if now - self._trouble_since > BROKER_LOST_S:
                self._lost = (f"the sweep's endpoint broker (a Ray actor) did not answer for {BROKER_LOST_S:.0f} s "
                              f"({what}); --retry-failed runs the failed trials again")
            if self._lost:
                raise LLMError(self._lost)

    def lease(self, avoid=()) -> tuple[int, str]:
        import ray

        while True:
            if self._lost:
                raise LLMError(self._lost)
            ref = None
            try:
                ref = self.handle.acquire.remote(list(avoid), self.owner, BROKER_WAIT_S)
                got = ray.get(ref, timeout=BROKER_WAIT_S + BROKER_CALL_S)
            except ray.exceptions.GetTimeoutError:
                try:
                    ray.cancel(ref)
                except Exception:
                    pass
                self._failed(f"no answer in {BROKER_WAIT_S + BROKER_CALL_S:.0f} s")
                continue
            except ray.exceptions.RayError as exc:         # dead or restarting: ask again, within the bound
                self._failed(lost_reason(exc))
                time.sleep(0.2)
                continue
            with self._lock:
                self._trouble_since, self._trouble = None, ""
            if got is not None:
                return got[0], got[1]

    def release(self, index: int, ok: bool, error: str = "", lease: Any = None) -> None:
        try:
            self.handle.release.remote(index, ok, error, lease or "")
        except Exception:            # the broker is gone; its successor ignores this lease anyway
            pass

    def status(self) -> list[dict]:
        import ray

        try:
            return ray.get(self.handle.status.remote(), timeout=BROKER_CALL_S)
        except ray.exceptions.RayError as exc:
            return [{"in_flight": 0, "concurrency": 0, "sent": 0, "failed": 0, "state": "unknown",
                     "last_error": f"broker: {lost_reason(exc)}"}] * self.endpoints


class TrialWorker:
    """A Ray actor (``ray.remote(TrialWorker)``) running trials of one study: ``run(trial) -> (outcome, exchanges)``."""

    def __init__(self, study: Study, llm: dict, broker: Any = None, owner: str = "") -> None:
        self.study = study
        self.llm = dict(llm)
        self.stop = threading.Event()
        self.client = None
        if self.llm and self.llm["backend"] != "replay":
            from consensus.llm.pool import PooledClient, endpoints_of

            endpoints = endpoints_of(self.llm)
            self.client = PooledClient(endpoints, _RemoteBroker(broker, owner, len(endpoints)), model=self.llm["model"],
                                       api_key_env=self.llm["api_key_env"], timeout_s=self.llm["timeout_s"],
                                       max_retries=self.llm["max_retries"],
                                       retry_backoff_s=0.0 if self.llm.get("endpoints") else SINGLE_RETRY_BACKOFF_S)

    def where(self) -> dict:
        """Where this worker runs and which consensus it imports (logged by the driver)."""
        import consensus
        import ray

        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
                "consensus": str(Path(consensus.__file__).parent)}

    def run(self, trial: Trial, exchanges: list[dict] | None = None) -> tuple[Outcome, list[dict]]:
        if not self.llm:
            return execute(self.study, trial, TrialContext()), []
        from consensus.llm.transcripts import MemoryStore, RecordingClient, ReplayClient

        store = MemoryStore()
        if self.llm["backend"] == "replay":
            shared = ReplayClient(self.llm["replay_path"] or "transcripts.jsonl", records=exchanges or [])
        else:
            shared = RecordingClient(self.client, store)
        ctx = TrialContext(llm=TrialClient(shared, trial, self.stop), llm_settings=self.llm)
        return execute(self.study, trial, ctx), store.records


def _owner(tag: str, keys: set[str]) -> str | None:
    """The trial key a transcript tag ``"<trial key>|<tag>"`` belongs to (keys may contain '|')."""
    for i, ch in enumerate(tag):
        if ch == "|" and tag[:i] in keys:
            return tag[:i]
    return None


class RayExecutor:
    """``consensus.experiments.runner.Executor`` on a Ray cluster (module docstring)."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address or None

    def check(self, spec: ExperimentSpec) -> None:
        require("ray", "the Ray executor (--executor ray)")     # one line naming the extra's pip install
        llm = spec.llm
        if llm and starts_local_server(llm["backend"], llm["base_url"]):
            raise ConfigError("--executor ray cannot use the embedded model of this process: start a model server "
                              "that the workers can reach (e.g. `ros2 run consensus llm_server` bound to a routable "
                              "address, vLLM, llama.cpp, Ollama) and give its --base-url")

    def mode(self, spec: ExperimentSpec, study: Study, todo: list[Trial]) -> str:
        return "ray"

    # -----------------------------------------------------------------------------------------
    def _connect(self, study: Study) -> bool:
        """Connect (or start a local instance) with the job's runtime environment; True if this call did (and so
        must disconnect). Ray takes local code only at the job level: a caller that connected already must have
        given ``runtime_env(study)`` to its ``ray.init`` (or have the code installed on the workers)."""
        import ray

        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False,
                                  "namespace": "consensus-experiments", "runtime_env": runtime_env(study)}
        if self.address is None and not os.environ.get("RAY_ADDRESS"):
            kwargs["include_dashboard"] = False
        try:
            ray.init(address=self.address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConsensusError(f"cannot connect to the Ray cluster at {self.address or 'a new local instance'}: "
                                 f"{exc}") from None
        return True

    def run(self, mode: str, todo: list[Trial], spec: ExperimentSpec, study: Study, out: Path,
            sink: Callable[[Outcome], None]) -> None:
        import ray

        started = self._connect(study)
        actors: dict[int, Any] = {}
        broker = None
        try:
            cpus = int(ray.cluster_resources().get("CPU", 0))
            if cpus < 1:
                raise ConsensusError("the Ray cluster has no CPUs for the sweep's workers")
            llm = dict(spec.llm)
            if llm:
                want = min(max(spec.workers, llm["concurrency"]), len(todo))
                n_actors = min(cpus, want)
                # one trial more per worker than its share waits at the broker for a slot, so an endpoint slot does
                # not idle while the driver hands a worker its next trial; any worker may run the whole budget (the
                # first one up starts the sweep, the others take their share as trials finish)
                budget = min(want + n_actors, len(todo))
                threads = budget
            else:
                n_actors = min(cpus, len(todo))
                budget, threads = n_actors, 1
            if llm and llm["backend"] != "replay":
                from consensus.llm.pool import endpoints_of

                # async: its waiting asks hold no call slot; restarted by Ray if its process dies
                broker = ray.remote(SlotBrokerActor).options(num_cpus=0, max_concurrency=10_000, max_restarts=-1,
                                                             max_task_retries=0).remote(
                    [e.concurrency for e in endpoints_of(llm)], 2 * float(llm["timeout_s"]) + 30.0,
                    1.0 if llm.get("endpoints") else 0.0)        # one --base-url: the local client's retries
            exchanges = self._replay_exchanges(llm, todo)
            transcripts = None
            if llm and llm["backend"] != "replay":
                from consensus.llm.transcripts import TranscriptStore

                transcripts = TranscriptStore(out / TRANSCRIPTS_FILE)
            worker_cls = ray.remote(TrialWorker).options(num_cpus=1, max_concurrency=threads, max_restarts=0,
                                                         max_task_retries=0, runtime_env=actor_env(study) or None)
            study_ref = ray.put(study)
            try:
                self._loop(ray, worker_cls, study_ref, llm, broker, n_actors, threads, budget, todo, exchanges,
                           transcripts, sink, actors)
            finally:
                if transcripts is not None:
                    transcripts.close()
        finally:
            for handle in list(actors.values()) + ([broker] if broker is not None else []):
                try:
                    ray.kill(handle)
                except Exception:       # already dead
                    pass
            if started:
                ray.shutdown()

    @staticmethod
    def _replay_exchanges(llm: dict, todo: list[Trial]) -> dict[str, list[dict]]:
        if not llm or llm["backend"] != "replay":
            return {}
        from consensus.llm.transcripts import TranscriptStore

        keys = {t.key for t in todo}
        out: dict[str, list[dict]] = {}
        for rec in TranscriptStore(llm["replay_path"]).load():
            owner = _owner(str(rec.get("tag", "")), keys)
            if owner is not None:
                out.setdefault(owner, []).append(rec)
        return out

    def _loop(self, ray, worker_cls, study_ref, llm, broker, n_actors, threads, budget, todo, exchanges, transcripts,
              sink,
              actors) -> None:
        queue = deque(todo)
        busy: dict[int, int] = {}                 # ready actor -> trials it is running (at most `threads`)
        calls: dict[Any, tuple[int, Trial, float]] = {}   # call ref -> (actor, trial, start)
        pings: dict[Any, int] = {}                # ping ref -> actor being started
        next_id = 0
        generation_ok = False                     # some actor has started: a later failure is not a set-up error
        no_worker_since: float | None = None

        def start_actor() -> None:
            nonlocal next_id
            actors[next_id] = worker_cls.remote(study_ref, llm, broker, str(next_id))
            pings[actors[next_id].where.remote()] = next_id
            next_id += 1

        def deliver(outcome: Outcome, records: list[dict]) -> None:
            if transcripts is not None:
                for rec in records:
                    transcripts.append(rec)
            sink(outcome)

        def lose(actor_id: int) -> None:
            """The actor died: forget it (its other running calls fail too), give its endpoint slots back to the
            pool, and start one replacement."""
            busy.pop(actor_id, None)
            if actor_id not in actors:
                return
            if broker is not None:
                try:
                    broker.release_owner.remote(str(actor_id))
                except Exception:       # the broker is gone too: its leases expire with it
                    pass
            try:
                ray.kill(actors.pop(actor_id))
            except Exception:
                pass
            start_actor()

        for _ in range(n_actors):
            start_actor()
        try:
            while queue or calls:
                while queue and busy and len(calls) < budget:
                    actor_id = min(busy, key=busy.__getitem__)      # the least busy ready worker
                    if busy[actor_id] >= threads:
                        break
                    trial = queue.popleft()
                    ref = actors[actor_id].run.remote(trial, exchanges.get(trial.key))
                    calls[ref] = (actor_id, trial, time.monotonic())
                    busy[actor_id] += 1
                waiting = list(calls) + list(pings)
                if not calls and not busy:
                    no_worker_since = no_worker_since or time.monotonic()
                    if time.monotonic() - no_worker_since > NO_WORKER_TIMEOUT_S:
                        raise ConsensusError(f"no Ray worker could be placed for {NO_WORKER_TIMEOUT_S:.0f} s (did "
                                             "the cluster lose its nodes?); finished trials are kept: resume later")
                else:
                    no_worker_since = None
                if not waiting:
                    start_actor()
                    continue
                ready, _ = ray.wait(waiting, num_returns=1, timeout=POLL_S)
                if ready:
                    ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
                for ref in ready:
                    if ref in pings:
                        actor_id = pings.pop(ref)
                        try:
                            where = ray.get(ref, timeout=RESULT_TIMEOUT_S)
                        except Exception as exc:
                            if not generation_ok:
                                lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
                                cause = lines[-1] if len(lines) > 1 else ""
                                raise ConsensusError(f"the Ray workers could not start: {lost_reason(exc)}"
                                                     + (f" ... {cause}" if cause else "")) from None
                            log.warning("a replacement Ray worker could not start: %s", lost_reason(exc))
                            actors.pop(actor_id, None)
                            continue
                        generation_ok = True
                        trial_log.info("Ray worker %d: pid %s on node %s, consensus from %s", actor_id,
                                       where["pid"], where["node"][:12], where["consensus"])
                        busy[actor_id] = 0
                        continue
                    actor_id, trial, t0 = calls.pop(ref)
                    try:
                        outcome, records = ray.get(ref, timeout=RESULT_TIMEOUT_S)
                    except ray.exceptions.RayActorError as exc:
                        deliver(lost_outcome(trial, lost_reason(exc), time.monotonic() - t0), [])
                        lose(actor_id)
                        continue
                    except ray.exceptions.RayError as exc:       # the call itself failed (not the trial)
                        deliver(lost_outcome(trial, f"Ray call failed: {type(exc).__name__}: "
                                             f"{str(exc).splitlines()[0] if str(exc) else ''}",
                                             time.monotonic() - t0), [])
                        if actor_id in busy:
                            busy[actor_id] -= 1
                        continue
                    deliver(outcome, records)
                    if actor_id in busy:
                        busy[actor_id] -= 1
        except BaseException:
            # keep what already finished; the caller kills the actors (their running trials are dropped)
            done, _ = ray.wait(list(calls), num_returns=len(calls), timeout=0) if calls else ([], [])
            for ref in done:
                try:
                    outcome, records = ray.get(ref, timeout=1)
                except Exception:
                    continue
                deliver(outcome, records)
            if calls:
                log.warning("stopping: %d running trial(s) on Ray workers dropped (a resume runs them)",
                            len(calls) - len(done))
            raise
