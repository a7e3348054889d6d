"""The ``experiment`` and ``report`` commands (wired into ``consensus`` by ``consensus.cli``).

    consensus experiment --list                            # the presets (registered studies)
    consensus experiment consensus-1d --trials 20 --workers 2 --out runs/c1d
    consensus experiment my_sweep.yaml --set rounds=5 --sweep num_agents=2,4
    consensus experiment consensus-1d --planner llm --backend openai --base-url http://127.0.0.1:8000/v1 \\
        --model qwen --concurrency 16 --out runs/c1d-llm
    consensus experiment --resume runs/c1d-llm             # finish an interrupted sweep
    consensus experiment --replay runs/c1d-llm             # the same sweep from its transcripts, no network
    consensus experiment consensus-1d --executor ray --ray-address auto   # trials on the Ray cluster (ray start)
    consensus report runs/c1d

Flags apply on top of a spec file or a preset's defaults: ``--trials``/``--seed``/``--workers`` set the top-level
keys, ``--planner`` is ``--set planner=...``, ``--backend``/``--model``/``--base-url``/``--concurrency`` the llm
block; ``--set KEY=VALUE`` fixes a parameter (and drops its sweep axis), ``--sweep KEY=V1,V2`` (or
``KEY=[V1, V2]``) sets one axis. A run directory (``--out``, default ``runs/<study>-<time>``) that already holds
the same sweep is resumed. ``--resume``/``--replay`` read the spec from RUN_DIR and take only execution flags.
Bad input: one message, exit status 2, nothing run. Ctrl-C: exit status 130, finished trials kept.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Mapping

from consensus.errors import ConfigError
from consensus.experiments.study import Study
from consensus.llm.backends import backend_spec, names as backend_names, starts_local_server

_SPEC_FLAGS = ("trials", "seed", "planner", "backend", "model", "set", "sweep")
_RESUME_FLAGS = ("workers", "concurrency", "base_url", "retry_failed", "quiet", "executor", "ray_address")
_REPLAY_FLAGS = ("workers", "concurrency", "out", "force", "quiet", "executor", "ray_address")


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value
    return parse


def register(subparsers: Any) -> None:
    """Add the ``experiment`` and ``report`` commands to ``subparsers`` (from ``add_subparsers``)."""
    exp = subparsers.add_parser(
        "experiment", help="run a sweep of trials (a spec file or a named preset)",
        description="Expand a sweep into trials, run them on a worker pool, write RUN_DIR/results.jsonl, "
                    "manifest.json and report.md. Re-running into the same --out resumes.")
    exp.add_argument("target", nargs="?", help="SPEC.yaml, or a preset name (see --list)")
    exp.add_argument("--list", action="store_true", help="list the presets and exit")
    exp.add_argument("--resume", metavar="RUN_DIR", type=Path, help="finish the sweep stored in RUN_DIR")
    exp.add_argument("--replay", metavar="RUN_DIR", type=Path,
                     help="re-run the LLM sweep in RUN_DIR from its transcripts.jsonl, no network")
    exp.add_argument("--trials", type=_int_at_least(1), help="repetitions per grid point")
    exp.add_argument("--seed", type=_int_at_least(0), help="base seed of the trial seeds")
    exp.add_argument("--planner", help="= --set planner=NAME")
    exp.add_argument("--backend", choices=[b for b in backend_names() if not backend_spec(b).needs_replay_path],
                     help="LLM backend (a replay: --replay)")
    exp.add_argument("--model", help="model name (openai) or .gguf path (embedded)")
    exp.add_argument("--base-url", action="append", default=[], metavar="URL",
                     help="OpenAI-compatible endpoint; several times: a pool (llm.endpoints), --concurrency each")
    exp.add_argument("--concurrency", type=_int_at_least(1),
                     help="LLM requests in flight over the whole sweep (per endpoint with several --base-url)")
    exp.add_argument("--workers", type=_int_at_least(1), help="worker pool size")
    exp.add_argument("--executor", choices=("local", "ray"),
                     help="where trials run: this machine (local, the default) or a Ray cluster (ray)")
    exp.add_argument("--ray-address", metavar="ADDR",
                     help="with --executor ray: 'auto' (the cluster of `ray start`), HOST:PORT of its head; "
                          "default: a Ray instance on this machine for this sweep")
    exp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="fix a parameter (repeatable)")
    exp.add_argument("--sweep", action="append", default=[], metavar="KEY=V1,V2",
                     help="set one sweep axis (repeatable)")
    exp.add_argument("--out", type=Path, help="run directory (default: runs/<study>-<time>)")
    exp.add_argument("--force", action="store_true",
                     help="--out holds a different sweep: move it to RUN_DIR/old-<time>/ and start over")
    exp.add_argument("--retry-failed", action="store_true", help="on resume, run the failed trials again")
    exp.add_argument("--no-report", action="store_true", help="do not write report.md at the end")
    exp.add_argument("-q", "--quiet", action="store_true", help="no progress line")

    rep = subparsers.add_parser("report", help="write report.md and figures of an experiment run directory")
    rep.add_argument("run_dir", type=Path)


def _given(args: argparse.Namespace, names: tuple[str, ...]) -> list[str]:
    return [n for n in names if getattr(args, n, None) not in (None, False, [])]


def compact_values(values: list) -> str:
    """A sweep axis as a person reads it: short lists as they are; long ones summarised, e.g. ``44 table values
    (table:0 .. table:43) + 21 memory_invariant values (memory_invariant:0.0 .. memory_invariant:1.0)`` or ``22
    values (2 .. 1000)``."""
    if len(values) <= 8:
        return "[" + ", ".join(str(v) for v in values) + "]"
    groups: dict[str, list] = {}
    for v in values:
        kind = str(v).split(":", 1)[0] if isinstance(v, str) and ":" in v else ""
        groups.setdefault(kind, []).append(v)
    return " + ".join(f"{len(vs)} {kind + ' ' if kind else ''}values ({vs[0]} .. {vs[-1]})"
                      for kind, vs in groups.items())


def _list_presets(studies: Mapping[str, Study]) -> int:
    if not studies:
        print("no presets registered")
        return 0
    width = max(len(n) for n in studies)
    for name in sorted(studies):
        s = studies[name]
        points = 1
        for values in s.default_sweep.values():
            points *= len(values)
        axes = "; ".join(f"{k}: {compact_values(list(v))}" for k, v in s.default_sweep.items()) or "no sweep"
        print(f"{name:<{width}}  {s.description}\n{'':<{width}}  {points} point(s) x {s.default_trials} trials; "
              f"sweep {axes}; parameters: {', '.join(s.defaults)}")
    return 0


def _check_only(args: argparse.Namespace, flag: str, allowed: tuple[str, ...]) -> None:
    others = [n for n in _given(args, _SPEC_FLAGS + _REPLAY_FLAGS + _RESUME_FLAGS + ("target",))
              if n not in allowed]
    if others:
        names = ", ".join("--" + n.replace("_", "-") if n != "target" else "a spec/preset" for n in others)
        raise ConfigError(f"{flag} takes the sweep from RUN_DIR; it cannot be combined with {names}")


def _endpoint_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The llm entries of --base-url (once: base_url; several times: an endpoint pool) and --concurrency."""
    urls = list(args.base_url or [])
    if len(urls) < 2:
        return {"base_url": urls[0] if urls else None, "concurrency": args.concurrency}
    each = {"concurrency": args.concurrency} if args.concurrency is not None else {}
    return {"endpoints": [{"base_url": url, **each} for url in urls], "base_url": "", "concurrency": None}


