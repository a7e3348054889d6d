"""Paper 2, scenario 2: information spread and manipulation (appendices B.2, C.2, F.3; Table 4).

Defenders fact-check nodes of a scale-free network while an adversary injects rumours. Modules: ``config``
(``InfoSpreadConfig``), ``network`` (the graph, node states, spread, adversary, reports), ``metrics`` (MS, CT, CD,
Jaccard deviation), ``prompts`` (F.3), ``agents`` (heuristic, random and LLM defenders), ``headless`` (the loop) and
``study`` (preset ``info-spread``). Every rule and every choice where the paper is silent: docs/info-spread.md.
"""
from consensus.registry import Scenario, register

register(Scenario(name="info-spread", summary="information spread and manipulation (paper 2, scenario 2)",
                  studies=("consensus.scenarios.info_spread.study",)))
