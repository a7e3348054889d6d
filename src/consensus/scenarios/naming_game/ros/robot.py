"""``naming_robot``: the robots of the naming game. Each holds its memory and draws its own words, and drives to the
rendezvous point of the word it has just said.

A robot is a ``consensus.ros.robot.RobotNode`` (P controller, geofence, speed limit, stale-odometry stop, the
``cmd_vel``/``state``/``target``/``planner/status`` topics). Its meeting point is not planned periodically but set by
the game: after each interaction it is the point of the robot's own word. The game side is ``fleet_game.Player``, called
as ``fleet_game.play_headless`` calls it (``say()`` when named in a pair, ``hear(own, partner)`` when the outcome
comes), so a run draws the reference's words. The protocol is ``ros/protocol.py``.

Runs one robot per process (namespace ``robot_<i>``, node ``/robot_<i>/agent``) or the whole fleet in one process
(root namespace, ``/fleet``); see ``consensus.ros.fleet.run_robots``.
"""
from __future__ import annotations

from typing import Callable

from rclpy.node import Node
from std_msgs.msg import String

from consensus.ros import qos
from consensus.ros.fleet import run_robots
from consensus.ros.health import guarded_record
from consensus.ros.robot import RobotNode
from consensus.scenarios.naming_game.fleet_game import Player, RobotsGameConfig, controller_config, fleet_policy
from consensus.scenarios.naming_game.ros import protocol
from consensus.scenarios.naming_game.ros.protocol import (WordRecord, declare_game_config, message, parse_outcome,
                                                          parse_pair)
from consensus.settings import ControlParams, RobotBaseConfig, runtime_fields

#: the groups a robot reads whole (``consensus.settings.field_group``: ``control.kp``, ...): the robot process's
#: (``consensus.ros.fleet.run_robots``: layout, output directory) and ``RobotNode``'s through
#: ``fleet_game.controller_config`` (control, safety, collision filter); and the single fields it reads of the others:
#: the players' (memory, policy, words, rendezvous points) and the physics knobs the robot core reads (its odometry's
#: creep tolerance: the noise and the drive's lag). A fleet plays a fixed table (no LLM group); the simulator's and
#: the matchmaker's fields (the schedule's timing, the tally, the arrival) stay theirs
GROUPS = ("run", "control", "fleet")
USES = ("rendezvous", "memory", "words", "policy", "actuator_lag_s", "odom_noise_m")


