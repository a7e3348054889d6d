"""Honest parameters (issue 30, part 3): a node declares only the config fields it reads (``declare_config(uses=)``),
so ``ros2 param list`` tells what it uses; the fields it does not declare still take the run's values from the
parameters file (rclpy's overrides of the node), so its config and the manifest it writes stay the run's.

The ``uses`` lists are checked against what each node really reads: the node is built and spun in-process with every
config attribute read recorded (outside the whole-config methods: ``to_dict``, ``from_dict``, ``replace``,
``validate``, ``manifest_llm``; a field read of a config made from the node's by ``robot_base_overrides``, e.g. the
disaster drones' controller settings, counts as read of the node's), and every field read must be one it declared.
The disaster and naming-game nodes play a tiny run to its end, and every field they declare but did not read must be
one read on a path that run does not take (``ELSEWHERE``).
"""
from __future__ import annotations

import dataclasses
import threading
import time
import types

import pytest

from consensus.errors import ConfigError
from consensus.settings import FlatParams

WHOLE = ("to_dict", "from_dict", "replace", "validate", "manifest_llm")


class ReadLog:
    """Record the config fields read while active (monkeypatched ``FlatParams.__getattribute__``)."""

    def __init__(self, monkeypatch) -> None:
        self.read: dict[int, set[str]] = {}          # id of the config object -> the fields read of it
        # (a config made from another, that one, the fields it took over): a kernel component's RobotBaseConfig
        # made from a scenario's config (``robot_base_overrides``); a field read of it is read of the source
        self.derived: list[tuple[object, object, frozenset[str]]] = []
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
        groups = {klass for cls in _config_classes() for klass in cls.__mro__ if klass is not object}
        for cls in groups:              # the configs and the groups they compose (LLMParams.manifest_llm)
            for meth in WHOLE:
                raw = cls.__dict__.get(meth)
                if raw is None:
                    continue
                monkeypatch.setattr(cls, meth, self._silenced(raw))
        self._follow_robot_base_overrides(monkeypatch)

    def _follow_robot_base_overrides(self, monkeypatch) -> None:
        """``robot_base_overrides`` copies every field a scenario's config shares with ``RobotBaseConfig`` into the
        kernel's config (a whole-config step, not a use): the copy is not logged, and the fields later read of the
        made config (except the ones the caller set) count as read of the source."""
        import sys

        import consensus.scenarios.disaster.processes  # noqa: F401 - the modules that import it by name
        import consensus.scenarios.naming_game.fleet_game  # noqa: F401
        from consensus.runs import processes

        raw = processes.robot_base_overrides
        silenced = self._silenced(raw)

        def overrides(cfg, settings, *, values=None, exclude=(), **kw):
            base, out = silenced(cfg, settings, values=values, exclude=exclude, **kw)
            source = cfg if values is None else values
            shared = {f.name for f in dataclasses.fields(base)} & {f.name for f in dataclasses.fields(source)}
            self.derived.append((base, source, frozenset(shared - set(exclude) - set(settings))))
            return base, out

        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("consensus") and vars(mod).get("robot_base_overrides") is raw:
                monkeypatch.setattr(mod, "robot_base_overrides", overrides)

    def of(self, cfg) -> set[str]:
        """The fields read of ``cfg``, directly or through the configs made from it."""
        out = set(self.read.get(id(cfg), ()))
        for made, source, taken in self.derived:
            if source is cfg and made is not cfg:
                out |= self.of(made) & taken
        return out

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
    from consensus.settings import ros_names

    node = _node("recorder", num_robots=3, link_delay_s=0.2, llm_model="m.gguf")
    try:
        cfg = declare_config(node, AggregationConfig, uses=recorder.USES)
        declared = {p for p in node._parameters if p not in ("use_sim_time", "start_type_description_service")}
        assert declared == {ros_names(AggregationConfig)[n] for n in recorder.USES}     # nested: fleet.num_robots
        assert len(node._parameters) <= 30                     # issue 30: `ros2 param list /recorder` shows <= 30
        assert cfg.num_robots == 3                              # declared, from the parameters file
        assert cfg.link_delay_s == 0.2 and cfg.llm_model == "m.gguf"      # not declared, still the run's values
        assert not node.has_parameter("aggregation.link_delay_s") and not node.has_parameter("link_delay_s")
    finally:
        node.destroy_node()


