"""Import stand-in for the ROS 2 ``composition_interfaces`` message package - NOT the real one.

The PyPI ROS 2 Kilted wheels do not include ``composition_interfaces``, but ``launch_ros`` imports
``composition_interfaces.srv`` at start-up (``launch_ros.actions.load_composable_nodes``). This package only lets that
import succeed, so ``ros2 launch`` and every launch file made of plain ``Node`` actions work.

What it cannot do: composable nodes. ``LoadNode``, ``UnloadNode`` and ``ListNodes`` below are empty classes without
ROS type support, so ``ComposableNodeContainer`` / ``LoadComposableNodes`` fail when they create a service client.
With a ROS 2 install (apt, robostack) use its real ``composition_interfaces`` and do not install this.
"""
