"""Paper 2, appendix D: the simple theoretical model of the consensus-diversity trade-off.

``model`` (D_opt, d̄, perf_score), ``study`` (the ``theory-model`` preset).
"""
from consensus.registry import Scenario, register

register(Scenario(name="theory", summary='Paper 2, appendix D', studies=("consensus.scenarios.theory.study",)))
