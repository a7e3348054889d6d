"""crazyflie_link (consensus.ros.crazyflie_link) against crazyswarm2's real simulator (crazyflie_sim 1.0.5, backend
``none``, sim time at 10 steps per sim-s, ``sim.max_dt`` 0.1: RTF 1), two drones, one link process each, judged on
the server's own ``/tf``:

* each drone takes off to 0.5 m (within 0.05) before its link publishes any pose to its robot;
* a body-frame Twist on ``/cfN/cmd_vel`` moves the drone by the commanded velocity times the time it was commanded;
* ``/estop`` true lands cf1 (z < 0.1 m), while cf2, whose link listens to another e-stop topic
  (``control.estop_topic``), flies on: one flight shows both endings;
* SIGINT (the end of a run) lands cf2 and both links exit 0.

Skips without the simulator (``make drivers``). The figures are printed (``pytest -s``)."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support import needs
from support.ros_watch import SpinningNode

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[2]
START = {"cf1": (0.5, -0.5), "cf2": (-0.5, 0.5)}
VEL = {"cf1": (0.3, -0.2), "cf2": (-0.2, 0.1)}     # body frame; the drones keep yaw 0, so the world frame too
H, LANDED_Z, LAND_S = 0.5, 0.1, 2.0
COMMAND_S = 2.0                                    # sim seconds of commanded motion
OTHER_ESTOP = "/estop_cf2_only"


def _server() -> Path:
    """crazyswarm2's simulator script: the venv's (``make drivers``), else the shared built tree's; skip (with the
    way to get it) if neither is there or its packages do not import."""
    if "crazyswarm2" in needs.TOOLS:
        needs.need("crazyswarm2")
    for module in ("crazyflie_interfaces", "tf2_msgs", "rowan"):
        pytest.importorskip(module, reason=f"{module} not importable: `make drivers` (crazyswarm2's simulator)")
    for path in (Path(sys.prefix) / "lib" / "crazyflie_sim" / "crazyflie_server",
                 ROOT.parent / "shared" / "drivers" / "install" / "lib" / "crazyflie_sim" / "crazyflie_server"):
        if path.is_file():
            return path
    pytest.skip("crazyswarm2's crazyflie_server not found: `make drivers`")


def _server_params(folder: Path) -> Path:
    robots = "\n".join(
        f'      {cf}: {{enabled: true, uri: "radio://0/80/2M/E7E7E7E70{i + 1}", '
        f"initial_position: [{x}, {y}, 0.0], type: cf21}}" for i, (cf, (x, y)) in enumerate(START.items()))
    path = folder / "crazyflie_server.yaml"
    path.write_text(f"""/crazyflie_server:
  ros__parameters:
    fileversion: 3
    robots:
{robots}
    robot_types:
      cf21: {{big_quad: false}}
    all: {{reference_frame: world}}
    sim:
      max_dt: 0.1
      backend: none
      controller: none
      visualizations:
        rviz: {{enabled: true}}
    robot_description: "<robot name=\\"$NAME\\"/>"
