"""Make the vendors' driver-level simulators available to this venv, with no environment variable to set.

TurtleBot 3's ``turtlebot3_fake_node`` (C++, with ``turtlebot3_msgs``, ``rclcpp``, ``tf2``) and crazyswarm2's
``crazyflie_sim`` (``crazyflie_interfaces``, ``crazyflie_py``, the firmware's ``cffirmware`` bindings, ``tf2_ros``
for Python, ``rowan`` from PyPI). None of it is on PyPI. ``make drivers`` runs this with the venv's Python; the first
of these that works is used:

1. a sourced ROS 2 (``ROS_DISTRO`` set) whose ament index has turtlebot3_fake_node, turtlebot3_msgs, crazyflie_sim,
   crazyflie_interfaces, crazyflie_py and tf2_ros_py, and whose Python packages import into this Python: nothing to
   do (Ubuntu's apt ROS 2 runs Python 3.12: its packages do not import into a 3.11 venv; the line says so);
2. ``--shared DIR`` (``../shared/drivers``): a colcon install tree built against the pinned wheels. Its
   ``requirements.txt`` pins must equal the venv's installed ROS wheels (the C/C++ ABI is tied to them); then it is
   LINKED into the venv prefix (below);
3. a build from the sources pinned in requirements/drivers-sources.txt, kept under ``--cache``
   (``~/.cache/consensus/drivers/<hash of the pins>``): archives from ``--src DIR`` (``CONSENSUS_DRIVERS_SRC``) or
   ``../shared/drivers-src``, else downloaded from GitHub at the pinned commits (``CONSENSUS_DRIVERS_OFFLINE=1``
   forbids that); a build venv of its own with requirements/drivers-build.txt, colcon, Release, no tests, plus the
   firmware's Python bindings (needs swig, cmake, a C/C++ compiler and the Python headers); then linked as in 2.
   ``--src`` forces this way. ``--dry-run`` prints the steps and commands without running any;
4. none of these: ONE line saying what was looked for and how to get it, exit 1.

Linking (what makes "no environment variable" true): the ROS wheels' bootstrapper (``ros_wheels_bootstrapper.pth``)
re-executes every Python of the venv with ``$VENV/lib`` and the wheels' ``ros_*.libs`` on ``LD_LIBRARY_PATH``, which
its children inherit. So the tree's libraries and ``libpython3.11.so.1.0`` (the C++ node NEEDs it; no RPATH) are
symlinked into ``$VENV/lib``; ``consensus-drivers.pth`` puts the tree's site-packages on ``sys.path``; its
``share/<pkg>`` and ament index entries are linked into ``$VENV/share`` (the venv is an ament prefix);
``lib/<pkg>/<script>`` Python scripts are copied with this venv's Python in the shebang; a C++ executable gets a
small ``/bin/sh`` wrapper that sets the same loader path and ``exec``s it, so it starts from any shell too. Everything
made is listed in ``$VENV/share/consensus-drivers/MANIFEST``: a re-run replaces exactly that, ``--uninstall`` removes
exactly that (and requirements/drivers.txt's packages if this script installed them). Standard library only.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "requirements" / "drivers-sources.txt"
BUILD_REQS = ROOT / "requirements" / "drivers-build.txt"
PYPI_DEPS = ROOT / "requirements" / "drivers.txt"
DOC = "docs/drivers.md"
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
#: the ament packages a sourced ROS 2 must have, and the Python modules that must import from it
PACKAGES = ("turtlebot3_fake_node", "turtlebot3_msgs", "crazyflie_sim", "crazyflie_interfaces", "crazyflie_py",
            "tf2_ros_py")
MODULES = ("crazyflie_interfaces.msg", "tf2_ros", "turtlebot3_msgs.msg", "cffirmware", "rowan")
PTH = "consensus-drivers.pth"
MANIFEST = Path("share") / "consensus-drivers" / "MANIFEST"
RECIPE = "1"                      # bump when the build steps change: a new cache key
HOW = (f"`make drivers CONSENSUS_DRIVERS_SRC=DIR` (DIR: the archives named in requirements/drivers-sources.txt), "
       f"GitHub (unset CONSENSUS_DRIVERS_OFFLINE), or a ROS 2 install with them ({DOC}, docs/real-robots.md)")


class Stop(Exception):
    """This way cannot be used: the one line to print."""


def say(message: str) -> None:
    print(f"drivers: {message}", flush=True)


def site_packages(venv: Path) -> Path:
    return venv / "lib" / PY / "site-packages"


def venv_python(venv: Path) -> str:
    """The venv's Python (probes, pip); this one when the venv has none (a test's fake venv)."""
    mine = venv / "bin" / "python"
    return str(mine) if mine.is_file() else sys.executable


# --- 1. a sourced ROS 2 --------------------------------------------------------------------------------------------

def sourced_ros2(venv: Path) -> tuple[str | None, str | None]:
    """``(distro, None)`` when a sourced ROS 2 provides everything; ``(None, why)`` when one is sourced but does not
    do; ``(None, None)`` when none is sourced."""
    distro = os.environ.get("ROS_DISTRO")
    if not distro:
        return None, None
    prefixes = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes = [p for p in prefixes if p.resolve() != venv.resolve()]          # what make drivers linked is not it
    index = "share/ament_index/resource_index/packages"
    missing = [pkg for pkg in PACKAGES if not any((p / index / pkg).is_file() for p in prefixes)]
    if missing:
        return None, (f"the sourced ROS 2 {distro} lacks {', '.join(missing)} in its ament index "
                      f"(AMENT_PREFIX_PATH): trying the other ways")
    ours = [line.strip() for line in _read(site_packages(venv) / PTH).splitlines() if line.strip()]
    probe = ("import importlib, sys\nours = sys.argv[1:]\nfor name in %r:\n"
             "    try:\n        module = importlib.import_module(name)\n"
             "    except Exception as exc:\n        print(f'{name}: {type(exc).__name__}: {exc}'); sys.exit(1)\n"
             "    where = getattr(module, '__file__', None) or ''\n"
             "    if name != 'rowan' and any(where.startswith(o) for o in ours):\n"
             "        print(f'{name} comes from what make drivers linked, not from ROS 2'); sys.exit(1)\n") % (MODULES,)
    result = subprocess.run([venv_python(venv), "-c", probe, *ours], capture_output=True, text=True)
    if result.returncode != 0:
        detail = (result.stdout.strip() or result.stderr.strip() or "?").splitlines()[-1]
        return None, (f"the sourced ROS 2 {distro} has the drivers but its Python packages do not import into this "
                      f"{PY} ({detail}); apt's ROS 2 runs Python 3.12 ({DOC}, 'ROS 2 from apt'): trying the "
                      f"other ways")
    return distro, None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


# --- 2. the pins of a prebuilt tree ----------------------------------------------------------------------------------

def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path) -> dict[str, str]:
    """``ros-*`` name -> version of a requirements file's ``name==version`` lines."""
    pins = {}
    for line in _read(path).splitlines():
        m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s#;]+)", line)
        if m and _norm(m.group(1)).startswith("ros-"):
            pins[_norm(m.group(1))] = m.group(2)
    return pins


