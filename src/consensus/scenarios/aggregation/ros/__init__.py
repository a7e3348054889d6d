"""The aggregation scenario's ROS 2 nodes: ``robot`` (planner + controller, fleet or one per robot), ``topology`` (who
hears whom),
``recorder`` (the run directory). rclpy is imported only in modules of this package (and the kernel's ``ros/``)."""
