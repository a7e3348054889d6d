"""Install the real ROS 2 ``launch``, ``launch_ros``, ``ros2 launch`` and ``ros2`` CLI into this Python's venv.

They are not on PyPI (the PyPI ROS 2 Kilted wheels bring rclpy and messages only). ``make ros2-tools`` runs this with
the venv's Python; the first of these that applies is used:

1. a sourced ROS 2 install (``ROS_DISTRO`` set and its ``ros2`` importable): nothing to do, it has its own tools;
2. ``--src DIR`` / ``ROS2_TOOLS_SRC=DIR``: build the wheels from local copies of the repositories, for each one a
   git clone (``DIR/launch``, or ``DIR/launch.git``) that has the pinned commit, or an archive of the repository at
   that commit (``DIR/launch-<commit>.tar.gz`` as GitHub serves it, or ``DIR/launch.tar.gz`` from ``git archive``);
3. ``--shared DIR`` (``../shared/ros2-tools``) when it holds the wheels: install those;
4. otherwise download each repository's archive at its commit from GitHub (https://github.com/<repo>/archive/<commit>
   .tar.gz, kept in the cache; ``ROS2_TOOLS_ARCHIVE_URL`` names another host, e.g. a mirror, with the same
   ``{repo}`` and ``{commit}`` fields) and build the wheels; ``ROS2_TOOLS_OFFLINE=1`` forbids this download.

The repositories, their pinned commits and the package subfolders are in requirements/ros2-tools-sources.txt; each
subfolder is built unchanged with ``pip wheel --no-deps``, plus the project's import stand-in for
``composition_interfaces`` (tools/ros2-tools/composition_interfaces: composable nodes do not work). Built wheels are
cached under ``ROS2_TOOLS_CACHE`` (default ~/.cache/consensus/ros2-tools), keyed by those pins, so a second run only
installs. When no source is usable it prints ONE line saying what it needs and exits 1. Standard library only.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "requirements" / "ros2-tools-sources.txt"
PYPI_DEPS = ROOT / "requirements" / "ros2-tools.txt"
STAND_IN = Path(__file__).resolve().parent / "composition_interfaces"
GITHUB_ARCHIVE = "https://github.com/{repo}/archive/{commit}.tar.gz"    # ROS2_TOOLS_ARCHIVE_URL: another host
DOC = "docs/ros2-tools.md"


class Stop(Exception):
    """A source that cannot be used: the one line to print."""


class Repo:
    def __init__(self, repo: str, commit: str, subdirs: list[str]):
        self.repo, self.commit, self.subdirs = repo, commit, subdirs
        self.name = repo.rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return f"{self.repo}@{self.commit[:8]}"


def read_sources(path: Path = SOURCES) -> list[Repo]:
    repos = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) < 3 or len(fields[1]) != 40 or any(c not in "0123456789abcdef" for c in fields[1]):
            raise Stop(f"{path}:{number}: expected 'owner/repo <40-hex commit> <subfolder>...', got {line.strip()!r}")
        repos.append(Repo(fields[0], fields[1], fields[2:]))
    return repos


def say(message: str) -> None:
    print(f"ros2-tools: {message}", flush=True)


def run_pip(*args: str) -> None:
    """``python -m pip ARGS`` quietly; on failure the tail of pip's output, then Stop."""
    result = subprocess.run([sys.executable, "-m", "pip", *args, "--quiet", "--progress-bar", "off",
                             "--disable-pip-version-check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    if result.returncode != 0:
        sys.stderr.write("\n".join(result.stdout.splitlines()[-25:]) + "\n")
        raise Stop(f"pip {args[0]} failed (exit {result.returncode}; its output is above)")


def install(wheels: list[Path]) -> None:
    run_pip("install", "-r", str(PYPI_DEPS))
    run_pip("install", "--no-deps", *map(str, wheels))


# --- the sources of one repository -------------------------------------------------------------------------------

def archive_commit(path: Path) -> str | None:
    """The commit id git (``git archive``) and GitHub write into a tar's pax header, if there is one."""
    with tarfile.open(path) as tar:
        return (tar.pax_headers or {}).get("comment")


def extract(archive: Path, dest: Path) -> Path:
    """Unpack ``archive`` into ``dest``; the repository's root (the single top folder, if it has one)."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:                                                     # Python < 3.11.4: refuse paths leaving dest
            for member in tar.getmembers():
                target = (dest / member.name).resolve()
                if not (target == dest.resolve() or dest.resolve() in target.parents) or member.issym() \
                        or member.islnk():
                    raise Stop(f"{archive}: unsafe member {member.name!r}")
            tar.extractall(dest)
    entries = list(dest.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else dest


def pins(repos: list[Repo]) -> str:
    return ", ".join(str(r) for r in repos)


def local_tree(repo: Repo, src: Path, work: Path, repos: list[Repo]) -> Path:
    """The repository at its pinned commit, from a clone or an archive in ``src``, unpacked under ``work``."""
    for clone in (src / repo.name, src / f"{repo.name}.git"):
        if clone.is_dir():
            if subprocess.run(["git", "-C", str(clone), "rev-parse", "--git-dir"], capture_output=True).returncode:
                raise Stop(f"{clone} is not a git clone (give a clone with {repo.commit} or an archive "
                           f"{repo.name}-{repo.commit}.tar.gz)")
            if subprocess.run(["git", "-C", str(clone), "cat-file", "-e", f"{repo.commit}^{{commit}}"],
                              capture_output=True).returncode:
                raise Stop(f"{clone} lacks the pinned commit {repo.commit} of {repo.repo} "
                           f"(git -C {clone} fetch origin {repo.commit})")
            archive = work / f"{repo.name}.tar"
            with open(archive, "wb") as out:
                subprocess.run(["git", "-C", str(clone), "archive", "--format=tar", f"--prefix={repo.name}/",
                                repo.commit], stdout=out, check=True)
            return extract(archive, work / repo.name)
    for archive in (src / f"{repo.name}-{repo.commit}.tar.gz", src / f"{repo.name}.tar.gz"):
        if archive.is_file():
            found = archive_commit(archive)
            if found is None and repo.commit not in archive.name:
                raise Stop(f"{archive}: cannot tell its commit (no git header); name it "
                           f"{repo.name}-{repo.commit}.tar.gz if it is {repo.repo} at that commit")
            if found is not None and found != repo.commit:
                raise Stop(f"{archive} is {repo.repo} at {found}, not the pinned {repo.commit}")
            return extract(archive, work / repo.name)
    raise Stop(f"{src} has no {repo.repo} at {repo.commit[:8]}: it needs, for each of "
               f"{pins(repos)}, a git clone <name>/ with that commit or an archive "
               f"<name>-<commit>.tar.gz (requirements/ros2-tools-sources.txt; {DOC})")


def archive_url() -> str:
    return os.environ.get("ROS2_TOOLS_ARCHIVE_URL") or GITHUB_ARCHIVE


def github_tree(repo: Repo, downloads: Path, work: Path, repos: list[Repo]) -> Path:
    """The repository's GitHub archive at its pinned commit (downloaded once into ``downloads``), unpacked."""
    archive = downloads / f"{repo.name}-{repo.commit}.tar.gz"
    if not archive.is_file():
        url = archive_url().format(repo=repo.repo, commit=repo.commit)
        downloads.mkdir(parents=True, exist_ok=True)
        partial = archive.with_suffix(".part")
        try:
            with urllib.request.urlopen(url, timeout=30) as response, open(partial, "wb") as out:
                shutil.copyfileobj(response, out)
        except (urllib.error.URLError, OSError) as exc:
            partial.unlink(missing_ok=True)
            reason = getattr(exc, "reason", None) or exc
            raise Stop(f"cannot download {url} ({reason}): without network, set ROS2_TOOLS_SRC to a folder of "
                       f"clones or <name>-<commit>.tar.gz archives of {pins(repos)}, "
                       f"or install ROS 2 ({DOC})") from None
        partial.rename(archive)
        if archive_commit(archive) not in (None, repo.commit):
            archive.unlink()
            raise Stop(f"{url} did not serve commit {repo.commit}")
    return extract(archive, work / repo.name)


# --- building ----------------------------------------------------------------------------------------------------

def cache_key(repos: list[Repo]) -> str:
    digest = hashlib.sha256()
    for repo in repos:
        digest.update(f"{repo.repo} {repo.commit} {' '.join(repo.subdirs)}\n".encode())
    for path in sorted(STAND_IN.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and ".egg-info" not in str(path):
            digest.update(path.relative_to(STAND_IN).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def build(repos: list[Repo], tree_of, wheel_dir: Path) -> list[Path]:
    """Wheel every package subfolder of every repository (``tree_of(repo, work)`` gives its root) and the stand-in
    into ``wheel_dir`` (filled only when all of them built); the wheels."""
    done = wheel_dir / "COMPLETE"
    if done.is_file():
        cached = [wheel_dir / name for name in done.read_text().split()]
        if cached and all(p.is_file() for p in cached):
            return cached
    with tempfile.TemporaryDirectory(prefix="ros2-tools-") as tmp:
        work, out = Path(tmp), Path(tmp) / "wheels"
        folders = []
        for repo in repos:
            root = tree_of(repo, work)
            mine = [root / sub for sub in repo.subdirs]
            missing = [sub for sub, f in zip(repo.subdirs, mine) if not (f / "setup.py").is_file()
                       and not (f / "pyproject.toml").is_file()]
            if missing:
                raise Stop(f"{repo} has no Python package in {', '.join(missing)}")
            say(f"building {len(mine)} wheel(s) from {repo}: {' '.join(repo.subdirs)}")
            folders += mine
        stand_in = work / "composition_interfaces"                # built from a copy: no build/ in the repo
        shutil.copytree(STAND_IN, stand_in, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        run_pip("wheel", "--no-deps", "--wheel-dir", str(out), *map(str, folders), str(stand_in))
        wheel_dir.mkdir(parents=True, exist_ok=True)
        names = sorted(p.name for p in out.glob("*.whl"))
        for name in names:
            shutil.copy2(out / name, wheel_dir / name)
        done.write_text("\n".join(names) + "\n")
    return [wheel_dir / name for name in names]


def sourced_ros2() -> str | None:
    """The ROS 2 distribution of a sourced install whose tools this Python already imports (then nothing to do)."""
    distro = os.environ.get("ROS_DISTRO")
    if not distro or not shutil.which("ros2"):
        return None
    probe = subprocess.run([sys.executable, "-c", "import launch_ros, ros2cli, sys; "
                            "sys.exit(ros2cli.__file__.startswith(sys.prefix))"], capture_output=True)
    return distro if probe.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", default=os.environ.get("ROS2_TOOLS_SRC", ""),
                        help="folder of clones or archives of the repositories (default: $ROS2_TOOLS_SRC)")
    parser.add_argument("--shared", default=str(ROOT.parent / "shared" / "ros2-tools"),
                        help="folder of prebuilt wheels, used when present (default: ../shared/ros2-tools)")
    parser.add_argument("--cache", default=os.environ.get("ROS2_TOOLS_CACHE")
                        or str(Path.home() / ".cache" / "consensus" / "ros2-tools"),
                        help="where built wheels and downloads are kept (default: $ROS2_TOOLS_CACHE or "
                             "~/.cache/consensus/ros2-tools)")
    parser.add_argument("--offline", action="store_true", default=os.environ.get("ROS2_TOOLS_OFFLINE") == "1",
                        help="never download from GitHub (default: $ROS2_TOOLS_OFFLINE=1)")
    parser.add_argument("--sources", default=str(SOURCES),
                        help="the pins: lines 'owner/repo <commit> <subfolder>...' (default: %(default)s)")
    parser.add_argument("--build-only", action="store_true", help="build the wheels, do not install them")
    args = parser.parse_args(argv)
    try:
        distro = None if args.src else sourced_ros2()
        if distro:
            say(f"a sourced ROS 2 {distro} provides launch and the ros2 CLI: nothing to install")
            return 0
        repos = read_sources(Path(args.sources))
        cache = Path(args.cache).expanduser()
        shared = Path(args.shared)
        if args.src:
            src = Path(args.src).expanduser()
            if not src.is_dir():
                raise Stop(f"ROS2_TOOLS_SRC={src} is not a folder (of clones or archives of the ROS 2 repositories)")
            wheel_dir = cache / f"wheels-{cache_key(repos)}"
            wheels = build(repos, lambda repo, work: local_tree(repo, src, work, repos), wheel_dir)
            origin = f"built from {src}"
        elif shared.is_dir() and list(shared.glob("*.whl")):
            wheels, origin = sorted(shared.glob("*.whl")), f"prebuilt in {shared}"
        elif args.offline:
            raise Stop(f"no {shared}, no ROS2_TOOLS_SRC and ROS2_TOOLS_OFFLINE=1: set ROS2_TOOLS_SRC to a folder of "
                       f"clones or <name>-<commit>.tar.gz archives of {pins(repos)}, or install ROS 2 ({DOC})")
        else:
            wheel_dir = cache / f"wheels-{cache_key(repos)}"
            wheels = build(repos, lambda repo, work: github_tree(repo, cache / "downloads", work, repos), wheel_dir)
            origin = f"built from archives of {archive_url().split('/{')[0]}"
        if args.build_only:
            say(f"{len(wheels)} wheels {origin}: {wheels[0].parent}")
            return 0
        install(wheels)
        say(f"installed {len(wheels)} wheels ({origin}) into {sys.prefix}; with AMENT_PREFIX_PATH={sys.prefix}, "
            f"`ros2 launch consensus aggregation.launch.py` works")
        return 0
    except Stop as stop:
        say(str(stop))
        return 1


if __name__ == "__main__":
    sys.exit(main())