def installed(venv: Path) -> dict[str, str]:
    """Distribution -> version installed in the venv's site-packages."""
    return {_norm(d.metadata["Name"]): d.version
            for d in importlib.metadata.distributions(path=[str(site_packages(venv))]) if d.metadata["Name"]}


def pin_mismatch(pins: dict[str, str], venv: Path, what: str) -> str | None:
    """Why ``what``, built against ``pins``, cannot go into this venv; None when every pinned wheel the venv has is
    at the pinned version (pins the venv lacks are build-time only: ament_cmake, rosidl generators)."""
    have = installed(venv)
    if "ros-rclpy" not in have:
        return f"{venv} has no ROS 2 wheels (ros-rclpy; `make setup` installs them), so {what} cannot be used"
    wrong = [f"{name} {have[name]} (pinned {version})" for name, version in sorted(pins.items())
             if name in have and have[name] != version]
    if not wrong:
        return None
    return (f"{what} was built against other ROS 2 wheels than {venv} has: {', '.join(wrong[:4])}"
            f"{f' and {len(wrong) - 4} more' if len(wrong) > 4 else ''}")


# --- linking a tree into the venv ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    kind: str            # link | file | dir
    rel: str             # path relative to the venv
    target: str = ""     # link: what it points to
    content: str = ""    # file: its text
    mode: int = 0o755    # file: its mode
    optional: bool = False   # link: skipped where the venv already has such a file (libpython)

    def line(self) -> str:
        return f"{self.kind} {self.rel}" + (f" -> {self.target}" if self.kind == "link" else "")


