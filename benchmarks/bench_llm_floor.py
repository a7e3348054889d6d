"""The LLM floor: llama.cpp's own speed on this machine, and our planning round beside it (issue 44).

1. **The floor.** One embedded server as a run starts it (the pinned model, ``--threads`` = the cores, ``--slots``
   = the demo's 4 robots, the same context and batch settings: ``consensus.llm.embedded``), nothing else running.
   llama.cpp's own ``timings`` of: a ``--prompt-tokens`` prompt evaluated with the prompt cache off (prompt
   tokens/s, ``pp``); ``--gen-tokens`` generated from a short prompt with the end-of-text ignored (tokens/s, ``tg``);
   and ``--slots`` such generations at once, one per slot (what the server gives a round whose robots decode
   together). Each ``--repeat`` times, the median printed.
2. **Our round.** A run's ``transcripts.jsonl`` (``--run DIR``; or ``--demo``: the `make demo` command run here, its
   wall time, time to consensus and CPU per process measured): per planning round, the calls (retries included),
   the prompt tokens taken from the slot's cache and the new ones, the generated tokens, the round's wall time (from
   the previous round's completion, when its last robot had its answer, to this one's: the robots' rounds overlap),
   the floor for its tokens (``new / pp + generated / tg``) and the ratio. Then where the rest goes: time in the
   server's queue (a call's latency minus llama.cpp's time for it), prompt tokens evaluated again, answers that ran
   to the token cap, retries and fallbacks, and (``--demo``) the CPU
   the other nodes took.

    PYTHONPATH=src python benchmarks/bench_llm_floor.py                     # the floor only
    PYTHONPATH=src python benchmarks/bench_llm_floor.py --run runs/demo     # the floor and that run's rounds
    PYTHONPATH=src python benchmarks/bench_llm_floor.py --demo [--demo-runs 3] [--set llm_threads=1 ...]

Needs the embedded model (``make model``). Take the figures on an idle machine (the load average is printed).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ProcessCPU, isolate_ros  # noqa: E402

#: the demo's command (Makefile ``demo``), without its output folder
DEMO = ["aggregation", "--robots", "4", "--planner", "llm", "--prompt-style", "tools", "--backend", "embedded",
        "--duration", "600", "--settle", "20", "--set", "llm_timeout_s=300", "--set", "llm_max_tokens=160",
        "--set", "meeting_points=on", "--set", "news_wait_s=10"]

FILLER = ("The robots in the space report their positions to each other and each one chooses where to move next. ")


def _post(url: str, body: dict, timeout: float = 600.0) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def floor(threads: int | None, slots: int, prompt_tokens: int, gen_tokens: int, repeat: int) -> dict:
    """llama.cpp's own prompt and generation speed on this machine (module docstring, 1)."""
    from consensus.llm.embedded import EmbeddedServer, ensure_default_model
    from consensus.llm.from_config import embedded_context

    with EmbeddedServer(ensure_default_model(), n_ctx=embedded_context(slots), n_threads=threads,
                        n_parallel=slots) as server:
        root = server.base_url.removesuffix("/v1")
        tokens = _post(root + "/tokenize", {"content": FILLER * 40})["tokens"]
        text = FILLER * (40 * prompt_tokens // max(len(tokens), 1) + 1)
        prompt = _post(root + "/detokenize", {"tokens": _post(root + "/tokenize", {"content": text})["tokens"]
                                              [:prompt_tokens]})["content"]
        _post(root + "/completion", {"prompt": "Hello", "n_predict": 4, "id_slot": 0})       # warm-up
        pp, tg = [], []
        for k in range(repeat):
            r = _post(root + "/completion", {"prompt": prompt, "n_predict": 1, "cache_prompt": False, "id_slot": 0,
                                             "seed": k})
            pp.append((r["timings"]["prompt_n"], r["timings"]["prompt_per_second"]))
            r = _post(root + "/completion", {"prompt": f"Count from {k} upwards:", "n_predict": gen_tokens,
                                             "ignore_eos": True, "cache_prompt": False, "id_slot": 0, "seed": k,
                                             "temperature": 0.7})
            tg.append(r["timings"]["predicted_per_second"])
        together = []
        for k in range(repeat):
            t0 = time.monotonic()
            with ThreadPoolExecutor(slots) as pool:
                outs = list(pool.map(lambda s: _post(root + "/completion", {
                    "prompt": f"Robot {s} counts from {k} upwards:", "n_predict": gen_tokens, "ignore_eos": True,
                    "cache_prompt": False, "id_slot": s, "seed": k, "temperature": 0.7}), range(slots)))
            together.append(sum(o["timings"]["predicted_n"] for o in outs) / (time.monotonic() - t0))
        return {"threads": server.n_threads, "slots": slots, "prompt_tokens": pp[0][0],
                "pp": statistics.median(v for _, v in pp), "tg": statistics.median(tg),
                "tg_together": statistics.median(together), "gen_tokens": gen_tokens}


def rounds(run: Path, fl: dict, max_tokens: int) -> dict:
    """Our rounds in a run's transcripts against the floor (module docstring, 2)."""
    calls = [json.loads(line) for line in (run / "transcripts.jsonl").read_text().splitlines() if line.strip()]
    by_round: dict[int, list[dict]] = {}
    for c in calls:
        parts = c["tag"].split("/")
        rnd = next((int(p.removeprefix("round_")) for p in parts if p.startswith("round_")), None)
        if rnd is not None:
            by_round.setdefault(rnd, []).append(c)
    rows = []
    done_before = None                   # when the previous round was complete (its last robot answered)
    for rnd in sorted(by_round):
        cs = by_round[rnd]
        st = [c.get("server_timings") or {} for c in cs]
        new = sum(s.get("prompt_n", 0) for s in st)
        cached = sum(s.get("cache_n", 0) for s in st)
        gen = sum(s.get("predicted_n", 0) for s in st)
        start = min(c["time"] - c["latency_s"] for c in cs)
        done = max(c["time"] for c in cs)
        # a round's time: from the previous round's completion to this one's (the robots' rounds overlap: a robot
        # asks its next question while another still waits for its answer); the first from its first request
        wall = done - (start if done_before is None else done_before)
        done_before = done
        fl_s = new / fl["pp"] + gen / fl["tg"]
        server_s = sum(s.get("prompt_s", 0) + s.get("predicted_s", 0) for s in st)
        rows.append({"round": rnd, "calls": len(cs), "robots": len({c["tag"].split("/")[0] for c in cs}),
                     "retries": sum("/retry_" in c["tag"] for c in cs), "new": new, "cached": cached, "gen": gen,
                     "capped": sum(s.get("predicted_n", 0) >= max_tokens for s in st), "wall_s": wall,
                     "floor_s": fl_s, "ratio": wall / fl_s if fl_s else float("nan"),
                     "queue_s": sum(c["latency_s"] for c in cs) - server_s, "server_s": server_s, "start": start})
    per_call = [c["latency_s"] / ((c.get("server_timings") or {}).get("prompt_s", 0)
                                  + (c.get("server_timings") or {}).get("predicted_s", 0) or float("nan"))
                for c in calls if c.get("server_timings")]
    summary = {}
    if (run / "summary.json").is_file():
        summary = json.loads((run / "summary.json").read_text())
    return {"rows": rows, "calls": len(calls), "per_call_ratio": statistics.median(per_call) if per_call else None,
            "summary": summary}


def print_rounds(res: dict, fl: dict) -> None:
    rows = res["rows"]
    print(f"\n{'round':>5} {'robots':>6} {'calls':>5} {'retry':>5} {'cached':>6} {'new':>5} {'gen':>5} {'capped':>6} "
          f"{'wall s':>7} {'floor s':>7} {'x floor':>7} {'queued s':>8}")
    for r in rows:
        print(f"{r['round']:5d} {r['robots']:6d} {r['calls']:5d} {r['retries']:5d} {r['cached']:6d} {r['new']:5d} "
              f"{r['gen']:5d} {r['capped']:6d} {r['wall_s']:7.1f} {r['floor_s']:7.1f} {r['ratio']:7.2f} "
              f"{r['queue_s']:8.1f}")
    full = [r for r in rows if r["robots"] == max((x["robots"] for x in rows), default=0)]
    if full:
        wall = statistics.median(r['wall_s'] for r in full)
        print(f"rounds with every robot: {len(full)}; median wall {wall:.1f} s, "
              f"floor {statistics.median(r['floor_s'] for r in full):.1f} s, "
              f"median ratio {statistics.median(r['ratio'] for r in full):.2f} x floor "
              f"(target <= 1.5); per round: {statistics.median(r['new'] for r in full):.0f} new + "
              f"{statistics.median(r['cached'] for r in full):.0f} cached prompt tokens, "
              f"{statistics.median(r['gen'] for r in full):.0f} generated")
    if res["per_call_ratio"] is not None:
        print(f"per call: latency / llama.cpp's own time = {res['per_call_ratio']:.2f} (median; target 1.00)")
    s = res["summary"]
    if s:
        llm = s.get("llm") or {}
        print(f"run: converged {s.get('converged')} at {s.get('time_to_converge_s')} s, end {s.get('end_reason')}, "
              f"{res['calls']} calls, capped answers {sum(r['capped'] for r in rows)}, "
              f"retries {sum(r['retries'] for r in rows)}, fallbacks {llm.get('fallbacks', s.get('llm_fallbacks'))}")


def demo(out: Path, extra: list[str]) -> dict:
    """The demo's command, timed, with CPU per process (``_common.ProcessCPU``)."""
    isolate_ros()
    cmd = [str(Path(sys.executable).parent / "consensus"), "run", *DEMO, *extra, "--out", str(out)]
    cpu = ProcessCPU(period_s=1.0)
    t0 = time.monotonic()
    with cpu:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            cpu.echo(line.rstrip())
            if "converged" in line or "estimate" in line:
                print("    " + line.rstrip(), flush=True)
        proc.wait()
    return {"wall_s": time.monotonic() - t0, "code": proc.returncode, "cpu": cpu.cores(cpu.t0, cpu.t1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the cores, as a run)")
    ap.add_argument("--slots", type=int, default=4, help="server slots (the demo: one per robot, 4)")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=160,
                    help="the runs' llm_max_tokens (an answer that long was cut)")
    ap.add_argument("--floor", type=float, nargs=2, metavar=("PP", "TG"),
                    help="use these prompt and generation tokens/s (an earlier measurement) instead of measuring")
    ap.add_argument("--run", type=Path, action="append", default=[], help="a run folder with transcripts.jsonl")
    ap.add_argument("--demo", action="store_true", help="run the demo's command here, then read its transcripts")
    ap.add_argument("--demo-runs", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], help="an extra --set of the demo's command")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    if args.floor:
        fl = {"pp": args.floor[0], "tg": args.floor[1]}
        print(f"floor (given): prompt {fl['pp']:.1f} tok/s, generation {fl['tg']:.1f} tok/s")
    else:
        fl = floor(args.threads, args.slots, args.prompt_tokens, args.gen_tokens, args.repeat)
        print(f"floor (llama.cpp's own timings, {fl['threads']} threads, {fl['slots']} slots): "
              f"prompt {fl['pp']:.1f} tok/s ({fl['prompt_tokens']} tokens, no cache), "
              f"generation {fl['tg']:.1f} tok/s ({fl['gen_tokens']} tokens), "
              f"{fl['slots']} generations at once {fl['tg_together']:.1f} tok/s in all", flush=True)
    runs = list(args.run)
    demos = []
    for k in range(args.demo_runs if args.demo else 0):
        out = Path(tempfile.mkdtemp(prefix="bench_llm_floor_")) / f"demo_{k}"
        extra = [a for s in args.set for a in ("--set", s)]
        d = demo(out, extra)
        demos.append(d)
        print(f"demo {k}: exit {d['code']}, {d['wall_s']:.0f} s wall; CPU by process (cores, steady): "
              + ", ".join(f"{n} {v:.2f}" for n, v in sorted(d["cpu"].items(), key=lambda kv: -kv[1])), flush=True)
        runs.append(out)
    ttc = []
    for run in runs:
        print(f"\n== {run}")
        res = rounds(run, fl, args.max_tokens)
        print_rounds(res, fl)
        if res["summary"].get("time_to_converge_s") is not None:
            ttc.append(res["summary"]["time_to_converge_s"])
    if ttc:
        print(f"\ntime to consensus: {', '.join(f'{t:.0f}' for t in ttc)} s (target <= 150 s in 3 of 3)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
