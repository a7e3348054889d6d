"""The shipped RViz2 config and Foxglove layout show what the recorder publishes (docs/visualization.md)."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

CONFIG = Path(__file__).resolve().parents[3] / "config"


def test_rviz_config_fixed_frame_world_markers_and_tf():
    cfg = yaml.safe_load((CONFIG / "aggregation.rviz").read_text())["Visualization Manager"]
    assert cfg["Global Options"]["Fixed Frame"] == "world"
    displays = {d["Class"]: d for d in cfg["Displays"]}
    markers = displays["rviz_default_plugins/MarkerArray"]
    assert markers["Enabled"] and markers["Topic"]["Value"] == "/markers"
    assert set(markers["Namespaces"]) == {"robots", "targets", "plans", "edges", "reasoning"}
    assert displays["rviz_default_plugins/TF"]["Enabled"]


def test_foxglove_layout_3d_panel_on_markers_in_world():
    layout = json.loads((CONFIG / "foxglove_aggregation.json").read_text())
    panels = layout["configById"]
    three_d = [cfg for key, cfg in panels.items() if key.startswith("3D!")]
    assert len(three_d) == 1 and three_d[0]["followTf"] == "world"
    assert three_d[0]["topics"]["/markers"]["visible"] is True

    def leaves(node):
        return [node] if isinstance(node, str) else leaves(node["first"]) + leaves(node["second"])

    assert sorted(leaves(layout["layout"])) == sorted(panels)      # every panel placed, none missing