def _is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def loader_path_sh(venv: Path) -> str:
    """The shell lines that build the loader path the bootstrapper gives every venv Python."""
    return (f'lib={shlex.quote(str(venv / "lib"))}\n'
            f'for d in "$lib"/{PY}/site-packages/ros_*.libs; do [ -d "$d" ] && lib=$lib:$d; done\n'
            'LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexport LD_LIBRARY_PATH\n')


def wrapper(venv: Path, exe: Path) -> str:
    return ("#!/bin/sh\n# Written by tools/drivers/install.py (make drivers): this C++ node has no RPATH, so it starts "
            "with the\n# loader path the ROS wheels' bootstrapper gives every Python of the venv (and their "
            "children).\n" + loader_path_sh(venv) + f'exec {shlex.quote(str(exe))} "$@"\n')


def plan(tree: Path, venv: Path) -> list[Entry]:
    """What linking ``tree`` (a colcon install tree) into ``venv`` makes, in the order to make it."""
    entries: list[Entry] = []
    libdir = Path(sysconfig.get_config_var("LIBDIR") or "")
    soname = sysconfig.get_config_var("INSTSONAME") or ""
    for so in sorted(p for p in (tree / "lib").iterdir() if ".so" in p.name and p.is_file()):
        entries.append(Entry("link", f"lib/{so.name}", str(so)))
    if soname and (libdir / soname).is_file():
        entries.append(Entry("link", f"lib/{soname}", str(libdir / soname), optional=True))
    tree_site = tree / "lib" / PY / "site-packages"
    if tree_site.is_dir():
        entries.append(Entry("file", f"lib/{PY}/site-packages/{PTH}", content=f"{tree_site}\n", mode=0o644))
    for folder in sorted(p for p in (tree / "lib").iterdir() if p.is_dir() and p.name != PY):
        entries.append(Entry("dir", f"lib/{folder.name}"))
        for exe in sorted(p for p in folder.iterdir() if p.is_file()):
            rel = f"lib/{folder.name}/{exe.name}"
            first = exe.read_bytes()[:200].split(b"\n", 1)[0]
            if _is_elf(exe):
                entries.append(Entry("file", rel, content=wrapper(venv, exe)))
            elif first.startswith(b"#!") and b"python" in first:
                body = exe.read_text().split("\n", 1)[1]
                entries.append(Entry("file", rel, content=f"#!{venv / 'bin' / 'python'}\n{body}"))
            else:
                entries.append(Entry("link", rel, str(exe)))
    for pkg in sorted(p for p in (tree / "share").glob("*") if p.is_dir()):
        if pkg.name not in ("ament_index", "colcon-core"):
            entries.append(Entry("link", f"share/{pkg.name}", str(pkg)))
    index = tree / "share" / "ament_index" / "resource_index"
    for kind in sorted(p for p in index.iterdir() if p.is_dir()) if index.is_dir() else []:
        if kind.name == "parent_prefix_path":          # names the build machine's prefixes: not for this venv
            continue
        entries.append(Entry("dir", f"share/ament_index/resource_index/{kind.name}"))
        for marker in sorted(kind.iterdir()):
            entries.append(Entry("link", f"share/ament_index/resource_index/{kind.name}/{marker.name}", str(marker)))
    return entries


def read_manifest(venv: Path) -> tuple[list[Entry], list[str]]:
    """The entries the last run made and the distributions it pip-installed."""
    entries, pips = [], []
    for line in _read(venv / MANIFEST).splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "pip":
            pips.append(rest.strip())
        elif kind in ("link", "file", "dir"):
            rel, _, target = rest.partition(" -> ")
            entries.append(Entry(kind, rel.strip(), target.strip()))
    return entries, pips


def _remove(venv: Path, entries: list[Entry]) -> int:
    removed = 0
    for e in entries:
        path = venv / e.rel
        if e.kind != "dir" and (path.is_symlink() or path.is_file()):
            path.unlink()
            removed += 1
    for e in sorted((e for e in entries if e.kind == "dir"), key=lambda e: -len(e.rel)):
        try:
            (venv / e.rel).rmdir()                 # only when empty: what others put there stays
            removed += 1
        except OSError:
            pass
    return removed


