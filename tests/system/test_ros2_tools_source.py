"""`make ros2-tools` (tools/ros2-tools/install.py): the real ROS 2 launch and ros2 CLI for a pip-only user.

Always run: without any source it stops with one line; local sources are built at the pinned commit (a tiny
synthetic repository stands in for the ROS 2 ones) and a source at another commit is refused.
Into a fresh venv (the pinned ROS 2 Kilted wheels from the pip cache): the ../shared/ros2-tools wheels (skips
without that folder) and the wheels built from local copies of the real ROS 2 repositories, then `ros2 launch
--help`, `ros2 pkg list` and `ros2 topic list` there. The local copies: CONSENSUS_ROS2_TOOLS_SRC (a folder of clones
or <name>-<commit>.tar.gz archives, as ROS2_TOOLS_SRC) or CONSENSUS_ROS2_MIRRORS (bare git mirrors laid out as
<owner>+<name>/repo, e.g. /work/.mirror; archived here); with neither that test skips with the reason.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "ros2-tools" / "install.py"
SOURCES = ROOT / "requirements" / "ros2-tools-sources.txt"
SHARED = ROOT.parent / "shared" / "ros2-tools"
TOOLS = ["launch", "launch_xml", "launch_yaml", "launch_testing", "launch_ros", "ros2launch", "launch_testing_ros",
         "ros2cli", "ros2topic", "ros2node", "ros2param", "ros2service", "ros2pkg", "ros2run", "ros2interface",
         "rosidl_runtime_py", "composition_interfaces"]
HAVE_GIT = shutil.which("git") is not None


def pinned() -> list[tuple[str, str, list[str]]]:
    rows = [line.split("#", 1)[0].split() for line in SOURCES.read_text().splitlines()]
    return [(row[0], row[1], row[2:]) for row in rows if row]


def run_script(*args: str, python: str = sys.executable, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("ROS2_TOOLS_SRC", "ROS2_TOOLS_OFFLINE", "ROS_DISTRO")}
    environ.update(env)
    return subprocess.run([python, str(SCRIPT), *args], env=environ, capture_output=True, text=True, timeout=1800)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


# --- no usable source: one line ----------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["offline", "empty ROS2_TOOLS_SRC"])
def test_without_any_source_it_stops_with_one_line_saying_what_it_needs(how, tmp_path):
    args = ["--shared", str(tmp_path / "no-shared"), "--cache", str(tmp_path / "cache")]
    if how == "offline":
        result = run_script(*args, ROS2_TOOLS_OFFLINE="1")
    else:
        (tmp_path / "src").mkdir()
        result = run_script(*args, ROS2_TOOLS_SRC=str(tmp_path / "src"))
    assert result.returncode == 1
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ros2-tools: "), result.stdout
    for repo, commit, _ in pinned():                           # names every repository and commit it needs
        assert f"{repo}@{commit[:8]}" in lines[0]
    assert "ROS2_TOOLS_SRC" in lines[0] or "clone" in lines[0]
    assert not (tmp_path / "cache").exists()


def test_a_sourced_ros2_keeps_its_own_tools(tmp_path):
    """ROS_DISTRO set, a ``ros2`` on the PATH and launch_ros/ros2cli importable from outside the venv: nothing is
    installed over them (and no source is needed)."""
    bin_dir, site = tmp_path / "bin", tmp_path / "site"
    bin_dir.mkdir()
    (bin_dir / "ros2").write_text("#!/bin/sh\n")
    (bin_dir / "ros2").chmod(0o755)
    for module in ("launch_ros", "ros2cli"):
        (site / module).mkdir(parents=True)
        (site / module / "__init__.py").write_text("")
    result = run_script("--shared", str(tmp_path / "no-shared"), "--cache", str(tmp_path / "cache"),
                        ROS2_TOOLS_OFFLINE="1", ROS_DISTRO="kilted", PYTHONPATH=str(site),
                        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ("ros2-tools: a sourced ROS 2 kilted provides launch and the ros2 CLI: "
                                     "nothing to install")


# --- local sources, with a synthetic repository pinned in a sources file of its own --------------------------------

SETUP_PY = "from setuptools import setup\nsetup(name='r2t_demo_pkg', version='{v}', packages=['r2t_demo_pkg'])\n"


@pytest.fixture
def demo_repo(tmp_path):
    """A git repository ``example/demo`` whose subfolder ``pkg`` is a package: version 0.1 at the pinned commit,
    0.2 at the later HEAD; the sources file pinning it. ``(repo, commit, sources)``."""
    if not HAVE_GIT:
        pytest.skip("git not installed")
    repo = tmp_path / "upstream" / "demo"
    (repo / "pkg" / "r2t_demo_pkg").mkdir(parents=True)
    (repo / "pkg" / "r2t_demo_pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "setup.py").write_text(SETUP_PY.format(v="0.1"))
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "pinned")
    commit = git(repo, "rev-parse", "HEAD")
    (repo / "pkg" / "setup.py").write_text(SETUP_PY.format(v="0.2"))
    git(repo, "commit", "-qam", "later")
    sources = tmp_path / "sources.txt"
    sources.write_text(f"# test pins\nexample/demo  {commit}  pkg\n")
    return repo, commit, sources


@pytest.mark.parametrize("layout", ["clone", "git archive"])     # <name>-<commit>.tar.gz: the ROS 2 source test
def test_local_sources_are_built_at_the_pinned_commit(layout, demo_repo, tmp_path):
    repo, commit, sources = demo_repo
    src = tmp_path / "src"
    src.mkdir()
    if layout == "clone":
        git(tmp_path, "clone", "-q", str(repo), str(src / "demo"))        # its HEAD is the later commit
    else:                                                                  # the commit is in the tar's header
        git(repo, "archive", "--format=tar.gz", "--prefix=demo/", "-o", str(src / "demo.tar.gz"), commit)
    cache = tmp_path / "cache"
    result = run_script("--sources", str(sources), "--src", str(src), "--cache", str(cache), "--build-only")
    assert result.returncode == 0, result.stdout + result.stderr
    built = sorted(p.name for p in cache.glob("wheels-*/*.whl"))
    assert built == ["composition_interfaces-0.0.0-py3-none-any.whl", "r2t_demo_pkg-0.1-py3-none-any.whl"]
    assert "building 1 wheel(s) from example/demo@" + commit[:8] in result.stdout
    again = run_script("--sources", str(sources), "--src", str(src), "--cache", str(cache), "--build-only")
    assert again.returncode == 0 and "building" not in again.stdout          # the second run reuses the wheels


def test_without_local_sources_the_archives_are_downloaded_at_the_pinned_commit(demo_repo, tmp_path):
    """The GitHub path, against a local HTTP server in GitHub's layout (ROS2_TOOLS_ARCHIVE_URL): the archive of the
    pinned commit is downloaded once, kept, and built; a server that serves another commit is refused."""
    import functools
    import http.server
    import threading

    repo, commit, sources = demo_repo
    served = tmp_path / "served" / "example" / "demo" / "archive"
    served.mkdir(parents=True)
    git(repo, "archive", "--format=tar.gz", f"--prefix=demo-{commit}/", "-o", str(served / f"{commit}.tar.gz"), commit)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "served"))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(ROS2_TOOLS_ARCHIVE_URL=f"http://127.0.0.1:{server.server_port}/{{repo}}/archive/{{commit}}.tar.gz",
               no_proxy="127.0.0.1,localhost", NO_PROXY="127.0.0.1,localhost")
    args = ["--sources", str(sources), "--shared", str(tmp_path / "no-shared"), "--build-only"]
    try:
        result = run_script(*args, "--cache", str(tmp_path / "cache"), **env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert sorted(p.name for p in (tmp_path / "cache").glob("wheels-*/r2t_demo_pkg-*.whl")) == [
            "r2t_demo_pkg-0.1-py3-none-any.whl"]
        assert (tmp_path / "cache" / "downloads" / f"demo-{commit}.tar.gz").is_file()          # kept

        git(repo, "archive", "--format=tar.gz", "--prefix=demo/", "-o", str(served / f"{commit}.tar.gz"), "HEAD")
        wrong = run_script(*args, "--cache", str(tmp_path / "cache2"), **env)
        assert wrong.returncode == 1 and wrong.stderr == "", wrong.stdout + wrong.stderr
        assert len(wrong.stdout.splitlines()) == 1 and f"did not serve commit {commit}" in wrong.stdout
        assert not list((tmp_path / "cache2").glob("downloads/*.tar.gz"))
    finally:
        server.shutdown()


@pytest.mark.parametrize("layout, message", [
    ("clone without the commit", "lacks the pinned commit"),
    ("git archive of another commit", "not the pinned"),
    ("archive without a commit", "cannot tell its commit"),
])
def test_a_source_at_another_commit_is_refused_with_one_line(layout, message, demo_repo, tmp_path):
    repo, commit, sources = demo_repo
    src = tmp_path / "src"
    src.mkdir()
    if layout == "clone without the commit":
        sources.write_text(f"example/demo  {'ab' * 20}  pkg\n")
        git(tmp_path, "clone", "-q", str(repo), str(src / "demo"))
    elif layout == "git archive of another commit":
        git(repo, "archive", "--format=tar.gz", "--prefix=demo/", "-o", str(src / "demo.tar.gz"), "HEAD")
    else:
        with tarfile.open(src / "demo.tar.gz", "w:gz", format=tarfile.GNU_FORMAT) as tar:
            tar.add(repo / "pkg", arcname="demo/pkg")
    result = run_script("--sources", str(sources), "--src", str(src), "--cache", str(tmp_path / "cache"),
                        "--build-only")
    assert result.returncode == 1 and result.stderr == ""
    assert len(result.stdout.splitlines()) == 1 and message in result.stdout, result.stdout


# --- into a fresh venv: the shared wheels and the real ROS 2 sources -----------------------------------------------

def _unavailable(reason: str) -> None:
    if os.environ.get("CONSENSUS_REQUIRE_ALL") == "1" and SHARED.is_dir():
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    """A new venv with only the pinned ROS 2 Kilted wheels and the tools' PyPI dependencies (from the pip cache)."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    result = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                             "-r", str(ROOT / "requirements" / "ros-kilted.txt"),
                             "-r", str(ROOT / "requirements" / "ros2-tools.txt")],
                            capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        _unavailable(f"cannot install the pinned ROS 2 wheels into a fresh venv (no network or pip cache?): "
                     f"{result.stderr.strip().splitlines()[-1:]}")
    return venv


