"""Real robots: driver presets (``presets``) and the ``robots:`` map of a run (``map``); pure, no ROS imports.
The robot base (``consensus.ros.robot``) publishes and subscribes what an entry resolves to; see
docs/real-robots.md."""
