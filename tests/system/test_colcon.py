"""The package as a colcon workspace builds it (README "Build with colcon"): the pinned ROS 2 wheels as underlay
through AMENT_PREFIX_PATH, `colcon build`, `source install/setup.bash`, `ros2 launch` from the install."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.needs import need
from support.ros2_tools import ROOT, need_ros2, tool_env

pytestmark = pytest.mark.ros


def colcon() -> str:
    exe = Path(sys.prefix) / "bin" / "colcon"
    if exe.is_file():
        return str(exe)
    need("colcon")
    return shutil.which("colcon")


def test_colcon_build_source_and_launch_from_the_install(tmp_path):
    need_ros2()
    exe = colcon()
    ws = tmp_path / "ws"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for rel in filter(None, files.split("\0")):           # the package as a clone has it (no venv, no runs)
        src, dst = ROOT / rel, ws / "src" / "consensus" / rel
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    env = tool_env(AMENT_PREFIX_PATH=sys.prefix)            # the underlay: the venv holding the ROS 2 wheels
    build = subprocess.run([exe, "build", "--event-handlers", "console_direct-"], cwd=ws, env=env,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    install = ws / "install" / "consensus"
    assert (install / "share" / "ament_index" / "resource_index" / "packages" / "consensus").is_file()
    assert (install / "share" / "consensus" / "launch" / "aggregation.launch.py").is_file()
    assert (install / "lib" / "consensus" / "robot").is_file()

    out = tmp_path / "run"
    script = (f"source {ws}/install/setup.bash && "
              f"python -c 'import consensus; print(\"MODULE\", consensus.__file__)' && "
              f"ros2 pkg prefix consensus && "
              f"ros2 launch consensus aggregation.launch.py planner:=average num_robots:=3 duration_s:=4 "
              f"output_dir:={out}")
    run = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
                         start_new_session=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"MODULE {install}" in run.stdout                   # the workspace's copy, not the venv's
    assert str(install) in run.stdout.splitlines()[1]          # ros2 pkg prefix
    assert json.loads((out / "summary.json").read_text())["num_robots"] == 3
