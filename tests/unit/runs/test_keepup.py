"""consensus.runs.keepup: a node that falls behind says so once, early, with the figure (no ROS)."""
from consensus.runs.keepup import BEHIND, Shortfall, TimerSlots


def test_no_warning_while_nothing_is_lost_or_too_little_was_expected():
    s = Shortfall("bag_recorder", min_expected=50)
    s.add(40, 30)                                     # 25 % lost, but only 40 expected: too early to judge
    assert s.check() is None
    s = Shortfall("bag_recorder", min_expected=50)
    s.add(1000, 1000)
    assert s.check() is None and s.lost == 0


def test_warns_once_with_the_figure_and_where_most_was_lost():
    s = Shortfall("bag_recorder", advice="record fewer topics")
    s.add(600, 400, "/robot_3/cmd_vel")
    s.add(400, 390, "/robot_1/odom")
    line = s.check(elapsed_s=2.5)
    assert line is not None
    assert BEHIND in line and "210 of 1,000 messages lost (21.0%)" in line
    assert "first 2.5 s" in line
    assert line.index("/robot_3/cmd_vel (200)") < line.index("/robot_1/odom (10)")
    assert line.endswith("record fewer topics")
    s.add(1000, 0)
    assert s.check() is None                          # once per run: a loaded machine does not flood the log
    assert s.as_dict()["lost"] == 1210 and s.as_dict()["warned"]


def test_one_or_two_skipped_samples_are_not_a_machine_that_cannot_keep_up():
    s = Shortfall("recorder: trajectory samples", unit="samples", min_expected=25)
    s.add(30, 28)                                     # a busy start-up skipped two samples (6.7 %)
    assert s.check() is None
    s.add(5, 4)
    assert "3 of 35 samples lost" in s.check()


def test_a_loss_at_the_threshold_is_not_a_warning():
    s = Shortfall("x", max_share=0.01, min_expected=100)
    s.add(1000, 990)
    assert s.check() is None
    s.add(1, 0)
    assert s.check() is not None


def test_timer_slots_count_skipped_slots_not_jitter():
    s = Shortfall("recorder: trajectory samples", unit="samples", min_expected=5)
    t = TimerSlots(0.2, s)
    for k in range(10):
        assert t.call(100.0 + 0.2 * k + (0.15 if k % 2 else -0.01)) == 0      # late or early within a period
    assert s.lost == 0 and s.check() is None
    # starved: the next call comes 1.1 s after the last one's slot (slot 14, 0.1 s late): rcl skipped slots 10-13
    assert t.call(100.0 + 0.2 * 9 + 1.1) == 4
    assert s.lost == 4 and s.expected == 15
    assert "4 of 15 samples lost" in s.check()
