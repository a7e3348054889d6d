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


def pytest_collection_modifyitems(config, items):
    if os.environ.get("CONSENSUS_REQUIRE_ALL") == "1":
        return                                  # CI: a missing dependency must fail, not skip
    skip_ros = pytest.mark.skip(reason="rclpy not installed (pip install -r requirements/ros-kilted.txt)")
    for item in items:
        if "ros" in item.keywords and not HAVE_RCLPY:
            item.add_marker(skip_ros)
