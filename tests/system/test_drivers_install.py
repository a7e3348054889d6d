"""`make drivers` (tools/drivers/install.py): the vendors' driver simulators made available to a venv.

Always run, on fake trees in tmp_path (a fake venv with a ros-rclpy dist-info, a fake colcon install tree, fake
archives with git headers): the source order (a sourced ROS 2 that has everything, one that lacks a package, one whose
Python packages do not import; ``--src`` forces a build), a prebuilt tree at other pins falls through with one line,
without any source it stops with ONE line, linking is idempotent, refuses to replace what it did not make and
``--uninstall`` removes exactly what the MANIFEST lists, and ``--dry-run`` prints the build's commands (the build
itself is never run here: 11 minutes of both cores). With the real drivers linked into this venv (``make drivers``;
skips without): the C++ fake node starts from a plain shell and the Python packages import, nothing sourced.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "drivers" / "install.py"
SOURCES = ROOT / "requirements" / "drivers-sources.txt"
SHARED = ROOT.parent / "shared"
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
CLEARED = ("ROS_DISTRO", "AMENT_PREFIX_PATH", "CONSENSUS_DRIVERS_SRC", "CONSENSUS_DRIVERS_OFFLINE",
           "CONSENSUS_DRIVERS_CACHE")
PACKAGES = ("turtlebot3_fake_node", "turtlebot3_msgs", "crazyflie_sim", "crazyflie_interfaces", "crazyflie_py",
            "tf2_ros_py")


def run_script(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in CLEARED}
    environ.update(env)
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=environ, capture_output=True, text=True,
                          timeout=300)


def pinned() -> list[list[str]]:
    rows = [line.split("#", 1)[0].split() for line in SOURCES.read_text().splitlines()]
    return [row for row in rows if row]


def fake_venv(root: Path, rclpy: str = "9.1.2") -> Path:
    """A venv as the script sees one: site-packages with an installed ros-rclpy, an ament prefix with a package."""
    site = root / "lib" / PY / "site-packages"
    dist = site / f"ros_rclpy-{rclpy}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ros-rclpy\nVersion: {rclpy}\n")
    (root / "lib" / "libexisting.so").write_text("not ours")
    index = root / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    (index / "rclpy").write_text("")
    return root


def fake_tree(shared: Path, rclpy: str = "9.1.2", extra: bool = True) -> Path:
    """``shared/install`` laid out as colcon's merged install of the drivers, and ``shared/requirements.txt``."""
    install = shared / "install"
    lib = install / "lib"
    (lib / PY / "site-packages" / "fake_drivers_pkg").mkdir(parents=True)
    (lib / PY / "site-packages" / "fake_drivers_pkg" / "__init__.py").write_text("")
    (lib / "libtf2.so").write_bytes(b"\x7fELF fake library")
    if extra:
        (lib / "libturtlebot3_msgs__rosidl_generator_c.so").write_bytes(b"\x7fELF fake library")
    (lib / "turtlebot3_fake_node").mkdir()
    (lib / "turtlebot3_fake_node" / "turtlebot3_fake_node").write_bytes(b"\x7fELF fake executable")
    (lib / "crazyflie_sim").mkdir()
    (lib / "crazyflie_sim" / "crazyflie_server").write_text("#!/opt/consensus-drivers/venv/bin/python\nprint(1)\n")
    for pkg in ("turtlebot3_fake_node", "crazyflie_sim"):
        (install / "share" / pkg).mkdir(parents=True)
        (install / "share" / pkg / "package.xml").write_text("<package/>")
        for kind in ("packages", "parent_prefix_path"):
            (install / "share" / "ament_index" / "resource_index" / kind).mkdir(parents=True, exist_ok=True)
            (install / "share" / "ament_index" / "resource_index" / kind / pkg).write_text("/opt/elsewhere")
    (install / "share" / "colcon-core" / "packages").mkdir(parents=True)
    (shared / "requirements.txt").write_text(f"ros-ament-cmake==2.7.3\nros-rclpy=={rclpy}\nrowan==1.3.2\n")
    return install


