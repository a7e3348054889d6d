"""A pool of OpenAI-compatible endpoints serving one model: per-endpoint in-flight limits, back-off, fail-over.

``llm.endpoints: [{base_url, model, concurrency}, ...]`` (or ``--base-url`` given several times) spreads a sweep's
requests over several servers (vLLM, llama.cpp, Ollama on several GPU hosts)::

    broker = SlotBroker([e.concurrency for e in endpoints])
    client = PooledClient(endpoints, broker, model="qwen", timeout_s=30, max_retries=2)

* **Slots.** At most ``concurrency`` requests are in flight at each endpoint; the pool's limit is their sum. A
  request takes a slot of the endpoint that is up and has the lowest share of its slots in use (ties: the first
  listed), waiting while every endpoint that is up is full.
* **Back-off.** A request that fails at an endpoint (timeout, connection refused or reset, 5xx, 429, any error
  the endpoint's client raises) puts that endpoint down for ``backoff_s * 2**(failures in a row - 1)`` seconds
  (at most ``backoff_max_s``); no request is sent to it while it is down, and its first success brings it back.
  The request itself goes to another endpoint at once (one it has not failed at yet, when there is one).
* **Attempts.** A request is tried at most ``max_retries + 1`` times at each endpoint (the endpoints' own clients
  do not retry), so it fails only when every endpoint failed it that often: ``LLMError`` naming each endpoint's last
  error. While all endpoints are down a request waits for the first to come back. With ``retry_backoff_s`` (and a
  broker without back-off: the Ray executor's single endpoint) a request that failed at every endpoint instead
  waits, holding no slot, as ``OpenAIChatClient`` does between its retries: ``retry_backoff_s * 2**(k - 1)``
  jittered by 0.5-1.5, at most ``retry_backoff_max_s``, before its attempt number k + 1.
* **Which endpoint answered** is ``ChatResponse.meta["endpoint"]`` (its ``base_url``); the transcript records it.

The ``SlotBroker`` is the pool's only shared state and is thread-safe; with the Ray executor it lives in one actor
(``consensus.experiments.ray_executor``) that every worker's ``PooledClient`` asks, so the limits and the back-off
hold for the whole sweep across machines. For that use a slot is a **lease**: ``try_acquire(avoid, owner)`` never
waits (it grants ``(endpoint, lease)`` or refuses), ``release(index, ok, error, lease)`` gives a lease back, and
``release_owner(owner)`` gives back every lease of a holder that died and refuses its later asks. A lease not given
back within ``lease_s`` (a holder that hung or vanished unnoticed) expires and its slot returns to the pool; a late
release of an expired or unknown lease changes no slot count (the endpoint's success or failure still counts).

An endpoint's ``model`` (default: the llm block's) replaces the request's model name when sent (servers name one
model differently); the transcript key is the request's own.
"""
from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol, Sequence

from consensus.errors import ConfigError
from consensus.llm.base import ChatRequest, ChatResponse, LLMError


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    model: str = ""
    concurrency: int = 4


class Broker(Protocol):
    def lease(self, avoid: Sequence[int] = ()) -> tuple[int, Any]:
        """A slot: ``(endpoint index, lease)``, waiting while none is free."""

    def release(self, index: int, ok: bool, error: str = "", lease: Any = None) -> None: ...

    def status(self) -> list[dict]: ...


