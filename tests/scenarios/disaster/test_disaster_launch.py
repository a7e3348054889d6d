"""launch/disaster.launch.py as the real ``launch`` reads it (its OpaqueFunction run in a real LaunchContext,
nothing started; tests/support/ros2_tools.py). Running it to the end under ``ros2 launch``:
tests/system/test_ros2_tools.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from consensus.errors import ConfigError
from consensus.scenarios.disaster.headless import start_cells
from consensus.scenarios.disaster.config import load_disaster_config
from support.ros2_tools import launch_actions, node_info
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.settings import params_file_fields

pytestmark = pytest.mark.needs("ros2_launch")


def _launch(monkeypatch, **args):
    from launch_ros.actions import Node

    actions = launch_actions("disaster.launch.py", monkeypatch, **args)
    return actions, [node_info(a) for a in actions if isinstance(a, Node)]


def _params(path) -> dict:
    return params_file_fields(path, DisasterConfig)


def test_launch_arguments_reach_the_one_params_file_and_the_sim_starts_on_the_start_cells(monkeypatch, tmp_path):
    from launch.actions import RegisterEventHandler

    actions, nodes = _launch(monkeypatch, num_robots=4, planner="random", volatility="high", rounds=7, seed=5,
                             single_process="false", output_dir=tmp_path / "run")
    assert [n["executable"] for n in nodes] == ["sim", "drone", "drone", "drone", "drone", "disaster_grid",
                                                "bag_recorder"]
    assert [n["name"] for n in nodes if n["executable"] == "drone"] == [f"/robot_{i}/agent" for i in range(4)]
    assert [n["params"]["robot_id"] for n in nodes if n["executable"] == "drone"] == [0, 1, 2, 3]
    params_file = Path(nodes[0]["params_file"])
    assert all(Path(n["params_file"]) == params_file for n in nodes)
    params = _params(params_file)
    assert (params["num_robots"], params["planner"], params["volatility"], params["rounds"], params["seed"]) == \
        (4, "random", "high", 7, 5)
    assert params["output_dir"] == str((tmp_path / "run").resolve())
    sim = nodes[0]["params"]
    cfg = load_disaster_config(params_file)
    centres = [(c + 0.5) * cfg.cell_size_m for cell in start_cells(cfg) for c in cell]
    assert sim["sim.initial_positions"] == centres and sim["fleet"]["num_robots"] == 4    # (the file's groups)
    assert sim["world.workspace"] == [0.0, 10.0, 0.0, 10.0]
    handlers = [a for a in actions if isinstance(a, RegisterEventHandler)]
    # the grid ends the run; the sim's death ends it with an error; a drone may die, the last one's death ends it
    assert len(handlers) == 2 + 4
    assert (tmp_path / "run" / "manifest.json").is_file()


def test_launch_llm_explicit_fleet_adds_server_and_aggregator(monkeypatch, tmp_path):
    _, nodes = _launch(monkeypatch, planner="llm", llm_backend="embedded", mode="explicit",
                       strategy="spoke_wheel", output_dir=tmp_path / "run")
    assert [n["executable"] for n in nodes] == ["llm_server", "sim", "drone", "aggregator", "disaster_grid",
                                                "bag_recorder"]
    fleet = next(n for n in nodes if n["executable"] == "drone")
    assert fleet["name"] == "/fleet" and fleet["namespace"] == ""
    params = _params(tmp_path / "run" / "params.yaml")
    assert params["llm_base_url"] == "http://127.0.0.1:18080/v1" and params["strategy"] == "spoke_wheel"


def test_single_llm_baseline_flies_one_drone_and_the_sim_one_robot(monkeypatch, tmp_path):
    _, nodes = _launch(monkeypatch, planner="llm", llm_backend="openai", baseline="single_llm",
                       output_dir=tmp_path / "run")
    assert [n["executable"] for n in nodes] == ["sim", "drone", "disaster_grid", "bag_recorder"]   # no LLM server
    sim = nodes[0]["params"]
    assert sim["fleet.num_robots"] == 1 and len(sim["sim.initial_positions"]) == 2      # one drone is a valid fleet


@pytest.mark.parametrize("args, message", [
    (dict(num_robots=0), "num_robots must be in"),
    (dict(out="elsewhere"), "unknown launch argument"),             # the old name: refused, not ignored
    (dict(mode="explicit", strategy="single"), "unknown strategy 'single'"),
    (dict(volatility="extreme"), "unknown volatility 'extreme'"),
])
def test_launch_refuses_bad_arguments_before_starting_anything(monkeypatch, tmp_path, args, message):
    with pytest.raises(ConfigError, match=message):
        _launch(monkeypatch, output_dir=tmp_path / "run", **args)
    assert not (tmp_path / "run").exists()
