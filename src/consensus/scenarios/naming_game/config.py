"""Parameters of one naming-game run (paper 4): ``NamingGameConfig``, a ``/**:`` parameters file like every scenario's
(``config/naming_game.yaml``).

``policy`` says where each agent's q table comes from:

================================ =====================================================================================
``memory_invariant:P``           the SI's minimal naming game with a fixed bias P (``policy.memory_invariant``)
``fixed_bias:P``                 every memory state says word 0 with probability P (never converges for 0 < P < 1)
``table:PATH[#MODEL/W0,W1]``     a q-table file (our JSON, or the paper's ``q_dicts.zip``, read without executing
                                 pickle code); with several tables, ``#model/word0,word1`` picks one
``llm``                          extracted from the LLM of the ``llm_*`` settings (cached on disk, see ``llm_policy``)
================================ =====================================================================================

The game's rules are one group, ``NamingGameParams``: memory ``memory`` (H, 1-6), the ``words``, the ``policy``,
at most ``max_population_rounds`` population rounds, converged when ≥ ``threshold`` of the last ``window_factor``·N
interactions succeeded (paper: 0.98 of the last 3N; the exact counting is ``simulate``'s docstring). Who plays is
another group: ``NamingGameConfig`` (``consensus run naming-game``) composes the rules with
``consensus.settings.AgentsParams`` (``num_agents`` agents, the population size N; any N ≥ 2) and adds ``runs``
independent populations and the ``trajectory`` switch; the robot fleet's config (``fleet_game.RobotsGameConfig``)
composes them with ``FleetParams`` (``num_robots`` robots). A word means one thing across scenarios: the old names
``num_robots`` (the population) and ``max_rounds`` (the population rounds; a robot base's ``max_rounds`` counts
planning rounds) are refused with their new names (``FlatParams.RENAMED``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from consensus.errors import ConfigError
from consensus.scenarios.naming_game.game import H_MAX, H_MIN
from consensus.settings import AgentsParams, FlatParams, LLMParams, RunParams, load_flat, need, param

POLICY_KINDS = ("fixed_bias", "memory_invariant", "table", "llm")


@dataclass
class NamingGameParams:
    """The naming game's rules (paper 4, Methods), whoever plays it: a population of agents (``NamingGameConfig``)
    or a fleet of robots (``fleet_game.RobotsGameConfig``)."""

    GROUP: ClassVar[str] = "game"     # its fields' ROS parameters: game.<name> (settings.ros_names)

    memory: int = param(5, "H: interactions an agent remembers")
    words: str = param("word_a,word_b", "the two words (with policy: llm); a table brings its own")
    policy: str = param("memory_invariant:0.5", "memory_invariant:P | fixed_bias:P | table:PATH[#MODEL/W0,W1] | llm")
    max_population_rounds: int = param(1000, "population rounds (N interactions each) at most")
    threshold: float = param(0.98, "converged: at least this share of the last window succeeded")
    window_factor: int = param(3, "the window is window_factor * N interactions")

    #: a robot base's ``max_rounds`` counts planning rounds (0 = unlimited); the game's cap is another word
    RENAMED: ClassVar[dict[str, str]] = {"max_rounds": "max_population_rounds"}

    def _check_naming_game(self) -> None:
        need(H_MIN <= self.memory <= H_MAX, f"memory (H) must be in [{H_MIN}, {H_MAX}] (got {self.memory})")
        need(1 <= self.max_population_rounds <= 10 ** 6,
             f"max_population_rounds must be in [1, 1000000] (got {self.max_population_rounds})")
        need(0.5 < self.threshold <= 1.0, f"threshold must be in (0.5, 1] (got {self.threshold})")
        need(1 <= self.window_factor <= 100, f"window_factor must be in [1, 100] (got {self.window_factor})")
        kind = self.policy_kind()
        need(kind in POLICY_KINDS, f"unknown policy '{self.policy}'; valid: memory_invariant:P, fixed_bias:P, "
                                   f"table:PATH, llm")
        if kind in ("fixed_bias", "memory_invariant"):
            try:
                p = float(self.policy.split(":", 1)[1])
            except (IndexError, ValueError):
                p = float("nan")
            need(0.0 <= p <= 1.0, f"policy {kind}:P needs P in [0, 1] (got '{self.policy}')")
        if kind == "table":
            need(bool(self.policy.split(":", 1)[1].split("#", 1)[0]), "policy table:PATH needs a path")
        words = self.word_pair()
        need(len(words) == 2 and all(words) and words[0] != words[1],
             f"words must be two different words separated by a comma (got '{self.words}')")

    def policy_kind(self) -> str:
        return self.policy.split(":", 1)[0].strip()

    def uses_llm(self) -> bool:
        return self.policy_kind() == "llm"

    def word_pair(self) -> tuple[str, ...]:
        return tuple(w.strip() for w in self.words.split(","))

    def table_source(self) -> tuple[Path, str]:
        """``table:PATH#SELECT`` → (PATH, SELECT or ""). PATH is read like every other path: relative to the current
        folder; when it is not there, beside ``$CONSENSUS_NAMING_TABLES`` (a folder: PATH inside it; a file: that
        file when PATH names it or is empty). A PATH found nowhere is one error naming the places tried."""
        spec = self.policy.split(":", 1)[1]
        path, _, select = spec.partition("#")
        return resolve_tables_path(path), select.strip()


@dataclass
class NamingGameConfig(RunParams, AgentsParams, NamingGameParams, LLMParams, FlatParams):
    """Parameters of a naming-game run (paper 4): the game's rules played by ``num_agents`` agents (the run, agents
    and LLM groups are ``consensus.settings``')."""

    GROUP: ClassVar[str] = "game"     # its fields' ROS parameters: game.<name> (settings.ros_names)

    num_agents: int = param(24, "N: agents in the population (paper: 2 to 10^4)")
    runs: int = param(100, "independent populations")
    trajectory: bool = param(True, "keep the frequency of word 0 per population round")
    llm_temperature: float = param(0.5, "T of eq. 9 (the paper's 0.5)")

    #: the population is agents, not robots (``FleetParams.num_robots`` counts robots)
    RENAMED: ClassVar[dict[str, str]] = {"num_robots": "num_agents"}

    def check(self) -> None:
        need(self.num_agents >= 2, f"num_agents (N) must be at least 2 for a naming game (got {self.num_agents})")
        need(1 <= self.runs <= 10 ** 6, f"runs must be in [1, 1000000] (got {self.runs})")


TABLES_ENV = "CONSENSUS_NAMING_TABLES"


def resolve_tables_path(path: str) -> Path:
    """A q-tables file named in a policy (see ``NamingGameConfig.table_source``)."""
    import os

    given = Path(path).expanduser()
    if path and given.exists():
        return given
    env = os.environ.get(TABLES_ENV, "")
    tried = [str(given)] if path else []
    if env:
        base = Path(env).expanduser()
        if base.is_dir() and path and (base / path).exists():
            return base / path
        if base.is_file() and (not path or base.name == given.name):
            return base
        tried.append(f"{base / path if base.is_dir() else base} (${TABLES_ENV})")
    if not tried:
        raise ConfigError(f"policy 'table:' names no file and ${TABLES_ENV} is not set: policy=table:PATH#MODEL/W0,W1")
    raise ConfigError(f"no q-tables file {path!r}: tried {', '.join(tried)}")


def load_naming_game_config(path=None, **overrides: Any) -> NamingGameConfig:
    return load_flat(NamingGameConfig, path, **overrides)
