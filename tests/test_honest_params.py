"""Honest parameters (issue 30, part 3): a node declares only the config fields it reads (``declare_config(uses=)``),
so ``ros2 param list`` tells what it uses; the fields it does not declare still take the run's values from the
parameters file (rclpy's overrides of the node), so its config and the manifest it writes stay the run's.

The ``uses`` lists are checked against what each node really reads: the node is built and spun in-process with every
config attribute read recorded (outside the whole-config methods: ``to_dict``, ``from_dict``, ``replace``,
``validate``, ``manifest_llm``), and every field read must be one it declared.
"""
from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from consensus.errors import ConfigError
from consensus.settings import FlatParams

WHOLE = ("to_dict", "from_dict", "replace", "validate", "manifest_llm")


class ReadLog:
    """Record the config fields read while active (monkeypatched ``FlatParams.__getattribute__``)."""

    def __init__(self, monkeypatch) -> None:
        self.read: dict[int, set[str]] = {}          # id of the config object -> the fields read of it
        self._quiet = threading.local()
        names: dict[type, frozenset] = {}
        log = self

        def getattribute(obj, name):
            if not getattr(log._quiet, "n", 0):
                cls = type(obj)
                fields = names.get(cls)
                if fields is None:
                    fields = names[cls] = frozenset(f.name for f in dataclasses.fields(cls))
                if name in fields:
                    log.read.setdefault(id(obj), set()).add(name)
            return object.__getattribute__(obj, name)

        monkeypatch.setattr(FlatParams, "__getattribute__", getattribute, raising=False)
        for cls in _config_classes():
            for meth in WHOLE:
                raw = cls.__dict__.get(meth)
                if raw is None:
                    continue
                monkeypatch.setattr(cls, meth, self._silenced(raw))

    def _silenced(self, raw):
        func = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
        quiet = self._quiet

        def call(*args, **kwargs):
            quiet.n = getattr(quiet, "n", 0) + 1
            try:
                return func(*args, **kwargs)
            finally:
                quiet.n -= 1
        return classmethod(call) if isinstance(raw, classmethod) else call


def _config_classes() -> list[type]:
    out, todo = [], [FlatParams]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return out


def _node(name: str, **params):
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    return Node(name, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])


def _spin(nodes, seconds: float) -> None:
    from rclpy.executors import SingleThreadedExecutor

    ex = SingleThreadedExecutor()
    for n in nodes:
        ex.add_node(n)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ex.spin_once(timeout_sec=0.02)


@pytest.mark.ros
def test_a_node_declares_only_what_it_uses_and_still_takes_the_run_s_other_values(ros):
    from consensus.ros.params import declare_config
    from consensus.scenarios.aggregation.config import AggregationConfig
    from consensus.scenarios.aggregation.ros import recorder

    node = _node("recorder", num_robots=3, link_delay_s=0.2, llm_model="m.gguf")
    try:
        cfg = declare_config(node, AggregationConfig, uses=recorder.USES)
        declared = {p for p in node._parameters if p not in ("use_sim_time", "start_type_description_service")}
        assert declared == set(recorder.USES)
        assert len(node._parameters) <= 30                     # issue 30: `ros2 param list /recorder` shows <= 30
        assert cfg.num_robots == 3                              # declared, from the parameters file
        assert cfg.link_delay_s == 0.2 and cfg.llm_model == "m.gguf"      # not declared, still the run's values
        assert not node.has_parameter("link_delay_s")
    finally:
        node.destroy_node()


@pytest.mark.ros
def test_uses_naming_no_field_is_a_programming_error_and_a_bad_undeclared_value_one_clear_error(ros):
    from consensus.ros.params import declare_config
    from consensus.scenarios.aggregation.config import AggregationConfig

    node = _node("x", link_drop_prob="often")
    try:
        with pytest.raises(ValueError, match="no field"):
            declare_config(node, AggregationConfig, uses=("num_robots", "no_such_field"))
        with pytest.raises(ConfigError, match="link_drop_prob"):
            declare_config(node, AggregationConfig, uses=("num_robots",))
    finally:
        node.destroy_node()


@pytest.mark.ros
@pytest.mark.parametrize("which", ["recorder", "topology", "sim"])
def test_every_field_a_node_reads_is_one_it_declares(ros, which, tmp_path, monkeypatch):
    from consensus.scenarios.aggregation.ros import recorder, topology
    from consensus.ros import sim

    params = dict(num_robots=3, output_dir=str(tmp_path / "run"), collision_avoidance="cbf", duration_s=1.0)
    make = {"recorder": (recorder.Recorder, recorder.USES, ()),
            "topology": (topology.TopologyRelay, topology.USES, topology.GRAPH_PARAMS),
            "sim": (sim.Simulator, sim.USES, ())}[which]
    cls, uses, runtime = make
    log = ReadLog(monkeypatch)
    feeder = _node("feeder", **params) if which != "sim" else None
    nodes = []
    try:
        if feeder is not None:          # robots' odometry to read, so that the periodic paths run too
            sim.Simulator(feeder)
            nodes.append(feeder)
        node = _node(which, **params)
        nodes.append(node)
        obj = cls(node)
        _spin(nodes, 1.5)
        end = getattr(obj, "finish", None)
        if callable(end) and which == "recorder":
            end()
    finally:
        for n in nodes:
            n.destroy_node()
    read = log.read.get(id(obj.cfg), set())
    assert read, "nothing was read: the log is not recording"
    assert read <= set(uses) | set(runtime), f"{which} reads undeclared fields: {sorted(read - set(uses))}"


def test_every_field_of_every_node_config_has_a_description():
    """The ROS parameter descriptions come from the comment at a field (or the block right above it)."""
    import importlib

    modules = {f"consensus.scenarios.{name}.config" for name in ("aggregation", "disaster", "info_spread",
                                                                   "naming_game", "nlp_tasks", "public_goods")}
    modules |= {"consensus.ros.bag_recorder", "consensus.settings"}
    for mod in modules:
        importlib.import_module(mod)
    # (only the project's own: another test's throwaway example scenario may be loaded in this process)
    configs = [c for c in _config_classes() if dataclasses.is_dataclass(c) and c.__module__ in modules]
    assert {"AggregationConfig", "DisasterConfig", "BagConfig", "RobotBaseConfig"} <= {c.__name__ for c in configs}
    empty = {c.__name__: [k for k, v in c.field_docs().items() if not v] for c in configs}
    assert not {k: v for k, v in empty.items() if v}, empty
