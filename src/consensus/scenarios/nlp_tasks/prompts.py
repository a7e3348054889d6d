"""Paper 3's appendix prompts for question answering, topic classification and summarisation, our coordinator
prompts, and the reply parsers.

Word for word from the appendix ("Prompts"): ``QA_SYSTEM``, ``QA_PROMPT``, ``QA_FEEDBACK`` (+ ``QA_FEEDBACK_ITEM``,
"Loop over trial and agent_index"), ``CLS_PROMPT``, ``CLS_FEEDBACK``, ``SUM_SYSTEM``, ``SUM_PROMPT``, ``SUM_FEEDBACK``
(+ ``SUM_FEEDBACK_ITEM``). Where the extracted paper text runs lines together, the line breaks are ours. The
classification prompts have no system prompt (the paper gives none).

What the feedback shows (the paper's loops name the rounds and agents, not which):

* decentralized with feedback, QA and summarisation: every earlier round, every agent's answer ("Round r, Agent
  a's Answer:", 1-based), as the templates' loop over trial and agent_index; classification: the other agents'
  answers of the previous round, "Agent 2: Sports; Agent 3: World" (its template has one ``{Feedback}`` slot);
* spoke & wheel with feedback: the coordinator's last answer ("Round r, Coordinator's Answer:" / "Coordinator:
  World");
* a failed agent's answer is left out (it has none); plain decentralized shows nothing (its prompt has no slot).

Ours, because the paper gives none: the coordinator (wheel) prompts ``*_COORDINATOR``, the same task text followed by
the spokes' answers and a request for one final answer in the task's format.

Untrusted text: every answer shown to another agent or the coordinator is cleaned and cut by
``consensus.discussion.text.clean_text`` (control characters out, one line, at most ``message_max_chars``); the
context / article / document is cut to ``text_max_chars``. Replies that look like instructions are dropped by the
parsers (below), so they never reach another agent's prompt.

Parsers (``parse_qa``, ``parse_topic``, ``parse_summary``) never raise; they return ``Parsed(value, kind,
truncated, near_miss)``: ``value`` None is a fallback of ``kind``:

* ``empty``: nothing but whitespace;
* ``injection``: the reply contains instruction-like text ("ignore the instructions ...", "system prompt", "you are
  now", our data-block markers); it is dropped whole;
* ``nan_like``: the answer is nan / null / undefined / None (the text of a failed program, not an answer);
* ``off_format``: QA: no ``[...]``; classification: not exactly one of the four topics after trimming
  (``near_miss`` says whether quotes, a final period or the letter case were the only difference: the paper
  counts these wrong, and so do we);
* ``wrong_brackets``: QA: an answer in ``(...)``, ``{...}``, ``<...>`` or ``【...】`` but no ``[...]``;
* ``too_long``: QA: the bracketed answer is longer than ``QA_ANSWER_MAX_CHARS``.

A reply longer than ``REPLY_MAX_CHARS`` is cut before parsing (``truncated``). A QA value is the reply (newlines
kept: the instruction checkers read them, cut to ``QA_REPLY_MAX_CHARS``); its answer is the first ``[...]``, and
"NA" (the paper's "answer NA", any case, "N/A") is the empty answer SQuAD scores unanswerable questions with. A
summary is the reply on one line with a leading "Summary:" and enclosing quotes removed, cut to
``SUMMARY_MAX_CHARS``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from consensus.discussion.text import clean_text
from consensus.scenarios.nlp_tasks.data import TOPICS
from consensus.scenarios.nlp_tasks.instructions import BRACKET_RE
from consensus.scenarios.nlp_tasks.scoring import normalize_answer

# --- the paper's prompts (appendix), word for word --------------------------------------------------------------
QA_SYSTEM = (
    "You are an intelligent assistant that answers questions only based on the knowledge provided by the user. "
    "Answer in one or several words or a phrase, as short as possible, in brackets []. There could be additional "
    "requests from the user shown as \"Additional Instruction\". Please make sure to follow those instructions. It "
    "is possible that the context does not have the information needed to answer the question. In that case, "
    "answer NA. We don't need a period at the end of the answer. There could be other assistants working on the "
    "same task, and they may have different opinions. Please check their answers if provided, and use them to make "
    "your final answer better. You don't have to use others' answers if you don't agree with them.\n\n"
    "* Example\n\n"
    "Context: Tokyo, Japan's capital, blends tradition and modernity with landmarks like Meiji Shrine and Tokyo "
    "Skytree, world-class cuisine, and neighborhoods like Shibuya and Asakusa.\n\n"
    "Question: What city is Japan's capital?\n\n"
    "Additional Instruction: Add some explanations in less than 15 words.\n\n"
    "Answer: [Tokyo] Tokyo is the capital of Japan and it blends tradition and modernity.")
QA_PROMPT = "Context: {context} Question: {question}. Additional Instruction: {instruction}. Answer:"
QA_FEEDBACK = ("Context: {context} Question: {question}. Additional Instruction: {instruction}.\n\n"
               "These are proposed answers from other assistants in previous rounds. Use these in the next answer if "
               "applicable:\n\n{answers}\n\nAnswer:")
QA_FEEDBACK_ITEM = "Round {round}, {who}'s Answer:\n{answer}"

CLS_PROMPT = ("Classify the following news article into one of these topics: World, Sports, Business, "
              "Science/Technology.\n\nArticle: {article}\n\n"
              "Respond with only the topic name (e.g., \"World\"). Do not add additional explanations or responses.")
CLS_FEEDBACK = ("Classify the following news article into one of these topics: World, Sports, Business, "
                "Science/Technology.\n\nArticle: {article}\n\n"
                "Previous suggestions and feedback from other agents: {feedback}\n\n"
                "Based on this feedback and the given article, refine your classification. Respond with only the "
                "topic name (e.g., \"World\"). Do not add additional explanations or responses.")

SUM_SYSTEM = (
    "You are a professional writer who is able to summarize a given document in one short sentence. Make it concise "
    "but informative. There could be other writers working on the same summarization task, and they may have "
    "different opinions. Please check their answers if provided, and use it to make your final summarization "
    "better, if needed. You don't have to use others' answers if you don't agree with them.\n\n"
    "* Example\n\n"
    "Document: The Central Bank announced a 0.5% increase in interest rates, bringing the benchmark rate to 5.5%, "
    "the highest level in over a decade. The decision aims to curb persistently high inflation, which remains above "
    "the target of 2%. Economists warn that higher borrowing costs may slow consumer spending and business "
    "investments, potentially impacting economic growth. However, Central Bank Governor Lisa Martinez emphasized "
    "that controlling inflation is crucial to stabilizing the economy in the long term. Financial markets responded "
    "with mixed reactions, as stock indices dropped while bond yields rose. Analysts expect further rate hikes if "
    "inflation does not show signs of easing in the coming months.\n\n"
    "Summary: The Central Bank raised interest rates to 5.5% to tackle inflation, sparking concerns over potential "
    "economic slowdown.")
SUM_PROMPT = "Document: {document} Summary:"
SUM_FEEDBACK = ("Document: {document}\n\n"
                "These are proposed summaries from other assistants in previous rounds. Use these in the next summary "
                "if applicable:\n\n{summaries}\n\nSummary:")
SUM_FEEDBACK_ITEM = "Round {round}, {who}'s Summary: {summary}"

# --- ours: the central agent of spoke & wheel --------------------------------------------------------------------
QA_COORDINATOR = ("Context: {context} Question: {question}. Additional Instruction: {instruction}.\n\n"
                  "You are the coordinator. These are the answers of the assistants working on this question:\n\n"
                  "{answers}\n\nCombine them into one final answer, in brackets [], following the Additional "
                  "Instruction.\n\nAnswer:")
CLS_COORDINATOR = ("Classify the following news article into one of these topics: World, Sports, Business, "
                   "Science/Technology.\n\nArticle: {article}\n\n"
                   "You are the coordinator. Classifications proposed by the agents: {feedback}\n\n"
                   "Based on these proposals and the given article, decide the final classification. Respond with "
                   "only the topic name (e.g., \"World\"). Do not add additional explanations or responses.")
SUM_COORDINATOR = ("Document: {document}\n\n"
                   "You are the coordinator. These are the summaries of the writers working on this document:\n\n"
                   "{summaries}\n\nCombine them into one final summary of the document in one short sentence.\n\n"
                   "Summary:")

# --- parsing -------------------------------------------------------------------------------------------------------
REPLY_MAX_CHARS = 8000
QA_REPLY_MAX_CHARS = 1000
QA_ANSWER_MAX_CHARS = 200
SUMMARY_MAX_CHARS = 600
FALLBACK_KINDS = ("empty", "injection", "nan_like", "off_format", "wrong_brackets", "too_long")
_INJECTION_RE = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b[^\n]{0,60}?\b(?:instructions?|prompts?|rules|directions)\b"
    r"|\bsystem prompt\b|\byou are now\b|\bnew instructions?\b|<<<|>>>", re.IGNORECASE)
_NAN = {"nan", "null", "undefined", "none", "nil"}
_WRONG_BRACKETS_RE = re.compile(r"\([^()\n]{1,200}\)|\{[^{}\n]{1,200}\}|<[^<>\n]{1,200}>|【[^】\n]{1,200}】")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff]")
_SUMMARY_PREFIX_RE = re.compile(r"^\s*\**\s*summary\s*\**\s*:\s*\**\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Parsed:
    value: Any                  # the agent's answer (None: a fallback)
    kind: str = ""              # the fallback's kind (FALLBACK_KINDS), "" when value is set
    truncated: bool = False     # the reply was longer than REPLY_MAX_CHARS and was cut
    near_miss: bool = False     # classification: off by quotes, a final period or the case only


def _prepare(reply: Any) -> tuple[str, bool]:
    text = "" if reply is None else str(reply)
    return text[:REPLY_MAX_CHARS], len(text) > REPLY_MAX_CHARS


def _common(text: str, truncated: bool) -> Parsed | None:
    if not text.strip():
        return Parsed(None, "empty", truncated)
    if _INJECTION_RE.search(text):
        return Parsed(None, "injection", truncated)
    return None


def _is_nan(text: str) -> bool:
    return text.strip().strip("\"'`.*[]").lower() in _NAN


def parse_qa(reply: Any) -> Parsed:
    text, cut = _prepare(reply)
    early = _common(text, cut)
    if early is not None:
        return early
    text = _CONTROL_RE.sub(" ", text).strip()[:QA_REPLY_MAX_CHARS]
    m = BRACKET_RE.search(text)
    if m is None:
        return Parsed(None, "wrong_brackets" if _WRONG_BRACKETS_RE.search(text) else "off_format", cut)
    inside = m.group(1).strip()
    if len(inside) > QA_ANSWER_MAX_CHARS:
        return Parsed(None, "too_long", cut)
    if inside and _is_nan(inside):
        return Parsed(None, "nan_like", cut)
    return Parsed(text, "", cut)


def qa_answer_text(value: str | None) -> str:
    """The answer of a parsed QA reply: the first ``[...]``; "NA" (any case, N/A) -> "" (unanswerable)."""
    if not value:
        return ""
    m = BRACKET_RE.search(value)
    inside = m.group(1).strip() if m else ""
    return "" if normalize_answer(inside) == "na" else inside


def parse_topic(reply: Any) -> Parsed:
    text, cut = _prepare(reply)
    early = _common(text, cut)
    if early is not None:
        return early
    answer = text.strip()
    if answer in TOPICS:
        return Parsed(answer, "", cut)
    loose = answer.strip("\"'`*.").strip().lower()
    near = loose in {t.lower() for t in TOPICS}
    return Parsed(None, "nan_like" if _is_nan(answer) else "off_format", cut, near_miss=near)


def parse_summary(reply: Any) -> Parsed:
    text, cut = _prepare(reply)
    early = _common(text, cut)
    if early is not None:
        return early
    summary, _ = clean_text(_SUMMARY_PREFIX_RE.sub("", text), REPLY_MAX_CHARS)
    summary = summary.strip().strip("\"“”").strip()
    if not summary:
        return Parsed(None, "empty", cut)
    if _is_nan(summary):
        return Parsed(None, "nan_like", cut)
    if len(summary) > SUMMARY_MAX_CHARS:
        summary, cut = clean_text(summary, SUMMARY_MAX_CHARS)[0], True
    return Parsed(summary, "", cut)


# --- rendering -----------------------------------------------------------------------------------------------------
def shown(text: Any, max_chars: int) -> str:
    """An answer as another agent sees it: one line, control characters removed, at most ``max_chars``."""
    return clean_text(text, max_chars)[0]


def bounded(text: str, max_chars: int) -> str:
    """Dataset text cut to ``max_chars`` (newlines kept; control characters removed)."""
    text = _CONTROL_RE.sub(" ", text)
    return text if len(text) <= max_chars else text[:max_chars - 1].rstrip() + "…"


def feedback_items(history: Sequence[Sequence[Any]]) -> list[tuple[int, str, Any]]:
    """(round, who, answer) of every valid answer of the earlier rounds (rounds and agents 1-based)."""
    return [(r + 1, f"Agent {a + 1}", ans) for r, turn in enumerate(history) for a, ans in enumerate(turn)
            if ans is not None]


def others_line(answers: Sequence[tuple[str, Any]], max_chars: int) -> str:
    """``"Agent 2: Sports; Agent 3: World"`` (valid answers only; "(none)" if there is none)."""
    parts = [f"{who}: {shown(ans, max_chars)}" for who, ans in answers if ans is not None]
    return "; ".join(parts) or "(none)"
