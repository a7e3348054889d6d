"""The shared flat-parameter config machinery (consensus.scenarios.aggregation.config.FlatParams) for both scenarios."""
from __future__ import annotations

import pytest

from consensus.scenarios.aggregation.config import AggregationConfig, load_config
from consensus.settings import parse_set_args
from consensus.scenarios.disaster.config import DisasterConfig, load_disaster_config
from consensus.errors import ConfigError


def test_parse_set_args_keeps_values_as_text_and_rejects_malformed_items():
    assert parse_set_args(["seed=3", " kp = 1.5", "model=a=b"]) == {"seed": "3", "kp": " 1.5", "model": "a=b"}
    for bad in ("seed", "=3", " =3"):
        with pytest.raises(ConfigError, match="KEY=VALUE"):
            parse_set_args([bad])


@pytest.mark.parametrize("loader,field", [(load_config, "num_robots"), (load_disaster_config, "num_robots")])
def test_a_bad_value_in_a_file_names_the_file_and_the_field(tmp_path, loader, field):
    path = tmp_path / "bad.yaml"
    path.write_text(f"/**:\n  ros__parameters:\n    {field}: 0\n")
    with pytest.raises(ConfigError, match=rf"{path}: .*{field}"):
        loader(path)
    with pytest.raises(ConfigError, match=r"config: unknown parameter 'seeds' \(did you mean seed\?\)"):
        loader(None, seeds=1)


def test_replace_keeps_the_class_and_validates():
    d = load_disaster_config(None).replace(num_robots=5)
    assert isinstance(d, DisasterConfig) and d.num_robots == 5
    a = load_config(None).replace(num_robots=7)
    assert isinstance(a, AggregationConfig) and a.num_robots == 7
    with pytest.raises(ConfigError):
        d.replace(num_robots=0)
    assert "num_robots: 5" in d.to_ros_params_yaml()
