"""Controllers, kinematics, quaternion helpers and the safety layer."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consensus.control.controller import PController, UnicycleController, quaternion_from_yaw, yaw_from_quaternion
from consensus.control.kinematics import step_single_integrator, step_unicycle, wrap_angle
from consensus.control.safety import Geofence, is_stale, limit_speed
from consensus.errors import ConfigError


# ---- P controller -----------------------------------------------------------------------
def test_p_saturates_norm_and_keeps_direction():
    c = PController(kp=2.0, v_max=0.5, deadband=0.02)
    pos, target = np.array([1.0, 1.0]), np.array([4.0, -3.0])
    v = c.compute(pos, target)
    assert np.linalg.norm(v) == pytest.approx(0.5, abs=1e-12)
    err = target - pos
    assert np.allclose(v / np.linalg.norm(v), err / np.linalg.norm(err))


def test_p_is_proportional_below_saturation_and_zero_in_deadband():
    c = PController(kp=2.0, v_max=1.0, deadband=0.05)
    assert np.allclose(c.compute(np.zeros(2), np.array([0.3, -0.1])), [0.6, -0.2])
    assert np.array_equal(c.compute(np.zeros(2), np.array([0.03, 0.03])), [0.0, 0.0])
    assert np.array_equal(c.compute(np.array([5.0]), np.array([5.0])), [0.0])


def test_p_batch_matches_single_and_zeroes_nan_rows():
    c = PController(kp=1.5, v_max=1.0)
    rng = np.random.default_rng(0)
    pos, tgt = rng.uniform(-3, 3, (6, 2)), rng.uniform(-3, 3, (6, 2))
    tgt[2] = np.nan
    pos[4] = [np.inf, 0.0]
    out = c.compute_batch(pos, tgt)
    assert np.array_equal(out[2], [0.0, 0.0]) and np.array_equal(out[4], [0.0, 0.0])
    for i in (0, 1, 3, 5):
        assert np.allclose(out[i], c.compute(pos[i], tgt[i]))
    assert np.all(np.linalg.norm(out, axis=1) <= 1.0 + 1e-12)


@pytest.mark.parametrize("kwargs, field", [
    ({"kp": 0.0}, "kp"), ({"kp": -1.0}, "kp"), ({"v_max": 0.0}, "v_max"),
    ({"deadband": -0.1}, "deadband"), ({"kp": float("nan")}, "kp"), ({"v_max": "fast"}, "v_max"),
])
def test_p_rejects_bad_gains(kwargs, field):
    with pytest.raises(ConfigError, match=f"'{field}'"):
        PController(**kwargs)


def test_p_closed_loop_reaches_target_within_bounded_steps():
    c = PController(kp=1.0, v_max=1.0, deadband=0.02)
    pos = np.array([[5.0, -3.0], [-2.0, 0.5]])
    target = np.array([[1.0, 2.0], [-2.5, 0.0]])
    dt = 0.1
    # saturated leg ≈ 6.4 m at 1 m/s = 64 steps, then exponential tail with time constant 1/kp = 1 s
    for step in range(1, 200):
        v = c.compute_batch(pos, target)
        assert np.all(np.linalg.norm(v, axis=1) <= c.v_max + 1e-12)
        pos = step_single_integrator(pos, v, dt)
        if np.all(np.linalg.norm(pos - target, axis=1) <= c.deadband):
            break
    else:
        pytest.fail("P controller did not reach the targets within 200 steps")
    assert step < 120


# ---- unicycle ---------------------------------------------------------------------------
@pytest.mark.parametrize("target", [(-3.0, 0.2), (-3.0, 0.0), (0.0, -2.0)])
def test_unicycle_reaches_target_behind_without_reversing(target):
    c = UnicycleController(k_v=1.0, k_w=2.0, v_max=0.8, w_max=1.5, deadband=0.03)
    pose = np.array([0.0, 0.0, 0.0])
    tgt = np.array(target)
    first_v, _ = c.compute(pose, tgt)
    if abs(math.atan2(tgt[1], tgt[0])) > math.pi / 2:
        assert first_v == 0.0  # turns in place first
    for _ in range(600):
        v, w = c.compute(pose, tgt)
        assert v >= 0.0 and abs(w) <= c.w_max and v <= c.v_max
        pose = step_unicycle(pose[None, :], np.array([v]), np.array([w]), 0.05)[0]
        if np.linalg.norm(pose[:2] - tgt) <= c.deadband:
            break
    else:
        pytest.fail(f"unicycle did not reach {target}")
    assert c.compute(pose, tgt) == (0.0, 0.0)


def test_unicycle_batch_and_invalid_input():
    c = UnicycleController()
    poses = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, math.pi / 2], [0.0, 0.0, 0.0]])
    targets = np.array([[1.0, 0.0], [1.0, 3.0], [np.nan, 1.0]])
    v, w = c.compute_batch(poses, targets)
    assert v[0] == pytest.approx(1.0) and w[0] == pytest.approx(0.0)   # straight ahead, saturated
    assert v[1] == pytest.approx(1.0) and w[1] == pytest.approx(0.0)
    assert v[2] == 0.0 and w[2] == 0.0
    with pytest.raises(ConfigError, match="'w_max'"):
        UnicycleController(w_max=0.0)


# ---- kinematics -------------------------------------------------------------------------
def test_single_integrator_step_and_validation():
    out = step_single_integrator(np.array([[0.0, 1.0], [2.0, 2.0]]), np.array([[1.0, 0.0], [-1.0, 0.5]]), 0.5)
    assert np.allclose(out, [[0.5, 1.0], [1.5, 2.25]])
    with pytest.raises(ValueError, match="NaN"):
        step_single_integrator(np.zeros((1, 2)), np.array([[np.nan, 0.0]]), 0.1)
    with pytest.raises(ValueError, match="shape"):
        step_single_integrator(np.zeros((2, 2)), np.zeros((1, 2)), 0.1)


def test_unicycle_exact_arc_half_circle():
    # v = 1, w = 1 for π seconds: a half circle of radius 1 to the left
    out = step_unicycle(np.array([[0.0, 0.0, 0.0]]), np.array([1.0]), np.array([1.0]), math.pi)
    assert np.allclose(out, [[0.0, 2.0, math.pi]], atol=1e-12)


def test_unicycle_step_matches_fine_euler_integration():
    pose0 = np.array([[0.3, -1.0, 2.9], [0.0, 0.0, -0.5], [1.0, 1.0, 0.1]])
    v, w, dt = np.array([0.7, 1.0, 0.4]), np.array([1.3, 0.0, -2.0]), 0.8
    exact = step_unicycle(pose0, v, w, dt)
    p = pose0.copy()
    h = dt / 2000

    def f(q: np.ndarray) -> np.ndarray:
        return np.column_stack([v * np.cos(q[:, 2]), v * np.sin(q[:, 2]), w])

    for _ in range(2000):  # explicit midpoint (2nd order)
        p = p + h * f(p + 0.5 * h * f(p))
    assert np.allclose(exact[:, :2], p[:, :2], atol=1e-6)
    assert np.allclose(exact[:, 2], wrap_angle(p[:, 2]), atol=1e-9)
    assert np.all((exact[:, 2] > -math.pi) & (exact[:, 2] <= math.pi))


def test_wrap_angle_range():
    assert wrap_angle(math.pi) == pytest.approx(math.pi)
    assert wrap_angle(-math.pi) == pytest.approx(math.pi)
    assert wrap_angle(3 * math.pi / 2) == pytest.approx(-math.pi / 2)


# ---- quaternions ------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(st.floats(-math.pi, math.pi, exclude_min=True))
def test_quaternion_round_trip(yaw):
    x, y, z, w = quaternion_from_yaw(yaw)
    assert x == 0.0 and y == 0.0
    assert math.isclose(x * x + y * y + z * z + w * w, 1.0, rel_tol=1e-12)
    assert math.isclose(math.cos(yaw_from_quaternion(x, y, z, w) - yaw), 1.0, abs_tol=1e-12)


def test_quaternion_known_values_and_invalid():
    assert np.allclose(quaternion_from_yaw(math.pi / 2), (0, 0, math.sqrt(0.5), math.sqrt(0.5)))
    assert yaw_from_quaternion(0, 0, 2 * math.sqrt(0.5), 2 * math.sqrt(0.5)) == pytest.approx(math.pi / 2)
    with pytest.raises(ValueError, match="invalid quaternion"):
        yaw_from_quaternion(0, 0, 0, 0)
    with pytest.raises(ValueError, match="invalid quaternion"):
        yaw_from_quaternion(0, 0, float("nan"), 1)


# ---- safety -----------------------------------------------------------------------------
def test_geofence_clamp_and_contains():
    g = Geofence.from_bounds([-1, 1, 0, 5])
    q, changed = g.clamp(np.array([0.5, 2.0]))
    assert not changed and np.array_equal(q, [0.5, 2.0])
    q, changed = g.clamp(np.array([3.0, -1.0]))
    assert changed and np.array_equal(q, [1.0, 0.0])
    assert g.contains([1.0, 5.0]) and not g.contains([1.01, 5.0]) and not g.contains([np.nan, 1.0])
    with pytest.raises(ValueError, match="non-finite"):
        g.clamp(np.array([np.nan, 1.0]))
    with pytest.raises(ValueError, match="non-finite"):
        g.clamp(np.array([0.0, np.inf]))
    assert Geofence.from_bounds(g.to_bounds()) == g


def test_geofence_1d():
    g = Geofence.from_bounds([0, 100])
    assert g.dim == 1
    assert g.clamp(np.array([150.0]))[0].tolist() == [100.0]


@pytest.mark.parametrize("bounds, pattern", [
    ([0, 1, 2], "2 .* or 4"), ([1, 0], "axis 0 needs min < max"), ([0, 1, 3, 3], "axis 1"),
    ([0, float("nan")], r"bounds\[1\]"), ("0,1", "must be a list"), ([0, "1"], r"bounds\[1\]"),
])
def test_geofence_malformed_bounds(bounds, pattern):
    with pytest.raises(ConfigError, match=pattern):
        Geofence.from_bounds(bounds)


def test_limit_speed():
    out = limit_speed(np.array([[3.0, 4.0], [0.3, 0.0], [np.nan, 1.0]]), 1.0)
    assert np.allclose(out, [[0.6, 0.8], [0.3, 0.0], [0.0, 0.0]])
    assert np.allclose(limit_speed(np.array([0.0, -10.0]), 2.0), [0.0, -2.0])
    with pytest.raises(ValueError):
        limit_speed(np.zeros(2), 0.0)


def test_is_stale():
    assert is_stale(None, 10.0, 1.0)
    assert not is_stale(9.5, 10.0, 1.0)
    assert is_stale(8.5, 10.0, 1.0)
    assert is_stale(float("nan"), 10.0, 1.0)