def uninstall_tools(venv: Path) -> None:
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", "--quiet", *TOOLS],
                   capture_output=True, timeout=300)


def ros2_in(venv: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, AMENT_PREFIX_PATH=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONNOUSERSITE="1")
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(venv / "bin" / "ros2"), *args], env=env, capture_output=True, text=True, timeout=120,
                          start_new_session=True)


def assert_real_tools_work(venv: Path) -> None:
    launch = ros2_in(venv, "launch", "--help")
    assert launch.returncode == 0 and "usage: ros2 launch" in launch.stdout, launch.stdout + launch.stderr
    packages = ros2_in(venv, "pkg", "list")
    assert packages.returncode == 0, packages.stderr
    assert {"launch", "launch_ros", "ros2cli", "ros2launch", "rclpy"} <= set(packages.stdout.split())
    topics = ros2_in(venv, "topic", "list", "--no-daemon")            # a real rclpy node in the test's domain
    assert topics.returncode == 0 and "/rosout" in topics.stdout.split(), topics.stdout + topics.stderr
    stand_in = subprocess.run([str(venv / "bin" / "python"), "-c", "import launch_ros.actions, composition_interfaces;"
                               " print(composition_interfaces.__file__)"], capture_output=True, text=True)
    assert stand_in.returncode == 0, stand_in.stderr


