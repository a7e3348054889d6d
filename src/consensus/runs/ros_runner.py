"""Start a run's ROS processes without ``ros2 launch`` (for pip installs): the same executables, the same params.

Each process gets ``--ros-args -r __node:=NAME [-r __ns:=/NS] --params-file RUN/params.yaml -p k:=v`` (another
package's node, e.g. ``turtlesim_node``, found through the ament index, gets no params file; with
``ROS_SECURITY_ENABLE=true``, e.g. ``consensus run --security``, also ``--enclave`` of its SROS2 enclave, whose
files are checked in the keystore before anything starts: ``consensus.runs.security``), its output
goes to ``RUN/logs/<name>.log``, the recorder's progress lines, errors and a node's warning that it cannot keep up
with the machine (``consensus.runs.keepup``) are echoed, and the run ends when the recorder exits
(then every other process gets SIGINT, then SIGTERM, then SIGKILL: nothing is left behind). A robot whose own
process died is named in ``summary.json`` (``lost_processes``, and ``lost_robots`` where the scenario keeps one:
``note_lost_robots``), whenever it died.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from consensus import names
from consensus.errors import ConsensusError
from consensus.runs import security
from consensus.runs.keepup import BEHIND
from consensus.runs.processes import FINISH_GRACE_S, FINISHES, GOES_ON, NEEDED, ProcessSpec, writes_record

LLM_READY_TIMEOUT_S = 600.0     # first start assembles and hashes the 1.1 GB model


#: a node's output reaches its log line by line, also when the node is killed (unless the caller says otherwise)
CHILD_ENV = {"PYTHONUNBUFFERED": "1", "RCUTILS_LOGGING_BUFFERED_STREAM": "0"}

RESULTS_PREFIX = "RESULTS "      # the line a run's last process prints when its run directory is complete


def announce_results(out: Path) -> None:
    """Called by the process that ends a run (recorder, grid, matchmaker) once summary.json is written: one line
    that says where the run directory is, in the process's log and in the output of ``ros2 launch``."""
    print(f"{RESULTS_PREFIX}{Path(out).resolve()}", flush=True)


def executable_command(exe: str, package: str = "consensus") -> list[str]:
    """The installed node executable (lib/consensus/<exe>, as ros2 launch runs it) or the module as a fallback;
    another package's executable is found through the ament index (lib/<package>/<exe> under its prefix)."""
    if package != "consensus":
        from consensus.runs.ament import executable

        path = executable(package, exe)       # the ament index, else this venv (e.g. the drivers of `make drivers`)
        if path is None:
            raise ConsensusError(f"ROS package '{package}' has no executable lib/{package}/{exe} in the ament index "
                                 f"(AMENT_PREFIX_PATH) nor in {sys.prefix}")
        if python_script(path):        # e.g. crazyswarm2's server: run by this Python, whatever its first line names
            return [sys.executable, str(path)]
        return [str(path)]
    installed = Path(sys.prefix) / "lib" / "consensus" / exe
    if installed.is_file():
        return [sys.executable, str(installed)]
    from consensus.registry import executables

    module = executables().get(exe)
    if module is None:
        raise ConsensusError(f"no ROS executable '{exe}' is registered")
    return [sys.executable, "-c", f"import sys; from {module} import main; sys.exit(main())"]


