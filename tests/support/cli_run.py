"""``run_cli``: the package's CLI in a session of its own, so that a run that outlives its time is killed with every
node process it started. ``subprocess.run``'s timeout kills only the CLI; its nodes (each in a process group of its
own, ``consensus.runs.ros_runner.OWN_PROCESS_GROUP``, but in the CLI's session) ran on: four of a timed-out turtlesim
run were found alive an hour later, taking CPU from every test after it."""
from __future__ import annotations

import subprocess
import sys


def start_cli(args: list[str], *, env: dict | None = None) -> subprocess.Popen:
    """``consensus <args>`` with this interpreter, started in a session of its own, its output captured (a test
    that acts on the run while it goes: ``finish_cli`` then)."""
    cmd = [sys.executable, "-c", "import sys; from consensus.cli import main; sys.exit(main())", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def finish_cli(proc: subprocess.Popen, *, timeout: float) -> subprocess.CompletedProcess:
    """Wait for ``start_cli``'s run; on ``timeout`` every process of its session is killed, then
    ``subprocess.TimeoutExpired`` is raised as ``subprocess.run`` would."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        subprocess.run(["pkill", "-KILL", "-s", str(proc.pid)], check=False)      # the session: the CLI and its nodes
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_cli(args: list[str], *, env: dict, timeout: float) -> subprocess.CompletedProcess:
    """``consensus <args>`` with this interpreter, its output captured; on ``timeout`` every process of its session
    is killed, then ``subprocess.TimeoutExpired`` is raised as ``subprocess.run`` would."""
    return finish_cli(start_cli(args, env=env), timeout=timeout)
