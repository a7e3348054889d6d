"""consensus.loader.load: the one loader of "package.module:attr" targets, and one ConfigError naming the target for
a missing module, a missing attribute or a string that is not of that form; every registry resolves through it."""
from __future__ import annotations

import pytest

from consensus import registry
from consensus.errors import ConfigError
from consensus.loader import load


def test_it_gives_the_attribute_the_target_names():
    assert load("consensus.errors:ConfigError") is ConfigError
    assert registry.load is load                                        # the registry offers the same loader


@pytest.mark.parametrize("target, says", [
    ("consensus.no_such_module_42:run", "there is no module consensus.no_such_module_42"),
    ("consensus.no_such_package_42.runner:run", "there is no module consensus.no_such_package_42"),
    ("consensus.errors:no_such_function_42", "consensus.errors offers no no_such_function_42"),
    ("consensus.errors.ConfigError", "is not of the form 'package.module:attr'"),
    ("consensus.errors:", "is not of the form"),
    (":ConfigError", "is not of the form"),
    ("consensus.errors:ConfigError:x", "is not of the form"),
])
def test_one_config_error_naming_the_target(target, says):
    with pytest.raises(ConfigError) as exc:
        load(target)
    assert target in str(exc.value) and says in str(exc.value)
    assert isinstance(exc.value, ValueError) and exc.value.__cause__ is None


def test_a_module_that_exists_but_does_not_import_raises_what_its_import_raised(tmp_path, monkeypatch):
    (tmp_path / "loader_probe_42.py").write_text("import no_such_dependency_42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as exc:
        load("loader_probe_42:run")
    assert not isinstance(exc.value, ConfigError) and exc.value.name == "no_such_dependency_42"


def test_every_registry_resolves_through_it(monkeypatch):
    from consensus.control import motion
    from consensus.llm.backends import Backend
    from consensus.runs import video

    target = "consensus.no_such_module_42:run"
    with pytest.raises(ConfigError, match=target):
        registry.lazy(target)()
    with pytest.raises(ConfigError, match=target):
        motion._call(target)
    with pytest.raises(ConfigError, match=target):
        Backend("probe", "a probe", target).make(None)
    monkeypatch.setattr(motion, "_SIMS", motion._SIMS.copy())
    motion.register_sim(motion.Simulator("probe", "a probe", "consensus.sims:x", renderer=target))
    render, why = video.sim_renderer("probe")
    assert render is None and target in why and "no module" in why


def test_a_registry_keeps_order_names_the_valid_ones_and_copies_apart():
    """The one registry shape (kinematics, simulators, LLM backends): registration order, one error of the
    registry's kind naming what was asked and the valid names (an unhashable name too), a copy of its own."""
    from dataclasses import dataclass

    from consensus.control.dynamics import dynamics_names, dynamics_of
    from consensus.llm.backends import backend_spec
    from consensus.loader import Registry

    @dataclass
    class Entry:
        name: str

    reg: Registry[Entry] = Registry("probe")
    b, a = reg.register(Entry("b")), reg.register(Entry("a"))
    assert reg.names() == ("b", "a") and reg.get("a") is a and reg.get("b") is b
    with pytest.raises(ValueError, match=r"unknown probe 'c'; valid: b, a"):
        reg.get("c")
    with pytest.raises(ValueError, match=r"unknown probe \['a'\]"):
        reg.get(["a"])
    other = reg.copy()
    other.register(Entry("c"))
    assert reg.names() == ("b", "a") and other.names() == ("b", "a", "c") and other.get("c").name == "c"
    # the kernel's registries are of this shape, each with its own error
    assert dynamics_names() == ("single_integrator", "unicycle", "point_mass_pid")
    with pytest.raises(ValueError, match="unknown kinematics 'hover'; valid: single_integrator"):
        dynamics_of("hover")
    with pytest.raises(ConfigError, match="unknown llm backend 'gpt'; valid: embedded, openai, replay"):
        backend_spec("gpt")
