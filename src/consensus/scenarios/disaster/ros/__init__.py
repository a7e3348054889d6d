"""The disaster scenario's ROS 2 nodes: ``grid`` (environment and round clock), ``drone`` (the drones, fleet or one per
process; ``agent`` holds a drone's wiring), ``aggregator`` (explicit consensus). rclpy only here and in the
kernel's ``ros/``."""
