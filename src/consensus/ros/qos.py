"""QoS profiles of the stack, chosen from measurements on a 2-core machine (docs/benchmarks.md).

* ``STREAM`` (best effort, depth 5) for high-rate state streams — odom, state, neighbors, /clock. A lost sample is
  replaced by the next one, and a best-effort publish costs ~0.1 ms where a reliable one measured ~0.5 ms with a
  busy reader. A best-effort subscription also accepts reliable publishers (e.g. a real robot's odometry).
* ``EVENTS`` (reliable, depth 50) for low-rate records that must not be lost: target, planner status.
* ``HISTORY`` (``EVENTS``, transient local) for the planner's reasoning records: a subscriber that comes late (the
  recorder, started after the robots) still gets the rounds planned before it.
* ``COMMAND`` for cmd_vel: reliable by default (like turtlesim and most robot drivers, which a best-effort publisher
  would not match); ``cmd_vel_best_effort: true`` trades that for speed when every subscriber is best effort
  (the built-in sim's is).
"""
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

STREAM = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
EVENTS = QoSProfile(depth=50)
# the records of a run a recorder started after the robots must still get (a recorder started last on a loaded
# host would otherwise miss the first planning round's records; the incident: docs/benchmarks.md, 'Why the code is
# as it is')
HISTORY = QoSProfile(depth=50, durability=DurabilityPolicy.TRANSIENT_LOCAL)
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def command(best_effort: bool) -> QoSProfile:
    return QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT if best_effort
                      else ReliabilityPolicy.RELIABLE)


# subscribers of cmd_vel (the sim) accept both
COMMAND_SUB = STREAM


def profile(topic, *, best_effort_commands: bool = False) -> QoSProfile:
    """The QoS profile of a ``consensus.names.Topic`` (its QoS class), for its publishers and subscribers alike."""
    if topic.qos == "command":
        return command(best_effort_commands)
    base = {"stream": STREAM, "events": EVENTS, "history": HISTORY, "latched": LATCHED}[topic.qos]
    depth = topic.depth            # a protocol's kept records: the class with a deeper history
    if depth is None or depth == base.depth:
        return base
    return QoSProfile(depth=depth, reliability=base.reliability, durability=base.durability)


#: the depth of a recorder's subscriptions (the run's recorder: the robots' streams, whose publishers keep 5; the bag
#: recorder: every topic). A recorder runs niced (``consensus.ros.process.BACKGROUND_NICE``) and on a loaded host
#: may take them seconds late, and must not lose one meanwhile: the publishers' depth is too shallow for that (the
#: incident: docs/benchmarks.md, 'Why the code is as it is')
RECORDER_DEPTH = 100


def recording(topic) -> QoSProfile:
    """``profile(topic)`` with a recorder's depth (``RECORDER_DEPTH``): what a recorder subscribes with."""
    base = profile(topic)
    return QoSProfile(depth=max(base.depth, RECORDER_DEPTH), reliability=base.reliability,
                      durability=base.durability)
