"""What a process's death does to a run is decided once, on the process spec (``ProcessSpec.death_rule``), for
``consensus run`` and ``ros2 launch`` alike."""
from __future__ import annotations

from consensus.runs.processes import (DEATH_RULES, EXPENDABLE, FINISHES, GOES_ON, NEEDED, ProcessSpec, robot_specs,
                                      writes_record)
from consensus.settings import RobotBaseConfig


def test_each_process_has_one_death_rule():
    assert ProcessSpec("recorder", "recorder", ends_run=True).death_rule == FINISHES
    assert ProcessSpec("bag_recorder", "bag_recorder").death_rule == GOES_ON
    assert ProcessSpec("sim", "sim").death_rule == NEEDED
    assert ProcessSpec("robot", "agent", namespace="robot_0", expendable=True).death_rule == EXPENDABLE
    assert sorted(DEATH_RULES) == sorted({FINISHES, GOES_ON, EXPENDABLE, NEEDED})


def test_a_robot_s_own_process_is_expendable_unless_it_is_the_only_robot():
    per_robot = robot_specs("robot", RobotBaseConfig(num_robots=3, single_process=False), {})
    assert [s.death_rule for s in per_robot] == [EXPENDABLE] * 3
    assert robot_specs("robot", RobotBaseConfig(num_robots=1, single_process=False), {})[0].death_rule == NEEDED
    assert robot_specs("robot", RobotBaseConfig(num_robots=3, single_process=True), {})[0].death_rule == NEEDED


def test_the_processes_that_write_the_record_get_the_grace_to_write_it():
    assert writes_record(ProcessSpec("recorder", "recorder", ends_run=True))
    assert writes_record(ProcessSpec("bag_recorder", "bag_recorder"))
    assert not writes_record(ProcessSpec("sim", "sim"))
