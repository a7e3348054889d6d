"""The scenarios: one package each, registered with ``consensus.registry`` by its ``__init__``.

* ``aggregation`` - paper 1: LLM robots gather at one point (planner every ΔTp, controller every ΔTc);
* ``disaster``    - paper 2, scenario 1: drones respond to shifting disasters (implicit vs explicit consensus);
* ``allocation``  - paper 3: task allocation by seven decision architectures, reliability κ(τ) and AURC;
* ``theory``      - paper 2, appendix D: the consensus-diversity theory model.

Nothing is imported here: ``consensus.registry.scenarios()`` finds the packages by their folders.
"""
