"""The naming game's ROS 2 nodes (paper 4, "With robots"): ``robot`` (the robots, fleet or one per process; each
draws its own words and drives to its point), ``matchmaker`` (pairs, outcomes, the run directory). ``protocol`` holds
the topics, the JSON records and how the nodes declare their config. rclpy only here and in the kernel's ``ros/``."""
