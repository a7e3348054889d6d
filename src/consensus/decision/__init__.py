"""Paper 3's aggregation layer: seven architectures that turn several agents' proposals into one decision.

See ``consensus.decision.architectures`` (the architectures, turns, failures) and
``consensus.decision.voting`` (majority vote, averaging, unanimity and the proposal kinds).
"""
from consensus.decision.architectures import (ARCHITECTURE_LABELS, ARCHITECTURES, DecisionOutcome,
                                                 Coordinator, ProposeContext, Proposer, decide)
from consensus.decision.voting import KINDS, average, default_agree, is_cell, majority_vote, unanimous

__all__ = ["ARCHITECTURES", "ARCHITECTURE_LABELS", "KINDS", "DecisionOutcome", "Coordinator", "ProposeContext",
           "Proposer", "decide", "average", "default_agree", "is_cell", "majority_vote", "unanimous"]
