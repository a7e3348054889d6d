"""The topology node's meeting-point evidence and an operator's meeting point (issue 45): a suggestion inside the
workspace is kept for ``SUGGESTION_KEEP_S`` (``AcceptedSuggestions``), a robot's target equal to it (within 1e-6 m)
is not ``target.unreachable`` whichever of the two came first (a far target waits ``SUGGESTION_RACE_S``), every other
far target is refused as before. No ROS traffic: the relay's callbacks are called with messages."""
from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("rclpy")

from geometry_msgs.msg import PointStamped  # noqa: E402

from consensus.control.plausibility import Plausibility  # noqa: E402
from consensus.ros.health import Health  # noqa: E402
from consensus.scenarios.aggregation.ros.topology import (SUGGESTION_KEEP_S, SUGGESTION_RACE_S,  # noqa: E402
                                                          AcceptedSuggestions, TopologyRelay)


def test_the_topology_accepts_a_meeting_point_that_took_an_accepted_suggestion():
    kept = AcceptedSuggestions([-10.0, 10.0, -10.0, 10.0])
    assert not kept.matches([3.0, -2.0], 0.0)                     # nothing suggested: nothing accepted
    assert not kept.offer([30.0, 0.0], 0.0)                       # outside the workspace: not kept
    assert not kept.offer([float("nan"), 0.0], 0.0)
    assert not kept.matches([30.0, 0.0], 0.0)
    assert kept.offer((3.0, -2.0), 1.0)
    assert kept.matches([3.0, -2.0], 2.0) and kept.matches([3.0 + 5e-7, -2.0], 2.0)
    assert not kept.matches([3.0 + 2e-6, -2.0], 2.0) and not kept.matches([3.0, 2.0], 2.0)
    assert not kept.matches([3.0, -2.0], 1.0 + SUGGESTION_KEEP_S + 0.1)       # kept for a while only
    line = AcceptedSuggestions([-4.0, 4.0])                       # a 1-D run: its robots publish (x, 0)
    assert line.offer((3.0, -2.0), 0.0) and line.matches((3.0, 0.0), 0.0)


def _relay(n: int = 2):
    """A topology relay with only what its meeting-point checks read (no ROS traffic), its clock ``relay.t``."""
    ws = [-10.0, 10.0, -10.0, 10.0]
    relay = object.__new__(TopologyRelay)
    relay.t = 0.0
    relay._now = lambda: relay.t
    relay.cfg = SimpleNamespace(planner_period_s=2.0, num_robots=n)
    relay.node = SimpleNamespace(get_logger=lambda: SimpleNamespace(info=lambda *_: None, warning=lambda *_: None))
    relay.health = Health(logger=None)
    relay.plausible = Plausibility.for_workspace(n, ws, 1.0)
    relay.suggestions = AcceptedSuggestions(ws)
    relay.targets = np.full((n, 2), np.nan)
    relay.heard_box = np.full((2, n, 2, 2), np.nan)
    relay.target_times = [deque() for _ in range(n)]
    relay.targets_untrusted_until = np.full(n, -np.inf)
    relay.mp_refused, relay.foreign = 0, {}
    relay.heard_box[0, :, 0], relay.heard_box[0, :, 1] = [-1.0, -1.0], [1.0, 1.0]    # each heard [-1, 1]^2
    return relay


def _point(x: float, y: float) -> PointStamped:
    msg = PointStamped()
    msg.header.frame_id = "world"
    msg.point.x, msg.point.y = x, y
    return msg


def test_the_topology_takes_a_far_meeting_point_that_took_a_suggestion_whichever_came_first():
    relay = _relay()
    # without a suggestion a jump to (6, -5) is unreachable: it waits SUGGESTION_RACE_S, then it is refused
    relay._on_target(0)(_point(6.0, -5.0))
    assert relay.mp_refused == 0 and np.isnan(relay.targets[0]).all()
    relay.t = SUGGESTION_RACE_S + 0.1
    relay._settle_waiting(relay.t)
    assert relay.mp_refused == 1 and relay.health.bad_by_input == {"target.unreachable": 1}
    # the suggestion first, then robot 0's target: taken at once
    relay._on_suggestion(_point(3.0, -2.0))
    relay._on_target(0)(_point(3.0, -2.0))
    assert relay.targets[0].tolist() == [3.0, -2.0] and relay.mp_refused == 1
    # robot 1's target first (the two topics race), then the suggestion: taken when it comes, never refused
    relay.t += 5.0
    relay._on_target(1)(_point(-7.0, 8.0))     # (robot 1's box is still [-1, 1]^2: (-7, 8) is far for it)
    assert np.isnan(relay.targets[1]).all()
    relay._on_suggestion(_point(-7.0, 8.0))
    assert relay.targets[1].tolist() == [-7.0, 8.0] and relay.mp_refused == 1
    # a suggestion outside the workspace is not kept; a far target equal to it is refused as before
    relay._on_suggestion(_point(30.0, 0.0))
    relay._on_target(1)(_point(9.9, -9.9))
    relay.t += SUGGESTION_RACE_S + 0.1
    relay._settle_waiting(relay.t)
    assert relay.mp_refused == 2 and relay.targets[1].tolist() == [-7.0, 8.0]
