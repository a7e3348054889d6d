"""launch/aggregation.launch.py as the real ``launch`` reads it (its OpaqueFunction run in a real LaunchContext,
nothing started): what no process list shows, e.g. the embedded server that needs the model. Running it to the
end under ``ros2 launch`` is tests/system/test_ros2_tools.py's job."""
from __future__ import annotations

from pathlib import Path

import pytest

from consensus.errors import ConfigError
from support.ros2_tools import launch_actions, node_info
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.scenarios.naming_game.fleet_game import RobotsGameConfig
from consensus.settings import params_file_fields

pytestmark = pytest.mark.needs("ros2_launch")


def _launch(monkeypatch, **args):
    from launch_ros.actions import Node

    actions = launch_actions("aggregation.launch.py", monkeypatch, **args)
    return actions, [node_info(a) for a in actions if isinstance(a, Node)]


def test_launch_starts_the_runner_nodes_with_one_merged_params_file(monkeypatch, tmp_path):
    from launch.actions import RegisterEventHandler

    actions, nodes = _launch(monkeypatch, num_robots=3, planner="average", topology="ring", single_process="false",
                             output_dir=tmp_path / "run")
    assert [n["executable"] for n in nodes] == ["sim", "topology", "robot", "robot", "robot", "recorder",
                                                "bag_recorder"]
    assert [n["name"] for n in nodes if n["executable"] == "robot"] == \
        ["/robot_0/agent", "/robot_1/agent", "/robot_2/agent"]
    params_file = Path(nodes[0]["params_file"])
    params = params_file_fields(params_file, AggregationConfig)
    assert params["num_robots"] == 3 and params["topology"] == "ring" and params["planner"] == "average"
    assert all(Path(n["params_file"]) == params_file for n in nodes)
    assert [n["params"]["robot_id"] for n in nodes if n["executable"] == "robot"] == [0, 1, 2]
    handlers = [a for a in actions if isinstance(a, RegisterEventHandler)]
    # the recorder ends the run; the sim's or the topology node's death ends it with an error (as consensus run);
    # a robot's own process (single_process:=false) may die, but the last one's death ends the run (one handler each:
    # the behaviour under the real ros2 launch is tests/ros/test_lost_robot.py's); the bag recorder may die
    assert len(handlers) == 3 + 3
    assert (tmp_path / "run" / "manifest.json").is_file()


def test_launch_embedded_backend_adds_the_llm_server(monkeypatch, tmp_path):
    _, nodes = _launch(monkeypatch, planner="llm", llm_backend="embedded", output_dir=tmp_path / "run")
    exes = [n["executable"] for n in nodes]
    assert exes == ["llm_server", "sim", "topology", "robot", "recorder", "bag_recorder"]
    params = params_file_fields((tmp_path / "run" / "params.yaml"), AggregationConfig)
    assert params["llm_base_url"] == "http://127.0.0.1:18080/v1"


def test_launch_refuses_bad_arguments_before_starting_anything(monkeypatch, tmp_path):
    with pytest.raises(ConfigError, match="num_robots must be at least 2"):
        _launch(monkeypatch, num_robots=1, output_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_launch_with_a_robots_map_drives_the_mapped_robots_without_the_builtin_sim(monkeypatch, tmp_path):
    root = Path(__file__).resolve().parents[3]
    _, nodes = _launch(monkeypatch, robots_file=root / "config" / "robots_example.yaml", planner="average",
                       dry_run="true", output_dir=tmp_path / "run")
    exes = [n["executable"] for n in nodes]
    assert "sim" not in exes and exes[0] == "topology"
    params = params_file_fields((tmp_path / "run" / "params.yaml"), AggregationConfig)
    assert params["sim"] == "none" and params["dry_run"] is True and params["num_robots"] == 4
    assert Path(params["robots_file"]).is_absolute()


def test_launch_argument_foxglove_reaches_the_recorder_and_the_manifest(monkeypatch, tmp_path):
    import json

    _, nodes = _launch(monkeypatch, planner="average", foxglove=18765, output_dir=tmp_path / "run")
    params = params_file_fields((tmp_path / "run" / "params.yaml"), AggregationConfig)
    assert params["foxglove"] == 18765 and params["foxglove_host"] == "127.0.0.1"
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["config"]["foxglove"] == 18765
    _, nodes = _launch(monkeypatch, planner="average", foxglove="", output_dir=tmp_path / "off")
    assert params_file_fields((tmp_path / "off" / "params.yaml"), AggregationConfig)["foxglove"] == 0


def test_the_naming_game_robots_launch_counts_robots_and_caps_population_rounds(monkeypatch, tmp_path):
    """The fleet's game: ``num_robots`` (the fleet group's count, the same launch argument as every robot launch
    file) and ``max_population_rounds``; the old ``max_rounds`` (a robot base's planning rounds elsewhere) is refused
    naming the new one, before anything starts."""
    from launch_ros.actions import Node

    config = Path(__file__).resolve().parents[3] / "config" / "naming_game_robots.yaml"    # this tree's file
    with pytest.raises(ConfigError, match="launch argument max_rounds is now called max_population_rounds"):
        launch_actions("naming_game_robots.launch.py", monkeypatch, config=config, max_rounds=3,
                       output_dir=tmp_path / "old")
    assert not (tmp_path / "old").exists()
    with pytest.raises(ConfigError, match="launch argument fleet is now called single_process"):
        launch_actions("naming_game_robots.launch.py", monkeypatch, config=config, fleet="false",
                       output_dir=tmp_path / "old")
    assert not (tmp_path / "old").exists()
    actions = launch_actions("naming_game_robots.launch.py", monkeypatch, config=config, num_robots=3,
                             max_population_rounds=3, single_process="false", output_dir=tmp_path / "run")
    nodes = [node_info(a) for a in actions if isinstance(a, Node)]
    assert [n["name"] for n in nodes if n["executable"] == "naming_robot"] == [f"/robot_{i}/agent" for i in range(3)]
    params = params_file_fields((tmp_path / "run" / "params.yaml"), RobotsGameConfig)
    assert (params["num_robots"], params["max_population_rounds"]) == (3, 3)
    assert not {"max_rounds", "num_agents"} & set(params)
