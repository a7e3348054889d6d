"""consensus.runs.drivers: where the vendors' driver simulators are, judged on a fake prefix (no ROS needed)."""
from __future__ import annotations

import sys

import pytest

from consensus.runs import drivers


def _exe(prefix, package, name, mode=0o755):
    path = prefix / "lib" / package / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


def _ament_prefix(prefix, package):
    marker = prefix / "share" / "ament_index" / "resource_index" / "packages" / package
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("")


@pytest.fixture
def venv(tmp_path, monkeypatch):
    """An empty prefix standing for this Python's venv, and no ament prefix path."""
    prefix = tmp_path / "venv"
    prefix.mkdir()
    monkeypatch.setattr(sys, "prefix", str(prefix))
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    return prefix


def test_without_an_ament_path_the_executable_is_looked_up_in_this_pythons_prefix(venv):
    assert drivers.executable("turtlebot3_fake_node", "turtlebot3_fake_node") is None
    exe = _exe(venv, "turtlebot3_fake_node", "turtlebot3_fake_node")
    assert drivers.executable("turtlebot3_fake_node", "turtlebot3_fake_node") == exe


def test_a_file_that_is_not_executable_does_not_count(venv):
    _exe(venv, "crazyflie_sim", "crazyflie_server", mode=0o644)
    assert drivers.executable("crazyflie_sim", "crazyflie_server") is None


def test_the_ament_index_comes_first_and_this_prefix_is_the_fallback(venv, tmp_path, monkeypatch):
    pytest.importorskip("ament_index_python")
    ros = tmp_path / "opt-ros"
    _ament_prefix(ros, "crazyflie_sim")
    theirs = _exe(ros, "crazyflie_sim", "crazyflie_server")
    mine = _exe(venv, "crazyflie_sim", "crazyflie_server")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(ros))
    assert drivers.executable("crazyflie_sim", "crazyflie_server") == theirs
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path / "elsewhere"))     # the index does not have it
    assert drivers.executable("crazyflie_sim", "crazyflie_server") == mine


def test_each_fleet_says_what_it_lacks(venv, monkeypatch):
    monkeypatch.setattr(drivers, "missing_modules", lambda names: [])
    assert "turtlebot3_fake_node" in drivers.turtlebot3_available()
    assert "crazyflie_server" in drivers.crazyswarm2_available()
    assert not drivers.available()
    _exe(venv, "turtlebot3_fake_node", "turtlebot3_fake_node")
    assert drivers.turtlebot3_available() is None
    assert not drivers.available()                                      # the drones' server is still missing
    _exe(venv, "crazyflie_sim", "crazyflie_server")
    assert drivers.crazyswarm2_available() is None
    assert drivers.available()
    monkeypatch.setattr(drivers, "missing_modules", lambda names: ["cffirmware"])
    assert drivers.crazyswarm2_available().endswith("do not import: cffirmware")
    assert not drivers.available()


def test_modules_are_found_without_importing_them(tmp_path, monkeypatch):
    (tmp_path / "fake_cffirmware_mod.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert drivers.missing_modules(("fake_cffirmware_mod", "no_such_module_here")) == ["no_such_module_here"]
    assert "fake_cffirmware_mod" not in sys.modules


def test_the_install_hint_is_one_line_naming_make_drivers():
    assert "\n" not in drivers.INSTALL_HINT and drivers.INSTALL_HINT.startswith("`make drivers`")
