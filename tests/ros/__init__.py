"""Tests that start ROS 2 nodes or processes (marker ``ros``): real runs, nodes spun in-process, the wire."""