def link(tree: Path, venv: Path, source: str, pips: list[str] = ()) -> tuple[int, int]:
    """Link ``tree`` into ``venv``, replacing what the last run made; ``(entries, new ones)``. Refuses (Stop) to
    replace a file it did not make."""
    wanted = plan(tree, venv)
    old, old_pips = read_manifest(venv)
    ours = {e.rel for e in old}
    conflicts = [e.rel for e in wanted if e.kind != "dir" and not e.optional and e.rel not in ours
                 and ((venv / e.rel).exists() or (venv / e.rel).is_symlink())]
    if conflicts:
        raise Stop(f"{venv} already has {', '.join(conflicts[:3])}{' ...' if len(conflicts) > 3 else ''}, which "
                   f"make drivers did not make: not replacing it")
    keep = {e.rel for e in wanted}
    _remove(venv, [e for e in old if e.rel not in keep])
    made, new = [], 0
    for e in wanted:
        path = venv / e.rel
        if e.kind == "dir":
            if not path.is_dir():
                path.mkdir(parents=True)
                made.append(e)
                new += 1
            elif e.rel in ours:
                made.append(e)
        elif e.kind == "link":
            if e.optional and e.rel not in ours and (path.exists() or path.is_symlink()):
                continue                            # libpython already in the venv's lib: not ours, keep it
            if not (path.is_symlink() and os.readlink(path) == e.target):
                if path.is_symlink() or path.exists():
                    path.unlink()
                path.parent.mkdir(parents=True, exist_ok=True)
                path.symlink_to(e.target)
                new += 1
            made.append(e)
        else:
            if path.is_symlink() or _read(path) != e.content:
                if path.is_symlink():
                    path.unlink()
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(e.content)
                new += 1
            path.chmod(e.mode)
            made.append(e)
    manifest = venv / MANIFEST
    manifest.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# made by tools/drivers/install.py from {source}; `python tools/drivers/install.py --uninstall` "
             f"removes what is listed"] + [e.line() for e in made]
    lines += [f"pip {name}" for name in sorted(set(old_pips) | set(pips))]
    manifest.write_text("\n".join(lines) + "\n")
    return len(made), new


def uninstall(venv: Path, use_pip: bool) -> int:
    entries, pips = read_manifest(venv)
    if not (venv / MANIFEST).is_file():
        say(f"nothing to undo: {venv / MANIFEST} does not exist")
        return 0
    removed = _remove(venv, entries)
    if pips and use_pip:
        run_pip(venv, "uninstall", "--yes", *pips)
    (venv / MANIFEST).unlink()
    try:
        (venv / MANIFEST).parent.rmdir()
    except OSError:
        pass
    say(f"removed {removed} of the {len(entries)} entries listed in {MANIFEST}"
        + (f" and pip-uninstalled {', '.join(pips)}" if pips and use_pip else ""))
    return 0


def run_pip(venv: Path, *args: str) -> None:
    result = subprocess.run([venv_python(venv), "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        sys.stderr.write("\n".join(result.stdout.splitlines()[-25:]) + "\n")
        raise Stop(f"pip {args[0]} failed (exit {result.returncode}; its output is above)")


def pypi_deps(venv: Path, use_pip: bool) -> list[str]:
    """pip-install requirements/drivers.txt; the distributions that were not there before (to uninstall later)."""
    names = [_norm(m.group(1)) for m in (re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line.split("#", 1)[0])
                                         for line in _read(PYPI_DEPS).splitlines()) if m]
    if not use_pip:
        return []
    before = installed(venv)
    run_pip(venv, "install", "--progress-bar", "off", "-r", str(PYPI_DEPS))
    return [name for name in names if name not in before]


def check_linked(venv: Path, tree: Path) -> None:
    """After linking into a real venv: the Python packages import, and the C++ executables find their libraries."""
    if not (venv / "bin" / "python").is_file():
        return
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", f"import {', '.join(MODULES)}"],
                           capture_output=True, text=True, env={k: v for k, v in os.environ.items()
                                                                if k not in ("PYTHONPATH", "LD_LIBRARY_PATH",
                                                                             "_ROS_WHEELS_BOOTSTRAP_COMPLETE")})
    if probe.returncode != 0:
        raise Stop(f"linked, but `import {', '.join(MODULES)}` fails in {venv}: "
                   f"{(probe.stderr.strip() or '?').splitlines()[-1]}")
    if not shutil.which("ldd"):
        return
    for exe in sorted((tree / "lib").glob("*/*")):
        if exe.is_file() and _is_elf(exe):
            out = subprocess.run(["sh", "-c", loader_path_sh(venv) + 'exec ldd "$0"', str(exe)],
                                 capture_output=True, text=True).stdout
            lost = sorted({line.split()[0] for line in out.splitlines() if "not found" in line})
            if lost:
                raise Stop(f"linked, but {exe.name} does not find {', '.join(lost[:4])} on the venv's loader path")