def python_script(path: Path) -> bool:
    """Is the executable ``path`` a Python script (its first line a ``#!`` naming python)? Another package's
    script names the Python of the machine it was built on, which may not be this one (or may not exist)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def ros_args(spec: ProcessSpec, params_file: Path) -> list[str]:
    args = ["--ros-args", "-r", f"__node:={spec.name}"]
    if spec.namespace:
        args += ["-r", f"__ns:=/{spec.namespace}"]
    if spec.ours:
        args += ["--params-file", str(params_file)]
    own = spec.own_params_file(params_file.parent)      # another package's parameter tree, in the run directory
    if own is not None:
        args += ["--params-file", str(own)]
    args += security.enclave_args(spec)       # ROS_SECURITY_ENABLE=true: the process's SROS2 enclave
    for key, value in spec.ros_params.items():
        val = str(value).lower() if isinstance(value, bool) else str(value)
        args += ["-p", f"{key}:={val}"]
    return args


_ROS_LOG = re.compile(r"^\[(?P<level>[A-Z]+)\] \[[0-9.]+\] \[(?P<node>[^\]]+)\]: (?P<msg>.*)$")


def _readable(line: str) -> str:
    """A node's log line as a person reads it on the console: ``[recorder] progress ...`` (the level only when it is
    not INFO; the full line, with its time stamp, stays in RUN/logs)."""
    m = _ROS_LOG.match(line)
    if not m:
        return line
    level = "" if m["level"] == "INFO" else f"{m['level']} "
    return f"{level}[{m['node']}] {m['msg']}"


#: every node process in a process group of its own (signalled as a group: ``_Proc.signal``) but in the runner's
#: session. A session of its own (``start_new_session``) would also give it an autogroup of its own on Linux
#: (sched(7), ``/proc/sys/kernel/sched_autogroup_enabled``), where the scheduler shares the CPU between the autogroups
#: whatever their processes' nice values: the recorders' ``BACKGROUND_NICE`` would have no effect (measured with
#: ``perf sched``: docs/benchmarks.md, 'Why the code is as it is')
OWN_PROCESS_GROUP = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}


class _Proc:
    def __init__(self, spec: ProcessSpec, params_file: Path, log_dir: Path, echo: Callable[[str], None] | None):
        self.spec = spec
        self.log_path = log_dir / f"{spec.namespace + '_' if spec.namespace else ''}{spec.name}.log"
        self.log = self.log_path.open("w", buffering=1)      # line by line: `tail -f RUN/logs/<name>.log` works
        self.popen = subprocess.Popen(executable_command(spec.executable, spec.package) + ros_args(spec, params_file),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                      env=CHILD_ENV | dict(os.environ), **OWN_PROCESS_GROUP)
        self.echo = echo
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        log_ok = True
        for line in self.popen.stdout:
            if log_ok:
                try:
                    self.log.write(line)
                except OSError as exc:      # a full disk: keep draining the pipe (a full pipe would stop the node)
                    log_ok = False
                    if self.echo:
                        self.echo(f"warning: {self.log_path}: {exc.strerror or exc}; the rest of this log is lost")
            if self.echo and ("progress" in line or "done" in line.split(": ", 1)[-1][:6] or "error" in line.lower()
                              or BEHIND in line):
                self.echo(_readable(line.rstrip()))
        try:
            self.log.flush()
        except OSError:
            pass

    def tail(self, n: int = 15) -> str:
        self.thread.join(timeout=2)
        try:
            self.log.flush()
        except OSError:
            pass
        return "".join(self.log_path.read_text().splitlines(keepends=True)[-n:])

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass


def _wait_llm_ready(base_url: str, proc: _Proc, timeout: float) -> None:
    """Wait for the run's embedded LLM server (``llm.endpoint.wait_for_models``, the poll the robots' processes use
    too); one ``ConsensusError`` when it exits or does not answer within ``timeout`` seconds."""
    from consensus.llm.endpoint import models_url, wait_for_models

    if wait_for_models(base_url, timeout_s=timeout, give_up=lambda: proc.popen.poll() is not None):
        return
    if proc.popen.poll() is not None:
        raise ConsensusError(f"the embedded LLM server exited (code {proc.popen.returncode}):\n{proc.tail()}")
    raise ConsensusError(f"the embedded LLM server did not answer at {models_url(base_url)} within {timeout:.0f} s")


def stop_all(procs: list[_Proc], grace_s: float = 8.0) -> None:
    """Stop the processes stage by stage (``ProcessSpec.stop_stage``: a drone's link lands it before our nodes stop,
    and the vendors' simulators stop last), each stage as ``_stop_stage``."""
    for stage in sorted({p.spec.stop_stage for p in procs}):
        _stop_stage([p for p in procs if p.spec.stop_stage == stage], grace_s)


def _stop_stage(procs: list[_Proc], grace_s: float) -> None:
    """SIGINT every process, then SIGTERM and SIGKILL what is left: after ``grace_s`` (a process's own
    ``ProcessSpec.grace_s`` when it has one), or ``FINISH_GRACE_S`` for a process that writes the run's record on its
    way out (``writes_record``)."""
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0)):
        live = [p for p in procs if p.popen.poll() is None]
        if not live:
            return
        for p in live:
            p.signal(sig)
        start = time.monotonic()
        for p in live:
            own = p.spec.grace_s if sig == signal.SIGINT and p.spec.grace_s > 0 else wait
            longer = sig == signal.SIGINT and writes_record(p.spec)
            deadline = start + (max(own, FINISH_GRACE_S) if longer else own)
            try:
                p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _lost(p: _Proc, code: int | None, rule: str) -> dict:
    return {"process": p.spec.path, "exit_code": code, "rule": rule, "log": str(p.log_path)}


def robot_of_process(process: str) -> int | None:
    """The robot whose own process ``process`` (``ProcessSpec.path``: ``robot_<i>/agent``) is, else None."""
    namespace, _, _ = process.rpartition("/")
    return names.split_robot_namespace(f"/{namespace}")[1] if namespace else None