def listing(root: Path) -> dict[str, str]:
    """Every path under ``root`` -> what it is (a symlink's target, a file's text)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = ("-> " + os.readlink(path)) if path.is_symlink() else (
            "dir" if path.is_dir() else path.read_bytes().decode(errors="replace"))
    return out


def one_line(result: subprocess.CompletedProcess) -> str:
    assert result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("drivers: "), result.stdout
    return lines[0]


# --- no source: one line -------------------------------------------------------------------------------------------

def test_without_any_source_it_stops_with_one_line_saying_what_it_looked_for_and_how_to_get_it(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    result = run_script("--venv", str(venv), "--shared", str(tmp_path / "no-shared"),
                        "--shared-src", str(tmp_path / "no-src"), "--cache", str(tmp_path / "cache"), "--no-pip",
                        CONSENSUS_DRIVERS_OFFLINE="1")
    assert result.returncode == 1
    line = one_line(result)
    assert "no sourced ROS 2" in line and str(tmp_path / "no-shared") in line
    assert "CONSENSUS_DRIVERS_OFFLINE=1" in line
    assert "make drivers CONSENSUS_DRIVERS_SRC=DIR" in line and "docs/real-robots.md" in line
    for row in pinned():                                       # names every source it could not find
        assert f"{row[2].removeprefix('https://github.com/')}@" in line
    assert not (tmp_path / "cache").exists() and not (venv / "share" / "consensus-drivers").exists()


def test_make_test_never_starts_a_build_even_with_the_sources_at_hand(tmp_path):
    """``make test`` calls it with ``--no-build``: with archives at hand but nothing prebuilt it stops with one line
    naming ``make drivers`` instead of spending 11 minutes of both cores inside the suite's 15."""
    venv = fake_venv(tmp_path / "venv")
    fake_archives(tmp_path / "src")
    result = run_script("--venv", str(venv), "--shared", str(tmp_path / "no-shared"),
                        "--shared-src", str(tmp_path / "src"), "--cache", str(tmp_path / "cache"), "--no-pip",
                        "--no-build")
    assert result.returncode == 1
    line = one_line(result)
    assert "`make test` does not build them" in line and "make drivers" in line
    assert not (tmp_path / "cache" / "downloads").exists() and not (venv / "share" / "consensus-drivers").exists()
    assert "--no-build" in (ROOT / "Makefile").read_text()


# --- the source order ------------------------------------------------------------------------------------------------

def _sourced_ros(tmp_path: Path, packages=PACKAGES, broken: str = "") -> dict[str, str]:
    """The environment of a sourced ROS 2: an ament prefix with ``packages`` and a Python path with the modules
    (``broken`` raises ImportError, as a Python 3.12 extension does in 3.11)."""
    prefix, site = tmp_path / "opt-ros", tmp_path / "opt-ros-site"
    index = prefix / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    for pkg in packages:
        (index / pkg).write_text("")
    for module in ("crazyflie_interfaces.msg", "tf2_ros", "turtlebot3_msgs.msg", "cffirmware", "rowan"):
        folder = site.joinpath(*module.split("."))
        folder.mkdir(parents=True, exist_ok=True)
        for level in range(len(module.split("."))):
            init = site.joinpath(*module.split(".")[:level + 1]) / "__init__.py"
            init.write_text("raise ImportError('undefined symbol: _Py_NoneStruct (a cpython-312 build)')\n"
                            if module == broken and level == 0 else "")
    return {"ROS_DISTRO": "jazzy", "AMENT_PREFIX_PATH": str(prefix), "PYTHONPATH": str(site)}


