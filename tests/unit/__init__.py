"""Tests of the kernel, one folder per package or module: unit/<package>/ holds the tests of consensus.<package>.
ROS-free; a file with a few tests that start nodes keeps them here, marked ``ros`` (docs/testing.md)."""
