"""The formatting instructions added to each QA question (paper 3: "randomly selected from pre-set instructions ...
designed to be easy to be evaluated with a hard-coded evaluation method"; the paper does not list them).

Our fixed list, one drawn per question with the item seed (``draw_instruction``). Each has the text shown after
"Additional Instruction:" (the paper's template adds the final period), a checker (``check(reply) -> bool``, on the
whole reply as the agent wrote it, newlines kept, the answer in its ``[...]``), and for the heuristic agents and the
tests a way to follow it and a way to break it:

================= ===================================================================== ===========================
id                text                                                                  passes when
================= ===================================================================== ===========================
short_explanation Add some explanations in less than 15 words                           1-14 words after the ``]``
answer_only       Give only the answer in brackets, with nothing before or after it     the reply is ``[...]`` alone
uppercase_answer  Write the answer inside the brackets in capital letters               bracket text == its upper case
lowercase_all     Write your whole response in lowercase letters                        has a letter, no upper case
end_with_done     End your response with the word "Done"                                last word (minus . ! ) Done
confidence        After the answer, state your confidence as a percentage in the form   "Confidence: N%" after the
                  "Confidence: 80%"                                                     ``]``, N in 0..100
two_reasons       After the answer, give exactly two short reasons, each on its own     exactly two lines after the
                  line starting with "- "                                               ``]`` start with "- "
no_commas         Do not use any commas in your response                                non-empty, no ","
word_limit        Use at most 10 words in your whole response                           1-10 words in all
================= ===================================================================== ===========================

The first is the paper's own example (its system prompt). A reply without a ``[...]`` answer fails every checker
that looks at the text after the answer (``short_explanation``, ``answer_only``, ``uppercase_answer``,
``confidence``, ``two_reasons``); "bracket" means the first ``[...]`` of the reply (``BRACKET_RE``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

BRACKET_RE = re.compile(r"\[([^\[\]\n]*)\]")
_CONFIDENCE_RE = re.compile(r"Confidence:\s*(\d{1,3})\s*%")


def _split(reply: str) -> tuple[str | None, str]:
    """(text inside the first [...], text after it) or (None, "")."""
    m = BRACKET_RE.search(reply)
    return (m.group(1), reply[m.end():]) if m else (None, "")


def _short_explanation(reply: str) -> bool:
    inside, after = _split(reply)
    return inside is not None and 1 <= len(after.split()) < 15


def _answer_only(reply: str) -> bool:
    return BRACKET_RE.fullmatch(reply.strip()) is not None


def _uppercase_answer(reply: str) -> bool:
    inside, _ = _split(reply)
    return inside is not None and bool(inside.strip()) and inside == inside.upper()


def _lowercase_all(reply: str) -> bool:
    return any(c.isalpha() for c in reply) and reply == reply.lower()


def _end_with_done(reply: str) -> bool:
    words = reply.split()
    return len(words) >= 2 and words[-1].rstrip(".!") == "Done"


def _confidence(reply: str) -> bool:
    inside, after = _split(reply)
    m = _CONFIDENCE_RE.search(after) if inside is not None else None
    return m is not None and 0 <= int(m.group(1)) <= 100


def _two_reasons(reply: str) -> bool:
    inside, after = _split(reply)
    return inside is not None and sum(line.strip().startswith("- ") for line in after.splitlines()) == 2


def _no_commas(reply: str) -> bool:
    return bool(reply.strip()) and "," not in reply


def _word_limit(reply: str) -> bool:
    return 1 <= len(reply.split()) <= 10


_WHY = "It is stated in the context"
_LONG_WHY = ("The context says so in the sentence that mentions it, and nothing else in the passage points to any "
             "other answer at all")


@dataclass(frozen=True)
class Instruction:
    id: str
    text: str
    check: Callable[[str], bool]
    follow: Callable[[str], str]      # answer -> a reply that passes
    violate: Callable[[str], str]     # answer -> a reply that fails


INSTRUCTIONS: tuple[Instruction, ...] = (
    Instruction("short_explanation", "Add some explanations in less than 15 words", _short_explanation,
                lambda a: f"[{a}] {_WHY}.", lambda a: f"[{a}] {_LONG_WHY}."),
    Instruction("answer_only", "Give only the answer in brackets, with nothing before or after it", _answer_only,
                lambda a: f"[{a}]", lambda a: f"[{a}] {_WHY}."),
    Instruction("uppercase_answer", "Write the answer inside the brackets in capital letters", _uppercase_answer,
                lambda a: f"[{a.upper()}]", lambda a: f"[{a.lower()}]"),
    Instruction("lowercase_all", "Write your whole response in lowercase letters", _lowercase_all,
                lambda a: f"[{a}] {_WHY}.".lower(), lambda a: f"[{a}] {_WHY}."),
    Instruction("end_with_done", 'End your response with the word "Done"', _end_with_done,
                lambda a: f"[{a}] Done", lambda a: f"[{a}]"),
    Instruction("confidence", 'After the answer, state your confidence as a percentage in the form "Confidence: 80%"',
                _confidence, lambda a: f"[{a}] Confidence: 80%", lambda a: f"[{a}] I am fairly sure."),
    Instruction("two_reasons", 'After the answer, give exactly two short reasons, each on its own line starting with '
                '"- "', _two_reasons, lambda a: f"[{a}]\n- {_WHY}\n- It answers the question",
                lambda a: f"[{a}]\n- {_WHY}"),
    Instruction("no_commas", "Do not use any commas in your response", _no_commas,
                lambda a: f"[{a.replace(',', '')}] {_WHY}.", lambda a: f"[{a}] Yes, {_WHY.lower()}."),
    Instruction("word_limit", "Use at most 10 words in your whole response", _word_limit,
                lambda a: f"[{' '.join(a.split()[:9])}]", lambda a: f"[{a}] {_LONG_WHY}."),
)
BY_ID = {i.id: i for i in INSTRUCTIONS}


def draw_instruction(rng: np.random.Generator) -> Instruction:
    return INSTRUCTIONS[int(rng.integers(len(INSTRUCTIONS)))]
