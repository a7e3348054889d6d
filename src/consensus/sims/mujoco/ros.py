"""``mujoco_sim``: the ``sim`` node's wiring around a MuJoCo physics world (``sim: mujoco``; the ``mujoco`` extra).

The same topics as the built-in ``sim`` (``consensus.sims.builtin.ros``) and the real robots: it follows
``/robot_<i>/cmd_vel`` and publishes ``/robot_<i>/odom`` (frame ``world``) at ``sim_rate_hz`` and ``/clock`` with
``publish_clock``, so the nodes do not know which world moves them. Between two odometry messages the world
(``consensus.sims.mujoco.world.MujocoWorld``) takes whole physics steps at ``physics_rate_hz``. It runs in real time
(``realtime_factor`` 1), faster or slower (the factor), or as fast as the machine allows (0; with sim time, so that
the nodes follow its /clock, which is the physics' own time). The odometry carries the realism knobs (noise,
localisation offset); a unicycle's twist is in its body frame, a single integrator's in the world frame, as the
built-in sim publishes them.

MuJoCo's contacts between robots, and between robots and walls, are the run's independent judge: the node writes
them to ``RUN/contacts.json`` every second of sim time and when it ends (``consensus run`` adds them to
``summary.json``: ``contacts``, ``contact_list``, ``max_penetration_m``).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
from consensus.sims.builtin import ros as sim
from consensus.ros.process import node_main

#: the fields the node reads: the built-in simulator's and the physics group's
USES = (*sim.USES, "footprint_radius_m", "output_dir", "physics_rate_hz", "realtime_factor", "accel_max",
        "flight_altitude_m", "floor_cell_m", "wheel_friction", "actuator_lag_s", "odom_noise_m",
        "localization_offset_m")
CONTACTS_FILE = "contacts.json"
WRITE_EVERY_S = 1.0          # sim seconds between two writes of contacts.json
FAST_TICK_S = 0.001          # realtime_factor 0: wall seconds between two steps (the executor's breath)


class MujocoSimulator(sim.Simulator):
    """``consensus.sims.builtin.ros.Simulator`` with a MuJoCo world in place of the kinematics."""

    USES = USES

    def start(self, start: np.ndarray):
        from consensus.sims.mujoco.world import MujocoWorld

        cfg = self.cfg
        world = MujocoWorld(cfg, start, seed=cfg.seed)
        self.contacts_path = Path(cfg.output_dir) / CONTACTS_FILE if cfg.output_dir else None
        self.written_at, self.written_wall = 0.0, time.monotonic()
        if self.contacts_path is None:
            self.node.get_logger().warning("no output_dir: MuJoCo's contacts are only logged at the end")
        else:
            world.save_xml(Path(cfg.output_dir))
        self.node.get_logger().info(
            f"MuJoCo world: {cfg.num_robots} bodies, physics at {cfg.physics_rate_hz:g} Hz, "
            f"realtime_factor {cfg.realtime_factor:g}")
        if cfg.realtime_factor != 1.0 and not cfg.publish_clock:
            self.node.get_logger().warning(
                "realtime_factor is not 1 but the world publishes no /clock: nodes on the wall clock will see it "
                "run at another speed (use sim time: --use-sim-time, publish_clock)")
        return world

    def tick_period_s(self) -> float:
        factor = float(self.cfg.realtime_factor)
        return self.dt / factor if factor > 0 else FAST_TICK_S

    def sim_ns(self, now: float) -> int:
        return int(round(self.world.time * 1e9))

    def cmd_clock(self) -> float:
        """A command's age in the world's time: a world 50 times faster than real time still stops a robot whose
        controller fell silent 0.5 s (of its time) ago."""
        return self.world.time

    def advance(self, cmd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = super().advance(cmd)
        if self.world.time - self.written_at >= WRITE_EVERY_S and time.monotonic() - self.written_wall >= WRITE_EVERY_S:
            self.write_contacts()              # at most once a second of both clocks (a fast world writes no more)
        return out

    def write_contacts(self) -> None:
        """``RUN/contacts.json``: the world's judgement so far (replaced whole: a reader never sees half a file)."""
        self.written_at, self.written_wall = self.world.time, time.monotonic()
        if self.contacts_path is None:
            return
        tmp = self.contacts_path.with_suffix(".json.tmp")
        try:
            tmp.write_text(json.dumps({"t_s": round(self.world.time, 3), **self.world.judgement()}))
            os.replace(tmp, self.contacts_path)
        except OSError as exc:            # a full disk: the last whole file stays
            self.node.get_logger().warning(f"contacts.json not written: {exc}")

    def finish(self) -> None:
        self.write_contacts()
        judged = self.world.judgement()
        self.node.get_logger().info(f"MuJoCo judged {judged['contacts']} contact(s) in {self.world.time:.1f} s "
                                    f"of physics ({judged['physics_steps']} steps)")


def main() -> int:
    return node_main("sim", MujocoSimulator, before=sim._clock_source)

