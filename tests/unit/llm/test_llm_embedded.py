"""Offline model: chunk assembly, hash checks, the hash sidecar, and (marker ``embedded``) the real server."""
from __future__ import annotations

import hashlib
import json
import os
import socket

import pytest

from consensus.errors import ConfigError, ConsensusError
from consensus.llm import embedded
from consensus.llm.base import ChatRequest
from consensus.llm.embedded import (
    EmbeddedModelError,
    EmbeddedServer,
    ensure_default_model,
    installed_part_paths,
    resolve_model_path,
    verify_file,
)
from consensus.llm.factory import make_client


@pytest.fixture
def parts(tmp_path):
    """Three fake chunk files and the SHA-256 of their concatenation."""
    d = tmp_path / "parts"
    d.mkdir()
    blobs = [b"GGUF" + os.urandom(1000), os.urandom(3000), os.urandom(17)]
    paths = []
    for i, blob in enumerate(blobs, start=1):
        p = d / f"part{i:02d}.bin"
        p.write_bytes(blob)
        paths.append(p)
    whole = b"".join(blobs)
    return paths, whole, hashlib.sha256(whole).hexdigest()


def test_assembles_parts_and_verifies(tmp_path, parts):
    paths, whole, sha = parts
    out = ensure_default_model(tmp_path / "cache", parts=paths, sha256=sha, filename="m.gguf")
    assert out == tmp_path / "cache" / "m.gguf"
    assert out.read_bytes() == whole
    assert json.loads((tmp_path / "cache" / "m.gguf.sha256.json").read_text())["sha256"] == sha
    assert sorted(p.name for p in out.parent.iterdir()) == ["m.gguf", "m.gguf.sha256.json"]


def test_hash_mismatch_raises_and_leaves_nothing(tmp_path, parts):
    paths, _, _ = parts
    with pytest.raises(EmbeddedModelError, match="wrong SHA-256") as exc:
        ensure_default_model(tmp_path / "cache", parts=paths, sha256="0" * 64, filename="m.gguf")
    assert isinstance(exc.value, ConsensusError)
    assert list((tmp_path / "cache").iterdir()) == []      # no half-written or unverified file


def test_missing_part_raises_and_leaves_nothing(tmp_path, parts):
    paths, _, sha = parts
    paths[1].unlink()
    with pytest.raises(EmbeddedModelError, match="part missing"):
        ensure_default_model(tmp_path / "cache", parts=paths, sha256=sha, filename="m.gguf")
    assert list((tmp_path / "cache").iterdir()) == []


def test_verified_cache_is_not_rehashed(tmp_path, parts, monkeypatch):
    paths, _, sha = parts
    ensure_default_model(tmp_path / "c", parts=paths, sha256=sha, filename="m.gguf")

    def boom(path):
        raise AssertionError("re-hashed an unchanged, verified file")

    monkeypatch.setattr(embedded, "sha256_file", boom)
    for p in paths:
        p.unlink()                                          # the parts are not needed any more
    assert ensure_default_model(tmp_path / "c", sha256=sha, filename="m.gguf", parts=[]).is_file()


def test_corrupted_cache_is_rebuilt_from_parts(tmp_path, parts):
    paths, whole, sha = parts
    out = ensure_default_model(tmp_path / "c", parts=paths, sha256=sha, filename="m.gguf")
    with open(out, "r+b") as f:                              # bit rot: same size, new mtime
        f.seek(10)
        f.write(b"\x00\x01\x02")
    st = out.stat()
    os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert ensure_default_model(tmp_path / "c", parts=paths, sha256=sha, filename="m.gguf").read_bytes() == whole


def test_verify_file(tmp_path):
    f = tmp_path / "x.bin"
    f.write_bytes(b"abc")
    verify_file(f, hashlib.sha256(b"abc").hexdigest().upper())
    with pytest.raises(EmbeddedModelError, match="mismatch"):
        verify_file(f, hashlib.sha256(b"abd").hexdigest(), use_sidecar=False)
    with pytest.raises(EmbeddedModelError, match="not found"):
        verify_file(tmp_path / "nope", "0" * 64)


