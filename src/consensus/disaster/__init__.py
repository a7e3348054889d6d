"""Paper 2, scenario 1: the closed-loop dynamic disaster-response environment.

Submodules (imported on demand, nothing is imported here):

- ``environment``: grid, disasters, volatility presets, containment, rewards and penalties (``DisasterEnv``);
- ``reports``: the seeded textual situation report of every round, with contradictory/incomplete items;
- ``metrics``: coverage rate, misallocation penalty, response delay, net reward and action deviation.

The exact rules and formulas are in each module docstring and in ``docs/disaster.md``.
"""
