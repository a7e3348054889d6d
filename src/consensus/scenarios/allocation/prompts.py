"""Paper-3 resource-allocation prompts (appendix "Prompts"), as written or adapted to JSON output, and the parser.

Two prompt styles (``consensus.llm.styles``; the study's ``prompt_style``):

* ``paper`` (the default): the paper's prompts as written: the plan is a Python dict (``{'water': {'region1': 1,
  ...}, ...}``), "Think step-by-step" and "do not respond with JSON format" kept; no response schema. The reply is
  read by ``parse_allocation(..., style="paper")``: the LAST dict literal in the reply (the step-by-step text may
  come first) must be a plan with exactly the problem's names; anything else is off the template, which the study
  turns into the all-zero plan (the paper's failure rule) and counts.
* ``json``: the adaptation below (JSON example, "respond only with a JSON object", a ``response_format`` schema).

Templates (``json`` style), and how they map to the paper:

* ``ALLOCATION_PROMPT``: "Resource Allocation Prompt", verbatim except the output format: the paper's
  example is a Python dict and its last sentence says "do not respond with JSON format"; here the
  example is the same plan written as JSON and the sentence asks for a JSON object only, which a
  ``response_format`` JSON schema (``response_schema``) can enforce. ``{environment.resources}`` is
  rendered as ``{"water": 26, "food": 23}`` and ``{environment.regions}`` as
  ``{"region1": {"water": 8, "food": 6}, ...}``.
* ``FEEDBACK_PROMPT``: "Resource Allocation Prompt for agents with feedback", same adaptation;
  ``{previous plans}`` is one line per plan, ``Planner 2: {...}`` (decentralized with feedback: the
  other agents' plans of the previous turn) or ``Coordinator: {...}`` (spoke & wheel with feedback).
  A failed agent's plan is shown as the all-zero plan that replaced it (the paper's rule).
* ``COORDINATOR_PROMPT``: ours: the paper gives no prompt for the central agent of spoke & wheel;
  it lists the spokes' plans and asks for one combined plan in the same format.
* ``retry_message``: ours, the correction turn sent after an unreadable reply (only when retries > 0;
  the paper retried nothing: the failed agent's plan became all zeros).

The templates are ``str.format`` strings (the example's braces are doubled, as in the paper's own template).
Plans are shown with ``format_number`` (at most 2 decimals), as in the paper-1 prompts.

``parse_allocation(text, problem)`` never raises; it returns ``(allocation, "")`` or ``(None, reason)``.
It reads the first JSON object of the reply (code fences and surrounding prose are tolerated) or, if
there is none, the paper's own Python-dict format (``{'water': {'region1': 1, ...}, ...}``, read with
``ast.literal_eval``). Rejected (None), following the paper's failure rule and our bounds:

* no object, or not an object of objects; only the first ``MAX_TEXT_CHARS`` characters are read;
* a missing or an extra (hallucinated) resource or region, or one named twice. Names are compared
  after lower-casing; region keys may be written "region1", "Region 1", "region_1" or "1";
* an amount that is not a number (``bool`` and numeric strings included), NaN/inf, negative, or larger
  than the resource's whole available total (one region can never receive more than exists).

A plan whose amounts add up to more than a total is NOT rejected here: the scenario scales that
resource down (``consensus.scenarios.allocation.model.fit_to_totals``) and counts it.
"""
from __future__ import annotations

import ast
import math
import re
from numbers import Real
from typing import Any, Sequence

import numpy as np

from consensus.llm.parsing import format_number, json_objects
from consensus.scenarios.allocation.model import AllocationProblem

MAX_TEXT_CHARS = 20_000
_MAX_JSON_STARTS = 200
_FENCE_RE = re.compile(r"```[a-zA-Z]*")

_INSTRUCTIONS = (
    "Provide an allocation plan (dictionary) where each resource (e.g., 'water', 'food') is mapped to another "
    "(dictionary) region IDs and allocated amounts. Ensure allocations respect the total available resources and "
    "your goal is to meet all the demand or as much demand as possible.\n\n"
    "As an example, respond directly in the format:\n"
    '{{"water": {{"region1": 1, "region2": 5, "region3": 1}}, '
    '"food": {{"region1": 3, "region2": 3, "region3": 3}}}}.\n\n'
    "Think step-by-step, and ensure all the resources and regions are included in your response. Do not "
    "hallucinate additional regions or resources. Do not add any additional response and respond only with a "
    "JSON object in this format."
)

ALLOCATION_PROMPT = "Available resources: {resources}. Regions and their demands: {regions}.\n\n" + _INSTRUCTIONS

FEEDBACK_PROMPT = (
    "Available resources:\n{resources}.\nRegions and their demands:\n{regions}.\n\n"
    "These are proposed plans from other planners in previous rounds. Use these to the next plan if applicable\n\n"
    "{previous_plans}.\n\n" + _INSTRUCTIONS
)

