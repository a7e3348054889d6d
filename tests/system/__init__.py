"""The whole system and its tooling: install layout, colcon, the real ros2 tools, Docker, extras, Ray, security,
the import contracts, the CLI end to end and the helper that decides whether an outside tool is here."""
