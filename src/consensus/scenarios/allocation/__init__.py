"""Paper 3: task allocation decided by seven architectures (``consensus.decision``); reliability κ(τ) and AURC.

``model`` (task tables, S(R), best allocation), ``prompts``, ``agents`` (LLM and classical allocators,
coordinators), ``study`` (the ``allocation-reliability`` preset).
"""
from consensus.registry import Scenario, register

register(Scenario(name="allocation", summary='Paper 3', studies=("consensus.scenarios.allocation.study",)))
