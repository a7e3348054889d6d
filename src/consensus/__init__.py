"""consensus: LLM-planned multi-robot consensus for ROS 2.

A kernel (``settings``, ``registry``, ``cli``, ``llm``, ``control``, ``graphs``, ``metrics``, ``decision``,
``experiments``, ``runs``, ``ros``) and one package per scenario under ``consensus.scenarios`` that registers
itself with ``consensus.registry``. The kernel never imports a scenario; rclpy is imported only by ``ros/`` modules
(checked by the import contracts in ``.importlinter``). Map: docs/architecture.md.
"""

__version__ = "0.1.0"
