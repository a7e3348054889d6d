"""How the node processes of a run are scheduled: their session and process group
(consensus.runs.ros_runner.OWN_PROCESS_GROUP) and the control thread's policy
(consensus.ros.process.control_thread_priority): what the 100-robot figures of docs/benchmarks.md rest on."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sessions and process groups as on Linux")
def test_node_processes_get_a_process_group_of_their_own_in_the_runner_s_session():
    # a session of its own would be an autogroup of its own, where nice values do not reach (sched(7))
    from consensus.runs.ros_runner import OWN_PROCESS_GROUP

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], **OWN_PROCESS_GROUP)
    try:
        assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
        assert os.getsid(child.pid) == os.getsid(0)
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not hasattr(os, "SCHED_FIFO"), reason="no SCHED_FIFO on this platform")
def test_the_control_thread_runs_sched_fifo_where_allowed_and_threads_it_starts_do_not():
    # in a child process (the test process stays as it is); where the host refuses (no root, CAP_SYS_NICE or rtprio
    # limit) the thread keeps the usual policy and says why
    code = """
import os, threading
from consensus.ros.process import control_thread_priority
print(*control_thread_priority(0), os.sched_getscheduler(0))
applied, how = control_thread_priority(40)
child = []
t = threading.Thread(target=lambda: child.append(os.sched_getscheduler(0))); t.start(); t.join()
print(applied, how, os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK, os.sched_getparam(0).sched_priority, child[0])
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    untouched, applied = out.stdout.splitlines()
    assert untouched == f"True usual scheduling (control_priority 0) {os.SCHED_OTHER}"
    ok, rest = applied.split(" ", 1)
    how, policy, priority, child = rest.rsplit(" ", 3)
    assert ok == str(how == "SCHED_FIFO 40")
    if how == "SCHED_FIFO 40":
        assert (int(policy), int(priority), int(child)) == (os.SCHED_FIFO, 40, os.SCHED_OTHER)
    else:
        assert "refused" in how and "control_priority 0" in how and int(policy) == os.SCHED_OTHER
