#!/bin/bash
# ROS 2 Kilted and the colcon workspace of the image, then the command.
set -e
source "/opt/ros/${ROS_DISTRO}/setup.bash"
source /ws/install/setup.bash
exec "$@"