def _executor(args: argparse.Namespace):
    from consensus.experiments.runner import LocalExecutor

    if args.executor == "ray":
        from consensus.experiments.ray_executor import RayExecutor

        return RayExecutor(args.ray_address)
    if args.ray_address:
        raise ConfigError("--ray-address needs --executor ray")
    return LocalExecutor()


def _plan(args: argparse.Namespace, studies: Mapping[str, Study]):
    """(spec, out_dir) for the command line."""
    from consensus.experiments import runner
    from consensus.experiments.spec import apply_overrides, load_spec_file, resolve_spec
    from consensus.runs.rundir import default_run_dir

    execution = dict(workers=args.workers, llm=_endpoint_flags(args))
    if args.resume is not None:
        _check_only(args, "--resume", _RESUME_FLAGS)
        stored = runner.load_run_spec(args.resume, studies).to_dict()
        return resolve_spec(apply_overrides(stored, studies, **execution), studies), args.resume
    if args.replay is not None:
        _check_only(args, "--replay", _REPLAY_FLAGS)
        spec = runner.replay_spec(args.replay, studies)
        spec = resolve_spec(apply_overrides(spec.to_dict(), studies, workers=args.workers,
                                            llm={"concurrency": args.concurrency}), studies)
        out = args.out or args.replay.with_name(args.replay.name + "-replay")
        if out.resolve() == args.replay.resolve():
            raise ConfigError("--out must differ from the replayed RUN_DIR")
        return spec, out
    if not args.target:
        raise ConfigError("name a spec file or a preset (consensus experiment --list shows the presets)")
    target = args.target
    if Path(target).is_file() or target.endswith((".yaml", ".yml")):
        raw, source = load_spec_file(target), target
    elif target in studies:
        raw, source = {"study": target}, f"preset {target}"
    else:
        raise ConfigError(f"{target!r} is neither a spec file nor a preset; presets: {', '.join(sorted(studies))}")
    raw = apply_overrides(raw, studies, trials=args.trials, seed=args.seed, workers=args.workers,
                          planner=args.planner, sets=args.set, sweeps=args.sweep,
                          llm={"backend": args.backend, "model": args.model, **_endpoint_flags(args)})
    spec = resolve_spec(raw, studies, source=source)
    return spec, args.out or default_run_dir(spec.study)


