"""Shared helpers of the benchmark scripts: isolated ROS environment, per-run control-timing figures (the ticks'
start and the publish of their commands), CPU per process of a run (/proc) and the messages its recorder and bag lost.
"""
from __future__ import annotations

import json
import os
import random
import re
import resource
import struct
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))          # support.fake_openai_server (tests/support)


def isolate_ros() -> None:
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.randint(120, 200)))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"


def calibration(additions: int = 10_000_000, size: int = 1_000_000, repeats: int = 20) -> dict:
    """How fast this machine is, so that figures taken on different machines can be compared: the seconds of a
    pure-Python loop of ``additions`` integer additions (``python_s``; one thread, the interpreter's speed) and of
    ``repeats`` numpy passes of ``a * b + c`` over ``size`` float64 (``numpy_s``; memory bandwidth and vector
    units), each the best of three (the least disturbed). Takes ~2-4 s of one core."""
    import numpy as np

    def loop() -> float:
        t = time.perf_counter()
        s = 0
        for i in range(additions):
            s += i
        return time.perf_counter() - t

    a, b, c = (np.random.default_rng(k).random(size) for k in range(3))
    out = np.empty(size)

    def vec() -> float:
        t = time.perf_counter()
        for _ in range(repeats):
            np.multiply(a, b, out=out)
            np.add(out, c, out=out)
        return time.perf_counter() - t

    return {"python_s": min(loop() for _ in range(3)), "numpy_s": min(vec() for _ in range(3)),
            "additions": additions, "numpy_size": size, "numpy_repeats": repeats}


def calibration_line(cal: dict) -> str:
    return (f"machine: {cal['python_s']:.2f} s for {cal['additions'] / 1e6:g} M pure-Python additions, "
            f"{cal['numpy_s']:.3f} s for {cal['numpy_repeats']} numpy a*b+c over {cal['numpy_size'] / 1e6:g} M "
            f"float64 (best of 3; lower is faster), {os.cpu_count()} cores")


def timing(summary: dict) -> dict:
    """Control-timing figures over all robots of a run's summary: the ticks' start (``on_time_share``,
    ``max_late_ms``, as before) and the publish of their ``cmd_vel`` from the slot (``publish``:
    ``consensus.control.ticks.merge``: ``share`` within 10 ms, ``max_late_ms``, ``within_ms``)."""
    from consensus.control.ticks import merge

    per = [st for st in summary.get("per_robot", []) if st.get("control")]
    ticks = sum(st["control"]["ticks"] for st in per)
    on_time = sum(st["control"]["on_time"] for st in per)
    rates = [st["control"].get("rate_hz") or 0.0 for st in per]
    return {"robots_reporting": len(per), "ticks": ticks, "on_time_share": on_time / ticks if ticks else 0.0,
            "min_rate_hz": min(rates, default=0.0), "max_late_ms": max((st["control"]["max_late_ms"] for st in per),
                                                                      default=0.0),
            "publish": merge([st["control"] for st in per])}


class ChildCPU:
    """CPU seconds used by finished child processes between start() and stop(), as a share of wall time."""

    def __enter__(self):
        self.t0 = time.monotonic()
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.c0 = ru.ru_utime + ru.ru_stime
        return self

    def __exit__(self, *exc):
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu_s = ru.ru_utime + ru.ru_stime - self.c0
        self.wall_s = time.monotonic() - self.t0
        self.share = self.cpu_s / self.wall_s


