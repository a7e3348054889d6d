"""consensus.settings: the shared groups are validated once, the same way in every scenario config."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from consensus.errors import ConfigError
from consensus.scenarios.aggregation.config import AggregationConfig
from consensus.scenarios.disaster.config import DisasterConfig
from consensus.settings import FlatParams, LLMParams, RobotBaseConfig, RunParams

DRIFTED = [("llm_concurrency", 0), ("llm_temperature", 9.0), ("llm_max_tokens", 0), ("parse_retries", -3),
           ("llm_max_retries", 11), ("llm_port", 0), ("llm_timeout_s", -1.0), ("llm_backend", "magic")]


@pytest.mark.parametrize("cls", [AggregationConfig, DisasterConfig, RobotBaseConfig])
@pytest.mark.parametrize("key, value", DRIFTED)
def test_every_scenario_rejects_the_same_bad_llm_values(cls, key, value):
    with pytest.raises(ConfigError, match=key):
        cls.from_dict({key: value})


@pytest.mark.parametrize("cls", [AggregationConfig, DisasterConfig])
@pytest.mark.parametrize("key, value", [("v_max", 0.0), ("kp", -1.0), ("deadband", -0.1), ("odom_timeout_s", 0.0),
                                        ("seed", -1), ("executor", "threads")])
def test_every_scenario_rejects_the_same_bad_control_and_fleet_values(cls, key, value):
    with pytest.raises(ConfigError, match=key):
        cls.from_dict({key: value})


def test_one_robot_is_a_valid_fleet_for_the_kernel_and_the_drones():
    assert RobotBaseConfig.from_dict({"num_robots": 1}).num_robots == 1
    assert DisasterConfig.from_dict({"num_robots": 1}).num_robots == 1
    with pytest.raises(ConfigError, match="at least 2"):         # a gathering needs two
        AggregationConfig.from_dict({"num_robots": 1})


def test_scenario_defaults_override_group_defaults_but_keep_the_group_bounds():
    assert DisasterConfig().llm_max_tokens == 256 and AggregationConfig().llm_max_tokens == 160
    assert DisasterConfig().llm_timeout_s == 300.0 and AggregationConfig().llm_timeout_s == 60.0
    with pytest.raises(ConfigError, match="llm_max_tokens"):
        DisasterConfig.from_dict({"llm_max_tokens": 5000})


def test_field_types_come_from_annotations_not_names():
    @dataclass
    class Probe(FlatParams, RunParams, LLMParams):
        tags: list[str] = field(default_factory=list)
        weights: list[float] = field(default_factory=list)
        counts: list[int] = field(default_factory=list)
        flag: bool = False

    cfg = Probe.from_dict({"tags": "[a, 2]", "weights": [1, "2.5"], "counts": "[3, 4]", "flag": "yes"})
    assert cfg.tags == ["a", "2"] and cfg.weights == [1.0, 2.5] and cfg.counts == [3, 4] and cfg.flag is True
    with pytest.raises(ConfigError, match="counts"):
        Probe.from_dict({"counts": [1.5]})
    with pytest.raises(ConfigError, match="weights"):
        Probe.from_dict({"weights": ["x"]})


def test_unknown_keys_stay_a_clear_error_with_a_hint():
    with pytest.raises(ConfigError, match="unknown parameter 'num_drones'.*num_robots"):
        DisasterConfig.from_dict({"num_drones": 3})


def test_discussion_scenarios_compose_one_discussion_group_with_one_count_field():
    """DisasterConfig, InfoSpreadConfig and PublicGoodsConfig take the discussion fields, paper 2's LLM defaults and
    llm_structured from DiscussionParams (declared once); the team size is one field (drones: num_robots)."""
    import dataclasses

    from consensus.discussion.config import DiscussionParams
    from consensus.scenarios.disaster.config import DisasterConfig
    from consensus.scenarios.info_spread.config import InfoSpreadConfig
    from consensus.scenarios.public_goods.config import PublicGoodsConfig

    own = {f.name for f in dataclasses.fields(DiscussionParams)}
    for cls, count in ((DisasterConfig, "num_robots"), (InfoSpreadConfig, "num_agents"),
                       (PublicGoodsConfig, "num_agents")):
        assert issubclass(cls, DiscussionParams) and cls.COUNT_FIELD == count
        names = set(cls.field_names())
        assert own <= names and ({"num_robots", "num_agents"} - {count}).isdisjoint(names), cls
        cfg = cls()
        assert (cfg.llm_max_tokens, cfg.parse_retries, cfg.llm_structured) == (256, 1, True)
        assert cfg.team_size() == getattr(cfg, count)
        single = cfg.replace(baseline="single_llm", planner="llm")
        assert single.resolved().team_size() == 1 and single.uses_llm()
        assert not cfg.replace(baseline="random", planner="llm").uses_llm()      # the group's uses_llm wins
        with pytest.raises(ConfigError, match="fallback_policy 'stay' is now called 'idle'"):
            cfg.replace(fallback_policy="stay")
        with pytest.raises(ConfigError, match="unknown fallback_policy"):
            cfg.replace(fallback_policy="panic")


def test_a_renamed_parameter_is_refused_with_its_new_name():
    from consensus.scenarios.aggregation.config import AggregationConfig, load_config

    with pytest.raises(ConfigError, match="parameter 'memory' is now called 'keep_history'"):
        AggregationConfig.from_dict({"memory": True})
    assert load_config(None, keep_history=True).keep_history is True


def test_the_old_process_layout_word_fleet_is_refused_naming_single_process(tmp_path):
    """``fleet`` (all robots in one process) is now ``single_process``; ``fleet`` is the group of robots only. The old
    name is refused naming the new one in a params file (flat) and through ``--set``; the nested name is the same."""
    from consensus.scenarios.aggregation.config import AggregationConfig, load_config
    from consensus.settings import load_flat, ros_names

    assert ros_names(AggregationConfig)["single_process"] == "fleet.single_process"
    with pytest.raises(ConfigError, match="parameter 'fleet' is now called 'single_process'"):
        load_config(None, fleet=False)
    old = tmp_path / "old.yaml"
    old.write_text("/**:\n  ros__parameters:\n    fleet: false\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="parameter 'fleet' is now called 'single_process'"):
        load_flat(AggregationConfig, old)
    nested = tmp_path / "nested.yaml"
    nested.write_text("/**:\n  ros__parameters:\n    fleet:\n      single_process: false\n", encoding="utf-8")
    assert load_flat(AggregationConfig, nested).single_process is False


def test_renamed_words_are_gathered_from_every_group_and_a_field_of_another_group_stays():
    """``RENAMED`` may sit on any group (``renamed_fields`` gathers the MRO's); an old name that is a field of the
    composing config (a fleet's ``num_robots``) is not refused."""
    @dataclass
    class Rules:
        cap: int = 3

        RENAMED = {"max_rounds": "cap"}

    @dataclass
    class Population(RunParams, Rules, FlatParams):
        size: int = 2

        RENAMED = {"num_robots": "size"}

    @dataclass
    class Fleet(RunParams, Rules, FlatParams):
        num_robots: int = 2

        RENAMED = {"num_robots": "size"}

    assert Population.renamed_fields() == {"max_rounds": "cap", "num_robots": "size"}
    assert Fleet.renamed_fields() == {"max_rounds": "cap"}
    for old, new in Population.renamed_fields().items():
        with pytest.raises(ConfigError, match=f"parameter '{old}' is now called '{new}'"):
            Population.from_dict({old: 4})
    assert Fleet.from_dict({"num_robots": 4}).num_robots == 4
    with pytest.raises(ConfigError, match="parameter 'max_rounds' is now called 'cap'"):
        Fleet.from_dict({"max_rounds": 4})


def test_a_word_means_one_thing_in_every_registered_config():
    """``num_robots`` counts robots (``FleetParams``), ``num_agents`` a team that is not robots (``AgentsParams``),
    ``max_rounds`` a robot base's planning rounds (``RobotBaseConfig``): a registered config that has one of these
    fields has it from that group, and no config counts its team twice. The naming game's population is
    ``num_agents`` and its cap ``max_population_rounds``; its robot fleet counts robots."""
    import dataclasses

    from consensus.registry import scenarios
    from consensus.scenarios.naming_game.config import NamingGameConfig
    from consensus.scenarios.naming_game.fleet_game import RobotsGameConfig
    from consensus.settings import AgentsParams, FleetParams

    owner = {"num_robots": FleetParams, "num_agents": AgentsParams, "max_rounds": RobotBaseConfig}
    configs = {sc.name: sc.config_cls for sc in scenarios().values() if dataclasses.is_dataclass(sc.config_cls)}
    assert configs["naming-game"] is NamingGameConfig and configs["naming-game-robots"] is RobotsGameConfig
    for name, cls in configs.items():
        names = set(cls.field_names())
        for word, group in owner.items():
            assert word not in names or issubclass(cls, group), (name, word)
        assert not {"num_robots", "num_agents"} <= names, name
    assert "num_agents" in NamingGameConfig.field_names() and "num_robots" in RobotsGameConfig.field_names()
    for cls in (NamingGameConfig, RobotsGameConfig):
        assert "max_population_rounds" in cls.field_names()


def test_every_study_parameter_uses_the_shared_words():
    """A study's parameters mean what the config groups' fields mean: a team that is not robots is ``num_agents``
    (and a study-only config with it composes ``AgentsParams``), the LLM's settings are ``LLMParams``'s ``llm_*``
    fields (or a discussion's ``llm_structured``), ``memory`` is the naming game's H (an int); the former words
    (``agents``, ``temperature``, ``max_tokens``, ...) are in no study's defaults, and a study's ``renamed`` points
    from a word it does not take to one it takes."""
    import dataclasses

    from consensus.discussion.config import DiscussionParams
    from consensus.registry import all_studies
    from consensus.scenarios.aggregation.config import NegotiationConfig
    from consensus.scenarios.nlp_tasks.config import NLPTaskConfig
    from consensus.settings import AgentsParams

    llm_words = {f.name for f in dataclasses.fields(DiscussionParams)}      # LLMParams's, plus llm_structured
    former = {"agents", "temperature", "max_tokens", "num_drones", "converge_tol", "drones"}
    studies = all_studies()
    assert {"theory-model", "allocation-reliability", "consensus-1d", "classification-reliability"} <= set(studies)
    for name, study in studies.items():
        keys = set(study.defaults)
        assert not keys & former, (name, keys & former)
        assert {k for k in keys if k.startswith("llm_")} <= llm_words, name
        assert not isinstance(study.defaults.get("memory", 0), bool), name
        assert not set(study.renamed) & keys and set(study.renamed.values()) <= keys, name
    for cls in (NegotiationConfig, NLPTaskConfig):
        assert issubclass(cls, AgentsParams), cls
