"""``consensus run naming-game``: one population size, many seeded runs, into a run directory.

    consensus run naming-game --agents 24 --set policy=memory_invariant:0.6 --set runs=1000
    consensus run naming-game --set "policy=table:q_dicts.zip#gpt-4o/his,her" --agents 100
    consensus run naming-game --set policy=llm --backend openai --base-url http://127.0.0.1:8000/v1 --model qwen \\
        --set words=his,her --set memory=1

Writes ``manifest.json``, ``params.yaml``, ``policy.json`` (the q table used, our JSON format), ``runs.jsonl``
(one record per run: converged, word, consensus time), ``summary.json`` (individual and collective bias with SEM,
convergence share, consensus-time mode and mean, interactions/s) and ``word_use.png`` (word 0's share per population
round of up to 20 runs and the mean of each outcome). Headless only: the game needs no ROS (``--headless`` is
implied; the robot demonstration of the game is its own launch file).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np

from consensus.runs.rundir import new_run_dir, write_json, write_manifest
from consensus.scenarios.naming_game.config import NamingGameConfig


def policy_of(cfg: NamingGameConfig):
    """The ``policy.Policy`` the config names (an LLM policy is extracted, cached, and recorded)."""
    from consensus.errors import ConfigError
    from consensus.scenarios.naming_game import policy as pol

    kind = cfg.policy_kind()
    if kind in ("fixed_bias", "memory_invariant"):
        make = pol.fixed_bias if kind == "fixed_bias" else pol.memory_invariant
        return make(float(cfg.policy.split(":", 1)[1]), cfg.memory, cfg.word_pair())
    if kind == "table":
        from consensus.scenarios.naming_game.study import table_label

        path, select = cfg.table_source()
        tables = pol.load_policies(path)
        if not select:
            if len(tables) != 1:
                raise ConfigError(f"{path} holds {len(tables)} tables: name one as table:PATH#MODEL/WORD0,WORD1, "
                                  f"e.g. #{table_label(tables[0])}")
            return tables[0]
        found = [t for t in tables if table_label(t).lower() == select.lower()]
        if not found:
            raise ConfigError(f"no table {select!r} in {path}; e.g. {table_label(tables[0])}")
        return found[0]
    from consensus.scenarios.naming_game.llm_policy import extract_policy

    result = extract_policy(cfg, cfg.word_pair(), cfg.memory, temperature=cfg.llm_temperature,
                            model=cfg.llm_model or None)
    return result.to_policy()


def run(cfg: NamingGameConfig, out: str | Path, *, headless: bool = True, use_sim_time: bool = False,
        echo: Callable[[str], None] = print) -> dict:
    """The registered runner of ``consensus run naming-game``."""
    from consensus.runs import plots
    from consensus.scenarios.naming_game.policy import individual_bias, is_neutral, save_policies
    from consensus.scenarios.naming_game.simulate import collective_bias, simulate

    policy = policy_of(cfg)             # a bad policy or table is refused before the run directory exists
    out = new_run_dir(out)
    cfg = cfg.replace(output_dir=str(out))
    (out / "params.yaml").write_text(cfg.to_ros_params_yaml())
    write_manifest(out, scenario="naming_game", config=cfg.to_dict(), seed=cfg.seed,
                   **cfg.manifest_llm(),
                   mode="headless", extra={"policy": {"name": policy.name, "source": policy.source,
                                                      "words": list(policy.words), "H": policy.H}})
    save_policies(out / "policy.json", [policy])
    echo(f"naming game: N={cfg.num_agents}, H={policy.H}, {cfg.runs} runs, policy {policy.name or cfg.policy} "
         f"(q(∅) = {individual_bias(policy):.3f}) -> {out}")
    # one tiny call first, so that numba's start-up (loading the compiled kernel, its threads) is not timed:
    # interactions_per_s is then the kernel's rate, the figure docs/naming-game.md's benchmark quotes
    simulate(policy.q, policy.H, 2, 1, cfg.seed, max_population_rounds=1)
    res = simulate(policy.q, policy.H, cfg.num_agents, cfg.runs, cfg.seed,
                   max_population_rounds=cfg.max_population_rounds, threshold=cfg.threshold,
                   window=cfg.window_factor * cfg.num_agents, trajectory=cfg.trajectory)
    with (out / "runs.jsonl").open("w") as fh:
        for k in range(res.runs):
            fh.write(json.dumps({"run": k, "converged": bool(res.converged[k]), "word": int(res.word[k]),
                                 "time": None if np.isnan(res.time[k]) else float(res.time[k]),
                                 "share0": float(res.share0[k])}) + "\n")
    bias, sem, n_conv = collective_bias(res, 0)
    times = res.time[res.converged]
    summary = {"words": list(policy.words), "N": res.N, "H": res.H, "runs": res.runs, "converged": n_conv,
               "individual_bias": individual_bias(policy), "neutral": bool(is_neutral(policy)),
               "collective_bias": None if np.isnan(bias) else float(bias), "sem": None if np.isnan(sem) else sem,
               "time_mode": int(np.bincount(times.astype(int)).argmax()) if times.size else None,
               "time_mean": float(times.mean()) if times.size else None, "interactions": res.interactions,
               "interactions_per_s": round(res.interactions / res.elapsed_s) if res.elapsed_s > 0 else None,
               "elapsed_s": round(res.elapsed_s, 4), "plots": []}
    if res.trajectory is not None:
        fig = plots.new_figure(figsize=(7, 4))
        ax = fig.add_subplot(1, 1, 1)
        for k in range(min(res.runs, 20)):
            ax.plot(res.trajectory_rounds, res.trajectory[k], lw=0.6, color="tab:blue" if res.word[k] == 0
                    else "tab:orange" if res.word[k] == 1 else "grey", alpha=0.7)
        ax.set_xlim(0, max(3, int(np.nanmax(res.rounds[: min(res.runs, 20)]))))
        ax.set_ylim(0, 1)
        ax.set_xlabel("population round")
        ax.set_ylabel(f"share of '{policy.words[0]}'")
        bias = _fmt(summary['collective_bias'], '.3f')
        ax.set_title(f"{policy.name or cfg.policy}, N = {res.N}: collective bias {bias}")
        plots.save_figure(fig, out / "word_use.png", svg=False)
        summary["plots"].append("word_use.png")
    write_json(out / "summary.json", summary)
    return summary


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def result_line(summary: dict) -> str:
    w0 = summary["words"][0]
    rate = summary.get("interactions_per_s")
    return (f"collective bias toward '{w0}': {_fmt(summary['collective_bias'], '.3f')} ± "
            f"{_fmt(summary['sem'], '.3f')} (SEM)  individual bias: {summary['individual_bias']:.3f}  "
            f"converged: {summary['converged']}/{summary['runs']}  consensus time mode: {summary['time_mode']} rounds"
            f"  kernel: {summary['interactions']:,} pair interactions at {_fmt(rate and rate / 1e6, '.1f')} M/s "
            f"(large runs reach more: docs/naming-game.md)")
