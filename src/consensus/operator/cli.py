"""``consensus mcp``: its flags and its main (docs/operator.md)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from consensus.errors import ConfigError

DEFAULT_PORT = 8765


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=Path, help="attach to the running ROS fleet writing this run directory (its domain "
                                            "and namespace from its manifest; its allowlist from its parameters)")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                   help="stdio (Claude Desktop, VS Code: the client starts the server) or streamable HTTP")
    p.add_argument("--host", default="127.0.0.1", help="HTTP: the address it listens on (loopback unless "
                                                       "--allow-remote)")
    p.add_argument("--allow-remote", action="store_true",
                   help="HTTP: listen on another address than loopback (put an authenticating proxy in front: a "
                        "client's name is its own claim)")
    p.add_argument("--console", type=Path,
                   help="where approval codes and the seat's lines are written (appended, mode 0600), e.g. a "
                        "terminal (/dev/pts/N) the operator watches; default: standard error, which over stdio is "
                        "the MCP client's to read")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP: the port (default {DEFAULT_PORT})")
    p.add_argument("--operator", default="", help="the human at this seat, as operator.jsonl names them "
                                                  "(default: the login name)")
    p.add_argument("--config", type=Path, help="without --run: the parameters file whose operator group (allowlist, "
                                               "approval) this seat uses (default: the packaged defaults)")
    p.add_argument("--out", type=Path, default=Path("runs"),
                   help="where start_run writes its runs (and, before a run is attached, operator.jsonl)")
    p.add_argument("--supervisor", action="store_true",
                   help="no client: an LLM supervisor reads the fleet through this server's read tools and may only "
                        "e-stop (docs/operator.md); needs --run")
    p.add_argument("--supervisor-period", type=float, default=10.0, help="seconds between the supervisor's looks")
    p.add_argument("--supervisor-looks", type=int, default=0, help="stop after this many looks (0: until Ctrl-C)")
    p.add_argument("--backend", default="embedded", help="the supervisor's LLM backend (consensus.llm.backends)")
    p.add_argument("--base-url", default="", help="the supervisor's OpenAI-compatible endpoint")
    p.add_argument("--model", default="", help="the supervisor's model")


def command(args: argparse.Namespace) -> int:
    from consensus.extras import require

    require("mcp", "consensus mcp")
    from consensus.operator.server import Seat, build_server

    if not 0 < args.port < 65536:
        raise ConfigError(f"--port must be in [1, 65535] (got {args.port})")
    if args.transport == "http" and not args.allow_remote and args.host not in ("127.0.0.1", "localhost", "::1"):
        raise ConfigError(f"--host {args.host} would let any machine that reaches it call the seat's tools, and a "
                          f"client's name is its own claim: give --allow-remote (behind an authenticating proxy)")
    console = _open_console(args.console) if args.console else None
    if args.supervisor and not args.run:
        raise ConfigError("--supervisor watches a running fleet: give --run RUN_DIR")
    if args.run:
        _join_run_domain(args.run)
        seat = Seat.for_run(args.run, operator=args.operator, out=args.out, supervisor=args.supervisor,
                            console=console)
    else:
        seat = Seat(**_seat_settings(args.config), operator=args.operator, out=args.out, console=console)
    try:
        if args.supervisor:
            from consensus.operator.supervisor import run_supervisor

            return run_supervisor(seat, period_s=args.supervisor_period, looks=args.supervisor_looks,
                                  backend=args.backend, base_url=args.base_url, model=args.model)
        app = build_server(seat)
        if args.transport == "stdio":
            seat.say(f"serving over stdio; run: {seat.fleet.run_dir if seat.fleet else 'none yet'}")
            app.run("stdio")
        else:
            seat.say(f"serving streamable HTTP at http://{args.host}:{args.port}/mcp; run: "
                     f"{seat.fleet.run_dir if seat.fleet else 'none yet'}")
            app.run("streamable-http", host=args.host, port=args.port)
    finally:
        seat.close()
    return 0


def _open_console(path: Path):
    """The operator's console: ``path`` opened for appending, readable by its owner only where it is a new file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ConfigError(f"--console {path}: cannot be opened: {exc.strerror or exc}") from None
    return os.fdopen(fd, "a", buffering=1)


def _seat_settings(config: Path | None) -> dict:
    """The operator group of a parameters file (or the defaults), validated as the runs validate it."""
    from consensus.settings import OperatorParams, params_file_fields

    if config is not None:
        fields = {k: v for k, v in params_file_fields(config, OperatorParams).items()
                  if k in OperatorParams.__dataclass_fields__}
        op = OperatorParams(**fields)
    else:
        op = OperatorParams()
    OperatorParams._check_operator(op)
    return {"allow": op.operator_allow, "approval": op.operator_approval,
            "approval_timeout_s": op.operator_approval_timeout_s}


def _join_run_domain(run_dir: Path) -> None:
    """The run's discovery settings for this process's own ROS traffic, where the environment does not say."""
    from consensus.operator.fleet import read_manifest

    ros = read_manifest(run_dir).get("ros") or {}
    for key, env in (("discovery_range", "ROS_AUTOMATIC_DISCOVERY_RANGE"), ("static_peers", "ROS_STATIC_PEERS")):
        if ros.get(key) and not os.environ.get(env):
            os.environ[env] = str(ros[key])
    print(f"[consensus mcp] the run's ROS domain: {ros.get('domain_id', 0)}", file=sys.stderr)