def installed_from(venv: Path, dist: str) -> str:
    """Where pip installed ``dist`` from (its direct_url.json)."""
    found = list((venv / "lib").glob(f"python3*/site-packages/{dist}-*.dist-info/direct_url.json"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text())["url"]


@pytest.mark.ros
def test_the_shared_wheels_still_install_into_a_fresh_venv(request, tmp_path):
    if not any(SHARED.glob("*.whl")):
        pytest.skip(f"no {SHARED} (only next to the project's ../shared): nothing to install from there")
    venv = request.getfixturevalue("fresh_venv")
    uninstall_tools(venv)
    try:
        result = run_script("--shared", str(SHARED), "--cache", str(tmp_path / "cache"), python=str(venv / "bin" /
                            "python"), ROS2_TOOLS_OFFLINE="1")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "prebuilt in" in result.stdout and not (tmp_path / "cache").exists()     # nothing built
        assert str(SHARED.resolve()) in installed_from(venv, "launch_ros")
        assert_real_tools_work(venv)
    finally:
        uninstall_tools(venv)


def _local_ros2_sources(tmp_path: Path) -> Path:
    """CONSENSUS_ROS2_TOOLS_SRC as given, or a folder made from the bare mirrors of CONSENSUS_ROS2_MIRRORS: each
    repository as an archive at its commit, except launch_ros, given as the clone itself."""
    given = os.environ.get("CONSENSUS_ROS2_TOOLS_SRC")
    if given:
        return Path(given)
    mirrors = os.environ.get("CONSENSUS_ROS2_MIRRORS")
    if not mirrors:
        pytest.skip("no local copies of the ROS 2 repositories: set CONSENSUS_ROS2_TOOLS_SRC=<folder of clones or "
                    "<name>-<commit>.tar.gz> or CONSENSUS_ROS2_MIRRORS=<folder of <owner>+<name>/repo mirrors>")
    if not HAVE_GIT:
        pytest.skip("git not installed (needed to archive the mirrors)")
    src = tmp_path / "ros2-src"
    src.mkdir()
    for repo, commit, _ in pinned():
        mirror = Path(mirrors) / repo.replace("/", "+") / "repo"
        name = repo.rsplit("/", 1)[-1]
        if subprocess.run(["git", "-C", str(mirror), "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True).returncode:
            pytest.skip(f"CONSENSUS_ROS2_MIRRORS: {mirror} missing or without {commit}")
        if name == "launch_ros":
            (src / f"{name}.git").symlink_to(mirror)
        else:
            git(mirror, "archive", "--format=tar.gz", f"--prefix={name}-{commit}/", "-o",
                str(src / f"{name}-{commit}.tar.gz"), commit)
    return src


@pytest.mark.ros
def test_wheels_built_from_the_ros2_sources_give_ros2_launch_in_a_fresh_venv(request, tmp_path):
    src = _local_ros2_sources(tmp_path)
    venv = request.getfixturevalue("fresh_venv")
    uninstall_tools(venv)
    cache = tmp_path / "cache"
    try:
        result = run_script("--src", str(src), "--shared", str(tmp_path / "no-shared"), "--cache", str(cache),
                            python=str(venv / "bin" / "python"), ROS2_TOOLS_OFFLINE="1")
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"installed {len(TOOLS)} wheels (built from {src})" in result.stdout
        for dist in ("launch", "launch_ros", "ros2cli", "rosidl_runtime_py", "composition_interfaces"):
            assert str(cache.resolve()) in installed_from(venv, dist)
        assert_real_tools_work(venv)
        doc = subprocess.run([str(venv / "bin" / "python"), "-c", "import composition_interfaces as c; "
                              "print(c.__doc__)"], capture_output=True, text=True).stdout
        assert "composable nodes" in doc and "NOT the real one" in doc       # the project's stand-in, saying so
    finally:
        uninstall_tools(venv)
