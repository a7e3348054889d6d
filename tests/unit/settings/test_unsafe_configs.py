"""Configs that cannot be safe are refused (issue 41, item 6): a fleet whose packing does not fit inside the fence and
a fence axis narrower than a body are one ``ConfigError`` (exit 2, before any run folder), through ``validate`` (the
robot base's group check and the disaster's and naming game's ``check``: ``consensus.robots.map.check_fence``); the
shipped configs and every scenario's defaults still pass; and the collision filter never drops its wall rows
silently: an axis too narrow for the body loses only its own walls, counted (``CollisionCounters.open_axes``,
``unwalled``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from consensus import registry
from consensus.control.avoidance import Avoidance, sum_collision
from consensus.control.collision import CollisionCounters, filter_velocity_many
from consensus.control.motion import SINGLE_INTEGRATOR, UNICYCLE
from consensus.control.packing import fits, most_that_fit, slots
from consensus.control.robot_core import RobotCore
from consensus.errors import ConfigError
from consensus.scenarios.aggregation.config import load_config
from consensus.scenarios.disaster.config import load_disaster_config
from consensus.scenarios.naming_game.fleet_game import RobotsGameConfig
from consensus.settings import FlatParams, load_flat

from unit.settings import test_one_validation  # noqa: E402 - tests/ is on sys.path (pyproject.toml)

# the one-line refusal of `consensus` and the runner that must not start: test_one_validation's
refused, no_runner = test_one_validation.refused, test_one_validation.no_runner

ROOT = Path(__file__).resolve().parents[3]
TWO_BY_TWO = [-1.0, 1.0, -1.0, 1.0]


# ------------------------------------------------------------------------------------------------ packing vs fence
def test_forty_robots_in_a_two_by_two_fence_are_refused_with_the_numbers():
    with pytest.raises(ConfigError) as err:
        load_config(num_robots=40, workspace=TWO_BY_TWO)
    msg = str(err.value)
    # robots, spacing (d_min 0.45 + gap 0.1), the fence, the fence they need, the box, and what to change
    for part in ("40 robots", "2 × 2 m geofence", "0.55 m apart", "d_min 0.45 m", "packing_gap_m 0.1 m",
                 "need a fence of at least 3.7 × 3.73 m", "the box is 1.6 × 1.6 m", "footprint_radius_m 0.2 m",
                 "Use at most 9 robots", "widen the workspace", "collision_avoidance: none"):
        assert part in msg, (part, msg)


@pytest.mark.parametrize("headless", [True, False], ids=["headless", "ros"])
def test_consensus_run_refuses_it_before_any_folder(tmp_path, capsys, no_runner, headless):
    out = tmp_path / "runs" / "run"
    err = refused(["run", "aggregation", *(["--headless"] if headless else []), "--robots", "40",
                   "--set", "workspace=[-1, 1, -1, 1]", "--out", str(out)], capsys)
    assert "40 robots do not fit inside the 2 × 2 m geofence" in err
    assert not (tmp_path / "runs").exists()


def test_the_most_that_fit_pass_and_one_more_is_refused():
    """The boundary the message names: 9 robots fit the 2 × 2 m fence, 10 do not."""
    assert load_config(num_robots=9, workspace=TWO_BY_TWO).num_robots == 9
    with pytest.raises(ConfigError, match="10 robots do not fit.*Use at most 9 robots"):
        load_config(num_robots=10, workspace=TWO_BY_TWO)


def test_a_fleet_that_fits_passes_and_the_filter_off_is_never_refused():
    assert load_config(num_robots=40).num_robots == 40                      # the default 20 × 20 m fence
    cfg = load_config(num_robots=40, workspace=TWO_BY_TWO, collision_avoidance="none")   # point robots
    assert cfg.num_robots == 40


def test_a_unicycle_s_offset_counts_in_the_spacing_and_the_box():
    """Unicycles pack 2 l further apart (d_min 1.45 m with l = v_max / w_max = 0.5 m) in a box l smaller per side:
    what fits single integrators may not fit them."""
    assert load_config(num_robots=150).num_robots == 150
    with pytest.raises(ConfigError, match=r"150 robots do not fit.*1\.55 m apart.*unicycle's offset"):
        load_config(num_robots=150, kinematics=UNICYCLE)


def test_a_robots_file_counts_its_own_robots_and_footprints(tmp_path):
    path = tmp_path / "robots.yaml"
    poses = [(-0.8 + 0.3 * (i % 6), -0.5 + 0.5 * (i // 6)) for i in range(12)]
    path.write_text("robots:\n" + "".join(
        f"  r{i}:\n    preset: generic\n    namespace: r{i}\n    initial_pose: [{x:.2f}, {y:.2f}]\n"
        for i, (x, y) in enumerate(poses)))
    with pytest.raises(ConfigError, match="12 robots do not fit inside the 2 × 2 m geofence"):
        load_config(robots_file=str(path), workspace=TWO_BY_TWO, num_robots=4)   # num_robots: not yet the file's
    assert load_config(robots_file=str(path), workspace=[-3.0, 3.0, -3.0, 3.0]).robots_file == str(path)


def test_the_disaster_refuses_drones_that_cannot_all_share_a_cell_of_its_grid():
    """Every drone may choose one cell: the grid (width × height cells of cell_size_m) must hold their packing."""
    small = dict(width=2, height=2, max_active=1, initial_disasters=1)
    with pytest.raises(ConfigError) as err:
        load_disaster_config(num_robots=30, **small)
    assert "30 robots do not fit inside the 2 × 2 m geofence" in str(err.value)
    assert "enlarge the grid (width, height, cell_size_m)" in str(err.value)
    assert load_disaster_config(num_robots=9, **small).num_robots == 9
    # a baseline that flies one drone, or no filter, cannot crowd it
    assert load_disaster_config(num_robots=30, baseline="single_llm", **small).num_robots == 30
    assert load_disaster_config(num_robots=30, collision_avoidance="none", **small).num_robots == 30


def test_the_naming_game_fleet_is_checked_against_its_fixed_fence():
    with pytest.raises(ConfigError, match=r"do not fit inside the 20 × 20 m geofence") as err:
        load_flat(RobotsGameConfig, num_robots=200, kinematics=UNICYCLE)
    assert "Use at most 135 robots; lower packing_gap_m" in str(err.value)      # no workspace to widen
    assert load_flat(RobotsGameConfig, num_robots=100, kinematics=UNICYCLE).num_robots == 100


# ------------------------------------------------------------------------------------------------ the shipped configs
@pytest.mark.parametrize("name", sorted(n for n, s in registry.scenarios().items() if s.config_cls is not None))
def test_every_scenario_s_defaults_and_shipped_config_still_validate(name):
    sc = registry.scenario(name)
    assert isinstance(sc.config_cls.from_dict({}), FlatParams)
    if sc.config_file:
        assert isinstance(load_flat(sc.config_cls, ROOT / "config" / sc.config_file), sc.config_cls)


def test_the_example_robots_file_still_validates():
    cfg = load_config(ROOT / "config" / "aggregation.yaml", robots_file=str(ROOT / "config" / "robots_example.yaml"))
    assert cfg.resolved_collision_avoidance(ros=False) == "cbf"          # checked: the filter is on


# ------------------------------------------------------------------------------------------------ narrow corridors
def test_a_corridor_narrower_than_a_body_is_an_error():
    with pytest.raises(ConfigError, match=r"workspace axis 1 is 0.3 m wide, narrower than a robot's body: "
                                          r"2 × \(footprint_radius_m 0.2 m\) = 0.4 m"):
        load_config(num_robots=2, workspace=[-5.0, 5.0, -0.15, 0.15])
    # a unicycle's body reaches its filtered point, l = v_max / w_max ahead
    with pytest.raises(ConfigError, match=r"axis 1 is 1 m wide.*offset v_max / w_max = 0.5 m\) = 1.4 m.*lower v_max"):
        load_config(num_robots=2, kinematics=UNICYCLE, workspace=[-5.0, 5.0, -0.5, 0.5])
    assert load_config(num_robots=2, workspace=[-5.0, 5.0, -0.5, 0.5]).num_robots == 2


def test_a_disaster_grid_narrower_than_a_drone_is_an_error():
    with pytest.raises(ConfigError, match=r"axis 0 is 0.3 m wide, narrower than a robot's body"):
        load_disaster_config(width=2, height=40, cell_size_m=0.15, max_active=1, initial_disasters=1)


# ------------------------------------------------------------------------------------------------ the robot core
def _core(n: int, fence: list[float]) -> RobotCore:
    cfg = load_config(num_robots=n, workspace=fence, collision_avoidance="none")   # validated without the check
    lo, hi = np.array(fence[0::2]), np.array(fence[1::2])
    avoid = Avoidance(kinematics=SINGLE_INTEGRATOR, v_max=cfg.v_max, w_max=cfg.w_max, gamma=cfg.cbf_gamma,
                      margin=cfg.safety_margin_m, radius=cfg.footprint_radius_m, fence=(lo, hi))
    return RobotCore(cfg, 0, None, avoid=avoid)


@pytest.mark.parametrize("fence", [TWO_BY_TWO, [0.0, 4.0, 0.0, 1.5], [-2.0, 2.0, -0.6, 0.6]])
def test_fits_is_what_the_robot_core_s_packing_does(fence):
    """``packing.fits`` agrees with ``GoalKeeper.inside`` (the pattern moved into the filter's box): a packing that
    fits has every slot inside the box, ``spacing`` apart, wherever the meeting point is; one more robot leaves a
    slot outside it (the core then clamps it onto the fence: the issue's 0.000 m apart)."""
    core = _core(2, fence)
    lo, hi = core.avoid.bounds
    spacing = core.avoid.d_min_m + core.gap
    most = most_that_fit(spacing, lo, hi)
    assert most >= 1
    for n, ok in ((most, True), (most + 1, False)):
        assert (fits(n, spacing, lo, hi) is None) is ok
        for target in ([fence[0], fence[2]], [fence[1], fence[3]], [0.5 * (fence[0] + fence[1]), fence[3]]):
            spots = core.goals.inside(slots(target, n, spacing))
            inside = bool(np.all((spots >= lo - 1e-9) & (spots <= hi + 1e-9)))
            assert inside is ok, (n, target)
            if ok and n > 1:
                d = np.linalg.norm(spots[:, None] - spots[None], axis=2)[np.triu_indices(n, 1)]
                assert d.min() >= spacing - 1e-9


# ------------------------------------------------------------------------------------------------ the filter's walls
def _avoid(fence_lo, fence_hi, **kw) -> Avoidance:
    base = dict(kinematics=SINGLE_INTEGRATOR, v_max=1.0, w_max=2.0, gamma=1.0, margin=0.05, radius=0.2)
    return Avoidance(**{**base, **kw}, fence=(np.array(fence_lo, float), np.array(fence_hi, float)))


def test_a_narrow_axis_loses_only_its_own_walls_and_every_step_without_them_is_counted():
    avoid = _avoid([-5.0, -0.1], [5.0, 0.1])          # y: 0.2 m, narrower than the 0.4 m body
    lo, hi = avoid.bounds
    assert lo[0] == pytest.approx(-4.8) and hi[0] == pytest.approx(4.8)       # x keeps its walls
    assert lo[1] == -np.inf and hi[1] == np.inf
    assert avoid.counters.open_axes == 1
    u = avoid.filter(np.array([4.7, 0.0]), np.array([1.0, 0.0]), np.empty((0, 2)))
    assert u[0] == pytest.approx(0.1)                 # the x wall binds: γ (4.8 - 4.7)
    avoid.filter(np.array([0.0, 0.0]), np.array([0.0, 1.0]), np.empty((0, 2)))
    info = avoid.info()
    assert info["unwalled"] == 2 and info["open_axes"] == 1 and info["steps"] == 2
    assert sum_collision([info, _avoid([-5.0, -5.0], [5.0, 5.0]).info()])["unwalled"] == 2


def test_a_fence_that_holds_the_body_counts_nothing():
    avoid = _avoid([-5.0, -0.2], [5.0, 0.2])          # exactly the body: a line of points, walls on both axes
    assert np.all(np.isfinite(np.concatenate(avoid.bounds))) and avoid.counters.open_axes == 0
    avoid.filter(np.array([0.0, 0.0]), np.array([0.0, 1.0]), np.empty((0, 2)))
    assert avoid.info()["unwalled"] == 0


def test_a_unicycle_s_offset_grown_at_run_time_opens_the_axis_counted_and_closes_it_again():
    avoid = _avoid([-5.0, -1.0], [5.0, 1.0], kinematics=UNICYCLE, v_max=0.5, w_max=2.0)   # l = 0.25: walls on
    assert avoid.counters.open_axes == 0
    avoid.set_limits(2.0, 2.0)                        # l = 1: 2 (0.2 + 1) > 2 m
    assert avoid.counters.open_axes == 1
    avoid.filter_unicycle([0.0, 0.0, 0.0], 0.5, 0.0, np.empty((0, 2)))
    avoid.set_limits(0.5, 2.0)
    assert avoid.counters.open_axes == 0
    avoid.filter_unicycle([0.0, 0.0, 0.0], 0.5, 0.0, np.empty((0, 2)))
    assert avoid.counters.unwalled == 1 and avoid.counters.steps == 2


def test_the_batched_filter_keeps_the_other_walls_and_its_steps_are_counted_too():
    """The fleet step (``FleetCore``: ``filter_velocity_many`` with each robot's ``bounds``, then
    ``counters.record``) treats an open axis as the one-robot filter does."""
    avoid = _avoid([-5.0, -0.1], [5.0, 0.1])
    lo, hi = avoid.bounds
    u, info = filter_velocity_many(np.array([[4.7, 0.0]]), np.array([[1.0, 0.5]]), np.full((1, 1, 2), np.nan),
                                   avoid.d_min_m, avoid.point_v_max, avoid.gamma, bounds=(lo[None], hi[None]))
    assert u[0, 0] == pytest.approx(0.1) and u[0, 1] == pytest.approx(0.5)
    avoid.counters.record(info.robot(0))
    assert avoid.counters.unwalled == 1
    batch = CollisionCounters(open_axes=1)
    batch.record(info)
    assert batch.unwalled == 1