class SlotBroker:
    """Per-endpoint in-flight slots, back-off and leases (module docstring); thread-safe."""

    def __init__(self, concurrency: Sequence[int], *, backoff_s: float = 1.0, backoff_max_s: float = 30.0,
                 lease_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if not concurrency or any(not isinstance(c, int) or c < 1 for c in concurrency):
            raise ConfigError(f"every endpoint needs a concurrency >= 1, got {list(concurrency)!r}")
        self.limit = list(concurrency)
        self.in_flight = [0] * len(self.limit)
        self.failures = [0] * len(self.limit)      # in a row
        self.down_until = [0.0] * len(self.limit)
        self.sent = [0] * len(self.limit)
        self.failed = [0] * len(self.limit)
        self.last_error = [""] * len(self.limit)
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self.lease_s = lease_s
        self.leases: dict[int, tuple[int, str, float]] = {}    # lease -> (endpoint, owner, expiry)
        self.dead: set[str] = set()                            # owners released by release_owner
        self.expired = 0                                       # leases that ran out (their slots came back)
        self._next_lease = 0
        self._clock = clock
        self._cond = threading.Condition()

    def _pick(self, avoid: set[int], now: float) -> int | None:
        best, best_load = None, 2.0
        for i, limit in enumerate(self.limit):
            if i in avoid or self.down_until[i] > now or self.in_flight[i] >= limit:
                continue
            load = self.in_flight[i] / limit
            if load < best_load:
                best, best_load = i, load
        return best

    def _skip(self, avoid: Sequence[int]) -> set[int]:
        return set(avoid) if len(set(avoid)) < len(self.limit) else set()

    def _expire(self, now: float) -> None:
        for lease, (i, _, until) in list(self.leases.items()):
            if until <= now:
                del self.leases[lease]
                self.in_flight[i] -= 1
                self.expired += 1

    def try_acquire(self, avoid: Sequence[int] = (), owner: str = "") -> tuple[int, int] | None:
        """A slot as ``(endpoint index, lease)``, or None at once when none is free (or ``owner`` was released by
        ``release_owner``); endpoints in ``avoid`` only when every other one is avoided too. Never waits."""
        skip = self._skip(avoid)
        with self._cond:
            now = self._clock()
            self._expire(now)
            if owner in self.dead:
                return None
            i = self._pick(skip, now)
            if i is None:
                return None
            self.in_flight[i] += 1
            self.sent[i] += 1
            self._next_lease += 1
            self.leases[self._next_lease] = (i, owner, now + self.lease_s if self.lease_s else float("inf"))
            return i, self._next_lease

    def retry_in(self, avoid: Sequence[int] = ()) -> float | None:
        """Seconds until a refused ``try_acquire`` may succeed without a release (a back-off or a lease running
        out), or None when only a release can free a slot."""
        skip = self._skip(avoid)
        with self._cond:
            now = self._clock()
            times = [t - now for k, t in enumerate(self.down_until) if t > now and k not in skip]
            times += [until - now for _, _, until in self.leases.values() if until != float("inf")]
            return max(0.0, min(times)) if times else None

    def lease(self, avoid: Sequence[int] = (), owner: str = "") -> tuple[int, int]:
        """``try_acquire``, waiting (in this process) while none is free."""
        with self._cond:
            while True:
                got = self.try_acquire(avoid, owner)
                if got is not None:
                    return got
                if owner in self.dead:
                    raise LLMError("this holder's endpoint slots were released (its worker was declared lost)")
                self._cond.wait(timeout=self.retry_in(avoid))

    def acquire(self, avoid: Sequence[int] = ()) -> int:
        """Take a slot and return its endpoint's index (``lease`` without the lease; ``release`` it by index)."""
        return self.lease(avoid)[0]

    def release(self, index: int, ok: bool, error: str = "", lease: int | None = None) -> None:
        """Give the slot back; a failure backs the endpoint off, a success brings it back up. A ``lease`` that has
        expired or was released with its owner gives no slot back (it already went back)."""
        with self._cond:
            if lease is None:
                if self._anonymous_release(index):
                    self.in_flight[index] -= 1
            elif self.leases.pop(lease, None) is not None:
                self.in_flight[index] -= 1
            if ok:
                self.failures[index] = 0
                self.down_until[index] = 0.0
            else:
                self.failures[index] += 1
                self.failed[index] += 1
                self.last_error[index] = error[:300]
                delay = min(self.backoff_max_s, self.backoff_s * 2 ** (self.failures[index] - 1))
                self.down_until[index] = max(self.down_until[index], self._clock() + delay)
            self._cond.notify_all()

    def _anonymous_release(self, index: int) -> bool:
        """A release by index (``acquire``): forget one lease of the anonymous owner on that endpoint."""
        for lease, (i, owner, _) in self.leases.items():
            if i == index and owner == "":
                del self.leases[lease]
                return True
        return False

    def release_owner(self, owner: str) -> int:
        """Give back every slot ``owner`` holds (it died) and refuse its later asks; returns how many."""
        with self._cond:
            self.dead.add(owner)
            mine = [lease for lease, (_, who, _) in self.leases.items() if who == owner]
            for lease in mine:
                self.in_flight[self.leases.pop(lease)[0]] -= 1
            self._cond.notify_all()
            return len(mine)

    def status(self) -> list[dict]:
        with self._cond:
            now = self._clock()
            self._expire(now)
            return [{"in_flight": self.in_flight[i], "concurrency": self.limit[i], "sent": self.sent[i],
                     "failed": self.failed[i], "state": "down" if self.down_until[i] > now else "ok",
                     "last_error": self.last_error[i]} for i in range(len(self.limit))]


class PooledClient:
    """``LLMClient`` over several endpoints sharing one ``Broker`` (module docstring)."""

    def __init__(self, endpoints: Sequence[Endpoint], broker: Broker, *, model: str = "",
                 api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 30.0, max_retries: int = 2,
                 retry_backoff_s: float = 0.0, retry_backoff_max_s: float = 8.0) -> None:
        from consensus.llm.openai_client import OpenAIChatClient

        if not endpoints:
            raise ConfigError("an endpoint pool needs at least one endpoint")
        self.endpoints = list(endpoints)
        self.broker = broker
        self.model = model or self.endpoints[0].model
        self.max_retries = max_retries
        self.retry_backoff_s, self.retry_backoff_max_s = retry_backoff_s, retry_backoff_max_s
        self._rng = random.Random()
        self._clients = [OpenAIChatClient(e.base_url, e.model or model, api_key_env=api_key_env, timeout_s=timeout_s,
                                          max_retries=0, concurrency=e.concurrency) for e in self.endpoints]
        self._lock = threading.Lock()
        self._calls = self._errors = self._failovers = 0
        self._last_error = ""

    def __repr__(self) -> str:
        return f"PooledClient({[e.base_url for e in self.endpoints]!r})"

    def complete(self, req: ChatRequest) -> ChatResponse:
        with self._lock:
            self._calls += 1
        tries = [0] * len(self.endpoints)
        errors: dict[int, str] = {}
        while True:
            spent = [i for i, n in enumerate(tries) if n > self.max_retries]
            if len(spent) == len(self.endpoints):
                message = "; ".join(f"{self.endpoints[i].base_url}: {errors[i]}" for i in sorted(errors))
                with self._lock:
                    self._errors += 1
                    self._last_error = message
                raise LLMError(f"LLM request failed at every endpoint ({message})"[:2000])
            # prefer endpoints this request has not failed at; never one whose attempts are spent
            fresh_avoid = [i for i, n in enumerate(tries) if n > 0]
            i, lease = self.broker.lease(fresh_avoid if len(fresh_avoid) < len(self.endpoints) else spent)
            endpoint = self.endpoints[i]
            ok, error = False, ""
            try:
                sent = replace(req, model=endpoint.model) if endpoint.model else req
                resp = self._clients[i].complete(sent)
                ok = True
            except LLMError as exc:
                error = str(exc)
            finally:
                self.broker.release(i, ok, error, lease)
            if ok:
                resp.meta["endpoint"] = endpoint.base_url
                return resp
            tries[i] += 1
            errors[i] = error
            with self._lock:
                self._failovers += 1
                self._last_error = error
            left = [n for n in tries if n <= self.max_retries]
            if self.retry_backoff_s > 0 and left and min(tries) > 0:     # no fresh endpoint: back off, slot-less
                base = min(self.retry_backoff_max_s, self.retry_backoff_s * 2 ** (min(left) - 1))
                time.sleep(min(self.retry_backoff_max_s, base * self._rng.uniform(0.5, 1.5)))

    def status(self) -> dict:
        endpoints = self.broker.status()
        with self._lock:
            return {"state": "ok" if any(e["state"] == "ok" for e in endpoints) else "down", "calls": self._calls,
                    "errors": self._errors, "retries": self._failovers, "last_error": self._last_error,
                    "last_latency_s": 0.0, "model": self.model,
                    "endpoints": [{"base_url": e.base_url, **s} for e, s in zip(self.endpoints, endpoints)]}

    def close(self) -> None:
        for client in self._clients:
            client.close()


def endpoints_of(llm: dict) -> list[Endpoint]:
    """The endpoints of a resolved llm block: ``llm.endpoints``, else its one ``base_url`` at ``concurrency``."""
    if llm.get("endpoints"):
        return [Endpoint(e["base_url"], e.get("model") or llm.get("model", ""), int(e["concurrency"]))
                for e in llm["endpoints"]]
    return [Endpoint(llm.get("base_url", ""), llm.get("model", ""), int(llm.get("concurrency", 4)))]
