"""``consensus mcp`` without ``--run``: the seat starts a run itself (``start_run``, approved by a console code),
attaches to it, reads it, and stops it (``stop_run``: the run ends as on Ctrl-C, its summary written). What the seat
may not start is refused before approval: an unknown scenario, settings that touch the operator's group."""
from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest

pytest.importorskip("mcp")
pytestmark = pytest.mark.ros

CLI = [sys.executable, "-c", "import sys; from consensus.cli import main; sys.exit(main())"]


def test_the_seat_starts_a_run_after_approval_attaches_reads_it_and_stops_it(tmp_path):
    import anyio
    from mcp import ClientSession, StdioServerParameters, types
    from mcp.client.stdio import stdio_client

    err = tmp_path / "server.err"
    out = tmp_path / "runs"
    found: dict = {}

    async def main():
        params = StdioServerParameters(command=CLI[0], args=[*CLI[1:], "mcp", "--out", str(out)],
                                       env=dict(os.environ))
        with open(err, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w):
                async with ClientSession(r, w, client_info=types.Implementation(name="starter", version="1")) as s:
                    await s.initialize()
                    res = await s.call_tool("fleet_status", {})
                    assert res.is_error and "no run is attached" in res.content[0].text
                    res = await s.call_tool("stop_run", {})
                    assert res.is_error and "started no run" in res.content[0].text
                    res = await s.call_tool("start_run", {"scenario": "no-such", "robots": 3})
                    assert res.is_error and "unknown scenario 'no-such'" in res.content[0].text
                    res = await s.call_tool("start_run", {"robots": 3, "settings": {"operator_allow": "start_run"}})
                    assert res.is_error and "may not change the operator's seat" in res.content[0].text
                    res = await s.call_tool("start_run", {"robots": 3, "duration_s": 1e9})
                    assert res.is_error and "duration_s" in res.content[0].text
                    args = {"robots": 3, "duration_s": 120.0, "settings": {"topology": "ring"}}
                    res = await s.call_tool("start_run", args)
                    assert res.is_error and "approval needed" in res.content[0].text
                    assert not out.exists() or not any(out.glob("aggregation-*/manifest.json"))
                    errlog.flush()
                    code = re.findall(r"the code ([0-9a-f]{8})", err.read_text())[-1]
                    res = await s.call_tool("start_run", {**args, "confirm": code})
                    assert not res.is_error, res.content[0].text
                    found["run_dir"] = json.loads(res.content[0].text)["run_dir"]
                    end = time.monotonic() + 60
                    while time.monotonic() < end:
                        st = json.loads((await s.call_tool("fleet_status", {})).content[0].text)
                        if st["robots_heard"] == 3 and st["topology"] == "ring":
                            break
                        await anyio.sleep(0.5)
                    assert st["num_robots"] == 3 and st["robots_heard"] == 3 and st["topology"] == "ring", st
                    res = await s.call_tool("stop_run", {})
                    assert not res.is_error, res.content[0].text
                    found["stop"] = json.loads(res.content[0].text)

    anyio.run(main)
    run = found["run_dir"]
    assert found["stop"]["stopped"] == [{"dir": run, "exit_code": 0}]
    assert os.path.dirname(run) == str(out)
    assert json.loads(open(os.path.join(run, "summary.json")).read())["topology"] == "ring"
    # the run's own record begins with who started it
    log = [json.loads(x) for x in open(os.path.join(run, "operator.jsonl"))]
    assert [(e["tool"], e["outcome"], e["approval"]) for e in log if e["tool"] != "fleet_status"] == [
        ("start_run", "done", "token"), ("stop_run", "done", "none")]
    before = [json.loads(x) for x in open(out / "operator.jsonl")]
    assert [(e["tool"], e["outcome"]) for e in before if e["tool"] != "fleet_status"] == [
        ("stop_run", "refused"), ("start_run", "refused"), ("start_run", "refused"), ("start_run", "refused"),
        ("start_run", "approval needed")]
