"""Launch actions from process specs, shared by ``launch/aggregation.launch.py`` and ``launch/disaster.launch.py``.

``launch`` and ``launch_ros`` come with a ROS 2 install (they are not on PyPI), so they are imported only when a
launch file calls this.
"""
from __future__ import annotations

from pathlib import Path

from consensus.runs.processes import ProcessSpec


def node_actions(specs: list[ProcessSpec], params_file: Path) -> list:
    """One ``launch_ros.actions.Node`` per spec (the run's parameters file, then the spec's own parameters); the
    whole launch shuts down when the process marked ``ends_run`` exits."""
    from launch.actions import EmitEvent, RegisterEventHandler
    from launch.event_handlers import OnProcessExit
    from launch.events import Shutdown
    from launch_ros.actions import Node

    actions = []
    for spec in specs:
        node = Node(
            package="consensus",
            executable=spec.executable,
            name=spec.name,
            namespace=spec.namespace or None,
            parameters=[str(params_file), spec.params],
            output="screen",
            emulate_tty=True,
        )
        actions.append(node)
        if spec.ends_run:
            actions.append(RegisterEventHandler(OnProcessExit(
                target_action=node,
                on_exit=[EmitEvent(event=Shutdown(reason=f"{spec.name} finished the run"))])))
    return actions
