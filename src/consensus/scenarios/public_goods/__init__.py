"""Paper 2, scenario 3: dynamic public-goods provision (appendices B.3, C.3, F.4; Table 5).

Modules: ``config`` (``PublicGoodsConfig``), ``game`` (threshold, benefit, payoffs, rumour reports), ``metrics`` (PR,
TW, FD, deviation), ``prompts`` (F.4), ``agents`` (heuristic, random and LLM contributors), ``headless`` and ``study``
(preset ``public-goods``). Every rule and every choice where the paper is silent: docs/public-goods.md.
"""
from consensus.registry import Scenario, register

register(Scenario(name="public-goods", summary="dynamic public-goods provision (paper 2, scenario 3)",
                  studies=("consensus.scenarios.public_goods.study",)))
