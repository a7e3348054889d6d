"""Scorers of paper 3's NLP tasks: SQuAD F1, exact topic match, ROUGE-1/2/L F1.

* ``squad_f1(prediction, golds)``: the official SQuAD 2.0 script (``evaluate-v2.0.py``: ``normalize_answer``,
  ``get_tokens``, ``compute_f1``, ``get_raw_scores``): answers are normalised (lower case, punctuation removed,
  the articles a/an/the removed, whitespace collapsed) and compared as bags of tokens; F1 = 2PR/(P+R) with
  P = common/len(prediction), R = common/len(gold). When either side has no token the score is 1 if both are
  empty, else 0. The score of a question is the MAX over its gold answers; gold answers that normalise to nothing
  are dropped and an unanswerable question (no gold answer left) has the one gold answer "" (so only an empty
  prediction scores 1). The paper's agents answer "NA" when the context has no answer: ``qa_answer_text`` turns
  that into the empty answer before scoring (``consensus.scenarios.nlp_tasks.prompts``).
* ``topic_correct(answer, gold)``: 1 when ``answer`` (already trimmed by the parser) is exactly ``gold``, else 0
  (paper: "any output text that is not an exact match to one of the four topic classes is considered to be an
  incorrect classification").
* ``rouge(prediction, reference)``: ROUGE-1, ROUGE-2 and ROUGE-L F-measures from Google's ``rouge-score``
  (PyPI ``rouge-score``, extra ``studies``): ``RougeScorer(["rouge1", "rouge2", "rougeL"],
  use_stemmer=True)``, everything else at its defaults (its tokenizer: lower case, non-alphanumerics -> spaces;
  Porter stemming of tokens longer than 3 characters; ``rougeL`` = sentence-level LCS, no summary splitting).
  ``use_stemmer`` is False in rouge-score's own default; True is what summarisation papers report and what the
  original ROUGE-1.5.5 ``-m`` flag did. The paper does not say.
"""
from __future__ import annotations

import collections
import re
import string
from functools import lru_cache
from typing import Sequence

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD's ``normalize_answer``: lower case, no punctuation, no articles, single spaces."""
    s = "".join(ch for ch in str(s).lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES_RE.sub(" ", s).split())


def _tokens(s: str) -> list[str]:
    return normalize_answer(s).split() if s else []


def f1_single(gold: str, prediction: str) -> float:
    """SQuAD's ``compute_f1`` for one gold answer."""
    gold_toks, pred_toks = _tokens(gold), _tokens(prediction)
    if not gold_toks or not pred_toks:
        return float(gold_toks == pred_toks)
    same = sum((collections.Counter(gold_toks) & collections.Counter(pred_toks)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_toks), same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def exact_single(gold: str, prediction: str) -> float:
    """SQuAD's ``compute_exact``."""
    return float(normalize_answer(gold) == normalize_answer(prediction))


def gold_answers(answers: Sequence[str]) -> list[str]:
    """The gold answers SQuAD scores against: those that normalise to something, or [""] (unanswerable)."""
    golds = [a for a in answers if normalize_answer(a)]
    return golds or [""]


def squad_f1(prediction: str, answers: Sequence[str]) -> float:
    """Max F1 of ``prediction`` over the gold ``answers`` (empty list = unanswerable question)."""
    return max(f1_single(g, prediction) for g in gold_answers(answers))


def squad_exact(prediction: str, answers: Sequence[str]) -> float:
    return max(exact_single(g, prediction) for g in gold_answers(answers))


def topic_correct(answer: str | None, gold: str) -> float:
    return float(answer is not None and answer == gold)


@lru_cache(maxsize=1)
def _rouge_scorer():
    from consensus.extras import require

    rouge_scorer = require("rouge_score.rouge_scorer", "paper 3's summarisation metric (ROUGE)")
    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)


def rouge(prediction: str | None, reference: str) -> dict[str, float]:
    """ROUGE-1/2/L F1 of ``prediction`` against ``reference`` (module docstring); None scores 0."""
    if not prediction:
        return {k: 0.0 for k in ROUGE_TYPES}
    scores = _rouge_scorer().score(reference, prediction)     # rouge-score's order: (target, prediction)
    return {k: float(scores[k].fmeasure) for k in ROUGE_TYPES}


def token_f1(a: str, b: str) -> float:
    """Symmetric bag-of-tokens F1 after SQuAD normalisation (the heuristic coordinators' similarity)."""
    return f1_single(a, b)