""")
    return path


def _link_params(folder: Path) -> Path:
    path = folder / "link.yaml"
    path.write_text(f"/**:\n  ros__parameters:\n    use_sim_time: true\n    flight_height_m: {H}\n"
                    f"    land_s: {LAND_S}\n    landed_z_m: {LANDED_Z}\n")
    return path


class _Watch(SpinningNode):
    """The test's own node on sim time, spinning in a thread: every /tf sample of the drones, each link's first
    pose and newest status; it commands the drones and presses the e-stop."""

    def __init__(self) -> None:
        from geometry_msgs.msg import PoseStamped, Twist
        from std_msgs.msg import Bool, String
        from tf2_msgs.msg import TFMessage

        from consensus import names
        from consensus.ros import qos

        super().__init__("link_test_watch", use_sim_time=True, period_s=0.02)
        self.Twist, self.Bool = Twist, Bool
        self.lock = threading.Lock()
        self.tf: dict[str, list[tuple]] = {cf: [] for cf in START}          # (stamp, x, y, z)
        self.first_pose: dict[str, tuple] = {}                             # (stamp, x, y, z)
        self.poses = dict.fromkeys(START, 0)
        self.status: dict[str, dict] = {}
        self.node.create_subscription(TFMessage, names.TF.name, self._on_tf, 50)
        self.cmd = {}
        for cf in START:
            self.node.create_subscription(PoseStamped, f"/{cf}/{names.LINK_POSE}",
                                          lambda m, cf=cf: self._on_pose(cf, m), qos.profile(names.ODOM))
            self.node.create_subscription(String, f"/{cf}/{names.LINK_STATUS}",
                                          lambda m, cf=cf: self._on_status(cf, m), qos.LATCHED)
            self.cmd[cf] = self.node.create_publisher(Twist, f"/{cf}/{names.CMD_VEL.name}", qos.profile(names.CMD_VEL))
        self.estop = self.node.create_publisher(Bool, names.ESTOP.name, qos.profile(names.ESTOP))

    def _on_tf(self, msg) -> None:
        with self.lock:
            for t in msg.transforms:
                if t.header.frame_id == "world" and t.child_frame_id in self.tf:
                    p = t.transform.translation
                    self.tf[t.child_frame_id].append((t.header.stamp.sec + t.header.stamp.nanosec * 1e-9,
                                                      p.x, p.y, p.z))

    def _on_pose(self, cf: str, m) -> None:
        with self.lock:
            self.poses[cf] += 1
            if cf not in self.first_pose:
                p = m.pose.position
                self.first_pose[cf] = (m.header.stamp.sec + m.header.stamp.nanosec * 1e-9, p.x, p.y, p.z)

    def _on_status(self, cf: str, m) -> None:
        with self.lock:
            self.status[cf] = json.loads(m.data)

    def now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def latest(self, cf: str) -> tuple:
        with self.lock:
            return self.tf[cf][-1]

    def wait(self, predicate, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if predicate():
                    return True
            time.sleep(0.02)
        return False

    def command(self, cf: str, vx: float, vy: float) -> None:
        msg = self.Twist()
        msg.linear.x, msg.linear.y = float(vx), float(vy)
        self.cmd[cf].publish(msg)


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    with open(log, "w") as handle:
        return subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def test_two_drones_take_off_fly_the_commands_and_land_on_the_estop_and_at_the_end(tmp_path):
    server = _server()
    wall0 = time.monotonic()
    link_file = _link_params(tmp_path)
    procs: dict[str, subprocess.Popen] = {}
    figures: dict = {}
    try:
        with _Watch() as w:
            procs["server"] = _start([sys.executable, str(server), "--ros-args", "--params-file",
                                      str(_server_params(tmp_path))], tmp_path / "server.log")
            for cf in START:
                extra = ["-p", f"control.estop_topic:={OTHER_ESTOP}"] if cf == "cf2" else []
                procs[cf] = _start([sys.executable, "-m", "consensus.ros.crazyflie_link", "--ros-args",
                                    "-r", f"__ns:=/{cf}", "--params-file", str(link_file), *extra],
                                   tmp_path / f"link_{cf}.log")
            logs = lambda: "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(tmp_path.glob("*.log")))  # noqa: E731

            # take-off: the first pose each robot gets is the drone at the flight height, above its start
            assert w.wait(lambda: len(w.first_pose) == 2 and all(w.tf.values()), 30), logs()
            for cf, (stamp, x, y, z) in w.first_pose.items():
                assert abs(z - H) < 0.05, (cf, z)
                assert math.hypot(x - START[cf][0], y - START[cf][1]) < 1e-6, (cf, x, y)
                figures[f"{cf}_takeoff_z"] = round(z, 4)
                figures[f"{cf}_first_pose_sim_s"] = round(stamp, 2)
            figures["first_poses_wall_s"] = round(time.monotonic() - wall0, 1)
            with w.lock:
                assert all(st["phase"] == "fly" for st in w.status.values()), w.status

            # motion: the commanded velocities for COMMAND_S sim seconds, 10 commands a second; then zeros (hover)
            start = {cf: w.latest(cf) for cf in START}
            t0 = w.now()
            while w.now() - t0 < COMMAND_S and time.monotonic() - wall0 < 40:
                for cf, v in VEL.items():
                    w.command(cf, *v)
                time.sleep(0.1)
            t1 = w.now()
            for _ in range(5):
                for cf in START:
                    w.command(cf, 0.0, 0.0)
                time.sleep(0.1)
            for cf, (vx, vy) in VEL.items():
                end = w.latest(cf)
                dx, dy = end[1] - start[cf][1], end[2] - start[cf][2]
                # the link integrates each command over its measured tick intervals: at most a tick's worth (0.1 s)
                # at either end differs from the test's own timing of the window
                assert math.hypot(dx - vx * (t1 - t0), dy - vy * (t1 - t0)) < 0.08, (cf, dx, dy, t1 - t0)
                assert abs(end[3] - H) < 1e-6, (cf, end)
                figures[f"{cf}_moved"] = (round(dx, 3), round(dy, 3))
            figures["commanded_sim_s"] = round(t1 - t0, 2)

            # the e-stop lands cf1; cf2 (another e-stop topic) hovers on while the test keeps commanding zero
            estop_at = w.now()
            w.estop.publish(w.Bool(data=True))
            landed = w.wait(lambda: w.tf["cf1"][-1][3] < LANDED_Z, 10)
            for cf in START:
                w.command(cf, 0.0, 0.0)
            assert landed, logs()
            figures["estop_landing_sim_s"] = round(w.now() - estop_at, 2)
            assert w.wait(lambda: w.status.get("cf1", {}).get("phase") == "landed", 5), w.status
            assert abs(w.latest("cf2")[3] - H) < 1e-6 and w.status["cf2"]["phase"] == "fly", w.status["cf2"]
            assert w.status["cf1"]["reason"].endswith("e-stop"), w.status["cf1"]
            w.estop.publish(w.Bool(data=False))              # released: cf1 stays down
            time.sleep(0.5)

            # the end of the run: SIGINT lands cf2; both links exit 0
            stop_at, stop_wall = w.now(), time.monotonic()
            for cf in START:
                procs[cf].send_signal(signal.SIGINT)
            codes = {cf: procs[cf].wait(timeout=LAND_S + 1.0 + 6.0) for cf in START}
            figures["links_exit_wall_s"] = round(time.monotonic() - stop_wall, 2)
            assert codes == {"cf1": 0, "cf2": 0}, logs()
            assert w.wait(lambda: w.tf["cf2"][-1][3] < LANDED_Z, 5), logs()
            figures["sigint_landing_sim_s"] = round(w.now() - stop_at, 2)
            # the links' last status records may come after their TF shows them down; and under load a link that
            # stops on SIGINT can exit (its bounded wait over) before its own pose shows it down while the simulator
            # lands it: two full runs of 2026-11-30 (3 of 4 passed) read cf2 in "land" here after the link exited 0
            # and its TF showed it down. The drone's landing is judged above on the simulator's TF; its link's last
            # word must be the landing or the landing under way, never flight
            w.wait(lambda: all(w.status.get(cf, {}).get("phase") == "landed" for cf in START), 5)
            with w.lock:
                figures["landed_z"] = {cf: round(w.tf[cf][-1][3], 3) for cf in START}
                status = dict(w.status)
            assert status["cf1"]["phase"] == "landed", status
            assert status["cf2"]["phase"] in ("landed", "land"), status
            assert status["cf2"]["reason"].endswith("the run ended"), status["cf2"]
            assert status["cf1"]["estop"] is False and status["cf1"]["commands_dropped"] > 0     # after the e-stop
            for cf in START:
                assert status[cf]["bad_messages"] == 0 and status[cf]["callback_errors"] == 0, status[cf]
                assert status[cf]["setpoints"] > 10 * COMMAND_S, status[cf]
            # no pose reached a robot before its take-off was done (the first one, above, was at the height)
            figures["wall_s"] = round(time.monotonic() - wall0, 1)
            print("crazyflie_link against crazyswarm2's simulator:", json.dumps(figures))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            _kill(proc)


def test_the_link_parameters_are_declared_with_meaning_and_range_and_a_bad_one_is_one_line(ros):
    """No simulator needed: the parameters of ``crazyflie_link`` (robot_name from the namespace, the LinkParams
    fields with their ranges, the robots' e-stop topic) and the one-line refusals."""
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from consensus.errors import ConfigError
    from consensus.robots.crazyflie import FIELDS
    from consensus.control.controller import yaw_from_quaternion
    from consensus.ros.crazyflie_link import declare_link_parameters

    node = Node("link", namespace="/fleet_a/cf3")
    try:
        params, robot, world, estop, cap = declare_link_parameters(node)
        assert (robot, world, estop, cap) == ("cf3", "world", "/estop", 5.0)
        assert params.flight_height_m == 0.5 and params.rate_hz == 10.0
        for name, (doc, unit, (lo, hi)) in FIELDS.items():
            desc = node.describe_parameter(name)
            assert doc in desc.description and f"[{unit}]" in desc.description and desc.read_only, name
            rng = desc.floating_point_range[0]
            assert (rng.from_value, rng.to_value) == (lo, hi), name
        assert "crazyswarm2 name" in node.describe_parameter("robot_name").description
    finally:
        node.destroy_node()
    for overrides, words in (([Parameter("flight_height_m", value=9.0)], "flight_height_m"),
                             ([Parameter("landed_z_m", value=0.6)], "must be below flight_height_m"),
                             ([Parameter("rate_hz", value=10)], "rate_hz"),
                             ([Parameter("robot_name", value="cf 1")], "not a crazyswarm2 name")):
        node = Node("link", namespace="/cf1", parameter_overrides=overrides)
        try:
            with pytest.raises(ConfigError) as err:
                declare_link_parameters(node)
            assert words in str(err.value) and "\n" not in str(err.value), str(err.value)
        finally:
            node.destroy_node()
    # the yaw the link reads from /tf (the project's yaw_from_quaternion; an invalid rotation is a bad pose)
    assert yaw_from_quaternion(0.0, 0.0, math.sin(0.35), math.cos(0.35)) == pytest.approx(0.7)
    assert yaw_from_quaternion(0.0, 0.0, 2 * math.sin(0.35), 2 * math.cos(0.35)) == pytest.approx(0.7)   # not unit
    for bad in ((0.0, 0.0, 0.0, 0.0), (math.nan, 0.0, 0.0, 1.0)):
        with pytest.raises(ValueError):
            yaw_from_quaternion(*bad)