def test_a_sourced_ros2_with_the_drivers_and_importable_python_packages_needs_nothing(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    fake_tree(tmp_path / "shared")
    before = listing(venv)
    result = run_script("--venv", str(venv), "--shared", str(tmp_path / "shared"), "--no-pip",
                        **_sourced_ros(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert one_line(result) == ("drivers: a sourced ROS 2 jazzy provides turtlebot3_fake_node, crazyflie_sim and "
                                "their Python packages: nothing to install")
    assert listing(venv) == before                               # the prebuilt tree was not linked


@pytest.mark.parametrize("how, said", [
    ("lacks a package", "lacks crazyflie_sim, crazyflie_py in its ament index"),
    ("python does not import", "Python packages do not import into this python3"),
])
def test_a_sourced_ros2_that_does_not_do_says_why_in_one_line_and_the_next_source_is_used(how, said, tmp_path):
    venv = fake_venv(tmp_path / "venv")
    fake_tree(tmp_path / "shared")
    env = (_sourced_ros(tmp_path, packages=[p for p in PACKAGES if p not in ("crazyflie_sim", "crazyflie_py")])
           if how == "lacks a package" else _sourced_ros(tmp_path, broken="tf2_ros"))
    result = run_script("--venv", str(venv), "--shared", str(tmp_path / "shared"), "--no-pip", **env)
    assert result.returncode == 0, result.stdout + result.stderr
    first, last = result.stdout.splitlines()
    assert first.startswith("drivers: the sourced ROS 2 jazzy ") and said in first and first.endswith(
        "trying the other ways")
    if how != "lacks a package":
        assert "Python 3.12" in first and "tf2_ros" in first
    assert "linked into" in last and (venv / "share" / "consensus-drivers" / "MANIFEST").is_file()


def test_prebuilt_drivers_at_other_pins_fall_through_with_one_line(tmp_path):
    venv = fake_venv(tmp_path / "venv", rclpy="9.1.2")
    fake_tree(tmp_path / "shared", rclpy="9.9.9")
    result = run_script("--venv", str(venv), "--shared", str(tmp_path / "shared"), "--shared-src",
                        str(tmp_path / "no-src"), "--cache", str(tmp_path / "cache"), "--no-pip",
                        CONSENSUS_DRIVERS_OFFLINE="1")
    assert result.returncode == 1 and result.stderr == ""
    mismatch, last = result.stdout.splitlines()
    assert mismatch == (f"drivers: {tmp_path / 'shared'} was built against other ROS 2 wheels than {venv} has: "
                        f"ros-rclpy 9.1.2 (pinned 9.9.9): trying a build from sources")
    assert "CONSENSUS_DRIVERS_OFFLINE=1" in last                 # then the usual line: nothing else was found
    assert not (venv / "share" / "consensus-drivers").exists()


def test_explicit_sources_skip_the_prebuilt_tree(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    fake_tree(tmp_path / "shared")
    (tmp_path / "src").mkdir()
    result = run_script("--venv", str(venv), "--shared", str(tmp_path / "shared"), "--shared-src",
                        str(tmp_path / "no-src"), "--cache", str(tmp_path / "cache"), "--no-pip",
                        CONSENSUS_DRIVERS_SRC=str(tmp_path / "src"), CONSENSUS_DRIVERS_OFFLINE="1")
    assert result.returncode == 1
    assert "no archives of IMRCLab/crazyswarm2@1.0.5" in one_line(result)
    assert not (venv / "share" / "consensus-drivers").exists()


# --- linking -----------------------------------------------------------------------------------------------------

def test_linking_is_idempotent_and_uninstall_removes_exactly_what_the_manifest_lists(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    tree = fake_tree(tmp_path / "shared")
    before = listing(venv)
    args = ["--venv", str(venv), "--shared", str(tmp_path / "shared"), "--no-pip"]
    result = run_script(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "linked into" in one_line(result) and "(prebuilt in" in result.stdout
    lib, site = venv / "lib", venv / "lib" / PY / "site-packages"
    assert os.readlink(lib / "libtf2.so") == str(tree.resolve() / "lib" / "libtf2.so")
    soname = sysconfig.get_config_var("INSTSONAME")
    if soname and (Path(sysconfig.get_config_var("LIBDIR")) / soname).is_file():       # the C++ node NEEDs it
        assert os.readlink(lib / soname) == str(Path(sysconfig.get_config_var("LIBDIR")) / soname)
    assert (site / "consensus-drivers.pth").read_text() == f"{tree.resolve() / 'lib' / PY / 'site-packages'}\n"
    server = (lib / "crazyflie_sim" / "crazyflie_server").read_text()
    assert server == f"#!{venv / 'bin' / 'python'}\nprint(1)\n"                            # this venv's Python
    node = lib / "turtlebot3_fake_node" / "turtlebot3_fake_node"
    assert os.access(node, os.X_OK) and node.read_text().startswith("#!/bin/sh\n")
    assert f"lib={venv / 'lib'}\n" in node.read_text()
    assert node.read_text().endswith(f"exec {tree.resolve()}/lib/turtlebot3_fake_node/turtlebot3_fake_node \"$@\"\n")
    assert os.readlink(venv / "share" / "crazyflie_sim") == str(tree.resolve() / "share" / "crazyflie_sim")
    index = venv / "share" / "ament_index" / "resource_index"
    assert (index / "packages" / "turtlebot3_fake_node").is_symlink()
    assert not (index / "parent_prefix_path").exists() and not (venv / "share" / "colcon-core").exists()
    manifest = (venv / "share" / "consensus-drivers" / "MANIFEST").read_text()
    assert "link lib/libtf2.so -> " in manifest and "file lib/crazyflie_sim/crazyflie_server" in manifest
    assert "dir lib/crazyflie_sim" in manifest and "packages/rclpy" not in manifest and "libexisting" not in manifest
    after = listing(venv)

    again = run_script(*args)                                        # a re-run changes nothing
    assert again.returncode == 0 and "(0 new," in again.stdout, again.stdout
    assert listing(venv) == after

    (tmp_path / "shared" / "install" / "lib" / "libturtlebot3_msgs__rosidl_generator_c.so").unlink()
    assert run_script(*args).returncode == 0                         # a tree with less: the stale link goes
    assert not (lib / "libturtlebot3_msgs__rosidl_generator_c.so").is_symlink()

    undo = run_script("--venv", str(venv), "--uninstall", "--no-pip")
    assert undo.returncode == 0 and one_line(undo).startswith("drivers: removed "), undo.stdout
    assert listing(venv) == before                                   # what was there before is intact


def test_linking_refuses_to_replace_a_file_it_did_not_make(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    fake_tree(tmp_path / "shared")
    (venv / "lib" / "libtf2.so").write_text("someone else's")
    before = listing(venv)
    result = run_script("--venv", str(venv), "--shared", str(tmp_path / "shared"), "--no-pip")
    assert result.returncode == 1
    assert "lib/libtf2.so, which make drivers did not make: not replacing it" in one_line(result)
    assert listing(venv) == before


def test_uninstall_without_a_manifest_does_nothing(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    before = listing(venv)
    result = run_script("--venv", str(venv), "--uninstall", "--no-pip")
    assert result.returncode == 0 and "nothing to undo" in one_line(result)
    assert listing(venv) == before


# --- the build from sources, as a dry run ------------------------------------------------------------------------

def fake_archives(folder: Path, wrong: str = "") -> None:
    """An archive of every pinned source, named as ../shared/drivers-src names it (or <name>-<commit>.tar.gz), with
    the pinned commit in its git header (``wrong``: that source at another commit)."""
    folder.mkdir(parents=True, exist_ok=True)
    readme = folder / "README"
    readme.write_text("fake")
    for name, _role, _url, _tag, commit, archive, *_ in pinned():
        path = folder / (archive if archive != "-" else f"{name}-{commit}.tar.gz")
        with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT,
                          pax_headers={"comment": "0" * 40 if name == wrong else commit}) as tar:
            tar.add(readme, arcname=f"{name}/README")
    readme.unlink()


def test_dry_run_prints_the_build_commands_and_changes_nothing(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    fake_archives(tmp_path / "src")
    cache = tmp_path / "cache"
    result = run_script("--venv", str(venv), "--shared", str(tmp_path / "no-shared"), "--shared-src",
                        str(tmp_path / "no-src"), "--cache", str(cache), "--dry-run", "--no-pip",
                        CONSENSUS_DRIVERS_SRC=str(tmp_path / "src"), CONSENSUS_DRIVERS_OFFLINE="1")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"drivers: would build into {cache}/")
    work = lines[0].split("would build into ", 1)[1].split()[0].rstrip(":")
    assert not any("download" in line for line in lines)                  # every archive was found locally
    for name, role, *_ in pinned():
        assert any(line.startswith("# unpack ") and f"-> {work}/" in line and name in line for line in lines), name
    colcon = next(line for line in lines if "/colcon --log-base" in line)
    assert " build --merge-install " in colcon and f"--install-base {work}/install" in colcon
    assert "-DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF" in colcon
    for folder in ("crazyswarm2/crazyflie_interfaces", "crazyswarm2/crazyflie_sim", "geometry2/tf2_ros_py",
                   "turtlebot3_simulations/turtlebot3_fake_node", "rclcpp/rclcpp", "rcl_interfaces/statistics_msgs"):
        assert f"{work}/src/{folder} " in colcon, folder
    assert f"AMENT_PREFIX_PATH={work}/venv" in colcon and "env -u _ROS_WHEELS_BOOTSTRAP_COMPLETE" in colcon
    assert lines.index(colcon) > max(i for i, line in enumerate(lines) if "requirements/drivers-build.txt" in line)
    bindings = next(line for line in lines if "make bindings_python" in line)
    assert f"CPATH={work}/firmware/vendor/CMSIS/CMSIS/DSP/PrivateInclude" in bindings
    assert bindings.startswith(f"cd {work}/firmware && ") and f"PYTHON={work}/venv/bin/python" in bindings
    assert any("make cf2_defconfig" in line for line in lines)
    assert lines[-1] == (f"# copy build/cffirmware.py and build/_cffirmware*.so -> {work}/install/lib/{PY}/"
                         f"site-packages")
    assert not cache.exists() and not (venv / "share" / "consensus-drivers").exists()


def test_dry_run_without_local_archives_would_download_them_at_the_pinned_commits(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    (tmp_path / "src").mkdir()
    result = run_script("--venv", str(venv), "--src", str(tmp_path / "src"), "--shared-src", str(tmp_path / "no"),
                        "--cache", str(tmp_path / "cache"), "--dry-run", "--no-pip")
    assert result.returncode == 0, result.stdout + result.stderr
    for name, _role, url, _tag, commit, *_ in pinned():
        assert f"# download {url}/archive/{commit}.tar.gz -> {tmp_path / 'cache' / 'downloads'}/{name}-{commit}" \
               f".tar.gz" in result.stdout
    assert not (tmp_path / "cache").exists()


def test_an_archive_at_another_commit_is_refused_with_one_line(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    fake_archives(tmp_path / "src", wrong="geometry2")
    result = run_script("--venv", str(venv), "--src", str(tmp_path / "src"), "--shared-src", str(tmp_path / "no"),
                        "--cache", str(tmp_path / "cache"), "--dry-run", "--no-pip")
    assert result.returncode == 1
    assert f"is ros2/geometry2 at {'0' * 40}, not the pinned 1b005c6556cf350d7670812ef30eefed8443a759" in \
        one_line(result)


def test_the_build_pins_are_the_projects_and_the_shared_trees():
    """requirements/drivers-build.txt: the project's ROS wheels at its pins, the build-time ones as ../shared/drivers
    was built (where that folder is here); the sources file's commits are the ../shared/drivers-src archives'."""
    def pins(path: Path) -> dict[str, str]:
        rows = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
        return dict(row.split("==") for row in rows if row.startswith("ros-"))

    build = pins(ROOT / "requirements" / "drivers-build.txt")
    project = pins(ROOT / "requirements" / "ros-kilted.txt")
    assert {name: build.get(name) for name in project} == project
    if (SHARED / "drivers" / "requirements.txt").is_file():
        assert pins(SHARED / "drivers" / "requirements.txt") == build
    for name, _role, _url, _tag, commit, archive, *_ in pinned():
        if archive != "-" and (SHARED / "drivers-src" / archive).is_file():
            with tarfile.open(SHARED / "drivers-src" / archive) as tar:
                assert tar.pax_headers.get("comment") == commit, archive


# --- the real drivers in this venv ---------------------------------------------------------------------------------

@pytest.mark.needs("turtlebot3_fake", "crazyswarm2")
def test_the_linked_drivers_run_from_a_plain_shell_with_nothing_sourced():
    """The wrapper gives the C++ node the venv's loader path (a shell has none); the Python packages import through
    the venv's .pth files alone."""
    venv = Path(sys.prefix)
    plain = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"),
             "ROS_DOMAIN_ID": os.environ.get("ROS_DOMAIN_ID", "91"), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    probe = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import crazyflie_interfaces.msg, tf2_ros, turtlebot3_msgs.msg, cffirmware, rowan"],
                           env=plain, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    node = subprocess.Popen([str(venv / "lib" / "turtlebot3_fake_node" / "turtlebot3_fake_node"), "--ros-args",
                             "-r", "__ns:=/tb3_drivers_test", "-p", "wheels.separation:=0.160",
                             "-p", "wheels.radius:=0.033", "-p", "joint_states_frame:=base_footprint",
                             "-p", "odom_frame:=odom", "-p", "base_frame:=base_footprint"],
                            env=plain, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, process_group=0)
    try:
        time.sleep(2.0)
        alive = node.poll() is None
    finally:
        if node.poll() is None:
            os.killpg(node.pid, 2)
            try:
                node.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, 9)
                node.wait()
    out = node.stdout.read()
    assert alive, out
    assert "Turtlebot3 fake node has been initialised" in out
