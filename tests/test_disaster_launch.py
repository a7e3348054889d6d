"""launch/disaster.launch.py against the recording stand-ins of `launch`/`launch_ros` from test_launch_file.py (the
real packages are not on PyPI; with a ROS install the same file runs under `ros2 launch`)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from consensus.errors import ConfigError
from consensus.scenarios.disaster.headless import start_cells
from consensus.scenarios.disaster.config import load_disaster_config
from test_launch_file import DeclareLaunchArgument, Node, OpaqueFunction, RegisterEventHandler, _install_standins

ROOT = Path(__file__).resolve().parents[1]


def _launch(monkeypatch, **args):
    _install_standins(monkeypatch)
    spec = importlib.util.spec_from_file_location("disaster_launch", ROOT / "launch" / "disaster.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    entities = module.generate_launch_description().args[0]
    context = {e.args[0]: e.kwargs["default_value"] for e in entities if isinstance(e, DeclareLaunchArgument)}
    context.update({k: str(v) for k, v in args.items()})
    opaque = [e for e in entities if isinstance(e, OpaqueFunction)]
    assert len(opaque) == 1
    return opaque[0].kwargs["function"](context)


def _params(path) -> dict:
    return yaml.safe_load(Path(path).read_text())["/**"]["ros__parameters"]


def test_launch_arguments_reach_the_one_params_file_and_the_sim_starts_on_the_start_cells(monkeypatch, tmp_path):
    actions = _launch(monkeypatch, num_robots=4, planner="random", volatility="high", rounds=7, seed=5,
                      fleet="false", output_dir=tmp_path / "run")
    nodes = [a for a in actions if isinstance(a, Node)]
    assert [n.kwargs["executable"] for n in nodes] == ["sim", "drone", "drone", "drone", "drone", "disaster_grid",
                                                        "bag_recorder"]
    assert [n.kwargs["namespace"] for n in nodes if n.kwargs["executable"] == "drone"] == \
        ["robot_0", "robot_1", "robot_2", "robot_3"]
    assert {n.kwargs["name"] for n in nodes if n.kwargs["executable"] == "drone"} == {"agent"}   # /robot_i/agent
    assert [n.kwargs["parameters"][1]["robot_id"] for n in nodes if n.kwargs["executable"] == "drone"] == [0, 1, 2, 3]
    params_file = Path(nodes[0].kwargs["parameters"][0])
    assert all(Path(n.kwargs["parameters"][0]) == params_file for n in nodes)
    params = _params(params_file)
    assert (params["num_robots"], params["planner"], params["volatility"], params["rounds"], params["seed"]) == \
        (4, "random", "high", 7, 5)
    assert params["output_dir"] == str((tmp_path / "run").resolve())
    sim = nodes[0].kwargs["parameters"][1]
    cfg = load_disaster_config(params_file)
    centres = [(c + 0.5) * cfg.cell_size_m for cell in start_cells(cfg) for c in cell]
    assert sim["initial_positions"] == centres and sim.get("num_robots", params["num_robots"]) == 4
    assert sim["workspace"] == [0.0, 10.0, 0.0, 10.0]
    handlers = [a for a in actions if isinstance(a, RegisterEventHandler)]
    assert len(handlers) == 1 and handlers[0].args[0].kwargs["target_action"] is nodes[-2]   # the grid ends the run
    assert (tmp_path / "run" / "manifest.json").is_file()


def test_launch_llm_explicit_fleet_adds_server_and_aggregator(monkeypatch, tmp_path):
    actions = _launch(monkeypatch, planner="llm", llm_backend="embedded", mode="explicit",
                      strategy="spoke_wheel", output_dir=tmp_path / "run")
    exes = [a.kwargs["executable"] for a in actions if isinstance(a, Node)]
    assert exes == ["llm_server", "sim", "drone", "aggregator", "disaster_grid", "bag_recorder"]
    fleet = next(a for a in actions if isinstance(a, Node) and a.kwargs["executable"] == "drone")
    assert fleet.kwargs["name"] == "fleet" and fleet.kwargs["namespace"] is None
    params = _params(tmp_path / "run" / "params.yaml")
    assert params["llm_base_url"] == "http://127.0.0.1:18080/v1" and params["strategy"] == "spoke_wheel"


def test_single_llm_baseline_flies_one_drone_and_the_sim_one_robot(monkeypatch, tmp_path):
    actions = _launch(monkeypatch, planner="llm", llm_backend="openai", baseline="single_llm",
                      output_dir=tmp_path / "run")
    nodes = [a for a in actions if isinstance(a, Node)]
    assert [n.kwargs["executable"] for n in nodes] == ["sim", "drone", "disaster_grid", "bag_recorder"]  # no LLM server
    sim = nodes[0].kwargs["parameters"][1]
    assert sim["num_robots"] == 1 and len(sim["initial_positions"]) == 2      # one drone is a valid fleet


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
