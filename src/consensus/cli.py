"""The ``consensus`` command.

    consensus run aggregation --robots 4 --planner llm --backend embedded --out runs/demo
    consensus run aggregation --robots 10 --topology ring --planner average --headless
    consensus run disaster --robots 3 --planner heuristic --mode implicit --headless
    consensus experiment consensus-1d --trials 50 --out runs/fig4
    consensus report runs/fig4
    consensus model path            # assemble + verify the embedded model, print its path
    consensus gazebo-world --robots 4 --out DIR     # gz sim world.sdf + ros_gz bridge.yaml (docs/gazebo.md)
    consensus plot runs/demo/bag     # redraw a run's figures from its MCAP bag
    consensus security keystore ks --robots 4    # SROS2 keystore: one enclave per robot process (docs/real-robots.md)
    consensus bag repair runs/demo/bag   # make a bag whose writer died readable (consensus.runs.bag.repair_bag)

``consensus run <scenario>`` exists for every registered scenario with a runner (``consensus.registry``). Every one
takes the same common flags (``COMMON_FLAGS``: ``--config``, ``--seed``, ``--backend``, ``--model``, ``--base-url``,
``--replay``, ``--temperature``, ``--set``, ``--headless``, ``--use-sim-time``, ``--per-robot-processes``,
``--security`` and ``--keystore`` (SROS2 enclaves: ``consensus.runs.security``), ``--out``, ``-q``), the team size
as ``--robots`` (``num_robots``) or ``--agents`` (``num_agents``, a team that is not robots: the naming game's
population), ``--planner`` and ``--prompt-style`` where its config has the field (``FIELD_FLAGS``), plus the
scenario's own. A flag whose field the config renamed (``FlatParams.renamed_fields``: ``--robots`` of the naming
game) is refused with the new flag's name. A run refused with a ``ConfigError`` removes the run directory it created
(and its new parents), so a refused command leaves nothing on disk.

Errors: ``error_boundary`` is the one place where every command (and, through ``consensus.ros.process.run_node``,
every node main) turns an exception into one line on stderr and an exit status: bad input (``ConfigError``) 2,
a failure of the run, the LLM or the file system 1, Ctrl-C 130, anything unexpected 70 (set ``CONSENSUS_DEBUG=1``
for the traceback).
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import shutil
import sys
from pathlib import Path

from consensus.errors import (EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERNAL, EXIT_INTERRUPTED,  # noqa: F401
                              ConfigError, ConsensusError, error_boundary)
from consensus.llm.styles import PROMPT_STYLES
from consensus.control.motion import sim_names
from consensus.llm.backends import names as backend_names
from consensus.settings import load_flat, parse_set_args



def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None


class Registered:
    """argparse ``choices`` read from a registry when the command line is parsed (``names()``), so a backend or
    simulator registered after this module was imported is a valid choice too."""

    def __init__(self, names) -> None:
        self.names = names

    def __contains__(self, value) -> bool:
        return value in self.names()

    def __iter__(self):
        return iter(self.names())


#: (flag, config field, argparse keyword arguments) shared by every `consensus run <scenario>`; a flag without
#: ``help`` shows its field's doc and unit (``settings.field_help``)
COMMON_FLAGS: tuple = (
    ("--seed", "seed", dict(type=_int)),
    ("--backend", "llm_backend", dict(choices=Registered(backend_names))),
    ("--model", "llm_model", {}),
    ("--base-url", "llm_base_url", {}),
    ("--temperature", "llm_temperature", dict(type=_float)),
)

#: flags every `consensus run <scenario>` whose config has the field gets (unless the scenario defines the flag with
#: its own choices): (flag, config field, argparse keyword arguments)
FIELD_FLAGS: tuple = (
    ("--robots", "num_robots", dict(type=_int)),
    ("--agents", "num_agents", dict(type=_int)),
    ("--planner", "planner", {}),
    ("--prompt-style", "prompt_style", dict(choices=PROMPT_STYLES)),
    ("--sim", "sim", dict(choices=Registered(sim_names))),
)


def _add_flag(parser: argparse.ArgumentParser, flag: str, field: str, kwargs: dict, cls: type | None = None) -> None:
    kwargs = dict(kwargs)
    if "help" not in kwargs and cls is not None and dataclasses.is_dataclass(cls):
        from consensus.settings import field_help

        kwargs["help"] = field_help(cls, field).replace("%", "%%")     # argparse formats help with %
    if "choices" not in kwargs and kwargs.get("action") not in ("store_true", "store_false"):
        kwargs.setdefault("metavar", flag.lstrip("-").upper().replace("-", "_"))
    parser.add_argument(flag, dest=f"cfg__{field}", **kwargs)


def _default_config(name: str) -> Path | None:
    """The packaged config/<name> (ament index, installed share/, or the source tree)."""
    if not name:
        return None
    candidates = [Path(sys.prefix) / "share" / "consensus" / "config" / name,
                  Path(__file__).resolve().parents[2] / "config" / name]
    from consensus.runs.ament import package_share

    share = package_share("consensus")              # None without an ament index: the other places
    if share is not None:
        candidates.insert(0, share / "config" / name)
    return next((c for c in candidates if c.is_file()), None)


def _add_run_parser(runs, sc) -> None:
    p = runs.add_parser(sc.name, help=sc.summary, description=sc.description or sc.summary)
    p.add_argument("--config", type=Path,
                   help=f"the /**: params file (default: the packaged {sc.config_file or 'defaults'})")
    own = {flag for flag, _, _ in sc.cli_flags}
    fields = {f.name for f in dataclasses.fields(sc.config_cls)} if dataclasses.is_dataclass(sc.config_cls) else set()
    shared = tuple(f for f in FIELD_FLAGS if f[1] in fields and f[0] not in own)
    for flag, field, kwargs in COMMON_FLAGS + shared + tuple(sc.cli_flags):
        _add_flag(p, flag, field, kwargs, sc.config_cls)
    renamed = sc.config_cls.renamed_fields() if hasattr(sc.config_cls, "renamed_fields") else {}
    for flag, field, kwargs in FIELD_FLAGS:           # a renamed field's flag: accepted, then refused by name
        if field in renamed and flag not in own:
            p.add_argument(flag, dest=f"cfg__{field}", help=argparse.SUPPRESS)
    p.add_argument("--replay", help="transcripts.jsonl to replay (implies --backend replay)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any other config field, e.g. --set llm_max_tokens=200 (repeatable)")
    p.add_argument("--per-robot-processes", action="store_true", help="one process per robot (single_process: false)")
    p.add_argument("--use-sim-time", action="store_true", help="the sim publishes /clock; nodes follow it")
    p.add_argument("--headless", action="store_true", help="no ROS: the same core in one synchronous loop")
    p.add_argument("--security", action="store_true",
                   help="SROS2: every process in its enclave, enforced (needs the DDS security plugins)")
    p.add_argument("--keystore", type=Path, help="the SROS2 keystore of --security (default: $ROS_SECURITY_KEYSTORE; "
                                                 "made for this run if it does not exist)")
    p.add_argument("--out", type=Path, help=f"run directory (default: runs/{sc.name}-<time>)")
    p.add_argument("--video", action="store_true", help="after the run, write its video (RUN/video.mp4, or .gif "
                                                        "without an ffmpeg; consensus.runs.video)")
    p.add_argument("--video-format", choices=("mp4", "gif"), help="the video's format (default: mp4 if an ffmpeg "
                                                                  "is found, else gif)")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(scenario_name=sc.name)


def config_from_args(sc, args: argparse.Namespace):
    """The validated config of ``consensus run <scenario>``'s flags: the file (or the packaged one), then
    ``--set``, then the flags."""
    sets = parse_set_args(args.set)
    flags = {key[len("cfg__"):]: value for key, value in vars(args).items()
             if key.startswith("cfg__") and value is not None}
    renamed = sc.config_cls.renamed_fields() if hasattr(sc.config_cls, "renamed_fields") else {}
    for field in flags:
        if field in renamed:
            by_field = {f: flag for flag, f, _ in COMMON_FLAGS + FIELD_FLAGS + tuple(sc.cli_flags)}
            new = renamed[field]
            raise ConfigError(f"{by_field.get(field, field)}: consensus run {sc.name} has no {field}; it is now "
                              f"{by_field.get(new, '--set ' + new + '=...')} (the field {new}: one meaning per word "
                              f"across scenarios)")
    if args.replay:
        flags.update(llm_backend="replay", replay_path=str(Path(args.replay).expanduser().resolve()))
    if args.per_robot_processes:
        flags["single_process"] = False
    sets.update(flags)
    path = args.config or _default_config(sc.config_file)
    cfg = load_flat(sc.config_cls, path, **sets)
    if args.replay and not cfg.uses_llm():
        raise ConfigError("--replay answers an LLM's requests from a transcript, but this run calls no LLM: add "
                          "the recorded run's flags (e.g. --planner llm)")
    return cfg


def _created_by(out: Path) -> list[Path]:
    """``out`` and those of its ancestors that do not exist yet (deepest first): what a run into ``out`` creates."""
    missing, here = [], out.resolve()
    while not here.exists() and here != here.parent:
        missing.append(here)
        here = here.parent
    return missing


def _remove_created(missing: list[Path]) -> None:
    """Undo ``_created_by``'s list after a refused run: the run directory (created by this command, so everything
    in it is ours) and its then-empty new parents."""
    for i, path in enumerate(missing):
        if not path.exists():
            continue
        if i == 0:
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                path.rmdir()
            except OSError:
                return


def build_parser() -> argparse.ArgumentParser:
    from consensus.experiments import cli as experiments_cli
    from consensus.registry import scenarios

    parser = argparse.ArgumentParser(prog="consensus", description="LLM-planned multi-robot consensus (ROS 2).")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a scenario")
    runs = run.add_subparsers(dest="scenario", required=True)
    for sc in scenarios().values():
        if sc.runner is not None:
            _add_run_parser(runs, sc)
    experiments_cli.register(sub)
    model = sub.add_parser("model", help="the embedded LLM's weights")
    model.add_argument("action", choices=("path", "verify"), help="assemble + verify the pinned model, print path")
    # gz sim: the world and ros_gz bridge of a run (docs/gazebo.md)
    from consensus.sims.gazebo import world as gazebo
    gazebo.add_arguments(sub.add_parser("gazebo-world", help="write a gz sim world + ros_gz bridge config"))
    from consensus.runs import security      # `consensus security keystore DIR --robots N`: SROS2 without sros2
    security.add_arguments(sub.add_parser("security", help="SROS2: make a run's keystore, check the DDS plugins"))
    # `consensus mcp`: the running fleet as an MCP server, with approval before anything moves (docs/operator.md)
    from consensus.operator import cli as operator_cli
    operator_cli.add_arguments(sub.add_parser(
        "mcp", help="the running fleet as an MCP server (an assistant's or supervisor's seat, approval-gated)",
        description="Serve a running ROS fleet to MCP clients (Claude Desktop, VS Code, any MCP client) over stdio "
                    "or streamable HTTP: read tools, and act tools behind the run's allowlist and a human's "
                    "approval; every call is appended to RUN_DIR/operator.jsonl."))
    # `consensus plot BAG`: a run's figures redrawn from its MCAP bag (consensus.runs.bag)
    plot = sub.add_parser("plot", help="redraw a run's figures from its MCAP bag",
                          description="Redraw the trajectories (paths, planned vs actual) and the spread over time "
                                      "from a run's bag: RUN/bag (the bag directory) or its .mcap file.")
    plot.add_argument("bag", type=Path, help="bag directory (with metadata.yaml) or .mcap file; with --video the "
                                             "run directory (or its bag)")
    plot.add_argument("--out", type=Path, default=None, help="output folder (default: plots/ beside the bag; "
                                                             "with --video: the run directory)")
    plot.add_argument("--video", action="store_true", help="write only the run's video instead, from the run "
                                                           "directory's trajectories.csv (headless runs have no bag)")
    plot.add_argument("--video-format", choices=("mp4", "gif"), help="with --video: the format (default: mp4 if an "
                                                                     "ffmpeg is found, else gif)")
    # `consensus bag repair DIR`: a bag cut by its writer's death made readable (consensus.runs.bag.repair_bag)
    bag = sub.add_parser("bag", help="MCAP bag tools").add_subparsers(dest="bag_command", required=True)
    repair = bag.add_parser("repair", help="make a bag whose writer died readable (rosbags, ros2 bag, Foxglove)",
                            description="Copy every message of the whole chunks of a cut bag into a complete MCAP "
                                        "file in its place and write metadata.yaml; a complete bag is left as it "
                                        "is (a missing metadata.yaml is written).")
    repair.add_argument("bag", type=Path, help="bag directory (RUN/bag) or its .mcap file")
    return parser


def _run(args: argparse.Namespace) -> int:
    from consensus.registry import scenario
    from consensus.runs.rundir import default_run_dir

    sc = scenario(args.scenario_name)
    cfg = config_from_args(sc, args)
    if (args.video or args.video_format) and not hasattr(cfg, "sim"):
        raise ConfigError(f"--video draws the robots' trajectories: consensus run {sc.name} moves no robots")
    if hasattr(cfg, "sim"):               # every scenario that moves robots takes its simulator the same way
        from consensus.sims import check_run
        check_run(cfg, headless=args.headless, world_ok=sc.headless_world)
    out = args.out or default_run_dir(sc.name)
    say = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    created = _created_by(Path(out))
    if args.security or args.keystore:
        from consensus.runs import security
        if args.headless or not args.security:
            raise ConfigError("--security secures a ROS run's DDS traffic: not with --headless; --keystore needs "
                              "--security")
        security.enable(args.keystore, num_robots=getattr(cfg, "num_robots", 1),
                        single_process=getattr(cfg, "single_process", False),
                        robots_file=getattr(cfg, "robots_file", ""), say=say)
    try:
        summary = sc.runner(cfg, out, headless=args.headless, use_sim_time=args.use_sim_time, echo=say)
    except ConfigError:
        _remove_created(created)        # a refused run leaves nothing on disk
        raise
    if sc.result_line is not None:
        print(sc.result_line(summary))
    out = Path(out).resolve()
    print(f"results: {out}")
    for plot in summary.get("plots", []):
        print(f"  plot: {out / plot}")
    if args.video or args.video_format:
        from consensus.runs.rundir import note_in_summary
        from consensus.runs.video import write_video
        video = write_video(out, fmt=args.video_format, say=print)
        note_in_summary(out, video=str(video.relative_to(out)))
        print(f"  video: {video}")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)

    def body() -> int:
        if args.command == "run":
            return _run(args)
        if args.command in ("experiment", "report"):
            from consensus.experiments import cli as experiments_cli
            return experiments_cli.run(args)
        if args.command == "plot" and (args.video or args.video_format):
            from consensus.runs.video import run_dir_of, write_video
            print(f"video: {write_video(run_dir_of(args.bag), args.out, args.video_format)}")
            return 0
        if args.command == "plot":
            from consensus.runs.bag import plot_bag
            for png in plot_bag(args.bag, args.out):
                print(f"plot: {png}")
            return 0
        if args.command == "bag":
            from consensus.runs.bag import repair_bag
            fixed = repair_bag(args.bag)
            print(f"repaired {fixed['file']}: {fixed['messages']} messages kept"
                  + (f", {fixed['dropped']} dropped (their channel was in the cut tail)" if fixed["dropped"] else "")
                  if fixed["repaired"] else f"{fixed['file']} is complete; nothing to repair")
            return 0
        if args.command == "model":
            from consensus.llm.embedded import ensure_default_model
            print(ensure_default_model())
            return 0
        if args.command == "gazebo-world":
            from consensus.sims.gazebo.world import command
            return command(args, _default_config)
        if args.command == "mcp":
            from consensus.operator.cli import command as operator_command
            return operator_command(args)
        if args.command == "security":
            from consensus.runs.security import command as security_command
            return security_command(args)
        parser.error("unknown command")
        return EXIT_BAD_INPUT

    return error_boundary(body, "consensus")


if __name__ == "__main__":
    sys.exit(main())
