"""Run-time settings of a robot process against the checks and the reach made at launch, in every scenario whose
robots run the kernel's robot node (the aggregation's robots, a disaster run's drones, the naming game's robots)."""
from __future__ import annotations

import pytest

from consensus.scenarios.aggregation.config import load_config


def _cfg(**kw):
    base = dict(num_robots=4, collision_avoidance="cbf", planner="average", seed=5)
    base.update(kw)
    return load_config(None, **base)


def _scenario_cfg(scenario: str, **kw):
    """The config a robot process of ``scenario`` reads (each scenario's own class: only the aggregation's has a
    ``robots_file``)."""
    if scenario == "disaster":
        from consensus.scenarios.disaster.config import load_disaster_config
        return load_disaster_config(None, num_robots=4, collision_avoidance="cbf", seed=5, **kw)
    if scenario == "naming_game":
        from consensus.scenarios.naming_game.fleet_game import RobotsGameConfig
        return RobotsGameConfig.from_dict(dict(num_robots=4, collision_avoidance="cbf", seed=5, **kw))
    return _cfg(**kw)


@pytest.mark.ros
@pytest.mark.parametrize("scenario, fleet", [("aggregation", False), ("aggregation", True), ("disaster", False),
                                             ("naming_game", False)])
def test_no_run_time_change_may_outrun_the_checks_and_the_reach_made_at_launch(ros, scenario, fleet):
    """The plausibility checks judge the robots' speed by the launch ``v_max``: a faster one is refused at run time.
    With one process per robot the relay computed its reach at launch: a lower ``w_max``, which moves a unicycle's
    filtered point further ahead, is refused there (a fleet process computes its nearby sets itself). The same holds
    for the robot processes of every scenario (a disaster run's drones, the naming game's robots), whose configs have
    no robots file (a CI run's drones once all died of that at start, and the run waited for them)."""
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from consensus.ros.fleet import _runtime_settings

    unicycle = scenario != "disaster"            # a disaster run's drones fly as single integrators
    cfg = _scenario_cfg(scenario, single_process=fleet, v_max=1.0, w_max=2.0,
                        kinematics="unicycle" if unicycle else "single_integrator")
    node = Node("agent_under_test")
    try:
        on_set = _runtime_settings(node, cfg, [])
        faster = on_set([Parameter("control.v_max", value=2.0)])
        assert not faster.successful and "launch value 1" in faster.reason
        slower_turns = on_set([Parameter("control.w_max", value=1.0)])
        assert slower_turns.successful is (fleet or not unicycle)
        if not slower_turns.successful:
            assert "reach" in slower_turns.reason
        assert on_set([Parameter("control.v_max", value=0.5)]).successful
    finally:
        node.destroy_node()