COORDINATOR_PROMPT = (
    "Available resources: {resources}. Regions and their demands: {regions}.\n\n"
    "You are the central coordinator. These are the allocation plans proposed by {count} planners:\n\n"
    "{previous_plans}.\n\n"
    "Combine them into one final allocation plan. " + _INSTRUCTIONS
)


_INSTRUCTIONS_PAPER = (
    "Provide an allocation plan (dictionary) where each resource (e.g., 'water', 'food') is mapped to another "
    "(dictionary) region IDs and allocated amounts. Ensure allocations respect the total available resources and "
    "your goal is to meet all the demand or as much demand as possible.\n\n"
    "As an example, respond directly in the format:\n"
    "{{'water': {{'region1': 1, 'region2': 5, 'region3': 1}}, 'food': {{'region1': 3, 'region2': 3, "
    "'region3': 3}}}}.\n\n"
    "Think step-by-step, and ensure all the resources and regions are included in your response. Do not "
    "hallucinate additional regions or resources. Do not add any additional response and do not respond with JSON "
    "format."
)
ALLOCATION_PROMPT_PAPER = "Available resources: {resources}. Regions and their demands: {regions}.\n\n" + \
    _INSTRUCTIONS_PAPER
FEEDBACK_PROMPT_PAPER = (
    "Available resources:\n{resources}.\nRegions and their demands:\n{regions}.\n\n"
    "These are proposed plans from other planners in previous rounds. Use these to the next plan if applicable\n\n"
    "{previous_plans}.\n\n" + _INSTRUCTIONS_PAPER
)
COORDINATOR_PROMPT_PAPER = (
    "Available resources: {resources}. Regions and their demands: {regions}.\n\n"
    "You are the central coordinator. These are the allocation plans proposed by {count} planners:\n\n"
    "{previous_plans}.\n\n"
    "Combine them into one final allocation plan. " + _INSTRUCTIONS_PAPER
)
_PAPER = {"allocation": ALLOCATION_PROMPT_PAPER, "feedback": FEEDBACK_PROMPT_PAPER,
          "coordinator": COORDINATOR_PROMPT_PAPER}
_JSON = {"allocation": ALLOCATION_PROMPT, "feedback": FEEDBACK_PROMPT, "coordinator": COORDINATOR_PROMPT}


def _templates(style: str) -> dict[str, str]:
    if style not in ("paper", "json"):
        raise ValueError(f"allocation prompts: style must be paper or json (got {style!r})")
    return _PAPER if style == "paper" else _JSON


def _styled(text: str, style: str) -> str:
    """Dicts in the style's notation: JSON's double quotes, or the paper's Python single quotes."""
    return text.replace('"', "'") if style == "paper" else text


def _json_dict(items: Sequence[tuple[str, str]]) -> str:
    return "{" + ", ".join(f'"{k}": {v}' for k, v in items) + "}"


def format_resources(prob: AllocationProblem) -> str:
    return _json_dict([(r, format_number(t)) for r, t in zip(prob.resources, prob.totals)])


def format_regions(prob: AllocationProblem) -> str:
    return _json_dict([(region, _json_dict([(r, format_number(prob.demand[k, j]))
                                            for k, r in enumerate(prob.resources)]))
                       for j, region in enumerate(prob.regions)])


def format_plan(prob: AllocationProblem, plan: np.ndarray) -> str:
    """A plan as the JSON the agents are asked to write."""
    plan = np.asarray(plan, dtype=float)
    return _json_dict([(r, _json_dict([(region, format_number(plan[k, j])) for j, region in enumerate(prob.regions)]))
                       for k, r in enumerate(prob.resources)])


def _plan_lines(prob: AllocationProblem, labelled: Sequence[tuple[str, np.ndarray]]) -> str:
    return "\n".join(f"{label}: {format_plan(prob, plan)}" for label, plan in labelled)


def allocation_messages(prob: AllocationProblem, feedback: Sequence[tuple[str, np.ndarray]] = (),
                        style: str = "json") -> list[dict]:
    """The user turn of an agent: the plain prompt, or the feedback prompt when ``feedback`` lists
    (label, plan) pairs, e.g. ``[("Planner 2", plan), ("Coordinator", plan)]``."""
    t = _templates(style)
    fields = {"resources": _styled(format_resources(prob), style), "regions": _styled(format_regions(prob), style)}
    if feedback:
        text = t["feedback"].format(previous_plans=_styled(_plan_lines(prob, feedback), style), **fields)
    else:
        text = t["allocation"].format(**fields)
    return [{"role": "user", "content": text}]


def coordinator_messages(prob: AllocationProblem, plans: Sequence[np.ndarray | None],
                         style: str = "json") -> list[dict]:
    """The coordinator's user turn listing the valid spoke plans as ``Planner i`` (1-based agent index)."""
    labelled = [(f"Planner {i + 1}", p) for i, p in enumerate(plans) if p is not None]
    text = _templates(style)["coordinator"].format(
        resources=_styled(format_resources(prob), style), regions=_styled(format_regions(prob), style),
        count=len(labelled), previous_plans=_styled(_plan_lines(prob, labelled), style))
    return [{"role": "user", "content": text}]


