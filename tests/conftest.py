"""Shared test set-up.

ROS isolation: every test session gets its own ROS_DOMAIN_ID (derived from the pid, or CONSENSUS_TEST_DOMAIN_ID)
and ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, set before any rclpy import, so parallel runs on one machine and
other ROS graphs on the network never see each other. Processes started by tests are killed by their fixtures.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("ROS_DOMAIN_ID", os.environ.get("CONSENSUS_TEST_DOMAIN_ID", str(1 + os.getpid() % 100)))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")

sys.path.insert(0, str(Path(__file__).resolve().parent))   # tests/fake_openai_server.py

HAVE_RCLPY = importlib.util.find_spec("rclpy") is not None


def pytest_runtest_setup(item):
    from needs import need

    for marker in item.iter_markers(name="needs"):
        need(*marker.args)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("CONSENSUS_REQUIRE_ALL") == "1":
        return                                  # CI: a missing dependency must fail, not skip
    skip_ros = pytest.mark.skip(reason="rclpy not installed (pip install -r requirements/ros-kilted.txt)")
    for item in items:
        if "ros" in item.keywords and not HAVE_RCLPY:
            item.add_marker(skip_ros)


@pytest.fixture
def embedded_model_installed():
    """Skip unless xllamacpp and the pinned model chunk packages are installed (CI installs both, see Makefile)."""
    pytest.importorskip("xllamacpp")
    from consensus.llm.embedded import installed_part_paths

    try:
        installed_part_paths()
    except Exception as exc:  # noqa: BLE001 - model packages absent
        pytest.skip(f"embedded model packages not installed: {exc}")


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind(tmp_path_factory):
    """Nothing a test started outlives the session: SIGTERM (e.g. `timeout`, CI) is turned into KeyboardInterrupt
    so fixtures and runners stop their children, and at the end every process whose command line names this
    session's temporary directory (every ROS process a run starts gets RUN/params.yaml) is killed."""
    import signal
    import subprocess

    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    base = str(tmp_path_factory.getbasetemp())
    yield
    signal.signal(signal.SIGTERM, previous)
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if base in args and int(pid) != os.getpid():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@pytest.fixture(autouse=True)
def plain_logger_class():
    """Importing the real ``launch`` (tests that build launch descriptions) makes every logger created afterwards a
    non-propagating LaunchLogger for the rest of the process, so later tests' log records would never reach caplog.
    Each test leaves the logger class as it found it."""
    import logging

    before = logging.getLoggerClass()
    yield
    logging.setLoggerClass(before)