def note_lost_robots(out: Path, dead: list[dict], echo: Callable[[str], None] | None = None) -> list[int]:
    """Every robot whose own process died (``dead``: the lost processes, ``robot_<i>/...``) joins the summary's
    ``lost_robots``, where the scenario keeps one (its recorder judges a loss by the robot's own messages, and has not
    yet when the robot died within ``robot_timeout_s`` of the end), with a ``losses`` event ``{"robot", "event":
    "lost", "t_s": None, "process", "exit_code"}`` (the runner does not know the run's clock). A summary without
    ``lost_robots`` is left as it is. Returns the robots added."""
    try:
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return []
    listed = summary.get("lost_robots") if isinstance(summary, dict) else None
    if not isinstance(listed, list):
        return []
    losses = summary.get("losses") if isinstance(summary.get("losses"), list) else []
    added = []
    for d in dead:
        robot = robot_of_process(str(d.get("process", "")))
        if robot is None or robot in listed or robot in added:
            continue
        added.append(robot)
        losses.append({"robot": robot, "event": "lost", "t_s": None, "process": d.get("process"),
                       "exit_code": d.get("exit_code")})
    if added:
        _note_quietly(out, echo, lost_robots=sorted({*listed, *added}), losses=losses)
    return added


def _note_quietly(out: Path, echo: Callable[[str], None] | None, **fields) -> None:
    """``note_in_summary``; on a full disk the summary keeps what it had and the reason is printed."""
    from consensus.runs.rundir import note_in_summary

    try:
        note_in_summary(out, **fields)
    except OSError as exc:
        if echo:
            echo(f"warning: summary.json could not take {', '.join(fields)}: {exc}")


def _physics_judgement(out: Path) -> dict:
    """What a physics world judged (``RUN/contacts.json`` of ``sim: mujoco``): ``contacts`` (how many),
    ``contact_list`` (each: ``t_s``, ``pair``, ``depth_m``, ``end_s``), ``robot_contacts``, ``wall_contacts``,
    ``max_penetration_m``; empty without one, or when the file is not a judgement."""
    path = out / "contacts.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        count = int(data["contacts"])
    except (OSError, ValueError, KeyError, TypeError):
        return {"contacts_error": f"{path.name} is not readable"}
    keys = ("contact_list", "robot_contacts", "wall_contacts", "max_penetration_m", "true_min_pair_distance_m",
            "true_outside_geofence_m")
    return {"contacts": count, **{k: data.get(k) for k in keys}}


def _keep_record(out: Path, params_file: Path, dead: list[dict], echo: Callable[[str], None] | None) -> None:
    """After every process stopped: a bag cut by its writer's death or a full disk is repaired (``bag_repaired``
    in the summary); a summary.json
    names the processes lost during the run (``end_reason: lost:<process>``), and is written from what the run left
    (``consensus.runs.rundir.salvage_summary``) when the process that writes it died first."""
    from consensus.runs.bag import BAG_DIR, bag_is_cut, repair_bag
    from consensus.runs.rundir import note_lost_processes, release_space, salvage_summary

    release_space(out)                  # the room set aside at the start: for what follows on a full disk
    repaired: dict | None = None
    bag = out / BAG_DIR
    if bag.is_dir() and any(bag.glob("*.mcap")):
        if (out / "summary.json").exists() and bag_is_cut(bag):
            # said before the repair, which may take the last free bytes of a full disk (then this stays)
            _note_quietly(out, echo, bag_repaired={"pending": True})
        try:
            fixed = repair_bag(bag)
            if fixed["repaired"]:
                repaired = {"messages": fixed["messages"], "in_place": bool(fixed.get("in_place"))}
                if echo:
                    echo(f"the bag was cut (its writer died or the disk filled): repaired {fixed['file']} "
                         f"({fixed['messages']} messages kept)")
        except (ConsensusError, OSError) as exc:       # a full disk: the summary below still gets its chance
            if echo:
                echo(f"warning: the bag could not be repaired: {exc}")
    if repaired is not None and (out / "summary.json").exists():
        _note_quietly(out, echo, bag_repaired=repaired)
    if dead and (out / "summary.json").exists():
        note_lost_processes(out, dead)
        note_lost_robots(out, dead, echo)
    elif dead:
        workspace = None
        try:
            from consensus.settings import RobotBaseConfig, params_file_fields

            workspace = params_file_fields(params_file, RobotBaseConfig).get("workspace")
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError, ConsensusError):
            pass
        summary = salvage_summary(out, dead, workspace=workspace)
        if echo:
            echo(f"summary.json written from what the run left (end_reason {summary['end_reason']})")
    judged = _physics_judgement(out)        # after a salvage too: the engine's judgement is the run's record
    if judged and (out / "summary.json").exists():
        _note_quietly(out, echo, **judged)


