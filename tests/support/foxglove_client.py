"""A minimal Foxglove WebSocket client for the tests: what the Foxglove app does when it connects to a live run.

It speaks the Foxglove WebSocket protocol (subprotocol ``foxglove.sdk.v1``): it reads ``serverInfo`` and each
``advertise``, subscribes to every advertised channel, and decodes the binary ``messageData`` frames (opcode 1,
subscription id u32 LE, log time u64 LE, payload) by the channel's advertised encoding: ``json`` with ``json``,
``protobuf`` with the advertised FileDescriptorSet (base64) and ``google.protobuf``.
"""
from __future__ import annotations

import asyncio
import base64
import json
import socket
import time

SUBPROTOCOL = "foxglove.sdk.v1"
NEEDS = {"foxglove": "pip install -r requirements/foxglove.txt (the Foxglove SDK)",
         "websockets": "pip install -r requirements/test.txt (the test client)",
         "google.protobuf": "pip install -r requirements/test.txt (protobuf decodes the scene)"}


def need_client_and_sdk() -> None:
    """Skip (with the install command) unless the SDK and the client's packages are installed; with
    CONSENSUS_REQUIRE_ALL=1 (`make test`, CI) a missing one is an error instead."""
    import importlib
    import os

    import pytest

    for module, hint in NEEDS.items():
        try:
            importlib.import_module(module)
        except ImportError:
            if os.environ.get("CONSENSUS_REQUIRE_ALL") == "1":
                raise
            pytest.skip(f"{module} is not installed: {hint}", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def protobuf_decoder(channel: dict):
    """payload -> dict for a protobuf channel, from its advertised schema alone."""
    from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(channel["schema"]))
    pool = descriptor_pool.DescriptorPool()
    pending = list(fds.file)
    while pending:                              # dependencies first, whatever order the set lists them in
        progress = False
        for f in list(pending):
            try:
                pool.Add(f)
            except TypeError:
                continue
            pending.remove(f)
            progress = True
        if not progress:
            raise ValueError(f"cannot load the schema of {channel['topic']}")
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(channel["schemaName"]))
    return lambda payload: json_format.MessageToDict(cls.FromString(payload), preserving_proto_field_name=True)


def decoder(channel: dict):
    if channel["encoding"] == "json":
        return lambda payload: json.loads(payload.decode("utf-8"))
    if channel["encoding"] == "protobuf":
        return protobuf_decoder(channel)
    raise ValueError(f"unexpected encoding {channel['encoding']} of {channel['topic']}")


async def _listen(url: str, seconds: float, connect_timeout: float, until=None) -> tuple[dict, dict, dict]:
    import websockets

    deadline = time.monotonic() + connect_timeout
    while True:
        try:
            ws = await websockets.connect(url, subprotocols=[SUBPROTOCOL], open_timeout=2)
            break
        except (OSError, asyncio.TimeoutError, websockets.InvalidHandshake):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.3)
    info: dict = {"subprotocol": ws.subprotocol}
    channels: dict[int, dict] = {}
    subs: dict[int, tuple[dict, object]] = {}
    heard: dict[str, list] = {}
    end = time.monotonic() + seconds
    async with ws:
        while time.monotonic() < end and not (until and until(heard)):
            try:
                frame = await asyncio.wait_for(ws.recv(), timeout=max(0.05, end - time.monotonic()))
            except asyncio.TimeoutError:
                break
            except websockets.ConnectionClosed:
                break
            if isinstance(frame, str):
                msg = json.loads(frame)
                if msg["op"] == "serverInfo":
                    info.update(msg)
                elif msg["op"] == "advertise":
                    new = []
                    for ch in msg["channels"]:
                        channels[ch["id"]] = ch
                        sub_id = len(subs) + 1
                        subs[sub_id] = (ch, decoder(ch))
                        new.append({"id": sub_id, "channelId": ch["id"]})
                    await ws.send(json.dumps({"op": "subscribe", "subscriptions": new}))
            elif frame[0] == 1:                                       # messageData
                sub_id = int.from_bytes(frame[1:5], "little")
                ch, decode = subs[sub_id]
                heard.setdefault(ch["topic"], []).append(decode(frame[13:]))
    return info, {ch["topic"]: ch for ch in channels.values()}, heard


def listen(port: int, seconds: float, *, connect_timeout: float = 30.0, until=None) -> tuple[dict, dict, dict]:
    """Connect to ws://127.0.0.1:PORT (retrying up to ``connect_timeout``), subscribe to every channel and listen
    ``seconds`` (or until ``until(heard)``); returns (serverInfo, topic -> channel, topic -> decoded messages)."""
    return asyncio.run(_listen(f"ws://127.0.0.1:{port}", seconds, connect_timeout, until))
