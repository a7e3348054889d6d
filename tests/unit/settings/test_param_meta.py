"""A config field's meaning, bounds, unit and runtime flag live in one place, its metadata (``settings.param``; issue
30, part 3): the ROS descriptors, the CLI's and launch arguments' help, validation and docs/parameters.md come from
there. ``python tests/unit/settings/test_param_meta.py --write`` regenerates docs/parameters.md's tables."""
from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from consensus.errors import ConfigError
from consensus.settings import (ControlParams, FlatParams, RobotBaseConfig, field_help, field_meta, param,
                                parameter_table, runtime_fields)

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "parameters.md"
TABLE = re.compile(r"<!-- parameters: (?P<name>\w+) -->\n(?P<body>.*?)\n<!-- end parameters -->", re.S)


def documented_classes() -> list[type]:
    """Every group and config class of the package that declares fields (each scenario package's ``config``
    module, and the configs its registered scenarios name), groups first."""
    import importlib
    import pkgutil

    import consensus.scenarios
    from consensus import registry

    roots = [sc.config_cls for sc in registry.scenarios().values() if sc.config_cls is not None]
    for info in pkgutil.iter_modules(consensus.scenarios.__path__):
        try:
            module = importlib.import_module(f"consensus.scenarios.{info.name}.config")
        except ModuleNotFoundError:
            continue
        roots += [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, FlatParams)
                  and v.__module__ == module.__name__]
    seen: dict[type, None] = {}
    for root in roots:
        for klass in reversed(root.__mro__):
            if dataclasses.is_dataclass(klass) and vars(klass).get("__annotations__") and klass is not FlatParams:
                seen.setdefault(klass, None)
    import inspect

    kernel = sorted((k for k in seen if not k.__module__.startswith("consensus.scenarios.")),
                    key=lambda k: (k.__module__ != "consensus.settings", inspect.getsourcelines(k)[1]))
    return kernel + [k for k in seen if k not in kernel]


def test_docs_parameter_tables_are_the_generated_ones():
    found = {m["name"]: m["body"] for m in TABLE.finditer(DOC.read_text(encoding="utf-8"))}
    classes = documented_classes()
    assert set(found) == {k.__name__ for k in classes}, \
        "docs/parameters.md: python tests/unit/settings/test_param_meta.py --write"
    for klass in classes:
        assert found[klass.__name__] == parameter_table(klass), \
            f"docs/parameters.md: the table of {klass.__name__} is stale " \
            f"(python tests/unit/settings/test_param_meta.py --write)"


def test_a_redeclared_default_keeps_the_group_s_doc_bounds_and_unit_and_its_own_doc_wins():
    from consensus.scenarios.aggregation.config import AggregationConfig
    from consensus.scenarios.disaster.config import DisasterConfig

    base, agg = field_meta(ControlParams)["deadband"], field_meta(AggregationConfig)["deadband"]
    assert AggregationConfig().deadband == 0.005 != ControlParams().deadband
    assert agg == base and base["bounds"] == (0.0, 10.0) and base["unit"] == "m" and base["runtime"]
    with pytest.raises(ConfigError, match=r"deadband must be in \[0, 10\]"):
        AggregationConfig.from_dict({"deadband": 11.0})
    assert field_meta(DisasterConfig)["num_robots"]["doc"] == "N drones"            # its own doc wins...
    assert field_meta(DisasterConfig)["num_robots"]["bounds"] == (1, 1000)          # ... the group's bounds stay


def test_the_flag_and_the_launch_argument_say_what_the_metadata_says(capsys):
    from consensus.cli import build_parser
    from consensus.runs.launch_file import launch_arguments
    from consensus.scenarios.aggregation.config import AggregationConfig

    assert field_help(AggregationConfig, "v_max") == "speed limit [m/s]"
    for name in ("settle_s", "duration_s", "planner", "topology"):
        assert launch_arguments("aggregation")[name] == field_help(AggregationConfig, name)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "aggregation", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for name in ("settle_s", "duration_s", "num_robots", "llm_model"):        # a flag without its own help
        assert " ".join(field_help(AggregationConfig, name).split()) in shown, name


@pytest.mark.ros
def test_a_node_s_descriptor_carries_the_doc_the_unit_the_range_and_the_runtime_flag(ros):
    from consensus.ros.params import config_descriptors

    desc = config_descriptors(RobotBaseConfig, runtime_fields(RobotBaseConfig))
    assert desc["v_max"].description.startswith("speed limit [m/s] (changeable")
    assert not desc["v_max"].read_only and desc["planner_period_s"].read_only
    assert desc["v_max"].floating_point_range[0].to_value == 100.0
    assert desc["num_robots"].integer_range[0].to_value == 1000


def test_runtime_fields_are_the_ones_marked_and_the_bounds_come_before_the_group_checks():
    assert runtime_fields(RobotBaseConfig) == ("kp", "v_max", "w_max", "deadband")
    # control_period_s = 0 would divide by zero in the cbf_gamma check: the bound refuses it first, by name
    with pytest.raises(ConfigError, match=r"control_period_s must be in \[0.001, 10\] \(got 0.0\)"):
        RobotBaseConfig.from_dict({"control_period_s": 0.0})
    with pytest.raises(ConfigError, match=r"cbf_gamma must be at most 1 / control_period_s"):
        RobotBaseConfig.from_dict({"control_period_s": 1.0, "cbf_gamma": 2.0})


def test_param_copies_a_list_default_and_a_new_group_s_field_is_documented_checked_and_shown():
    @dataclass
    class SpacingParams:
        spacing_m: float = param(1.0, "distance between neighbours", bounds=(0.01, 100.0), unit="m")
        offsets: list[float] = param([0.0, 1.0], "per-robot offsets")

    @dataclass
    class Demo(FlatParams, SpacingParams):
        pass

    a, b = Demo(), Demo()
    a.offsets.append(2.0)
    assert b.offsets == [0.0, 1.0]
    assert Demo.field_ranges() == {"spacing_m": (0.01, 100.0)}
    with pytest.raises(ConfigError, match=r"spacing_m must be in \[0.01, 100\]"):
        Demo.from_dict({"spacing_m": 0.0})
    assert "| `spacing_m` | `spacing.spacing_m` | float | `1.0` | [0.01, 100] | m | distance between neighbours |" in \
        parameter_table(SpacingParams)


def write() -> None:
    text = DOC.read_text(encoding="utf-8")
    tables = {k.__name__: parameter_table(k) for k in documented_classes()}
    missing = set(tables) - {m["name"] for m in TABLE.finditer(text)}
    if missing:
        sys.exit(f"docs/parameters.md: add a section with <!-- parameters: NAME --> for {sorted(missing)}")
    DOC.write_text(TABLE.sub(lambda m: f"<!-- parameters: {m['name']} -->\n{tables[m['name']]}\n"
                                       f"<!-- end parameters -->", text), encoding="utf-8")


if __name__ == "__main__":
    if "--write" in sys.argv:
        write()