@pytest.mark.ros
def test_a_robot_node_declares_its_groups_nested_and_reads_a_flat_name_with_one_warning(ros, monkeypatch):
    """Issue 42: ``ros2 param list /robot_0/agent`` shows the groups the node reads (``control.kp``, ...), and
    nothing flat; an old flat name (``v_max``) is still read for one release, with one warning naming the nested
    one; given both ways (an old flat file layered over a new nested one), the flat one wins, as the layer on top."""
    from consensus.ros.params import declare_config
    from consensus.scenarios.aggregation.config import AggregationConfig
    from consensus.scenarios.aggregation.ros import robot
    from consensus.settings import ControlParams, runtime_fields

    def read(node):
        return declare_config(node, AggregationConfig, runtime=runtime_fields(ControlParams), groups=robot.GROUPS,
                              uses=robot.USES)

    node = _node("agent", **{"control.kp": 2.0, "v_max": 0.5, "planner.period_s": 3.0})
    said: list[str] = []
    monkeypatch.setattr(node, "get_logger", lambda: types.SimpleNamespace(warning=said.append))
    try:
        cfg = read(node)
        names = set(node._parameters) - {"use_sim_time", "start_type_description_service"}
        assert all("." in n for n in names), sorted(names)
        assert {n.split(".")[0] for n in names} == {*robot.GROUPS, "aggregation"}
        assert len(names) < len(AggregationConfig.field_names())
        assert (cfg.kp, cfg.v_max, cfg.planner_period_s) == (2.0, 0.5, 3.0)
        assert node.get_parameter("control.v_max").value == 0.5 and not node.has_parameter("v_max")
        assert len(said) == 1 and "v_max -> control.v_max" in said[0] and "kp ->" not in said[0], said
    finally:
        node.destroy_node()
    node = _node("agent2", **{"control.v_max": 0.4, "v_max": 0.5})
    said.clear()
    monkeypatch.setattr(node, "get_logger", lambda: types.SimpleNamespace(warning=said.append))
    try:
        assert read(node).v_max == 0.5 and node.get_parameter("control.v_max").value == 0.5
        assert len(said) == 1 and "v_max -> control.v_max" in said[0]
    finally:
        node.destroy_node()
    # a flat value is typed as the nested one is (an int for a float is refused, as ever: a later `ros2 param set
    # control.kp 2.5` must still work), and a renamed field's old name is refused at the node too
    for name, overrides, message in (("agent3", {"kp": 2}, "control.kp"),
                                     ("agent4", {"fleet": False}, "'fleet' is now called 'fleet.single_process'")):
        node = _node(name, **overrides)
        monkeypatch.setattr(node, "get_logger", lambda: types.SimpleNamespace(warning=said.append))
        try:
            with pytest.raises(ConfigError, match=message):
                read(node)
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
    from consensus.sims.builtin import ros as sim

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
    read = log.of(obj.cfg)
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


# ----------------------------------------------------------------------------------- disaster and naming-game nodes
NOT_CONFIG = {"use_sim_time", "start_type_description_service", "robot_id"}     # rclpy's and the fleet's own
RUN_WAIT_S = 60.0           # a tiny run ends in a few seconds; the bound only keeps a broken one from hanging


