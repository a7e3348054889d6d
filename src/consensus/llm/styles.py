"""Prompt styles shared by every LLM agent (``prompt_style`` in ``consensus.settings.LLMParams``) and what they need
from the LLM layer.

* ``paper``: the paper's own wording and free format: the agent reasons freely (no cap beyond ``max_tokens``) and
  ends with the paper's answer line. On a llama.cpp server the request carries a GBNF grammar (``free_then``) that
  lets the model write anything and then forces the answer line; elsewhere the reply is parsed leniently.
* ``json``: a strict JSON schema (``response_format``), for endpoints that need it.
* ``tools``: OpenAI tool calling: the agent is offered tools and answers by calling one. Small local models often
  write the call as text (``{"name": ..., "arguments": {...}}``, in a code fence or ``<tool_call>`` tags) instead of
  the API's ``tool_calls``; ``tool_calls_in_text`` reads those.

Scenarios keep their own prompt texts and tools; this module holds only what they share.
"""
from __future__ import annotations

import json
import re
from typing import Any

from consensus.llm.parsing import json_objects

PROMPT_STYLES = ("paper", "json", "tools")

# --- GBNF -----------------------------------------------------------------------------------------------------------
#: a number as the paper's answers write it (sign, digits, optional decimals); the same in GBNF and as a regex
GBNF_NUMBER = 'num ::= "-"? [0-9]{1,7} ("." [0-9]{1,6})?'
REGEX_NUMBER = r"-?[0-9]{1,7}(?:\.[0-9]{1,6})?"


def free_then(answer: str, rules: str = "") -> str:
    """A GBNF grammar: any text (free reasoning, newlines included), then ``answer`` (a GBNF expression) and the end of
    the reply. ``rules`` are further GBNF rules the answer uses (one per line)."""
    lines = [f"root ::= free {answer} ws", r"free ::= [^\x00]*", r'ws ::= [ \t\n]{0,4}']
    if rules:
        lines.append(rules.strip())
    return "\n".join(lines) + "\n"


# --- tool calls written as text ---------------------------------------------------------------------------------------
_TOOL_TAG_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
MAX_TOOL_CALLS = 8


def tool_calls_in_text(text: Any, names: set[str] | frozenset[str]) -> list[dict]:
    """Tool calls a model wrote in its text: JSON objects ``{"name": <one of names>, "arguments": {...}}`` (also
    ``"parameters"``), in ``<tool_call>`` tags, code fences or plain. Returns ``[{"id", "name", "arguments"}]`` with the
    arguments as a JSON string, like the API's ``tool_calls``; at most ``MAX_TOOL_CALLS``."""
    if not isinstance(text, str) or "{" not in text:
        return []
    calls: list[dict] = []
    chunks = _TOOL_TAG_RE.findall(text) or [text]
    for chunk in chunks:
        for obj in json_objects(chunk, max_starts=50):
            name = obj.get("name")
            if not isinstance(name, str) or name not in names:
                continue
            args = obj.get("arguments", obj.get("parameters", {}))
            if isinstance(args, str):
                arguments = args
            else:
                try:
                    arguments = json.dumps(args)
                except (TypeError, ValueError):
                    arguments = "null"
            calls.append({"id": f"text_{len(calls)}", "name": name, "arguments": arguments})
            if len(calls) >= MAX_TOOL_CALLS:
                return calls
    return calls


def tool_arguments(call: dict) -> dict:
    """The arguments of a tool call as a dict; ``ValueError`` (with a short reason) when they are not a JSON object."""
    raw = call.get("arguments", "")
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or len(raw) > 4_000:
        raise ValueError("arguments must be a JSON object of at most 4000 characters")
    try:
        args = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError):
        raise ValueError("arguments are not valid JSON") from None
    if not isinstance(args, dict):
        raise ValueError("arguments must be a JSON object")
    return args


def assistant_tool_message(text: str, calls: list[dict]) -> dict:
    """The assistant turn that carries ``calls`` (sent back with the tool results)."""
    return {"role": "assistant", "content": text or "",
            "tool_calls": [{"id": c["id"], "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]}