# --- 3. a build from the sources -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    name: str
    role: str            # colcon | firmware | cmsis-core | cmsis-dsp
    url: str
    tag: str
    commit: str
    archive: str         # its name in ../shared/drivers-src, or ""
    folders: tuple[str, ...]

    @property
    def repo(self) -> str:                 # owner/name
        return self.url.removeprefix("https://github.com/").rstrip("/")

    def __str__(self) -> str:
        return f"{self.repo}@{self.tag if self.tag != '-' else self.commit[:8]}"


ROLES = ("colcon", "firmware", "cmsis-core", "cmsis-dsp")


def read_sources(path: Path = SOURCES) -> list[Source]:
    sources = []
    for number, line in enumerate(_read(path).splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) < 7 or fields[1] not in ROLES or not re.fullmatch(r"[0-9a-f]{40}", fields[4]):
            raise Stop(f"{path}:{number}: expected 'name role url tag <40-hex commit> archive folder...', "
                       f"got {line.strip()!r}")
        sources.append(Source(fields[0], fields[1], fields[2], fields[3], fields[4],
                              "" if fields[5] == "-" else fields[5], tuple(fields[6:])))
    if not sources:
        raise Stop(f"{path} lists no sources")
    return sources


def cache_key(sources: list[Source]) -> str:
    digest = hashlib.sha256(f"recipe {RECIPE} {PY}\n".encode())
    for s in sources:
        digest.update(f"{s.name} {s.role} {s.url} {s.commit} {' '.join(s.folders)}\n".encode())
    digest.update("".join(f"{k}=={v}\n" for k, v in sorted(read_pins(BUILD_REQS).items())).encode())
    return digest.hexdigest()[:16]


def archive_commit(path: Path) -> str | None:
    with tarfile.open(path) as tar:
        return (tar.pax_headers or {}).get("comment")


def find_archive(source: Source, folders: list[Path], downloads: Path) -> Path | None:
    """A local archive of ``source`` at its pinned commit (Stop when one is there at another commit)."""
    names = [n for n in (source.archive, f"{source.name}-{source.commit}.tar.gz",
                         f"{source.name}-{source.tag}.tar.gz" if source.tag != "-" else "") if n]
    for folder in folders:
        for name in names:
            path = folder / name
            if path.is_file():
                found = archive_commit(path)
                if found is None and source.commit not in name:
                    raise Stop(f"{path}: cannot tell its commit (no git header); name it "
                               f"{source.name}-{source.commit}.tar.gz if it is {source} at that commit")
                if found is not None and found != source.commit:
                    raise Stop(f"{path} is {source.repo} at {found}, not the pinned {source.commit}")
                return path
    cached = downloads / f"{source.name}-{source.commit}.tar.gz"
    return cached if cached.is_file() else None


def download(source: Source, downloads: Path) -> Path:
    url = f"{source.url.rstrip('/')}/archive/{source.commit}.tar.gz"
    archive = downloads / f"{source.name}-{source.commit}.tar.gz"
    downloads.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:
            shutil.copyfileobj(response, out)
    except (urllib.error.URLError, OSError) as exc:
        partial.unlink(missing_ok=True)
        raise Stop(f"cannot download {url} ({getattr(exc, 'reason', None) or exc}): without network, "
                   f"{HOW}") from None
    partial.rename(archive)
    if archive_commit(archive) not in (None, source.commit):
        archive.unlink()
        raise Stop(f"{url} did not serve commit {source.commit}")
    return archive