def retry_message(error: str, style: str = "json") -> str:
    if style == "paper":
        return (f"Your reply could not be used ({error}). Respond with the allocation plan (dictionary) mapping every "
                "resource to every region ID and its allocated amount.")
    return (f"Your reply could not be used ({error}). Respond only with a JSON object mapping every resource to "
            "every region ID and its allocated amount.")


def response_schema(prob: AllocationProblem) -> dict:
    """OpenAI ``response_format``: {resource: {region: number}} with exactly the problem's names."""
    regions = {"type": "object", "properties": {region: {"type": "number"} for region in prob.regions},
               "required": list(prob.regions), "additionalProperties": False}
    return {
        "type": "json_schema",
        "json_schema": {
            "name": f"allocation_{len(prob.resources)}x{len(prob.regions)}",
            "strict": True,
            "schema": {"type": "object", "properties": {r: regions for r in prob.resources},
                       "required": list(prob.resources), "additionalProperties": False},
        },
    }


# --- parsing ---------------------------------------------------------------------------------------
def parse_allocation(text: Any, prob: AllocationProblem, style: str = "json") -> tuple[np.ndarray | None, str]:
    """(allocation of shape (resources, regions), "") or (None, why the reply was rejected); never raises.
    ``style="paper"`` reads the last dict literal of the reply (module docstring)."""
    try:
        obj = _last_dict(text) if style == "paper" else _find_object(text)
        if isinstance(obj, str):
            return None, obj
        return _to_array(obj, prob)
    except Exception as exc:  # a parser must not take an agent down
        return None, f"parser error: {type(exc).__name__}"


def _find_object(text: Any) -> dict | str:
    """The first dict in the reply, or an error string."""
    if not isinstance(text, str):
        return f"reply is not text ({type(text).__name__})"
    text = _FENCE_RE.sub("", text[:MAX_TEXT_CHARS])
    if "{" not in text:
        return "no object in the reply"
    obj = next(json_objects(text, _MAX_JSON_STARTS), None)
    if obj is not None:
        return obj
    first, last = text.find("{"), text.rfind("}")
    try:
        obj = ast.literal_eval(text[first:last + 1])     # the paper's Python-dict format
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return "no readable JSON object"
    return obj if isinstance(obj, dict) else "no readable JSON object"


def _last_dict(text: Any) -> dict | str:
    """The last top-level ``{...}`` of the reply that is a Python (or JSON) dict literal, or an error string."""
    if not isinstance(text, str):
        return f"reply is not text ({type(text).__name__})"
    text = text[:MAX_TEXT_CHARS]
    spans: list[tuple[int, int]] = []
    depth, start = 0, -1
    for k, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                start = k
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, k + 1))
    for a, b in reversed(spans[-_MAX_JSON_STARTS:]):
        try:
            obj = ast.literal_eval(text[a:b])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(obj, dict):
            return obj
    return "no dictionary in the reply (off the template)"


def _region_key(key: Any) -> str:
    name = re.sub(r"[^a-z0-9]", "", str(key).lower())
    return f"region{name}" if name.isdigit() else name


def _match(obj: dict, expected: Sequence[str], what: str, normalize) -> dict | str:
    """{expected name: value} or an error string (missing, extra or duplicate names)."""
    found: dict[str, Any] = {}
    for key, value in obj.items():
        name = normalize(key)
        if name in found:
            return f"{what} {name!r} given twice"
        found[name] = value
    missing = [n for n in expected if n not in found]
    extra = [str(k) for k in found if k not in expected]
    if missing:
        return f"missing {what}(s): {', '.join(missing)}"
    if extra:
        return f"unknown {what}(s): {', '.join(extra[:5])}"
    return found


def _to_array(obj: dict, prob: AllocationProblem) -> tuple[np.ndarray | None, str]:
    by_resource = _match(obj, prob.resources, "resource", lambda k: str(k).strip().lower())
    if isinstance(by_resource, str):
        return None, by_resource
    alloc = np.zeros(prob.shape)
    for r, resource in enumerate(prob.resources):
        row = by_resource[resource]
        if not isinstance(row, dict):
            return None, f"{resource}: expected an object of region amounts"
        by_region = _match(row, prob.regions, "region", _region_key)
        if isinstance(by_region, str):
            return None, f"{resource}: {by_region}"
        for j, region in enumerate(prob.regions):
            value = by_region[region]
            if isinstance(value, bool) or not isinstance(value, Real):
                return None, f"{resource}/{region}: not a number"
            try:
                value = float(value)
            except OverflowError:
                return None, f"{resource}/{region}: amount too large"
            if not math.isfinite(value) or value < 0:
                return None, f"{resource}/{region}: amount must be finite and >= 0"
            if value > prob.totals[r]:
                return None, (f"{resource}/{region}: {format_number(value)} exceeds the available total "
                              f"{format_number(prob.totals[r])}")
            alloc[r, j] = value
    return alloc, ""