def _declared(node) -> set[str]:
    """The config fields ``node`` declared (what ``ros2 param list`` shows of the run's config, by their nested ROS
    names: ``control.kp`` -> ``kp``)."""
    from consensus.scenarios.disaster.config import DisasterConfig
    from consensus.scenarios.naming_game.fleet_game import RobotsGameConfig
    from consensus.settings import fields_of_ros

    field_of = {**fields_of_ros(DisasterConfig), **fields_of_ros(RobotsGameConfig)}
    names = set(node._parameters) - NOT_CONFIG
    assert all("." in n for n in names), f"flat parameter names declared: {sorted(n for n in names if '.' not in n)}"
    return {field_of[n] for n in names}


def _spin_until(nodes, seconds: float, done=lambda: False) -> None:
    from rclpy.executors import SingleThreadedExecutor

    ex = SingleThreadedExecutor()
    for n in nodes:
        ex.add_node(n)
    end = time.monotonic() + seconds
    while time.monotonic() < end and not done():
        ex.spin_once(timeout_sec=0.02)


def _node_main_end(obj) -> None:
    """What ``consensus.ros.process.node_main`` reads of a node besides its own work: the executor its config names,
    then ``finish()`` (or ``close()``) after the spin."""
    _ = obj.cfg.executor
    end = getattr(obj, "finish", None) or getattr(obj, "close", None)
    end()


def _robot_process(module, params: dict, monkeypatch):
    """The process of a robot executable (``module.main``'s ``read_config``, ``build`` and ``attach``) as
    ``consensus.ros.fleet.run_robots`` makes it, in-process: the main node ``/fleet``, one node per robot, their
    planners (and LLM client), the parameter callback, the one clock and the robots' diagnostics."""
    from rclpy.node import Node

    from consensus.ros import diagnostics
    from consensus.ros.fleet import FleetClock, _runtime_settings, planners_with_llm, robot_ids

    parts: list = []
    monkeypatch.setattr(module, "run_robots", lambda _name, *fns: parts.extend(fns) or 0)
    module.main()
    read_config, build, attach = parts
    main = _node("fleet", **params)
    cfg = read_config(main)
    ids = robot_ids(main, cfg.num_robots)
    planners, pool, status, close = planners_with_llm(cfg, lambda client: build(cfg, ids, client))
    _ = cfg.executor                                     # run_robots: make_executor(cfg.executor)
    nodes, robots = [main], []
    for i, planner in zip(ids, planners):
        nodes.append(Node("agent", namespace=f"/robot_{i}", start_parameter_services=False))
        robots.append(attach(nodes[-1], cfg, i, planner, pool, status))
    main.add_on_set_parameters_callback(_runtime_settings(main, cfg, robots))
    clock = FleetClock(main, cfg, robots, nearby_in_process=True)
    diag = diagnostics.RobotsDiagnostics(main, robots, clock.health)
    main.create_timer(diag.period_s, diag.publish)
    return main, cfg, nodes, close


def _disaster_run(tmp_path, monkeypatch, mode: str, **more) -> dict:
    """sim, drones (one fleet process), [aggregator] and grid of a tiny disaster run in-process until the grid is
    done (one round: every node's periodic paths and the grid's summary; at most ``RUN_WAIT_S``); -> node name ->
    (the fields it declared, its config object, whether the run was done)."""
    from consensus.sims.builtin import ros as sim
    from consensus.scenarios.disaster.config import load_disaster_config
    from consensus.scenarios.disaster.processes import sim_params
    from consensus.scenarios.disaster.ros import aggregator, drone, grid

    params = dict(num_robots=2, planner="heuristic", rounds=1, width=3, height=3, initial_disasters=1, p_new=0.0,
                  discussion_turns=1, v_max=3.0, kp=3.0, control_period_s=0.05, seed=1, mode=mode,
                  output_dir=str(tmp_path / "run"))
    params.update(more)
    nodes, made = [], {}
    try:
        sim_node = _node("sim", **{**params, **sim_params(load_disaster_config(None, **params))})
        nodes.append(sim_node)
        sim.Simulator(sim_node)
        main, drones_cfg, robot_nodes, close = _robot_process(drone, params, monkeypatch)
        nodes += robot_nodes
        made["drone"] = (main, drones_cfg)
        if mode == "explicit":
            agg_node = _node("aggregator", **params)
            nodes.append(agg_node)
            agg = aggregator.Aggregator(agg_node)
            made["aggregator"] = (agg_node, agg.cfg)
        grid_node = _node("disaster_grid", **params)
        nodes.append(grid_node)
        g = grid.DisasterGrid(grid_node)
        made["grid"] = (grid_node, g.raw_cfg)
        _spin_until(nodes, RUN_WAIT_S, g.done.done)
        done = g.done.done()
        _node_main_end(g)
        if mode == "explicit":
            _node_main_end(agg)
        close()
        return {name: (_declared(node), cfg, done) for name, (node, cfg) in made.items()}
    finally:
        for n in nodes:
            n.destroy_node()


