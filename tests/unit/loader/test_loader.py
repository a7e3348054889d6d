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
    monkeypatch.setattr(motion, "_SIMS", dict(motion._SIMS))
    motion.register_sim(motion.Simulator("probe", "a probe", "consensus.sims:x", renderer=target))
    render, why = video.sim_renderer("probe")
    assert render is None and target in why and "no module" in why
