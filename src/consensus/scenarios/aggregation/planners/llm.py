"""The LLM planner of one robot (paper 1): prompt, ask, parse, validate.

One ``plan`` call:

1. builds the paper's prompt (``consensus.scenarios.aggregation.prompts``) from the robot's own state and
   its in-neighbours' states only;
2. sends it (``response_format`` = the JSON schema when ``structured``);
3. parses the reply (``consensus.llm.parsing``). An unreadable reply is answered with a short
   correction turn and asked again, up to ``parse_retries`` times (the request therefore differs
   from the first one, so a record/replay store does not return the same bad answer);
4. clamps a parsed target into the geofence (``clamped``, not a fallback). NaN/inf never pass.

Fallback: when no valid target comes out (``unparseable`` after all retries, ``llm_error`` when the
client gave up after its own retries, ``client_error`` for any other exception of the client), the
result has ``target=None`` and ``fallback=True``: the caller keeps the robot's last target, and at
round 0 (no target yet) the robot's current position. The paper's code kept the old target after 3
tries but froze the robot when round 0 failed; holding the current position is the explicit form.

Memory (the paper's 1-D setting): the planner remembers successful (prompt, reply) exchanges and
sends at most ``history_rounds`` of them: the first one, which states the task (later-round prompts
do not repeat it), and the most recent ones. Without memory every round is self-contained.

A planner belongs to one robot; ``plan`` may run on a worker thread. Counters are guarded by a lock
and read with ``counters()``.
"""
from __future__ import annotations

import copy
import logging
import threading
from collections import deque

import numpy as np

from consensus.control.safety import Geofence
from consensus.errors import ConfigError
from consensus.llm.counters import add_counters, new_counters  # noqa: F401 (re-used here)
from consensus.llm.base import ChatRequest, LLMClient, LLMError
from consensus.control.planner import PlanRequest, PlanResult
from consensus.scenarios.aggregation.prompts import build_messages, personality_text, response_schema, retry_message
from consensus.llm.parsing import MAX_REASONING_CHARS, parse_position

log = logging.getLogger(__name__)

MAX_HISTORY_REPLY_CHARS = 2_000     # a remembered reply is cut here (a runaway reply must not grow the prompt)


