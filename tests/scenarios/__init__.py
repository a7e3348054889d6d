"""Tests of one scenario each: scenarios/<name>/ holds the tests of consensus.scenarios.<name>; a test of several
scenarios at once sits here. ROS-free; a file with a few tests that start nodes keeps them, marked ``ros``."""
