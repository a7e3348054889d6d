"""Named study presets for ``consensus experiment NAME`` (see ``consensus.experiments.study.Study``).

Each module below defines ``STUDIES: list[Study]``; a module that is missing or fails to import is skipped
with a warning so one broken study never hides the others.
"""
from __future__ import annotations

import importlib
import logging

log = logging.getLogger(__name__)

_MODULES = (
    "consensus.studies.consensus_seeking",   # paper 1: consensus-1d, consensus-2d, personalities, topologies
    "consensus.studies.allocation",          # paper 3: allocation-reliability
    "consensus.studies.theory",              # paper 2 appendix D: theory-model
    "consensus.studies.disaster",            # paper 2 scenario 1: disaster batches (Tables 1-2, Figs. 3, 5)
)


def all_studies() -> dict:
    studies = {}
    for name in _MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            log.warning("study module %s failed to import: %s", name, exc)
            continue
        except Exception as exc:  # noqa: BLE001 - one broken study must not hide the others
            log.warning("study module %s failed to import: %s", name, exc)
            continue
        for study in getattr(module, "STUDIES", ()):
            studies[study.name] = study
    return studies