class NamingGameRobot(RobotNode):
    """Robot ``robot_id`` of a naming-game fleet, attached to ``node`` (namespace ``robot_<id>``); ``player`` is its
    side of the game (``fleet_game.Player``), ``cfg`` its controller settings (``fleet_game.controller_config``)."""

    def __init__(self, node: Node, cfg: RobotBaseConfig, robot_id: int, player: Player, n: int) -> None:
        super().__init__(node, cfg, robot_id, planner=None, pool=None)
        self.player = player
        self.n = n
        self.open: tuple[int, int, str] | None = None     # (interaction, word said, memory key) awaiting its outcome
        self.waiting: dict | None = None                  # a pair named us before our earlier outcomes arrived
        self.last_pair = -1                               # newest interaction we were named in
        self.last_outcome = -1                            # newest outcome of ours applied (or skipped)
        self.counters.update(words=0, deferred=0, skipped=0, late_pairs=0)
        ns = node.get_namespace()  # the run's shared channels sit under its namespace (names.Topic.in_run)
        for topic, callback in ((protocol.NAMING_GAME_PAIRS, self._on_pair),
                                (protocol.NAMING_GAME_OUTCOMES, self._on_outcome),
                                (protocol.NAMING_GAME_STATUS, self._on_game_status)):
            node.create_subscription(String, topic.in_run(ns), self._guard(callback), qos.profile(topic))
        self.pub_word = node.create_publisher(String, protocol.NAMING_GAME_WORDS.in_run(ns),
                                              qos.profile(protocol.NAMING_GAME_WORDS))

    def _guard(self, fn: Callable[[String], None]) -> Callable[[String], None]:
        """A malformed record is counted (``bad_messages``) and dropped; any other exception is counted by
        ``guarded`` (``callback_errors``)."""
        return guarded_record(fn, f"robot_{self.id}.{fn.__name__.lstrip('_')}", self.health)

    # ------------------------------------------------------------------ the game
    def _on_game_status(self, _msg: String) -> None:
        self.core.alive(self._now())                # the game clock is alive

    def _on_pair(self, msg: String) -> None:
        rec = parse_pair(msg.data, self.n)
        self.core.alive(self._now())
        if self.id not in (rec.i, rec.j) or rec.interaction <= self.last_pair:
            return                                  # not ours, or seen before (a late-matched history)
        self.last_pair = rec.interaction
        expected = rec.played_i if self.id == rec.i else rec.played_j
        if self.player.played > expected:
            raise ValueError(f"interaction {rec.interaction}: the matchmaker counts {expected} games of ours, "
                             f"we played {self.player.played}")
        self.waiting = {"interaction": rec.interaction, "played": expected, "deadline": rec.deadline}
        if self.player.played < expected:
            self.counters["deferred"] += 1          # an earlier outcome is still on its way
        self._answer_if_due()

    def _answer_if_due(self) -> None:
        w = self.waiting
        if w is None or self.player.played != w["played"]:
            return
        self.waiting = None
        if self._now() > w["deadline"]:
            self.counters["late_pairs"] += 1        # the matchmaker has given up on it: do not spend a draw
            return
        key = self.player.key
        word = self.player.say()
        self.open = (w["interaction"], word, key)
        self.counters["words"] += 1
        self.pub_word.publish(message(WordRecord(interaction=w["interaction"], robot=self.id, word=word, state=key,
                                                 stamp=self._now())))

    def _on_outcome(self, msg: String) -> None:
        rec = parse_outcome(msg.data, self.n)
        self.core.alive(self._now())
        k = rec.interaction
        if self.id not in (rec.i, rec.j) or k <= self.last_outcome:
            return
        self.last_outcome = k
        if self.waiting is not None and self.waiting["interaction"] == k:
            self.waiting = None                     # skipped before we could answer
        if self.open is None or self.open[0] != k:
            if not rec.skipped:
                raise ValueError(f"outcome of interaction {k}, which we did not answer")
            return
        _, said, _ = self.open
        self.open = None
        if rec.skipped:
            self.counters["skipped"] += 1           # our draw is spent; the reference is left behind
            self._answer_if_due()
            return
        own, partner = (rec.word_i, rec.word_j) if self.id == rec.i else (rec.word_j, rec.word_i)
        if own != said:
            raise ValueError(f"outcome of interaction {k} says we said {own}, we said {said}")
        self.player.hear(own, partner)
        self._drive_to(self.player.target)
        self._answer_if_due()

    def _drive_to(self, point) -> None:
        point, _ = self.core.set_meeting_point(point, self._now())
        self._publish_point(self.pub_target, point)

    # ------------------------------------------------------------------ RobotNode hooks
    def plan_tick(self) -> None:
        """The slow tick: only the status report (meeting points come from the game)."""
        self._decode_inputs()
        self.publish_status()

    def status(self) -> dict:
        out = super().status()
        p = self.player
        out.update(memory=p.key, word=p.word, played=p.played, draws=p.draws,
                   target=None if self.meeting_point is None else [float(v) for v in self.meeting_point],
                   position=None if self.pos is None else [float(v) for v in self.pos],
                   pending=None if self.open is None else self.open[0])
        return out


def main() -> int:
    game: dict = {}

    def read_config(node: Node) -> RobotBaseConfig:
        cfg: RobotsGameConfig = declare_game_config(node, runtime_fields(ControlParams), groups=GROUPS, uses=USES)
        game.update(cfg=cfg, policy=fleet_policy(cfg))
        return controller_config(cfg)[0]

    def build(_base: RobotBaseConfig, ids: list[int], _client) -> list[Player]:
        cfg = game["cfg"]
        return [Player(i, game["policy"].q, cfg.memory, cfg.seed, cfg.points()) for i in ids]

    def attach(node: Node, base: RobotBaseConfig, i: int, player: Player, _pool, _status) -> NamingGameRobot:
        return NamingGameRobot(node, base, i, player, game["cfg"].num_robots)

    return run_robots("naming_robot", read_config, build, attach)