def _naming_game_run(tmp_path, monkeypatch, log) -> dict:
    """sim, robots (one fleet process) and matchmaker of a tiny naming game in-process until the matchmaker is done
    (one population round, the arrival and the summary; at most ``RUN_WAIT_S``); -> node name -> (the fields it
    declared, its config object, whether the game was done)."""
    from consensus.sims.builtin import ros as sim
    from consensus.scenarios.naming_game.fleet_game import RobotsGameConfig, controller_config
    from consensus.scenarios.naming_game.ros import matchmaker, robot
    from consensus.settings import load_flat

    params = dict(num_robots=2, max_population_rounds=1, interaction_period_s=0.1, answer_timeout_s=1.0,
                  arrival_timeout_s=0.5, v_max=3.0, kp=3.0, control_period_s=0.05, seed=1,
                  output_dir=str(tmp_path / "run"))
    nodes, made = [], {}
    try:
        _, sim_overrides = controller_config(load_flat(RobotsGameConfig, None, **params))
        sim_node = _node("sim", **{**params, **sim_overrides})
        nodes.append(sim_node)
        sim.Simulator(sim_node)
        main, base, robot_nodes, close = _robot_process(robot, params, monkeypatch)
        nodes += robot_nodes
        # the process runs on the controller's RobotBaseConfig made from the game's config, which is the node's
        made["naming_robot"] = (main, next(src for obj, src, _ in log.derived if obj is base))
        mm_node = _node("matchmaker", **params)
        nodes.append(mm_node)
        mm = matchmaker.Matchmaker(mm_node)
        made["matchmaker"] = (mm_node, mm.cfg)
        _spin_until(nodes, RUN_WAIT_S, mm.done.done)
        done = mm.done.done()
        _node_main_end(mm)
        close()
        return {name: (_declared(node), cfg, done) for name, (node, cfg) in made.items()}
    finally:
        for n in nodes:
            n.destroy_node()


def _drone_reply(_body: dict) -> str:
    """The fake LLM of the drones and the coordinator: cell (1, 1), with a message."""
    return '{"analysis": "the centre", "action": [1, 1], "message": "to [1, 1]"}'


#: the declared fields these runs do not read, by node, and where they are read: ``single_process`` by a robot
#: process that runs only some robots (``run_robots``) and by the client of a local llama.cpp server
#: (``client_from_config``), ``control_priority`` by ``run_robots`` as it starts the clock (these runs build their
#: robots without it), these runs' robots all being in one process and their LLM remote; ``round_time_s`` with
#: ``motion: kinematic`` (the round clock's flight time)
ELSEWHERE = {"drone": {"single_process", "control_priority"}, "aggregator": {"single_process"},
             "grid": {"round_time_s"},
             "naming_robot": {"single_process", "control_priority"},
             "matchmaker": set()}
