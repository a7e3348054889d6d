"""What every headless discussion scenario does around its round loop: ``start_run`` (validate, resolve the
baseline, run directory and manifest) and ``team_client`` (the LLM client the team asks, made here when the caller
gave none)."""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path


def start_run(cfg, scenario: str, out_dir: str | Path | None):
    """``(run, out)``: the config the baseline means (``cfg.resolved()``) and the run directory (None without
    ``out_dir``), whose ``manifest.json`` records ``cfg`` and what the baseline changed (``resolved``)."""
    from consensus.runs.rundir import new_run_dir, write_manifest

    cfg.validate()
    out = new_run_dir(out_dir) if out_dir is not None else None
    run = cfg.resolved()
    if out is not None:
        given = cfg.to_dict()
        write_manifest(out, scenario=scenario, config=given, seed=cfg.seed, **cfg.manifest_llm(), mode="headless",
                       extra={"resolved": {k: v for k, v in run.to_dict().items() if given[k] != v}})
    return run, out


def team_client(run, client, out: Path | None, stack: ExitStack):
    """``client``, or for an LLM team without one a client from ``run``'s settings (transcripts into ``out``),
    closed with ``stack``."""
    if client is None and run.uses_llm():
        from consensus.llm.from_config import client_from_config

        client, close = client_from_config(run, out / "transcripts.jsonl" if out is not None else None)
        stack.callback(close)
    return client
