"""The ``consensus`` command.

    consensus run aggregation --robots 4 --planner llm --backend embedded --out runs/demo
    consensus run aggregation --robots 10 --topology ring --planner average --headless
    consensus run disaster --drones 3 --planner heuristic --mode implicit --headless
    consensus experiment consensus-1d --trials 50 --out runs/fig4
    consensus report runs/fig4
    consensus model path            # assemble + verify the embedded model, print its path

Bad arguments or config: one clear message on stderr, exit status 2, nothing started.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from consensus.config import BACKENDS, PLANNERS, load_config, parse_set_args
from consensus.errors import ConfigError, ConsensusError

TOPOLOGY_NAMES = ("complete", "ring", "star", "line", "leader_follower", "random", "custom")


def _default_config() -> Path | None:
    """The packaged config/aggregation.yaml (installed share/ or the source tree)."""
    candidates = [Path(sys.prefix) / "share" / "consensus" / "config" / "aggregation.yaml",
                  Path(__file__).resolve().parents[2] / "config" / "aggregation.yaml"]
    try:
        from ament_index_python.packages import get_package_share_directory
        candidates.insert(0, Path(get_package_share_directory("consensus")) / "config" / "aggregation.yaml")
    except Exception:  # noqa: BLE001 - no ament index: fall back to the other places
        pass
    return next((c for c in candidates if c.is_file()), None)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None
    return value


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="consensus", description="LLM-planned multi-robot consensus (ROS 2).")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a scenario")
    scen = run.add_subparsers(dest="scenario", required=True)
    agg = scen.add_parser("aggregation", help="multi-robot aggregation (paper 1, section 4)",
                          description="Start sim, topology, robots and recorder as ROS 2 processes from one YAML "
                                      "(or run headless) and write a run directory.")
    agg.add_argument("--config", type=Path, help="the /**: params file (default: the packaged aggregation.yaml)")
    agg.add_argument("--robots", type=_positive_int, help="number of robots (>= 2)")
    agg.add_argument("--topology", choices=TOPOLOGY_NAMES)
    agg.add_argument("--adjacency", help="custom topology: adjacency as JSON, e.g. '[[0,1],[1,0]]'")
    agg.add_argument("--directed", action="store_true", default=None, help="directed ring/line/random/custom")
    agg.add_argument("--planner", choices=PLANNERS)
    agg.add_argument("--personality", action="append", choices=("none", "stubborn", "suggestible"),
                     help="one for all robots, or once per robot")
    agg.add_argument("--backend", choices=BACKENDS, help="LLM backend")
    agg.add_argument("--model", help="model name (openai) or .gguf path (embedded)")
    agg.add_argument("--base-url", help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp server, ...)")
    agg.add_argument("--replay", help="transcripts.jsonl to replay (implies --backend replay)")
    agg.add_argument("--temperature", type=_float)
    agg.add_argument("--duration", type=_float, help="run length [s]")
    agg.add_argument("--rounds", type=_positive_int,
                     help="stop planning after this many rounds (a ROS run ends one planning period later)")
    agg.add_argument("--seed", type=_positive_int)
    agg.add_argument("--per-robot-processes", action="store_true", help="one process per robot instead of a fleet")
    agg.add_argument("--use-sim-time", action="store_true", help="the sim publishes /clock; nodes follow it")
    agg.add_argument("--headless", action="store_true", help="no ROS: the same core in one synchronous loop")
    agg.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="any other config field, e.g. --set link_drop_prob=0.1 (repeatable)")
    agg.add_argument("--out", type=Path, help="run directory (default: runs/aggregation-<time>)")
    agg.add_argument("-q", "--quiet", action="store_true")

    from consensus.disaster import cli as disaster_cli
    from consensus.experiments import cli as experiments_cli

    disaster_cli.register(scen)
    experiments_cli.register(sub)

    model = sub.add_parser("model", help="the embedded LLM's weights")
    model.add_argument("action", choices=("path", "verify"), help="assemble + verify the pinned model, print path")
    return parser


def _aggregation_config(args: argparse.Namespace):
    sets = parse_set_args(args.set)
    overrides = dict(
        num_robots=args.robots, topology=args.topology, adjacency=args.adjacency, directed=args.directed,
        planner=args.planner, personalities=args.personality, llm_backend="replay" if args.replay else args.backend,
        llm_model=args.model, llm_base_url=args.base_url, replay_path=args.replay, llm_temperature=args.temperature,
        duration_s=args.duration, max_rounds=args.rounds, seed=args.seed,
        fleet=False if args.per_robot_processes else None,
    )
    sets.update({k: v for k, v in overrides.items() if v is not None})
    config = args.config or _default_config()
    return load_config(config, **sets)


def _run_aggregation(args: argparse.Namespace) -> int:
    from consensus.runs.rundir import default_run_dir

    cfg = _aggregation_config(args)
    ok, msg = cfg.graph().consensus_check()
    if not ok:
        logging.warning(msg)
    out = args.out or default_run_dir("aggregation")
    say = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    say(f"aggregation: {cfg.num_robots} robots, topology={cfg.topology}, planner={cfg.planner}"
        + (f", backend={cfg.llm_backend}" if cfg.planner == "llm" else "")
        + (" (headless)" if args.headless else " (ROS 2 nodes)") + f" -> {out}")
    if args.headless:
        from consensus.runs.headless import run_headless_to_dir

        def progress(r: int, total: int, *_: object) -> None:
            say(f"  round {r}/{total}")
        summary = run_headless_to_dir(cfg, out, progress=progress)
    else:
        from consensus.runs.ros_runner import run_ros

        summary = run_ros(cfg, out, use_sim_time=args.use_sim_time, echo=say)
    out = Path(out).resolve()
    print(f"converged: {summary.get('converged')}  final spread: {summary.get('final_spread_m')} m  "
          f"consensus point: {summary.get('consensus_point')}  llm calls: {summary.get('llm_calls')}  "
          f"fallbacks: {summary.get('llm_fallbacks')}")
    print(f"results: {out}")
    for plot in summary.get("plots", []):
        print(f"  plot: {out / plot}")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "run" and args.scenario == "aggregation":
            return _run_aggregation(args)
        if args.command == "run" and args.scenario == "disaster":
            from consensus.disaster import cli as disaster_cli
            return disaster_cli.run(args)
        if args.command in ("experiment", "report"):
            from consensus.experiments import cli as experiments_cli
            return experiments_cli.run(args)
        if args.command == "model":
            from consensus.llm.embedded import ensure_default_model
            print(ensure_default_model())
            return 0
    except ConfigError as exc:
        print(f"consensus: error: {exc}", file=sys.stderr)
        return 2
    except ConsensusError as exc:
        print(f"consensus: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("consensus: interrupted", file=sys.stderr)
        return 130
    parser.error("unknown command")
    return 2


if __name__ == "__main__":
    sys.exit(main())