#: read by heuristic drones only (an LLM drone: with ``fallback_policy: heuristic``)
HEURISTIC_DRONE = {"containment_per_drone", "misallocation_threshold"}
#: read by LLM drones only: their client's and requests' settings and their discussion's
LLM_DRONE = {"llm_backend", "llm_model", "llm_base_url", "llm_api_key_env", "llm_timeout_s", "llm_max_retries",
             "llm_concurrency", "replay_path", "llm_temperature", "llm_max_tokens", "llm_structured", "parse_retries",
             "fallback_policy", "inbox_max_messages", "message_max_chars", "discussion_turns", "max_agreement_turns"}


def _check(runs: dict, log, cls, modules: dict, elsewhere: dict) -> None:
    """Every node declares its module's ``GROUPS`` and ``USES``, fewer than its whole config; every field it read is
    declared, and every declared field it did not read is one read on a path this run does not take
    (``elsewhere``)."""
    from consensus.ros.params import declared_fields

    whole = len(cls.field_names())
    for name, (declared, cfg, done) in runs.items():
        assert done, f"the run did not end: {name}'s later paths were not taken"
        read = log.of(cfg)
        assert read, "nothing was read: the log is not recording"
        module = modules[name]
        assert declared == declared_fields(cls, getattr(module, "GROUPS", None), module.USES), name
        assert read <= declared, f"{name} reads undeclared fields: {sorted(read - declared)}"
        assert declared - read <= elsewhere[name], f"{name} declares unread fields: {sorted(declared - read)}"
        assert len(declared) < whole, name
        print(f"{name}: declares {len(declared)} of {whole} {cls.__name__} fields; read {len(read)} in this run")


@pytest.mark.ros
@pytest.mark.parametrize("mode, planner", [("implicit", "heuristic"), ("explicit", "llm")])
def test_every_field_a_disaster_node_reads_is_one_it_declares(ros, mode, planner, tmp_path, monkeypatch):
    """Drones, grid and (explicit) aggregator of one round; the LLM case (a spoke-and-wheel vote: the drones' and
    the coordinator's LLM calls, on a fake server) reads the LLM group and the discussion settings too."""
    from support.fake_openai_server import FakeOpenAIServer

    from consensus.scenarios.disaster.config import DisasterConfig
    from consensus.scenarios.disaster.ros import aggregator, drone, grid

    log = ReadLog(monkeypatch)
    with FakeOpenAIServer(script=_drone_reply) as srv:
        more = {} if planner != "llm" else dict(planner="llm", strategy="spoke_wheel", llm_backend="openai",
                                                llm_base_url=srv.base_url, llm_model="fake", llm_max_retries=0)
        runs = _disaster_run(tmp_path, monkeypatch, mode, **more)
    assert set(runs) == ({"drone", "grid", "aggregator"} if mode == "explicit" else {"drone", "grid"})
    drones = HEURISTIC_DRONE if planner == "llm" else LLM_DRONE
    _check(runs, log, DisasterConfig, {"drone": drone, "grid": grid, "aggregator": aggregator},
           {**ELSEWHERE, "drone": ELSEWHERE["drone"] | drones})
    if planner == "llm":
        assert srv.requests, "no LLM call: the LLM paths were not taken"


@pytest.mark.ros
def test_every_field_a_naming_game_node_reads_is_one_it_declares(ros, tmp_path, monkeypatch):
    """The robots (a fleet process: players, controller, filter) and the matchmaker of one population round, the
    arrival and the summary (with the headless reference game)."""
    from consensus.scenarios.naming_game.fleet_game import RobotsGameConfig
    from consensus.scenarios.naming_game.ros import matchmaker, robot

    log = ReadLog(monkeypatch)
    runs = _naming_game_run(tmp_path, monkeypatch, log)
    assert set(runs) == {"naming_robot", "matchmaker"}
    _check(runs, log, RobotsGameConfig, {"naming_robot": robot, "matchmaker": matchmaker}, ELSEWHERE)
