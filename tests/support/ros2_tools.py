"""The real ROS 2 command-line and launch tools for the tests: how to call them (whether they are there, and what to
do when they are not, is tests/support/needs.py's one decision).

They come with a ROS 2 install, or from `make ros2-tools` (wheels of the ROS 2 sources: ../shared/ros2-tools or
built from source). On a machine with neither, the tests that need them skip with the reason; in CI
(CONSENSUS_REQUIRE_ALL=1, set by .ci/run where ../shared is there) a missing install fails instead of skipping.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .needs import ROOT, need, ros2_executable  # noqa: F401  (ros2_executable: re-exported for the tests)


def need_ros2() -> str:
    """The ``ros2`` executable, or skip (fail in CI) with the reason and the install command
    (tests/support/needs.py)."""
    need("ros2_cli")
    return ros2_executable()


def need_launch() -> None:
    need("ros2_launch")


def tool_env(**extra: str) -> dict[str, str]:
    """The environment of a ``ros2`` call: this venv's install first on the ament prefix path (where
    share/consensus and lib/consensus are), the test session's ROS domain, local discovery only."""
    env = dict(os.environ)
    prefixes = [sys.prefix] + [p for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    env.update(AMENT_PREFIX_PATH=os.pathsep.join(dict.fromkeys(prefixes)),
               PATH=os.pathsep.join([str(Path(sys.prefix) / "bin"), env.get("PATH", "")]),
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1", RCUTILS_COLORIZED_OUTPUT="0")
    env.update(extra)
    return env


def ros2(*args: str, timeout: float = 30.0, check: bool = False) -> subprocess.CompletedProcess:
    """Run ``ros2 ARGS`` to completion (killed, with its group, after ``timeout`` seconds)."""
    proc = subprocess.Popen([need_ros2(), *args], env=tool_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        out, _ = proc.communicate()
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, "")
    if check and proc.returncode != 0:
        raise AssertionError(f"ros2 {' '.join(args)} exited {proc.returncode}:\n{out}")
    return result


#: what ``ros2 param`` prints when its fixed 5 s wait for a node's parameter services ran out (ros2param's
#: ``wait_for_services(timeout_sec=5.0)``; the CLI has no option for it): under the suite's load a fresh CLI process
#: can take longer than that to discover a node that is there (failed a CI run once)
PARAM_SERVICE_TIMED_OUT = "Wait for service timed out"


def ros2_param(*args: str, attempts: int = 4, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """``ros2 param ARGS``, asked again while the CLI's own wait for the node's services runs out."""
    result = ros2("param", *args, timeout=timeout)
    for _ in range(attempts - 1):
        if PARAM_SERVICE_TIMED_OUT not in result.stdout:
            break
        result = ros2("param", *args, timeout=timeout)
    return result


def param_list(node: str, timeout: float = 60.0) -> set[str]:
    """The parameter names ``ros2 param list NODE`` prints (asked again as ``ros2_param`` does)."""
    out = ros2_param("list", node, timeout=timeout).stdout
    if PARAM_SERVICE_TIMED_OUT in out or not out.strip():
        raise AssertionError(f"ros2 param list {node} gave no list:\n{out}")
    return set(out.split())


def start_ros2(*args: str, log: Path) -> subprocess.Popen:
    """Start ``ros2 ARGS`` in the background (its own process group), output into ``log``."""
    handle = open(log, "w")
    return subprocess.Popen([need_ros2(), *args], env=tool_env(), stdout=handle, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def stop_group(proc: subprocess.Popen, grace: float = 45.0) -> int:
    """SIGINT the process group (as Ctrl-C does), then SIGKILL what is left after ``grace`` seconds."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)       # children that outlived their launch
    except (ProcessLookupError, PermissionError):
        pass
    return proc.wait()


def wait_until(predicate, timeout: float, period: float = 0.5):
    """Poll ``predicate()`` until it returns something truthy (returned) or ``timeout`` passes (returns None)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(period)
    return None


@pytest.fixture(scope="module")
def ros2_daemon():
    """A ``ros2 daemon`` in the test session's ROS domain (the CLI finds nodes reliably through it), stopped after."""
    need_ros2()
    ros2("daemon", "stop", timeout=20)
    ros2("daemon", "start", timeout=30, check=True)
    yield
    ros2("daemon", "stop", timeout=20)


def launch_actions(launch_file: str | Path, monkeypatch, **args) -> list:
    """The actions the real ``launch`` gets from ``launch_file`` for the launch arguments ``args`` (``launch_run``)."""
    return launch_run(launch_file, monkeypatch, **args)[1]


def launch_run(launch_file: str | Path, monkeypatch, **args):
    """``(context, actions)``: the file's OpaqueFunction executed in a real ``LaunchContext`` for the launch
    arguments ``args`` (strings as on the command line, defaults for the rest) - what ``ros2 launch`` does before
    it starts any process. Nodes come back with their substitutions performed."""
    import importlib.util as iu

    need_launch()
    from launch import LaunchContext
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch_ros.actions import Node

    monkeypatch.setenv("AMENT_PREFIX_PATH", tool_env()["AMENT_PREFIX_PATH"])
    path = ROOT / "launch" / launch_file
    spec = iu.spec_from_file_location(path.stem.replace(".", "_"), path)
    module = iu.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    context = LaunchContext()
    for entity in description.entities:
        if isinstance(entity, DeclareLaunchArgument):
            context.launch_configurations[entity.name] = "".join(s.perform(context) for s in entity.default_value)
    context.launch_configurations.update({k: str(v) for k, v in args.items()})
    actions = []
    for entity in description.entities:
        if isinstance(entity, OpaqueFunction):
            actions += entity.execute(context) or []
    for action in actions:
        if isinstance(action, Node):
            action._perform_substitutions(context)
    return context, actions


def node_info(node) -> dict:
    """executable, fully qualified name, namespace and the parameters (files merged in order) of a performed
    ``launch_ros`` Node."""
    params: dict = {}
    files = [path for path, is_file in node._Node__expanded_parameter_arguments if is_file]
    import yaml

    class Loader(yaml.SafeLoader):      # launch_ros writes a node's own parameters with !!python/tuple lists,
        pass                            # which the nodes' YAML parser (rcl) reads as plain sequences

    Loader.add_constructor("tag:yaml.org,2002:python/tuple", lambda loader, n: loader.construct_sequence(n))
    for path in files:
        for section in (yaml.load(Path(path).read_text(), Loader=Loader) or {}).values():
            params.update(section.get("ros__parameters", {}))
    namespace = node.expanded_node_namespace
    name = node.node_name.replace("<node_namespace_unspecified>", "")   # the root namespace, as ros2 node list says
    return {"executable": node.node_executable, "package": node.node_package, "name": name,
            "namespace": "" if "unspecified" in namespace else namespace, "params_file": files[0] if files else None,
            "params": params}