class LLMPlanner:
    """Planner asking an LLM for the next target (one instance per robot)."""

    def __init__(self, client: LLMClient, *, dim: int, robot_id: int, personality: str = "none",
                 memory: bool = False, geofence: Geofence | None = None, model: str = "",
                 temperature: float = 0.7, max_tokens: int = 160, parse_retries: int = 2,
                 structured: bool = True, seed: int | None = None, history_rounds: int = 5,
                 num_agents: int | None = None) -> None:
        if dim not in (1, 2):
            raise ConfigError(f"llm planner: dim must be 1 or 2 (got {dim})")
        personality_text(personality)     # ConfigError for an unknown personality
        if not 0 <= parse_retries <= 10:
            raise ConfigError(f"llm planner: parse_retries must be in [0, 10] (got {parse_retries})")
        if memory and history_rounds < 1:
            raise ConfigError(f"llm planner: history_rounds must be >= 1 with memory on (got {history_rounds})")
        if geofence is not None and geofence.dim != dim:
            raise ConfigError(f"llm planner: geofence has {geofence.dim} axes but dim is {dim}")
        if num_agents is not None and num_agents < 2:
            raise ConfigError(f"llm planner: num_agents must be >= 2 (got {num_agents})")
        self.client = client
        self.dim = dim
        self.robot_id = robot_id
        self.personality = personality
        self.memory = memory
        self.geofence = geofence
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.parse_retries = parse_retries
        self.structured = structured
        self.seed = seed
        self.history_rounds = history_rounds
        self.num_agents = num_agents
        self._plan_lock = threading.Lock()      # one plan at a time per robot
        self._count_lock = threading.Lock()
        self._counters = new_counters()
        self._first: tuple[str, str] | None = None
        self._recent: deque[tuple[str, str]] = deque(maxlen=max(history_rounds - 1, 0))

    # ------------------------------------------------------------------
    def counters(self) -> dict:
        """A snapshot of the counters (``new_counters`` layout)."""
        with self._count_lock:
            return copy.deepcopy(self._counters)

    def history(self) -> list[tuple[str, str]]:
        """The (user, assistant) exchanges the next prompt will carry (empty without memory)."""
        if self._first is None:
            return []
        return [self._first, *self._recent]

    def reset(self) -> None:
        """Forget the chat history (counters are kept: they describe the whole run)."""
        with self._plan_lock:
            self._first = None
            self._recent.clear()

    # ------------------------------------------------------------------
    def plan(self, req: PlanRequest) -> PlanResult:
        if req.robot_id != self.robot_id:
            raise ValueError(f"planner of robot {self.robot_id} got a request for robot {req.robot_id}")
        with self._plan_lock:
            result = self._plan(req)
        with self._count_lock:
            c = self._counters
            c["plans"] += 1
            c["calls"] += result.llm_calls
            c["parse_failures"] += int(result.extra.get("parse_failures", 0))
            c["clamped"] += int(result.clamped)
            if result.fallback:
                c["fallbacks"][result.fallback_reason] = c["fallbacks"].get(result.fallback_reason, 0) + 1
        return result

    def _plan(self, req: PlanRequest) -> PlanResult:
        own = np.asarray(req.own, dtype=float).reshape(-1)
        neighbors = [np.asarray(nb, dtype=float).reshape(-1) for nb in req.neighbors]
        for k, arr in enumerate([own, *neighbors]):
            if arr.shape != (self.dim,) or not np.all(np.isfinite(arr)):
                what = "own state" if k == 0 else f"neighbour {k - 1} state"
                raise ValueError(f"robot {self.robot_id}: {what} must be {self.dim} finite numbers")
        messages = build_messages(dim=self.dim, own=own, neighbors=neighbors, round=req.round,
                                  personality=self.personality, history=self.history() if self.memory else None,
                                  num_agents=self.num_agents)
        user_text = messages[-1]["content"]
        tag = f"robot_{self.robot_id}/round_{req.round}"
        calls = 0
        failures = 0
        errors: list[str] = []
        for attempt in range(self.parse_retries + 1):
            request = ChatRequest(
                messages=tuple(messages), model=self.model, temperature=self.temperature,
                max_tokens=self.max_tokens,
                response_format=response_schema(self.dim) if self.structured else None,
                seed=self.seed, tag=tag if attempt == 0 else f"{tag}/retry_{attempt}")
            calls += 1
            try:
                reply = self.client.complete(request).text
            except LLMError as exc:
                log.warning("robot %d round %d: LLM request failed: %s", self.robot_id, req.round, exc)
                return self._fallback("llm_error", f"LLM request failed: {exc}", calls, failures, errors)
            except Exception as exc:  # a broken client must not take the robot down: hold the target
                log.exception("robot %d round %d: LLM client raised", self.robot_id, req.round)
                return self._fallback("client_error", f"LLM client error: {type(exc).__name__}: {exc}",
                                      calls, failures, errors)
            parsed = parse_position(reply, self.dim)
            if parsed.position is not None:
                return self._accept(parsed.position, parsed.reasoning, parsed.method, user_text, reply,
                                    calls, failures, errors)
            failures += 1
            errors.append(parsed.error)
            log.info("robot %d round %d: unreadable reply (%s)", self.robot_id, req.round, parsed.error)
            messages = [*messages, {"role": "assistant", "content": str(reply)[:MAX_REASONING_CHARS]},
                        {"role": "user", "content": retry_message(parsed.error, self.dim)}]
        return self._fallback("unparseable", f"no valid position after {calls} replies: {errors[-1]}",
                              calls, failures, errors)

    def _accept(self, target: np.ndarray, reasoning: str, method: str, user_text: str, reply: str,
                calls: int, failures: int, errors: list[str]) -> PlanResult:
        clamped = False
        if self.geofence is not None:
            target, clamped = self.geofence.clamp(target)
        if self.memory:
            exchange = (user_text, reply[:MAX_HISTORY_REPLY_CHARS])
            if self._first is None:
                self._first = exchange
            else:
                self._recent.append(exchange)
        return PlanResult(target=np.asarray(target, dtype=float), reasoning=reasoning[:MAX_REASONING_CHARS],
                          llm_calls=calls, clamped=clamped,
                          extra={"parse_failures": failures, "parse_errors": errors, "parse_method": method})

    @staticmethod
    def _fallback(reason: str, text: str, calls: int, failures: int, errors: list[str]) -> PlanResult:
        return PlanResult(target=None, reasoning=text[:MAX_REASONING_CHARS], fallback=True, fallback_reason=reason,
                          llm_calls=calls, extra={"parse_failures": failures, "parse_errors": errors})