def run_processes(specs: list[ProcessSpec], params_file: Path, out: Path, *, llm_base_url: str = "",
                  echo: Callable[[str], None] | None = print) -> dict:
    """Start ``specs`` in order with ``params_file`` (waiting for an ``llm_server`` to answer), run until the
    process marked ``ends_run`` exits, stop every process, and return ``out/summary.json``'s content.

    A process that dies with an error stops the run with its log tail - except an ``expendable`` one (one robot's
    own process): the run goes on without that robot, unless no robot is left (then it ends with the last one's log
    tail); and a writer of the record (``GOES_ON_WITHOUT``: the bag recorder): the run goes on without a bag writer.
    Either way ``summary.json`` names every process lost (``end_reason: lost:<process>``, the run's own reason in
    ``run_end_reason``, ``lost_processes``); when the
    process that writes it (``ends_run``, the recorder) died, it is written here from the streamed trajectories and
    plans (``salvaged: true``) and the run fails (exit 1). A bag cut by its writer's death is repaired
    (``consensus.runs.bag.repair_bag``). Ctrl-C or SIGTERM of the caller stops the children too (``end_reason``
    stays the recorder's ``interrupted``); one log per process in ``out/logs``."""
    if security.enabled():              # every process's enclave is in the keystore, before any starts
        security.check_keystore(os.environ.get("ROS_SECURITY_KEYSTORE", ""), specs)
    from consensus.runs.rundir import reserve_space

    log_dir = out / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    reserve_space(out)                  # room for the summary if the disk fills during the run
    procs: list[_Proc] = []
    dead: list[dict] = []             # processes lost during the run (``_keep_record``)
    interrupted = False
    previous = None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (e.g. `timeout`, a CI runner) must stop the children too, like Ctrl-C does
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for spec in specs:
            proc = _Proc(spec, params_file, log_dir, echo)
            procs.append(proc)
            if spec.executable == "llm_server":
                if echo:
                    echo("starting the embedded LLM (the first start assembles and verifies the model) ...")
                _wait_llm_ready(llm_base_url, proc, LLM_READY_TIMEOUT_S)
        last = next(p for p in procs if p.spec.ends_run)
        lost: set[int] = set()
        while last.popen.poll() is None:
            for k, p in enumerate(procs):
                code = p.popen.poll()
                rule = p.spec.death_rule                       # the one decision (consensus.runs.processes)
                if code is None or code == 0 or rule == FINISHES or k in lost:
                    continue
                if rule == GOES_ON:                            # a writer of the record: the run goes on
                    lost.add(k)
                    dead.append(_lost(p, code, "the run went on"))
                    if echo:
                        echo(f"warning: '{p.spec.name}' died (exit code {code}); the run goes on and its record is "
                             f"repaired at the end (log: {p.log_path})")
                    continue
                if rule == NEEDED:
                    dead.append(_lost(p, code, "the run ended"))
                    raise ConsensusError(f"process '{p.spec.namespace}/{p.spec.name}' exited with code {code}:\n"
                                         f"{p.tail()}")
                lost.add(k)          # one robot of many: the others go on (the recorder notes the loss)
                last_robot = all(j in lost for j, q in enumerate(procs) if q.spec.expendable)
                dead.append(_lost(p, code, "the run ended" if last_robot else "the run went on"))
                if last_robot:
                    # no robot left: nothing would move or answer again, and a round clock would wait for ever
                    raise ConsensusError(f"every robot process died (the last: '{p.spec.path}', "
                                         f"exit code {code}); the run ended:\n{p.tail()}")
                if echo:
                    echo(f"warning: robot process '/{p.spec.namespace}/{p.spec.name}' died (exit code {code}); "
                         f"the run goes on without it (log: {p.log_path})")
            time.sleep(0.2)
        if last.popen.returncode != 0:
            dead.append(_lost(last, last.popen.returncode, "the run ended"))
            raise ConsensusError(f"the {last.spec.name} process failed (code {last.popen.returncode}); "
                                 f"summary.json is written from what the run left (end_reason "
                                 f"lost:{last.spec.name}):\n{last.tail()}")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        stop_all(procs)
        for p in procs:
            p.thread.join(timeout=2)
            try:
                p.log.close()
            except OSError:            # a full disk: what the log holds stays
                pass
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        try:
            _keep_record(out, params_file, dead, echo)
        except (OSError, ConsensusError) as exc:        # a full disk: the run's own error comes first
            if echo:
                echo(f"warning: the run's record could not be completed: {exc}")
    summary_path = out / "summary.json"
    if not summary_path.exists():
        if interrupted:          # every process is stopped; the caller decides what an interrupt means
            raise KeyboardInterrupt
        raise ConsensusError(f"the run ended without a summary; see the logs in {log_dir}")
    return json.loads(summary_path.read_text())
