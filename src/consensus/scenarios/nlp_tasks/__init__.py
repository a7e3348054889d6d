"""Paper 3's NLP tasks: question answering (SQuAD 2.0), topic classification (AG News) and summarisation (XSum)
decided by ``consensus.decision``'s architectures; reliability κ(τ) and AURC (docs/paper3.md).

``config`` (``NLPTaskConfig``), ``data`` (loaders, seeded sampling), ``instructions`` (QA formatting instructions and
their checkers), ``scoring`` (SQuAD F1, exact topic, ROUGE), ``prompts`` (the appendix prompts, ours for the
coordinator, the reply parsers), ``tasks`` (the three tasks behind one interface, heuristics), ``agents`` (LLM and
heuristic agents and coordinators) and ``study`` (presets ``qa-reliability``, ``classification-reliability``,
``summarization-reliability``).
"""
from consensus.registry import Scenario, register

register(Scenario(name="nlp-tasks", summary="Paper 3: QA, topic classification and summarisation reliability",
                  studies=("consensus.scenarios.nlp_tasks.study",)))