def unpack(archive: Path, dest: Path, folders: tuple[str, ...]) -> None:
    """Extract ``folders`` (relative to the archive's top folder; ``.`` = all) of ``archive`` into ``dest``."""
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            parts = member.name.split("/", 1)
            rel = parts[1] if len(parts) > 1 else ""
            if not rel or not ("." in folders or any(rel == f or rel.startswith(f + "/") for f in folders)):
                continue
            member.name = rel
            members.append(member)
        dest.mkdir(parents=True, exist_ok=True)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, members=members, filter="data")
        else:                                                     # Python < 3.11.4: refuse paths leaving dest
            for member in members:
                if member.issym() or member.islnk() or dest.resolve() not in (dest / member.name).resolve().parents:
                    raise Stop(f"{archive}: unsafe member {member.name!r}")
            tar.extractall(dest, members=members)


#: a build command must not inherit the project venv's loader path: the build venv's Python (colcon, the rosidl
#: generators) bootstraps its own, which the compilers and the tools it starts inherit
DROPPED = ("_ROS_WHEELS_BOOTSTRAP_COMPLETE", "LD_LIBRARY_PATH")


@dataclass
class Step:
    """One build step: a command (argv, in cwd, with env additions, the build venv's bin first on PATH) or an action
    done here (``do``)."""
    text: str
    argv: list[str] = field(default_factory=list)
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    path: str = ""
    do: object = None

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in DROPPED} | self.env
        if self.path:
            env["PATH"] = f"{self.path}{os.pathsep}{os.environ.get('PATH', '')}"
        return env

    def show(self) -> str:
        """The step as a shell line (an action as a comment)."""
        if not self.argv:
            return f"# {self.text}"
        words = ["env", *(f"-u {k}" for k in DROPPED), *(f"{k}={shlex.quote(v)}" for k, v in self.env.items())]
        if self.path:
            words.append(f'PATH={shlex.quote(self.path)}:"$PATH"')
        cd = f"cd {shlex.quote(str(self.cwd))} && " if self.cwd else ""
        return f"{cd}{' '.join(words)} {shlex.join(self.argv)}"


def missing_build_tools() -> list[str]:
    """What the build needs that this machine lacks (apt names)."""
    missing = [f"{tool} (apt install {pkg})" for tool, pkg in (("swig", "swig"), ("cmake", "cmake"),
                                                               ("make", "make"), ("gcc", "gcc"), ("g++", "g++"))
               if not shutil.which(tool)]
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        missing.append(f"the {PY} headers ({include}/Python.h; apt install {PY}-dev)")
    return missing


def build_steps(sources: list[Source], archives: dict[str, Path | None], work: Path, downloads: Path,
                base_python: str) -> list[Step]:
    """The steps that build the drivers into ``work/install`` (``archives[name]`` None: download it first)."""
    src, fw, bv = work / "src", work / "firmware", work / "venv"
    install, site = work / "install", work / "install" / "lib" / PY / "site-packages"
    steps: list[Step] = []
    base_paths = []
    for s in sources:
        archive = archives.get(s.name)
        if archive is None:
            archive = downloads / f"{s.name}-{s.commit}.tar.gz"
            steps.append(Step(f"download {s.url}/archive/{s.commit}.tar.gz -> {archive}",
                              do=lambda s=s: download(s, downloads)))
        dest = {"colcon": src / s.name, "firmware": fw, "cmsis-core": fw / "vendor" / "CMSIS",
                "cmsis-dsp": fw / "vendor" / "CMSIS" / "CMSIS" / "DSP"}[s.role]
        steps.append(Step(f"unpack {archive.name} ({' '.join(s.folders)}) -> {dest}",
                          do=lambda a=archive, d=dest, f=s.folders: unpack(a, d, f)))
        if s.role == "colcon":
            base_paths += [str(dest if f == "." else dest / f) for f in s.folders]
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    env = {"AMENT_PREFIX_PATH": str(bv), "CMAKE_PREFIX_PATH": str(bv)}
    steps += [
        Step("a build venv", [base_python, "-m", "venv", "--clear", str(bv)]),
        Step("the pinned wheels", [f"{bv}/bin/python", "-m", "pip", "install", "--quiet", "--progress-bar", "off",
                                   "-r", str(BUILD_REQS), "-r", str(PYPI_DEPS)]),
        Step("colcon build", [f"{bv}/bin/colcon", "--log-base", str(work / "log"), "build", "--merge-install",
                              "--build-base", str(work / "build"), "--install-base", str(install),
                              "--base-paths", *base_paths, "--event-handlers", "console_cohesion-",
                              "--cmake-args", "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_TESTING=OFF",
                              f"-DPython3_EXECUTABLE={bv}/bin/python", f"-DPYTHON_EXECUTABLE={bv}/bin/python",
                              f"-DCMAKE_EXE_LINKER_FLAGS=-L{libdir} -l{PY}"],
             env=env, path=f"{bv}/bin"),
        Step("the firmware's configuration", ["make", "cf2_defconfig"], cwd=fw, path=f"{bv}/bin"),
        Step("the firmware's Python bindings", ["make", "bindings_python", f"PYTHON={bv}/bin/python"], cwd=fw,
             env={"CPATH": str(fw / "vendor" / "CMSIS" / "CMSIS" / "DSP" / "PrivateInclude")}, path=f"{bv}/bin"),
        Step(f"copy build/cffirmware.py and build/_cffirmware*.so -> {site}", do=lambda: copy_bindings(fw, site)),
    ]
    return steps


