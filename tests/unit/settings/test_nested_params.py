"""Parameters nested by group (issue 42): ``kp`` is the ROS parameter ``control.kp`` in every parameters file and node;
the CLI's ``--set`` and the launch arguments keep the fields' own names; flat names in a file are read for one
release with one warning; a parameter given both ways is refused."""
from __future__ import annotations

import logging

import pytest
import yaml

from consensus.errors import ConfigError
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.settings import ControlParams, field_group, load_flat, load_params_file, ros_names


def test_a_field_s_ros_name_is_its_group_and_its_name_without_the_group_s_prefix():
    names = ros_names(AggregationConfig)
    assert names["kp"] == "control.kp" and names["control_period_s"] == "control.period_s"
    assert names["llm_backend"] == "llm.backend" and names["planner_period_s"] == "planner.period_s"
    assert names["sim"] == "sim.backend" and names["single_process"] == "fleet.single_process"
    assert names["topology"] == "aggregation.topology"
    # a scenario that redeclares a group's field keeps it in the group: the same name in every scenario
    assert ros_names(DisasterConfig)["num_robots"] == names["num_robots"] == "fleet.num_robots"
    assert field_group(AggregationConfig, "deadband") == field_group(ControlParams, "deadband") == "control"
    for cls in (AggregationConfig, DisasterConfig):
        assert len(set(ros_names(cls).values())) == len(cls.field_names())


def test_the_run_s_params_file_is_nested_and_reads_back_as_the_same_config(tmp_path):
    cfg = AggregationConfig.from_dict({"kp": 2.5, "num_robots": 6, "llm_backend": "openai", "sim": "mujoco"})
    path = tmp_path / "params.yaml"
    path.write_text(cfg.to_ros_params_yaml())
    tree = yaml.safe_load(path.read_text())["/**"]["ros__parameters"]
    assert tree["control"]["kp"] == 2.5 and tree["fleet"]["num_robots"] == 6 and tree["sim"]["backend"] == "mujoco"
    assert not {k for k, v in tree.items() if not isinstance(v, dict)}          # nothing flat at the top
    assert load_params_file(path)["control.kp"] == 2.5
    assert load_flat(AggregationConfig, path) == cfg


class _Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_flat_file_is_read_with_one_warning_and_a_flag_still_names_the_field(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text("/**:\n  ros__parameters:\n    kp: 2.0\n    num_robots: 5\n")
    said, logger = _Said(), logging.getLogger("consensus.settings")
    # on the logger itself, enabled: another test's library may have configured logging (dictConfig disables the
    # loggers that exist then), which is not what this test is about
    was_disabled, logger.disabled = logger.disabled, False
    logger.addHandler(said)
    try:
        cfg = load_flat(AggregationConfig, old, v_max=0.5)
    finally:
        logger.removeHandler(said)
        logger.disabled = was_disabled
    assert (cfg.kp, cfg.num_robots, cfg.v_max) == (2.0, 5, 0.5)
    warned = [r.getMessage() for r in said.records]
    assert len(warned) == 1 and "kp -> control.kp" in warned[0] and "num_robots -> fleet.num_robots" in warned[0]
    new = tmp_path / "new.yaml"
    new.write_text("/**:\n  ros__parameters:\n    control:\n      kp: 2.0\n")
    assert load_flat(AggregationConfig, new, kp=3.0).kp == 3.0                   # the flag wins over the file


def test_a_parameter_given_both_ways_or_an_unknown_nested_one_is_one_clear_error(tmp_path):
    both = tmp_path / "both.yaml"
    both.write_text("/**:\n  ros__parameters:\n    kp: 2.0\n    control:\n      kp: 3.0\n")
    with pytest.raises(ConfigError, match="given twice"):
        load_flat(AggregationConfig, both)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("/**:\n  ros__parameters:\n    control:\n      kpp: 3.0\n")
    with pytest.raises(ConfigError, match="unknown parameter 'control.kpp'"):
        load_flat(AggregationConfig, unknown)
