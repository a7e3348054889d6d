"""A real two-node Ray cluster on this machine for the tests (``ray start --head`` + ``ray start --address``).

Each node is a ``ray start --block`` process in its own session (process group), with 1 CPU, a 100 MB object
store, no dashboard UI, usage stats off, every port chosen free, and Ray's temp dir in a short fresh directory
under /tmp (Unix socket paths must stay under 108 characters). ``stop()`` ends exactly what it started: SIGTERM to
each ``ray start`` (it stops its node's processes), then SIGKILL to each node's process group and to any process
whose command line names the cluster's temp dir; never ``ray stop`` (that would stop every Ray on the machine).
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = str(Path(sys.prefix) / "bin" / "ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayCluster:
    def __init__(self, nodes: int = 2) -> None:
        self.nodes = nodes
        self.temp = Path(tempfile.mkdtemp(prefix="cr", dir="/tmp"))
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []
        # token authentication (Ray's GCS listens on every interface): a fresh token, used by the nodes and, through
        # ``auth_env``, by the test's drivers; never the user's ~/.ray/auth_token
        token = self.temp / "auth_token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        self.auth_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), "RAY_USAGE_STATS_ENABLED": "0"}
        self.env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN")}
        self.env.update(self.auth_env)

    def _start(self, head: bool, index: int) -> None:
        cmd = [RAY, "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1",
               f"--object-store-memory={100 * 2**20}", f"--temp-dir={self.temp}", "--disable-usage-stats",
               f"--dashboard-agent-listen-port={free_port()}", f"--metrics-export-port={free_port()}",
               f"--runtime-env-agent-port={free_port()}"]
        if head:
            cmd += ["--head", f"--port={self.port}", "--include-dashboard=false", f"--dashboard-port={free_port()}"]
        else:
            cmd += [f"--address={self.address}"]
        log = open(self.temp / f"node{index}.log", "w")
        self.procs.append(subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))

    def start(self, timeout: float = 120.0) -> "RayCluster":
        try:
            self._start(True, 0)
            self._wait_nodes(1, timeout)
            for i in range(1, self.nodes):
                self._start(False, i)
            self._wait_nodes(self.nodes, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_nodes(self, n: int, timeout: float) -> None:
        """Until ``n`` nodes said "Ray runtime started" and the head counts them alive (asked in a subprocess, once
        the head is up: a probe of a head that is not up yet retries for a long time)."""
        probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
                 "print(sum(1 for x in ray.nodes() if x['Alive']))")
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"ray start exited with {p.returncode}: {self.logs()[-2000:]}")
            if self.logs().count("Ray runtime started") < n:
                time.sleep(0.5)
                continue
            r = subprocess.run([sys.executable, "-c", probe, self.address], env=self.env, capture_output=True,
                               text=True, timeout=60, check=False)
            last = r.stdout.strip() + r.stderr[-500:]
            if r.returncode == 0 and r.stdout.strip().isdigit() and int(r.stdout.strip()) >= n:
                return
            time.sleep(1.0)
        raise RuntimeError(f"the Ray cluster did not reach {n} node(s) in {timeout:.0f} s: {last}")

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.temp.glob("node*.log")))

    def worker_pids(self, name: str = "ray::TrialWorker") -> list[int]:
        """PIDs of this cluster's processes whose title starts with ``name`` (Ray sets ``ray::<Actor>.<method>``)."""
        import psutil

        out = []
        for p in self._members():
            try:
                if " ".join(p.cmdline()).startswith(name):
                    out.append(p.pid)
            except psutil.Error:
                pass
        return out

    def _members(self):
        import psutil

        groups = set()
        for proc in self.procs:
            try:
                groups.add(os.getpgid(proc.pid))
            except ProcessLookupError:
                groups.add(proc.pid)           # the session's group id is the leader's pid
        found: dict[int, object] = {}
        for p in psutil.process_iter(["pid", "cmdline"]):
            try:
                if os.getpgid(p.pid) in groups or str(self.temp) in " ".join(p.info["cmdline"] or []):
                    found[p.pid] = p
                    for child in p.children(recursive=True):   # Ray's workers run in sessions of their own
                        found[child.pid] = child
            except (ProcessLookupError, psutil.Error):
                pass
        return list(found.values())

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for _ in range(3):
            members = [m for m in self._members() if m.pid != os.getpid()]
            if not members:
                break
            for m in members:
                try:
                    m.kill()
                except Exception:
                    pass
            time.sleep(0.5)
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.temp, ignore_errors=True)

    def alive(self) -> list[int]:
        return [m.pid for m in self._members()]