# ---------------------------------------------------------------------------------------------- CPU per process
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
_PROGRESS = re.compile(r"progress t=\s*([0-9.]+)/")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    out += [int(c) for c in fh.read().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


def _cpu_s(pid: int) -> float | None:
    """utime + stime of process ``pid`` [s] (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S          # fields 14 and 15 of proc(5)


def _process_name(pid: int) -> str:
    """A run's process by its ROS node: ``fleet``, ``sim``, ``topology``, ``recorder``, ``bag_recorder``,
    ``llm_server``; one process per robot (``/robot_<i>/agent``) is ``robots``; anything else its command name."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            args = fh.read().decode(errors="replace").split("\0")
    except OSError:
        args = []
    node = next((a.split(":=", 1)[1] for a in args if a.startswith("__node:=")), None)
    ns = next((a.split(":=", 1)[1] for a in args if a.startswith("__ns:=")), "")
    if node is not None:
        return "robots" if re.fullmatch(r"/?robot_\d+", ns) else node
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return f"pid {pid}"


class ProcessCPU:
    """CPU of every process this one starts during the ``with`` block (the run's nodes, and their children),
    sampled from /proc/<pid>/stat every ``period_s`` in a thread, by process name (``_process_name``).

    ``echo`` is a function for ``run_ros(echo=...)``: it notes when the recorder's progress lines arrive, which gives
    the steady window (from the first progress line at run time >= ``warmup_s`` to the last one: start-up, the
    nodes' creation, and the end, writing the summary and figures, left out). Other lines with "error" or "warning"
    are printed, and a node's warning that it cannot keep up with the machine (``consensus.runs.keepup``).
    """

    def __init__(self, period_s: float = 0.25, warmup_s: float = 2.0) -> None:
        self.period, self.warmup = period_s, warmup_s
        self.samples: list[tuple[float, dict[int, float]]] = []
        self.names: dict[int, str] = {}
        self.progress: list[tuple[float, float]] = []       # (wall, run time) of the recorder's progress lines
        self._stop = threading.Event()

    def echo(self, line: str) -> None:
        m = _PROGRESS.search(line)
        if m:
            self.progress.append((time.monotonic(), float(m.group(1))))
        elif "error" in line.lower() or "warning" in line.lower() or "cannot keep up" in line:
            print(f"    {line}", file=sys.stderr, flush=True)

    def _sample(self) -> None:
        pids, todo = set(), _children(os.getpid())
        while todo:
            pid = todo.pop()
            if pid not in pids:
                pids.add(pid)
                todo += _children(pid)
        cpu = {}
        for pid in pids:
            c = _cpu_s(pid)
            if c is not None:
                cpu[pid] = c
                if pid not in self.names:
                    self.names[pid] = _process_name(pid)
        self.samples.append((time.monotonic(), cpu))

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def __enter__(self):
        self.t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-sampler")
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.t1 = time.monotonic()

    def _at(self, pid: int, t: float) -> float:
        """Process ``pid``'s CPU seconds at wall time ``t`` (the newest sample at or before it; 0 before its
        first)."""
        last = 0.0
        for ts, cpu in self.samples:
            if ts > t:
                break
            last = cpu.get(pid, last)
        return last

    def window(self) -> tuple[float, float, bool]:
        """(start, end, steady): the steady window, or the whole run when the progress lines do not give one."""
        steady = [w for w, t in self.progress if t >= self.warmup]
        if len(steady) >= 2 and steady[-1] - steady[0] >= 2.0:
            return steady[0], steady[-1], True
        return self.t0, self.t1, False

    def cores(self, start: float | None = None, end: float | None = None) -> dict[str, float]:
        """CPU by process name in cores (CPU seconds per wall second) over [start, end] (default: the steady
        window), plus ``total``."""
        if start is None or end is None:
            start, end, _ = self.window()
        span = max(end - start, 1e-9)
        out: dict[str, float] = {}
        for pid, name in self.names.items():
            out[name] = out.get(name, 0.0) + (self._at(pid, end) - self._at(pid, start)) / span
        out["total"] = sum(out.values())
        return out

    def report(self, robots: int) -> dict:
        """``steady`` (cores by process over the steady window), ``whole`` (over the whole run, sampled: the last
        fraction of a second of each process is missed), ``window_s``, ``steady_window`` (bool) and
        ``cpu_ms_per_robot_s``: CPU milliseconds per robot and second of the steady window (all processes, and the
        fleet's or robot processes' own)."""
        start, end, steady = self.window()
        st = self.cores(start, end)
        robot_cores = st.get("fleet", 0.0) + st.get("robots", 0.0)
        return {"steady": st, "whole": self.cores(self.t0, self.t1), "window_s": end - start, "steady_window": steady,
                "cpu_ms_per_robot_s": {"all": 1e3 * st["total"] / robots, "robots": 1e3 * robot_cores / robots}}


CPU_ORDER = ("sim", "fleet", "robots", "topology", "recorder", "bag_recorder", "llm_server")


def cpu_line(rep: dict) -> str:
    st = rep["steady"]
    names = [n for n in CPU_ORDER if n in st] + sorted(n for n in st if n not in CPU_ORDER and n != "total")
    per = "  ".join(f"{n} {st[n]:.2f}" for n in names)
    return (f"CPU [cores, {'steady' if rep['steady_window'] else 'whole run'} {rep['window_s']:.0f} s]: {per}  "
            f"total {st['total']:.2f} (whole run {rep['whole']['total']:.2f});  per robot-second "
            f"{rep['cpu_ms_per_robot_s']['all']:.1f} ms CPU (robots' own {rep['cpu_ms_per_robot_s']['robots']:.1f} ms)")


# ---------------------------------------------------------------------------------------------- lost messages
def _cdr_string(data: bytes) -> str | None:
    """The text of a serialized std_msgs/String (4-byte encapsulation, uint32 length with the NUL, bytes)."""
    try:
        little = data[1] == 1
        (n,) = struct.unpack_from("<I" if little else ">I", data, 4)
        return data[8: 8 + n - 1].decode()
    except (IndexError, struct.error, UnicodeDecodeError):
        return None


def lost_messages(run: Path, summary: dict) -> dict:
    """What the run's recorder and bag did not record, counted from the run directory (rclpy counts no drops):

    * ``recorder.plans_missing``: planning rounds missing from ``plans.jsonl`` (every round of a robot gives one
      record, numbered from 0; expected: up to the newest round the recorder saw, or the robot's final status's
      round count - 1, whichever is larger: the newest, perhaps unfinished, round excepted);
    * ``recorder.samples`` / ``samples_expected``: trajectory samples taken vs run time x ``state_rate_hz``;
    * ``bag.reasoning_missing``: gaps in each robot's planning rounds in the bag (between the first and last it has:
      the bag starts after the robots and ends after the recorder);
    * ``bag.cmd_vel_missing`` / ``cmd_vel_extra`` / ``cmd_vel_expected``: per robot, the commands its status
      messages in the bag say it published between two of its statuses there (``control.published``; the first
      0.5 s after its first command in the bag, the last 1 s before the bag's end) vs the ``cmd_vel`` messages the
      bag holds between the two (by receive time, half a control period after each status: a status and the
      command of its tick can arrive in either order; ``extra`` shows what ordering noise is left at the two ends).
    """
    n = int(summary.get("num_robots") or len(summary.get("per_robot", [])))
    out: dict = {"recorder": {}, "bag": {}}
    rec_rounds: dict[int, set] = {i: set() for i in range(n)}
    plans = run / "plans.jsonl"
    if plans.exists():
        for line in plans.read_text(errors="replace").splitlines():
            try:
                r = json.loads(line)
                rec_rounds.setdefault(int(r["robot"]), set()).add(int(r["round"]))
            except (ValueError, KeyError, TypeError):
                continue
    missing = 0
    for i, rounds in rec_rounds.items():
        st = summary["per_robot"][i] if i < len(summary.get("per_robot", [])) else {}
        upto = max(max(rounds, default=-1) + 1, int(st.get("round", 0)) - 1)
        missing += len(set(range(upto)) - rounds)
    out["recorder"]["plans_missing"] = missing
    out["recorder"]["samples"] = int(summary.get("samples", 0))
    rate = summary.get("state_rate_hz")
    if rate is None:
        try:
            from consensus.scenarios.aggregation.config import AggregationConfig
            from consensus.settings import params_file_fields

            rate = params_file_fields(run / "params.yaml", AggregationConfig).get("state_rate_hz")
        except (OSError, ValueError, KeyError, TypeError, ImportError):
            rate = None
    if rate:
        out["recorder"]["samples_expected"] = int(float(summary.get("duration_s", 0.0)) * float(rate)) + 1
    out["bag"] = _bag_lost(run / "bag", n)
    return out


#: half the default control period: where ``_bag_lost`` cuts the commands between two statuses
TICK_SHIFT_NS = 50_000_000


def _bag_lost(bag: Path, n: int) -> dict:
    from consensus import names
    from consensus.runs.bag import bag_file

    try:
        file = bag_file(bag)
    except Exception as exc:  # noqa: BLE001 - no bag (bag off) or unreadable: say so, the other figures stand
        return {"error": f"{type(exc).__name__}: {exc}"}
    from mcap.reader import make_reader

    cmd = {"/" + names.CMD_VEL.of(i): i for i in range(n)}             # a root-namespace run's bag: absolute names
    status = {"/" + names.PLANNER_STATUS.of(i): i for i in range(n)}
    reason = {"/" + names.PLANNER_REASONING.of(i): i for i in range(n)}
    cmd_times: dict[int, list[int]] = {i: [] for i in range(n)}
    stat: dict[int, list[tuple[int, int]]] = {i: [] for i in range(n)}         # (log time, published)
    rounds: dict[int, set] = {i: set() for i in range(n)}
    last = 0
    with file.open("rb") as stream:
        for _schema, channel, message in make_reader(stream).iter_messages(
                topics=[*cmd, *status, *reason], log_time_order=True):
            topic, last = channel.topic, max(last, message.log_time)
            if topic in cmd:
                cmd_times[cmd[topic]].append(message.log_time)
                continue
            text = _cdr_string(message.data)
            try:
                rec = json.loads(text) if text is not None else None
            except ValueError:
                rec = None
            if not isinstance(rec, dict):
                continue
            if topic in status:
                published = (rec.get("control") or {}).get("published")
                if published is not None:
                    stat[status[topic]].append((message.log_time, int(published)))
            elif "round" in rec:
                rounds[reason[topic]].add(int(rec["round"]))
    expected = missing = extra = robots = 0
    for i in range(n):
        # the window: from the first status 0.5 s after the robot's first command in the bag (the bag's
        # subscriptions match their publishers one by one at its start) to the last status 1 s before the bag's
        # end (the shutdown: what was still queued is not a writer that fell behind)
        first = cmd_times[i][0] if cmd_times[i] else None
        inside = [(t, p) for t, p in stat[i] if first is not None and first + 500_000_000 < t < last - 1_000_000_000]
        if len(inside) >= 2:
            robots += 1
            (t1, p1), (t2, p2) = inside[0], inside[-1]
            # a command and the status after it in the same tick go out ~1 ms apart on two topics, which the bag
            # may receive in either order: the window is counted half a control period later, between two ticks
            got = sum(1 for t in cmd_times[i] if t1 + TICK_SHIFT_NS < t <= t2 + TICK_SHIFT_NS)
            expected += p2 - p1
            missing += max(p2 - p1 - got, 0)
            extra += max(got - (p2 - p1), 0)
    gaps = sum((max(r) - min(r) + 1) - len(r) for r in rounds.values() if r)
    return {"cmd_vel_expected": expected, "cmd_vel_missing": missing, "cmd_vel_extra": extra,
            "reasoning_missing": gaps, "robots_with_status": robots}


def lost_line(lost: dict) -> str:
    rec, bag = lost["recorder"], lost["bag"]
    line = (f"lost: recorder plans {rec['plans_missing']}, samples {rec['samples']}/"
            f"{rec.get('samples_expected', '?')};  ")
    if "error" in bag:
        return line + f"bag not read ({bag['error']})"
    return line + (f"bag cmd_vel {bag['cmd_vel_missing']} of {bag['cmd_vel_expected']} (+{bag['cmd_vel_extra']} "
                   f"at window ends, {bag['robots_with_status']} robots), reasoning {bag['reasoning_missing']}")


def clock_line(summary: dict) -> str:
    """Where a fleet clock's tick went (``consensus.ros.fleet.FleetClock.stats``, from the first robot's status):
    mean and largest wall time of each phase [ms]."""
    clocks = [(st.get("control") or {}).get("clock") for st in summary.get("per_robot", [])]
    clocks = [c for c in clocks if isinstance(c, dict)]
    if not clocks:
        return "clock: no fleet clock figures"
    c = max(clocks, key=lambda c: c.get("robots", 0))
    parts = "  ".join(f"{k} {c[f'{k}_ms']['mean']:.2f} (max {c[f'{k}_ms']['max']:.1f})"
                      for k in ("prepare", "step", "publish", "after") if f"{k}_ms" in c)
    return f"clock [ms per tick, mean (max)], {c['robots']} robots, {c['ticks']} ticks: {parts}"
