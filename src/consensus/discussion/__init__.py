"""Paper 2's discussion protocol, generic over the scenario (Wu & Ito, section 3.1 and appendix C.4).

N agents talk in rounds. In a round each agent reads the observation (supplied by the scenario) and the other
agents' messages, then:

* **implicit** consensus: K discussion turns (message pass), then every agent decides its own action (action pass);
* **explicit** consensus: K discussion turns, then proposals aggregated by one of paper 3's strategies
  (``consensus.decision.decide``) and every agent adopts the collective action.

Modules:

* ``text``: untrusted text made safe for a prompt (cleaned, bounded, quoted inside data blocks);
* ``roles``: ``Role`` and the diversity levels (low / medium / high) of section 4.3;
* ``replies``: ``Reply`` (one agent answer with its counters), ``InboxMessage`` and the counter layout;
* ``agents``: ``DiscussionAgent`` (discuss / act / vote, the ``Proposer`` protocol) and ``ask_llm`` (one LLM
  decision with correction turns and a counted fallback);
* ``rounds``: the round protocol ``run_round`` (described there, once);
* ``baselines``: the baselines of section 4.4 and the study *conditions* (table columns) built on them;
* ``report``: the pieces of the paper's tables (Overall / Diversity / Volatility rows).

A scenario supplies the observation text, the action validator (its reply parser) and its heuristic policy; see
``consensus.scenarios.disaster``, ``info_spread`` and ``public_goods``.
"""