def copy_bindings(fw: Path, site: Path) -> None:
    found = [fw / "build" / "cffirmware.py", *sorted((fw / "build").glob("_cffirmware*.so"))]
    if len(found) < 2 or not found[0].is_file():
        raise Stop(f"the firmware's bindings build left no cffirmware.py and _cffirmware*.so in {fw / 'build'}")
    site.mkdir(parents=True, exist_ok=True)
    for path in found:
        shutil.copy2(path, site / path.name)


def build(args, venv: Path, dry_run: bool) -> Path:
    """The install tree built from the sources (cached), or Stop with why not."""
    sources = read_sources(Path(args.sources))
    mismatch = pin_mismatch(read_pins(BUILD_REQS), venv, "a build from sources (requirements/drivers-build.txt)")
    if mismatch:
        raise Stop(mismatch)
    cache = Path(args.cache).expanduser()
    work, downloads = cache / cache_key(sources), cache / "downloads"
    if (work / "COMPLETE").is_file() and (work / "install").is_dir():
        say(f"using the build in {work}")
        return work / "install"
    if getattr(args, "no_build", False):
        raise Stop("drivers: no ROS 2 with turtlebot3_fake_node/crazyflie_sim, no prebuilt tree (../shared/drivers) "
                   "and no earlier build; `make test` does not build them (about 11 min on 2 cores): run "
                   "`make drivers` (docs/drivers.md)")
    folders = []
    if args.src:
        src = Path(args.src).expanduser()
        if not src.is_dir():
            raise Stop(f"CONSENSUS_DRIVERS_SRC={src} is not a folder (of the archives named in "
                       f"requirements/drivers-sources.txt)")
        folders.append(src)
    folders.append(Path(args.shared_src))
    archives = {s.name: find_archive(s, folders, downloads) for s in sources}
    absent = [s for s in sources if archives[s.name] is None]
    if absent and args.offline:
        shared = Path(args.shared)
        tried = "" if args.src else (
            f"no sourced ROS 2 with the drivers, "
            f"{f'{shared} at other pins' if (shared / 'install' / 'lib').is_dir() else f'no {shared}/install'}, and ")
        raise Stop(f"not found: {tried}no archives of {', '.join(map(str, absent))} in "
                   f"{' or '.join(map(str, folders))} while CONSENSUS_DRIVERS_OFFLINE=1 forbids GitHub: {HOW}")
    missing = missing_build_tools()
    base_python = getattr(sys, "_base_executable", None) or sys.executable
    steps = build_steps(sources, archives, work, downloads, base_python)
    if dry_run:
        say(f"would build into {work}" + (f" (missing here: {'; '.join(missing)})" if missing else "") + ":")
        for step in steps:
            print(step.show(), flush=True)
        return work / "install"
    if missing:
        raise Stop(f"cannot build the drivers from their sources here: missing {'; '.join(missing)}")
    if work.exists():
        shutil.rmtree(work)                       # an interrupted build: start clean
    work.mkdir(parents=True)
    started = time.monotonic()
    say(f"building {', '.join(map(str, sources))} into {work} (about 11 min on 2 cores)")
    for step in steps:
        if step.do is not None:
            step.do()
            continue
        result = subprocess.run(step.argv, cwd=step.cwd, env=step.environ(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            (work / "build-failed.log").write_text(result.stdout)
            sys.stderr.write("\n".join(result.stdout.splitlines()[-30:]) + "\n")
            raise Stop(f"{step.text} failed (exit {result.returncode}; the tail is above, all of it in "
                       f"{work / 'build-failed.log'})")
    (work / "COMPLETE").write_text(f"{time.monotonic() - started:.0f} s\n")
    return work / "install"


# --- main ----------------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", default=sys.prefix, help="the venv to make them available to (default: this one)")
    parser.add_argument("--shared", default=str(ROOT.parent / "shared" / "drivers"),
                        help="a prebuilt tree: DIR/install and DIR/requirements.txt (default: ../shared/drivers)")
    parser.add_argument("--shared-src", default=str(ROOT.parent / "shared" / "drivers-src"),
                        help="archives of the sources (default: ../shared/drivers-src)")
    parser.add_argument("--src", default=os.environ.get("CONSENSUS_DRIVERS_SRC", ""),
                        help="archives of the sources; build from them (default: $CONSENSUS_DRIVERS_SRC)")
    parser.add_argument("--cache", default=os.environ.get("CONSENSUS_DRIVERS_CACHE")
                        or str(Path.home() / ".cache" / "consensus" / "drivers"),
                        help="builds and downloads (default: $CONSENSUS_DRIVERS_CACHE or ~/.cache/consensus/drivers)")
    parser.add_argument("--offline", action="store_true", default=os.environ.get("CONSENSUS_DRIVERS_OFFLINE") == "1",
                        help="never download from GitHub (default: $CONSENSUS_DRIVERS_OFFLINE=1)")
    parser.add_argument("--sources", default=str(SOURCES), help="the pinned sources (default: %(default)s)")
    parser.add_argument("--dry-run", action="store_true", help="say what would be done; change nothing")
    parser.add_argument("--uninstall", action="store_true", help="remove what the MANIFEST lists")
    parser.add_argument("--no-pip", action="store_true", help="do not pip-(un)install requirements/drivers.txt")
    parser.add_argument("--no-build", action="store_true",
                        help="only link what is there (a ROS 2 install, the prebuilt tree, an earlier build); never "
                             "start a build from sources (make test)")
    args = parser.parse_args(argv)
    venv = Path(args.venv).absolute()
    started = time.monotonic()
    try:
        if args.uninstall:
            return uninstall(venv, not args.no_pip)
        tree, origin = None, ""
        if not args.src:
            distro, why = sourced_ros2(venv)
            if distro:
                say(f"a sourced ROS 2 {distro} provides turtlebot3_fake_node, crazyflie_sim and their Python "
                    f"packages: nothing to install")
                return 0
            if why:
                say(why)
            shared = Path(args.shared)
            if (shared / "install" / "lib").is_dir():
                mismatch = pin_mismatch(read_pins(shared / "requirements.txt"), venv, str(shared))
                if mismatch:
                    say(mismatch + ": trying a build from sources")
                else:
                    tree, origin = (shared / "install").resolve(), f"prebuilt in {shared}"
        if tree is None:
            tree = build(args, venv, args.dry_run)
            origin = f"built from sources ({tree.parent})"
        if args.dry_run:
            if tree.is_dir():
                entries = plan(tree, venv)
                say(f"would link {len(entries)} entries of {tree} ({origin}) into {venv} and pip-install "
                    f"{PYPI_DEPS.relative_to(ROOT)}")
            return 0
        pips = pypi_deps(venv, not args.no_pip)
        count, new = link(tree, venv, origin, pips)
        check_linked(venv, tree)
        say(f"{count} entries of {tree} ({origin}) linked into {venv} ({new} new, {time.monotonic() - started:.1f} s; "
            f"list: {MANIFEST}): turtlebot3_fake_node and crazyflie_server start without sourcing anything ({DOC})")
        return 0
    except Stop as stop:
        say(str(stop))
        return 1


if __name__ == "__main__":
    sys.exit(main())
