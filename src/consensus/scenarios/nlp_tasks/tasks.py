"""The three tasks behind one interface: prompts for a turn, the parser, the agreement key, the scorer and the
heuristic answer.

``TASKS[name]`` is a ``Task``:

* ``messages(item, ctx, cfg)``: the chat messages of an agent's turn (``consensus.decision.ProposeContext``): the
  first prompt, or the feedback prompt when the context carries earlier answers (``prompts`` says which);
* ``coordinator_messages(item, proposals, cfg)``: the wheel's prompt;
* ``parse(reply) -> prompts.Parsed``;
* ``key(value)``: what two answers must share to agree (decentralized consensus, majority vote, the coordinator's
  fallback): QA: the normalised answer (SQuAD normalisation of the ``[...]``, NA = ""); classification: the topic;
  summarisation: the normalised summary (lower case, no punctuation or articles), which differs between almost all
  summaries, so decentralized summarisation nearly always runs every turn and ends with a random pick (the paper's
  rule for text);
* ``score(item, value) -> {metric: value}``: ``METRICS[name]`` in Table 2's row order (QA: F1, instruction
  following; classification: accuracy; summarisation: ROUGE-1, ROUGE-2, ROUGE-L); a failed decision (None) scores 0;
* ``heuristic(item)``: the baseline answer; ``wrong(item, value, rng)``: a noisy agent's wrong answer.

Heuristics (no LLM; what the preset runs by default):

* QA: the context sentence sharing the most (lower-cased, stop-word-free) words with the question; the answer is the
  longest run of that sentence's words that are not question words, at most 6 words, trimmed of stop words at both
  ends; "NA" when no sentence shares a content word. The reply follows the item's formatting instruction
  (``Instruction.follow``). Wrong answer: a random span of another sentence, or the right answer breaking the
  instruction (``Instruction.violate``), with equal probability.
* Classification: a keyword count per topic over the article's lower-cased words (``KEYWORDS``), highest count
  wins, ties and no keyword -> the earlier topic in World, Sports, Business, Science/Technology. Wrong answer: one
  of the other three topics, uniformly.
* Summarisation: the lead sentence (XSum's classic LEAD-1 baseline), cut to 60 words. Wrong answer: another
  sentence of the document, uniformly.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from consensus.decision import ProposeContext
from consensus.scenarios.nlp_tasks import prompts as P
from consensus.scenarios.nlp_tasks.data import TOPICS, Item
from consensus.scenarios.nlp_tasks.instructions import BY_ID
from consensus.scenarios.nlp_tasks.scoring import ROUGE_TYPES, normalize_answer, rouge, squad_f1, topic_correct

METRICS = {"qa": ("f1", "instruction"), "classification": ("accuracy",), "summarization": ROUGE_TYPES}
METRIC_LABELS = {"f1": "F1 Score", "instruction": "Instruction Following", "accuracy": "Accuracy",
                 "rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L"}

_STOP = frozenset("""a an the of in on at to for from by with and or but is are was were be been being what which who
whom whose when where why how did do does done has have had this that these those it its as into than then there their
they he she his her him we you your i me my our not no can could would should will shall may might must also about
after before during over under between such only any some each other more most much many""".split())
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")
_SENT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“(])")

KEYWORDS = {
    "World": """iraq iraqi war president minister government election killed police military troops palestinian
        israel israeli un nuclear iran afghanistan attack bomb army rebels country leader prime officials
        people capital vote party talks peace korea china russia europe european embassy""".split(),
    "Sports": """game games team season win won victory coach players player league cup match sox yankees nfl nba
        olympic olympics championship tournament score scored final round sports football baseball basketball
        soccer tennis golf quarterback inning""".split(),
    "Business": """company companies shares stock stocks market markets profit sales oil prices price percent
        economy economic bank deal billion million quarter earnings investors dollar trade business firm corp
        inc growth rates fed retail""".split(),
    "Science/Technology": """software microsoft internet computer computers technology web google space nasa
        scientists science research study online users windows linux apple ibm intel wireless phone mobile
        digital network data security virus search site""".split(),
}


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text)


def sentences(text: str) -> list[str]:
    """The text split into sentences (after . ! ? followed by a capital, digit or quote; newlines split too)."""
    out = []
    for para in text.splitlines():
        out += [s.strip() for s in _SENT_RE.split(para) if s.strip()]
    return out or [text.strip()]


def _span(sentence: str, question_words: set[str], max_words: int = 6) -> str:
    """The longest run of words not in the question, trimmed of stop words, at most ``max_words``."""
    words = sentence.split()
    best: list[str] = []
    run: list[str] = []
    for w in words + [""]:
        core = w.strip(".,;:!?\"'()“”").lower()
        if w and core and core not in question_words:
            run.append(w.strip(".,;:!?\"“”()"))
            continue
        while run and run[0].lower() in _STOP:
            run.pop(0)
        while run and run[-1].lower() in _STOP:
            run.pop()
        if len(run) > len(best):
            best = run
        run = []
    return " ".join(best[:max_words])


def qa_heuristic_answer(item: Item) -> str:
    q = {w.lower() for w in _words(item.question)}
    content = q - _STOP
    best, best_overlap = "", 0
    for s in sentences(item.text):
        overlap = len(content & {w.lower() for w in _words(s)})
        if overlap > best_overlap:
            best, best_overlap = s, overlap
    if not best_overlap:
        return "NA"
    return _span(best, q) or "NA"


def classify_keywords(text: str) -> str:
    words = [w.lower() for w in _words(text)]
    counts = [sum(words.count(k) for k in KEYWORDS[t]) for t in TOPICS]
    return TOPICS[int(np.argmax(counts))]


def lead_sentence(text: str, max_words: int = 60) -> str:
    return " ".join(sentences(text)[0].split()[:max_words])


def _pick_other(options: Sequence[str], not_this: str, rng: np.random.Generator) -> str:
    others = [o for o in options if o != not_this] or list(options)
    return others[int(rng.integers(len(others)))]


@dataclass(frozen=True)
class Task:
    name: str
    parse: Callable[[Any], P.Parsed]
    key: Callable[[Any], Any]
    score: Callable[[Item, Any], dict]
    heuristic: Callable[[Item], Any]
    wrong: Callable[[Item, Any, np.random.Generator], Any]
    messages: Callable[[Item, ProposeContext, Any], list[dict]]
    coordinator_messages: Callable[[Item, Sequence[Any], Any], list[dict]]

    @property
    def metrics(self) -> tuple[str, ...]:
        return METRICS[self.name]


# --- QA --------------------------------------------------------------------------------------------------------------
def _qa_fields(item: Item, cfg) -> dict:
    return {"context": P.bounded(item.text, cfg.text_max_chars), "question": item.question,
            "instruction": BY_ID[item.instruction].text}


def _qa_messages(item: Item, ctx: ProposeContext, cfg) -> list[dict]:
    if ctx.coordinator_plan is not None:
        shown = [(ctx.turn, "Coordinator", ctx.coordinator_plan)]
    else:
        shown = P.feedback_items(ctx.history)
    if not shown:
        user = P.QA_PROMPT.format(**_qa_fields(item, cfg))
    else:
        answers = "\n".join(P.QA_FEEDBACK_ITEM.format(round=r, who=who, answer=P.shown(a, cfg.message_max_chars))
                            for r, who, a in shown)
        user = P.QA_FEEDBACK.format(**_qa_fields(item, cfg), answers=answers)
    return [{"role": "system", "content": P.QA_SYSTEM}, {"role": "user", "content": user}]


def _qa_coordinator(item: Item, proposals: Sequence[Any], cfg) -> list[dict]:
    answers = "\n".join(f"Agent {i + 1}'s Answer:\n{P.shown(a, cfg.message_max_chars)}"
                        for i, a in enumerate(proposals) if a is not None) or "(none)"
    return [{"role": "system", "content": P.QA_SYSTEM},
            {"role": "user", "content": P.QA_COORDINATOR.format(**_qa_fields(item, cfg), answers=answers)}]


def _qa_score(item: Item, value: Any) -> dict:
    if value is None:
        return {"f1": 0.0, "instruction": 0.0}
    return {"f1": squad_f1(P.qa_answer_text(value), item.answers),
            "instruction": float(BY_ID[item.instruction].check(value))}


def _qa_wrong(item: Item, value: Any, rng: np.random.Generator) -> str:
    instruction = BY_ID[item.instruction]
    if rng.random() < 0.5:
        return instruction.violate(P.qa_answer_text(value) or "NA")
    q = {w.lower() for w in _words(item.question)}
    spans = [s for s in (_span(s, q) for s in sentences(item.text)) if s] or ["NA"]
    return instruction.follow(_pick_other(spans, P.qa_answer_text(value), rng))


QA = Task(name="qa", parse=P.parse_qa, key=lambda v: normalize_answer(P.qa_answer_text(v)), score=_qa_score,
          heuristic=lambda item: BY_ID[item.instruction].follow(qa_heuristic_answer(item)), wrong=_qa_wrong,
          messages=_qa_messages, coordinator_messages=_qa_coordinator)


# --- classification ----------------------------------------------------------------------------------------------
def _cls_messages(item: Item, ctx: ProposeContext, cfg) -> list[dict]:
    article = P.bounded(item.text, cfg.text_max_chars)
    if ctx.coordinator_plan is not None:
        shown = [("Coordinator", ctx.coordinator_plan)]
    else:
        others = [j for j in range(len(ctx.others_previous) + 1) if j != ctx.agent]
        shown = [(f"Agent {j + 1}", a) for j, a in zip(others, ctx.others_previous) if a is not None]
    if not shown:
        return [{"role": "user", "content": P.CLS_PROMPT.format(article=article)}]
    feedback = P.others_line(shown, cfg.message_max_chars)
    return [{"role": "user", "content": P.CLS_FEEDBACK.format(article=article, feedback=feedback)}]


def _cls_coordinator(item: Item, proposals: Sequence[Any], cfg) -> list[dict]:
    feedback = P.others_line([(f"Agent {i + 1}", a) for i, a in enumerate(proposals)], cfg.message_max_chars)
    return [{"role": "user", "content": P.CLS_COORDINATOR.format(article=P.bounded(item.text, cfg.text_max_chars),
                                                                 feedback=feedback)}]


CLASSIFICATION = Task(
    name="classification", parse=P.parse_topic, key=lambda v: v,
    score=lambda item, v: {"accuracy": topic_correct(v, item.label)},
    heuristic=lambda item: classify_keywords(item.text),
    wrong=lambda item, v, rng: _pick_other(TOPICS, v, rng),
    messages=_cls_messages, coordinator_messages=_cls_coordinator)


# --- summarisation -----------------------------------------------------------------------------------------------
def _sum_messages(item: Item, ctx: ProposeContext, cfg) -> list[dict]:
    document = P.bounded(item.text, cfg.text_max_chars)
    if ctx.coordinator_plan is not None:
        shown = [(ctx.turn, "Coordinator", ctx.coordinator_plan)]
    else:
        shown = P.feedback_items(ctx.history)
    if not shown:
        user = P.SUM_PROMPT.format(document=document)
    else:
        summaries = "\n".join(P.SUM_FEEDBACK_ITEM.format(round=r, who=who, summary=P.shown(s, cfg.message_max_chars))
                              for r, who, s in shown)
        user = P.SUM_FEEDBACK.format(document=document, summaries=summaries)
    return [{"role": "system", "content": P.SUM_SYSTEM}, {"role": "user", "content": user}]


def _sum_coordinator(item: Item, proposals: Sequence[Any], cfg) -> list[dict]:
    summaries = "\n".join(f"Agent {i + 1}'s Summary: {P.shown(s, cfg.message_max_chars)}"
                          for i, s in enumerate(proposals) if s is not None) or "(none)"
    user = P.SUM_COORDINATOR.format(document=P.bounded(item.text, cfg.text_max_chars), summaries=summaries)
    return [{"role": "system", "content": P.SUM_SYSTEM}, {"role": "user", "content": user}]


SUMMARIZATION = Task(
    name="summarization", parse=P.parse_summary, key=normalize_answer,
    score=lambda item, v: rouge(v, item.reference), heuristic=lambda item: lead_sentence(item.text),
    wrong=lambda item, v, rng: _pick_other([lead_sentence(s) for s in sentences(item.text)], v, rng),
    messages=_sum_messages, coordinator_messages=_sum_coordinator)

TASKS = {t.name: t for t in (QA, CLASSIFICATION, SUMMARIZATION)}
