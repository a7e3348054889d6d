"""The LLM planner of one robot (paper 1): prompt, ask, parse, validate.

One ``plan`` call:

1. builds the paper's prompt (``consensus.scenarios.aggregation.prompts``) from the robot's own state and
   its in-neighbours' states only, in the planner's prompt ``style`` (``consensus.llm.styles``):
   ``paper`` (the paper's format line, free reasoning; the request carries the answer-line GBNF grammar,
   which only llama.cpp servers receive), ``json`` (``response_format`` = the JSON schema) or ``tools``;
2. sends it and reads the answer: ``paper``/``json`` parse the text (``consensus.llm.parsing``); ``tools``
   executes the model's tool calls (API ``tool_calls``, or calls written as text) against the positions the
   robot sees: ``distance_to`` is answered and the model asked again, ``move_to_centroid``/``move_toward``/
   ``move_to`` are the answer. A call with bad arguments (not an object, NaN/inf, beyond 1e6, a wrong type, an
   unknown robot, a fraction outside [0, 1]) is answered with an error and counted (``tool_errors``); a text
   reply without a tool call is parsed like the paper style;
3. an unreadable reply is answered with a short correction turn and asked again, up to ``parse_retries``
   times (the request therefore differs from the first one, so a record/replay store does not return the
   same bad answer); the tools style allows ``parse_retries + 2`` requests in all;
4. clamps a parsed target into the geofence (``clamped``, not a fallback). NaN/inf never pass.

Fallback: when no valid target comes out (``unparseable`` after all retries, ``tool_error`` when the tools
style ended on a bad call, ``llm_error`` when the client gave up after its own retries, ``client_error`` for
any other exception of the client), the result has ``meeting_point=None`` and ``fallback=True``: the caller keeps
the robot's last target, and at round 0 (no target yet) the robot's current position. The paper's code kept
the old target after 3 tries but froze the robot when round 0 failed; holding the current position is the
explicit form.

Memory (the paper's 1-D setting): the planner remembers successful (prompt, reply) exchanges. With
``history_rounds = 0`` (the default, the paper's) it sends all of them, bounded only by the context window:
when the estimated prompt (``CHARS_PER_TOKEN`` characters a token) would not fit ``context_tokens`` minus
``max_tokens``, the oldest exchanges after the first one are left out and counted (``history_truncated``).
``history_rounds = k`` sends the first exchange (which states the task: later-round prompts do not repeat it)
and the ``k - 1`` most recent. Without memory every round is self-contained.

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
from consensus.scenarios.aggregation.prompts import (ANSWER_TOOLS, QUERY_TOOLS, answer_grammar, build_messages,
                                                     format_position, personality_text, response_schema,
                                                     retry_message, robot_names, tool_definitions, tool_grammar)
from consensus.llm.parsing import MAX_REASONING_CHARS, format_number, parse_position
from consensus.llm.styles import (PROMPT_STYLES, assistant_tool_message, tool_arguments, tool_calls_in_text)

log = logging.getLogger(__name__)

MAX_HISTORY_REPLY_CHARS = 2_000     # a remembered reply is cut here (a runaway reply must not grow the prompt)
CHARS_PER_TOKEN = 3.0               # a cautious estimate of the prompt's tokens (English text and numbers)
MAX_ABS = 1e6                       # a tool argument or answer beyond this is refused
_TOOL_NAMES = frozenset(ANSWER_TOOLS + QUERY_TOOLS)


class ToolError(ValueError):
    """A tool call the planner refuses (the model is told why; counted as ``tool_errors``)."""


class LLMPlanner:
    """Planner asking an LLM for the next target (one instance per robot)."""

    def __init__(self, client: LLMClient, *, dim: int, robot_id: int, personality: str = "none",
                 memory: bool = False, geofence: Geofence | None = None, model: str = "",
                 temperature: float = 0.7, max_tokens: int = 160, parse_retries: int = 2,
                 structured: bool = True, seed: int | None = None, history_rounds: int = 0,
                 num_agents: int | None = None, style: str | None = None, context_tokens: int = 4096,
                 meeting_points: bool = False) -> None:
        if dim not in (1, 2):
            raise ConfigError(f"llm planner: dim must be 1 or 2 (got {dim})")
        personality_text(personality)     # ConfigError for an unknown personality
        if not 0 <= parse_retries <= 10:
            raise ConfigError(f"llm planner: parse_retries must be in [0, 10] (got {parse_retries})")
        if history_rounds < 0:
            raise ConfigError(f"llm planner: history_rounds must be >= 0 (0 = the whole history; got {history_rounds})")
        style = style if style is not None else ("json" if structured else "paper")
        if style not in PROMPT_STYLES:
            raise ConfigError(f"llm planner: unknown prompt style '{style}'; valid: {', '.join(PROMPT_STYLES)}")
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
        self.style = style
        self.structured = style == "json"
        self.seed = seed
        self.history_rounds = history_rounds
        self.num_agents = num_agents
        self.context_tokens = context_tokens
        self.meeting_points = meeting_points    # show the others' meeting points too (AggregationConfig.meeting_points)
        self._plan_lock = threading.Lock()      # one plan at a time per robot
        self._count_lock = threading.Lock()
        self._counters = new_counters()
        self._first: tuple[str, str] | None = None
        self._recent: deque[tuple[str, str]] = deque(maxlen=history_rounds - 1 if history_rounds else None)

    # ------------------------------------------------------------------
    def counters(self) -> dict:
        """A snapshot of the counters (``new_counters`` layout)."""
        with self._count_lock:
            return copy.deepcopy(self._counters)

    def history(self) -> list[tuple[str, str]]:
        """The (user, assistant) exchanges remembered for the next prompt (empty without memory; the prompt may
        leave the oldest out to fit the context window, see ``_fit``)."""
        if self._first is None:
            return []
        return [self._first, *self._recent]

    def _fit(self, history: list[tuple[str, str]], reserve_chars: int) -> tuple[list[tuple[str, str]], int]:
        """The history that fits the context window (the first exchange always, then the most recent ones) and the
        number of exchanges left out."""
        budget = (self.context_tokens - self.max_tokens) * CHARS_PER_TOKEN - reserve_chars
        size = sum(len(u) + len(a) for u, a in history)
        dropped = 0
        while size > budget and len(history) - dropped > 1:
            u, a = history[1 + dropped]
            size -= len(u) + len(a)
            dropped += 1
        return ([history[0], *history[1 + dropped:]] if dropped else history), dropped

    def reset(self) -> None:
        """Forget the chat history (counters are kept: they describe the whole run)."""
        with self._plan_lock:
            self._first = None
            self._recent.clear()

    # ------------------------------------------------------------------
    def warm_up(self) -> bool:
        """Evaluate the prompt's fixed part (system prompt, tools, the task's sentences before the positions) into this
        robot's server slot before the run (issue 44): a round-0 request with placeholder positions and one token
        to generate. On a llama.cpp server its slot then keeps that prefix, and with a shared prefix
        (``consensus.llm.slots``) it is the primer every other slot starts from, so the first round evaluates only
        the positions. Sent only by the tools style (its positions come last; the other styles' prompts change
        earlier) to a llama.cpp server. False when not sent or it failed (logged: a warm-up changes no decision,
        only the first round's time)."""
        if self.style != "tools" or not getattr(self.client, "llama_cpp", False):
            return False
        n = max(1, (self.num_agents or 2) - 1)
        zero = np.zeros(self.dim)
        messages = build_messages(dim=self.dim, own=zero, neighbors=[zero] * n, round=0,
                                  personality=self.personality, num_agents=self.num_agents, style=self.style,
                                  meeting_points=(zero, [zero] * n) if self.meeting_points else None)
        try:
            self.client.complete(self._request(messages, n, f"robot_{self.robot_id}/warm_up", temperature=0.0,
                                               max_tokens=1))
        except Exception as exc:      # noqa: BLE001 - a warm-up must not stop a run: its first round is slower
            log.warning("robot %d: the LLM warm-up failed (%s); the first round evaluates the whole prompt",
                        self.robot_id, exc)
            return False
        return True

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
            c["history_truncated"] += int(result.extra.get("history_truncated", 0))
            c["tool_errors"] += int(result.extra.get("tool_errors", 0))
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
        history, dropped = [], 0
        if self.memory and self._first is not None:
            history, dropped = self._fit(self.history(), reserve_chars=2_000)
        mps = self._meeting_points(req, own, neighbors)
        messages = build_messages(dim=self.dim, own=own, neighbors=neighbors, round=req.round,
                                  personality=self.personality, history=history if self.memory else None,
                                  num_agents=self.num_agents, style=self.style, meeting_points=mps)
        user_text = messages[-1]["content"]
        tag = f"robot_{self.robot_id}/round_{req.round}"
        state = {"calls": 0, "failures": 0, "errors": [], "tool_errors": 0, "history_truncated": dropped}
        if self.style == "tools":
            tool_own, tool_nbs = (own, neighbors) if mps is None else mps
            return self._plan_tools(req, tool_own, tool_nbs, messages, user_text, tag, state)
        for attempt in range(self.parse_retries + 1):
            reply = self._ask(req, messages, tag, attempt, state)
            if isinstance(reply, PlanResult):
                return reply
            parsed = parse_position(reply.text, self.dim)
            if parsed.position is not None:
                return self._accept(parsed.position, parsed.reasoning, parsed.method, user_text, reply.text, state)
            self._failed(req, parsed.error, state)
            messages = [*messages, {"role": "assistant", "content": str(reply.text)[:MAX_REASONING_CHARS]},
                        {"role": "user", "content": retry_message(parsed.error, self.dim, self.style)}]
        return self._fallback("unparseable", f"no valid position after {state['calls']} replies: "
                              f"{state['errors'][-1]}", state)

    def _meeting_points(self, req: PlanRequest, own: np.ndarray, neighbors: list[np.ndarray]):
        """(own, neighbours') meeting points to show (``meeting_points`` on and the request carries them), else None;
        a meeting point that is missing or not finite is shown as the robot's position."""
        if not self.meeting_points or req.neighbor_meeting_points is None:
            return None

        def point(value, fallback):
            arr = None if value is None else np.asarray(value, dtype=float).reshape(-1)
            return arr if arr is not None and arr.shape == (self.dim,) and np.isfinite(arr).all() else fallback
        mps = list(req.neighbor_meeting_points)
        if len(mps) != len(neighbors):
            return None
        return point(req.own_meeting_point, own), [point(m, nb) for m, nb in zip(mps, neighbors)]

    def _request(self, messages: list[dict], neighbors: int, tag: str, *, temperature: float | None = None,
                 max_tokens: int | None = None) -> ChatRequest:
        """The one request of this planner's style (its schema, grammar and tools) for ``messages`` naming
        ``neighbors`` other robots: a round's (``_ask``), or the warm-up's (its own temperature and token cap)."""
        tools = self.style == "tools"
        return ChatRequest(
            messages=tuple(messages), model=self.model,
            temperature=self.temperature if temperature is None else temperature,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens,
            response_format=response_schema(self.dim) if self.style == "json" else None,
            grammar=(answer_grammar(self.dim) if self.style == "paper"
                     else tool_grammar(self.dim, neighbors) if tools else None),
            tools=tool_definitions(self.dim, self.meeting_points) if tools else None,
            tool_choice="auto" if tools else None, seed=self.seed, tag=tag)

    def _ask(self, req: PlanRequest, messages: list[dict], tag: str, attempt: int, state: dict):
        """One request of this plan: the reply, or the fallback PlanResult when the client failed."""
        request = self._request(messages, len(req.neighbors), tag if attempt == 0 else f"{tag}/retry_{attempt}")
        state["calls"] += 1
        try:
            return self.client.complete(request)
        except LLMError as exc:
            log.warning("robot %d round %d: LLM request failed: %s", self.robot_id, req.round, exc)
            return self._fallback("llm_error", f"LLM request failed: {exc}", state)
        except Exception as exc:  # a broken client must not take the robot down: hold the target
            log.exception("robot %d round %d: LLM client raised", self.robot_id, req.round)
            return self._fallback("client_error", f"LLM client error: {type(exc).__name__}: {exc}", state)

    def _failed(self, req: PlanRequest, error: str, state: dict) -> None:
        state["failures"] += 1
        state["errors"].append(error)
        log.info("robot %d round %d: unreadable reply (%s)", self.robot_id, req.round, error)

    # --- the tools style ----------------------------------------------------------------------------------------
    def _plan_tools(self, req: PlanRequest, own: np.ndarray, neighbors: list[np.ndarray], messages: list[dict],
                    user_text: str, tag: str, state: dict) -> PlanResult:
        seen = {"me": own, **dict(zip(robot_names(len(neighbors)), neighbors))}
        last_tool_error = ""
        for attempt in range(self.parse_retries + 2):
            reply = self._ask(req, messages, tag, attempt, state)
            if isinstance(reply, PlanResult):
                return reply
            calls = list(reply.tool_calls) or tool_calls_in_text(reply.text, _TOOL_NAMES)
            if not calls:
                parsed = parse_position(reply.text, self.dim)
                if parsed.position is not None:
                    return self._accept(parsed.position, parsed.reasoning, "text", user_text, reply.text, state)
                self._failed(req, "no tool call and " + parsed.error, state)
                messages = [*messages, {"role": "assistant", "content": str(reply.text)[:MAX_REASONING_CHARS]},
                            {"role": "user", "content": retry_message("no tool call", self.dim, self.style)}]
                continue
            results: list[dict] = []
            for call in calls[:4]:
                try:
                    kind, value = self._run_tool(call, seen)
                except ToolError as exc:
                    state["tool_errors"] += 1
                    last_tool_error = f"{call.get('name')}: {exc}"
                    results.append({"role": "tool", "tool_call_id": call.get("id", ""),
                                    "content": f"error: {exc}"})
                    continue
                if kind == "answer":
                    reasoning = f"{call['name']}({str(call.get('arguments', ''))[:200]})"
                    return self._accept(value, reasoning, "tool", user_text,
                                        f"Position: {format_position(value)}", state)
                results.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": value})
            messages = [*messages, assistant_tool_message(reply.text[:MAX_REASONING_CHARS], calls[:4]), *results]
        if last_tool_error:
            return self._fallback("tool_error", f"no valid tool answer after {state['calls']} replies: "
                                  f"{last_tool_error}", state)
        return self._fallback("unparseable", f"no valid position after {state['calls']} replies", state)

    def _run_tool(self, call: dict, seen: dict[str, np.ndarray]) -> tuple[str, object]:
        """("answer", target) or ("result", text) for one tool call; ``ToolError`` for a call it refuses."""
        name = call.get("name")
        try:
            args = tool_arguments(call)
        except ValueError as exc:
            raise ToolError(str(exc)) from None

        def robot(key: str) -> np.ndarray:
            value = args.get(key)
            if not isinstance(value, str) or value.strip() not in seen:
                raise ToolError(f"{key} must be one of {', '.join(seen)}")
            return seen[value.strip()]

        def number(key: str, lo: float = -MAX_ABS, hi: float = MAX_ABS) -> float:
            value = args.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ToolError(f"{key} must be a number")
            value = float(value)
            if not (np.isfinite(value) and lo <= value <= hi):
                raise ToolError(f"{key} must be a finite number in [{lo:g}, {hi:g}]")
            return value

        if name == "distance_to":
            return "result", format_number(float(np.linalg.norm(robot("robot") - seen["me"])))
        if name == "move_toward":
            fraction = number("fraction", 0.0, 1.0)
            return "answer", seen["me"] + fraction * (robot("robot") - seen["me"])
        if name == "move_to_centroid":
            names = args.get("robots", [])
            if names in (None, [], ""):
                names = list(seen)
            if not isinstance(names, list) or len(names) > 100:
                raise ToolError("robots must be a list of robot names")
            points = [_named(seen, n) for n in names]
            return "answer", np.mean(points, axis=0)
        if name == "move_to":
            return "answer", np.array([number(a) for a in ("x", "y")[:self.dim]])
        raise ToolError(f"unknown tool {name!r}")

    def _accept(self, target: np.ndarray, reasoning: str, method: str, user_text: str, reply: str,
                state: dict) -> PlanResult:
        clamped = False
        if self.geofence is not None:
            target, clamped = self.geofence.clamp(target)
        if self.memory:
            exchange = (user_text, reply[:MAX_HISTORY_REPLY_CHARS])
            if self._first is None:
                self._first = exchange
            else:
                self._recent.append(exchange)
        return PlanResult(meeting_point=np.asarray(target, dtype=float), reasoning=reasoning[:MAX_REASONING_CHARS],
                          llm_calls=state["calls"], clamped=clamped, extra=_extra(state, parse_method=method))

    @staticmethod
    def _fallback(reason: str, text: str, state: dict) -> PlanResult:
        return PlanResult(meeting_point=None, reasoning=text[:MAX_REASONING_CHARS], fallback=True,
                          fallback_reason=reason, llm_calls=state["calls"], extra=_extra(state))


def _extra(state: dict, **more) -> dict:
    return {"parse_failures": state["failures"], "parse_errors": state["errors"], "tool_errors": state["tool_errors"],
            "history_truncated": state["history_truncated"], **more}


def _named(seen: dict[str, np.ndarray], name: object) -> np.ndarray:
    if not isinstance(name, str) or name.strip() not in seen:
        raise ToolError(f"robots must name robots among {', '.join(seen)}")
    return seen[name.strip()]
