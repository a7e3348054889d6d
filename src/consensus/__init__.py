"""consensus: LLM-planned multi-robot consensus for ROS 2.

The package is split into a ROS-free core (graphs, control, planners, prompts,
llm, metrics, scenarios, runs) and thin rclpy wrappers under ``consensus.ros``.
Nothing outside ``consensus.ros`` may import rclpy.
"""

__version__ = "0.1.0"