#: seconds per request of the embedded CPU model (Qwen2.5-Coder-1.5B on 2 cores), low and high
EMBEDDED_SECONDS_PER_CALL = (4.0, 9.0)
#: how much faster two slots answer a sweep than one on 2 cores: the lower of the measured gains
#: (benchmarks/bench_llm_batch.py; docs/benchmarks.md, 'Why the code is as it is')
EMBEDDED_BATCH_SPEEDUP = 1.2


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{max(1, round(seconds / 60))} min"


def llm_estimate(spec, study: Study) -> str:
    """One line: how many LLM requests the sweep makes at most, and for the embedded model how long that takes."""
    from consensus.experiments.spec import grid

    if not spec.llm or study.llm_calls is None:
        return ""
    calls = spec.trials * sum(study.llm_calls(p) for p in grid(spec))
    text = f"up to {calls:,} LLM requests (parse retries aside; trials already recorded are skipped)"
    if starts_local_server(spec.llm["backend"], spec.llm["base_url"]):
        speedup = EMBEDDED_BATCH_SPEEDUP if min(spec.llm["n_parallel"], spec.llm["concurrency"]) > 1 else 1.0
        lo, hi = (calls * s / speedup for s in EMBEDDED_SECONDS_PER_CALL)
        text += (f"; the embedded CPU model answers one request in ~{EMBEDDED_SECONDS_PER_CALL[0]:g}-"
                 f"{EMBEDDED_SECONDS_PER_CALL[1]:g} s: about {_duration(lo)} to {_duration(hi)}. Fewer with "
                 "--trials/--sweep/--set, or a faster server with --backend openai --base-url")
    return text


def _sigterm_as_interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt


def _experiment(args: argparse.Namespace, studies: Mapping[str, Study]) -> int:
    from consensus.experiments.report import write_report
    from consensus.experiments.runner import run_experiment

    if args.list:
        return _list_presets(studies)
    spec, out = _plan(args, studies)
    executor = _executor(args)
    say = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    llm = f", LLM {spec.llm['backend']} {spec.llm['model'] or ''} x{spec.llm['concurrency']}".rstrip() \
        if spec.llm else ""
    say(f"{spec.study}: {spec.grid_size()} grid point(s) x {spec.trials} trials, workers {spec.workers}{llm} -> {out}")
    estimate = llm_estimate(spec, studies[spec.study])
    if estimate:
        say(estimate)
    previous = signal.getsignal(signal.SIGTERM)
    in_main = threading.current_thread() is threading.main_thread()   # signal.signal works only there
    if in_main:
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        result = run_experiment(spec, studies[spec.study], out, force=args.force, retry_failed=args.retry_failed,
                                progress=not args.quiet, executor=executor)
    except KeyboardInterrupt:
        print(f"consensus: interrupted; finished trials are in {out}/results.jsonl — "
              f"resume with: consensus experiment --resume {out}", file=sys.stderr)
        return 130
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    print(f"{result.total} trials: {result.ok} ok, {result.failed} failed this run, {result.skipped} already "
          f"recorded; {result.elapsed_s:.1f} s ({result.mode})")
    if not args.no_report:
        print(f"report: {write_report(out, studies)}")
    print(f"results: {Path(out) / 'results.jsonl'}")
    return 0


def run(args: argparse.Namespace, studies: Mapping[str, Study] | None = None) -> int:
    """Run the ``experiment`` or ``report`` command parsed by ``register``'s parsers; returns the exit status.

    ``studies`` defaults to ``consensus.registry.all_studies()``. ConfigError is printed, status 2.
    """
    from consensus.errors import ConsensusError

    if studies is None:
        from consensus.registry import all_studies

        studies = all_studies()
    try:
        if args.command == "report":
            from consensus.experiments.report import write_report

            print(f"report: {write_report(args.run_dir, studies)}")
            return 0
        return _experiment(args, studies)
    except ConfigError as exc:
        print(f"consensus: error: {exc}", file=sys.stderr)
        return 2
    except ConsensusError as exc:
        print(f"consensus: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:                 # a full disk, a permission, a path that is a file: no traceback
        print(f"consensus: {exc}", file=sys.stderr)
        return 1