def test_installed_parts_are_found_by_package(tmp_path, monkeypatch):
    for n in (1, 2):
        pkg = tmp_path / f"tmfake_model_part{n}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{n:02d}.bin").write_bytes(b"x")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = installed_part_paths(["tmfake_model_part1", "tmfake_model_part2"])
    assert found == [tmp_path / "tmfake_model_part1/data/part01.bin", tmp_path / "tmfake_model_part2/data/part02.bin"]
    with pytest.raises(EmbeddedModelError, match=r"pip install tmfake-model-part3==0\.2\.0"):
        installed_part_paths(["tmfake_model_part1", "tmfake_model_part3"])


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CONSENSUS_CACHE_DIR", str(tmp_path / "cc"))
    assert embedded.default_cache_dir() == tmp_path / "cc"
    monkeypatch.delenv("CONSENSUS_CACHE_DIR")
    assert embedded.default_cache_dir().parts[-3:] == (".cache", "consensus", "models")


def test_user_gguf_is_checked(tmp_path):
    good = tmp_path / "mine.gguf"
    good.write_bytes(b"GGUF" + b"\0" * 60)
    assert resolve_model_path(good) == good
    with pytest.raises(EmbeddedModelError, match="mismatch"):
        resolve_model_path(good, sha256="f" * 64)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"<html>not a model")
    with pytest.raises(EmbeddedModelError, match="not a GGUF"):
        resolve_model_path(bad)


def test_factory_embedded_rejects_non_gguf_model():
    with pytest.raises(ConfigError, match=r"\.gguf"):
        make_client("embedded", model="gpt-4o-mini")


def test_server_reports_unloadable_model(tmp_path):
    pytest.importorskip("xllamacpp")
    fake = tmp_path / "broken.gguf"
    fake.write_bytes(b"GGUF" + b"\3\0\0\0" + b"\0" * 500)
    srv = EmbeddedServer(fake, n_ctx=512)
    with pytest.raises(EmbeddedModelError, match="failed to start with .*broken.gguf"):
        srv.start()
    assert not srv.running


def test_server_reports_busy_port(tmp_path):
    pytest.importorskip("xllamacpp")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 60)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(EmbeddedModelError, match=f"port {busy.getsockname()[1]} .* in use"):
            EmbeddedServer(model, port=busy.getsockname()[1]).start()


def test_server_rejects_bad_parameters(tmp_path):
    with pytest.raises(ConfigError, match="n_parallel"):
        EmbeddedServer(tmp_path / "m.gguf", n_parallel=0)


@pytest.mark.embedded
def test_real_model_answers_json_schema_request(shared_llm):
    """On the session's shared server (tests/conftest.py); that ``close()`` of an "embedded" client stops its own
    server is asserted by test_embedded_styles, which starts one the way a user's headless run does."""
    schema = {"type": "object", "additionalProperties": False, "required": ["reasoning", "position"],
              "properties": {"reasoning": {"type": "string", "maxLength": 60},
                             "position": {"type": "array", "items": {"type": "number"},
                                          "minItems": 2, "maxItems": 2}}}
    client, close = shared_llm.client(timeout_s=120.0, max_retries=0, concurrency=1)
    try:
        r = client.complete(ChatRequest(
            messages=({"role": "system", "content": "You are a robot moving in a two-dimensional space."},
                      {"role": "user", "content": "Your position is (1, 2); the others are at (3, 4) and (5, 0). "
                                                  "Choose a position to move to in order to gather."}),
            temperature=0.0, max_tokens=80,
            response_format={"type": "json_schema", "json_schema": {"name": "plan", "schema": schema}}))
    finally:
        close()
    reply = json.loads(r.text)
    assert set(reply) == {"reasoning", "position"} and len(reply["reasoning"]) <= 60
    assert len(reply["position"]) == 2 and all(isinstance(v, (int, float)) for v in reply["position"])
    assert r.model == ensure_default_model().stem and r.completion_tokens > 0


def test_unwritable_cache_dir_is_a_clear_error(tmp_path, parts):
    paths, _, sha = parts
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(EmbeddedModelError, match="CONSENSUS_CACHE_DIR"):
        ensure_default_model(blocker / "cache", parts=paths, sha256=sha, filename="m.gguf")
