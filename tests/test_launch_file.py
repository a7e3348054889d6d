"""The launch file's logic, run against recording stand-ins for `launch`/`launch_ros` (those are not on PyPI, so
they cannot be installed here; with a ROS install the same file runs under the real `ros2 launch`).

The stand-ins accept exactly the constructor arguments the real classes take for the calls the file makes, so a
misspelt keyword fails here too."""
from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest
import yaml

from consensus.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


class _Rec:
    ALLOWED: tuple[str, ...] = ()

    def __init__(self, *args, **kwargs):
        bad = set(kwargs) - set(self.ALLOWED)
        assert not bad, f"{type(self).__name__} got unexpected keyword(s) {bad}"
        self.args, self.kwargs = args, kwargs


class DeclareLaunchArgument(_Rec):
    ALLOWED = ("default_value", "description", "choices")


class OpaqueFunction(_Rec):
    ALLOWED = ("function", "args", "kwargs")


class RegisterEventHandler(_Rec):
    ALLOWED = ("event_handler",)


class EmitEvent(_Rec):
    ALLOWED = ("event",)


class OnProcessExit(_Rec):
    ALLOWED = ("target_action", "on_exit")


class Shutdown(_Rec):
    ALLOWED = ("reason",)


class Node(_Rec):
    ALLOWED = ("package", "executable", "name", "namespace", "parameters", "remappings", "arguments", "output",
               "emulate_tty", "ros_arguments", "exec_name")


class LaunchDescription(_Rec):
    pass


class LaunchConfiguration:
    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return context[self.name]


def _install_standins(monkeypatch):
    mods = {
        "launch": dict(LaunchDescription=LaunchDescription),
        "launch.actions": dict(DeclareLaunchArgument=DeclareLaunchArgument, EmitEvent=EmitEvent,
                               OpaqueFunction=OpaqueFunction, RegisterEventHandler=RegisterEventHandler),
        "launch.event_handlers": dict(OnProcessExit=OnProcessExit),
        "launch.events": dict(Shutdown=Shutdown),
        "launch.substitutions": dict(LaunchConfiguration=LaunchConfiguration),
        "launch_ros": {},
        "launch_ros.actions": dict(Node=Node),
    }
    for name, attrs in mods.items():
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, mod)
    ament = types.ModuleType("ament_index_python.packages")
    ament.get_package_share_directory = lambda pkg: str(ROOT)
    monkeypatch.setitem(sys.modules, "ament_index_python.packages", ament)


def _launch(monkeypatch, **args):
    _install_standins(monkeypatch)
    spec = importlib.util.spec_from_file_location("aggregation_launch", ROOT / "launch" / "aggregation.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ld = module.generate_launch_description()
    entities = ld.args[0]
    context = {e.args[0]: e.kwargs["default_value"] for e in entities if isinstance(e, DeclareLaunchArgument)}
    context.update({k: str(v) for k, v in args.items()})
    opaque = [e for e in entities if isinstance(e, OpaqueFunction)]
    assert len(opaque) == 1
    return opaque[0].kwargs["function"](context)


def test_launch_starts_the_runner_nodes_with_one_merged_params_file(monkeypatch, tmp_path):
    actions = _launch(monkeypatch, num_robots=3, planner="average", topology="ring", fleet="false",
                      output_dir=tmp_path / "run")
    nodes = [a for a in actions if isinstance(a, Node)]
    assert [n.kwargs["executable"] for n in nodes] == ["sim", "topology", "robot", "robot", "robot", "recorder",
                                                        "bag_recorder"]
    assert [n.kwargs["namespace"] for n in nodes if n.kwargs["executable"] == "robot"] == \
        ["robot_0", "robot_1", "robot_2"]
    params_file = Path(nodes[0].kwargs["parameters"][0])
    params = yaml.safe_load(params_file.read_text())["/**"]["ros__parameters"]
    assert params["num_robots"] == 3 and params["topology"] == "ring" and params["planner"] == "average"
    assert all(Path(n.kwargs["parameters"][0]) == params_file for n in nodes)
    handlers = [a for a in actions if isinstance(a, RegisterEventHandler)]
    assert len(handlers) == 1 and handlers[0].args[0].kwargs["target_action"] is nodes[-2]   # recorder ends the run
    assert (tmp_path / "run" / "manifest.json").is_file()


def test_launch_embedded_backend_adds_the_llm_server(monkeypatch, tmp_path):
    actions = _launch(monkeypatch, planner="llm", llm_backend="embedded", output_dir=tmp_path / "run")
    exes = [a.kwargs["executable"] for a in actions if isinstance(a, Node)]
    assert exes == ["llm_server", "sim", "topology", "robot", "recorder", "bag_recorder"]
    params = yaml.safe_load((tmp_path / "run" / "params.yaml").read_text())["/**"]["ros__parameters"]
    assert params["llm_base_url"] == "http://127.0.0.1:18080/v1"


def test_launch_refuses_bad_arguments_before_starting_anything(monkeypatch, tmp_path):
    with pytest.raises(ConfigError, match="num_robots must be at least 2"):
        _launch(monkeypatch, num_robots=1, output_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
