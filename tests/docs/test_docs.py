"""The docs stay true: every command in README.md and docs/*.md is run here or says why it is not.

Every fenced block whose info string is ``bash`` (or ``sh``, ``shell``, ``console``) holds commands, one per line
(``\\`` continues a line; comment-only lines are prose). Each command is either

* **run by this test**: listed in ``RUN`` below with the claims the docs make about it (exit status, the files it
  writes, key figures within the stated tolerance). The commands run in document order (README.md, then docs/*.md
  by name), as a new user would type them, in one temporary folder (so ``runs/...`` lands there, and two commands
  that write the same run folder collide here as they would for the user); or
* **tagged** with a visible reason it is not run: ``[not run: REASON]`` in the command's trailing comment, or, for a
  whole block, an HTML comment ``<!-- doc-test: not run: REASON -->`` on the line before the fence. REASON starts
  with one of ``REASONS`` (``endpoint``, ``embedded LLM``, ``GPU``, ``Docker``, ``gz``, ``display``, ``rosbag2``,
  ``ROS 2 from apt``, ``long``, ``placeholder``, ``recorded run``, ``robots``) or ``in tests/<folder>/<file>.py``
  naming the test that runs it (the file must exist).

A command that is neither fails ``test_every_doc_command_is_run_or_tagged``, and a ``RUN`` entry that no document
holds any more fails ``test_run_table_matches_the_docs``. Commands outside a shell fence (an indented block or an
unlabelled fence) fail ``test_commands_sit_in_shell_fences``.

Figures the docs quote from a preset's output are checked against that output: the heuristic disaster batch's
per-condition table in docs/disaster.md sits between ``<!-- generated: disaster-conditions -->`` and
``<!-- end generated -->`` and must equal the one ``consensus experiment disaster`` writes; the inline
"implicit CR ... vs explicit CR ..." figures in README.md, docs/disaster.md and docs/scenarios.md must match its
Overall row.
``python tests/docs/test_docs.py --write`` runs the preset and rewrites those regions.

README.md is the front door: at most ``README_MAX_LINES`` lines; every relative link in it and in the pages that
took what moved out of it (``FRONT_DOOR_PAGES``) points to a file that exists (and, with ``#anchor`` into a Markdown
file, to a heading of it). README holds no map of the code of its own: it links docs/architecture.md, whose map
tests/docs/test_architecture.py checks.

ROS commands (a 6-robot ring, ~45 s of wall time but little CPU) start in the background first and are checked
last; the rest take ~30 s on a quiet 2-core machine. Tests that need a tool a machine may lack skip with the reason.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"bash", "sh", "shell", "console"}
REASONS = ("endpoint", "embedded LLM", "GPU", "Docker", "gz", "display", "rosbag2", "ROS 2 from apt", "long",
           "placeholder", "recorded run", "robots")
TAG = re.compile(r"\[not run: ([^\]]+)\]")
BLOCK_TAG = re.compile(r"<!--\s*doc-test:\s*not run:\s*(.+?)\s*-->")
FENCE = re.compile(r"^(\s*)(```|~~~)\s*([\w-]*)(.*)$")
COMMAND_WORDS = r"(?:consensus|ros2|make|pip|colcon|xvfb-run|source|export|rviz2|python) "
TABLES = ROOT.parent / "shared" / "data" / "naming-game" / "q_tables.json"


@dataclass
class DocCommand:
    file: str
    line: int
    text: str                    # the command as a shell reads it (continuations joined, comment removed)
    raw: str                     # the lines as written (with comments)
    reason: str | None           # why it is not run (tag), or None

    @property
    def key(self) -> str:
        return " ".join(shlex.split(self.text))


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _strip_comment(line: str) -> str:
    """``line`` without its shell comment (a ``#`` at a word start outside quotes)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=False)
    lex.whitespace_split, lex.commenters = True, "#"
    try:
        words = list(lex)
    except ValueError:
        return line.strip()
    if not words:
        return ""
    # cut the raw text after the last word's end: find where the comment starts
    quote, prev = None, " "
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and prev.isspace():
            return line[:i].rstrip()
        prev = ch
    return line.rstrip()


def doc_blocks():
    """(file, first line, lang, block reason, [lines]) of every fenced block."""
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
            prev = lines[i - 1] if i else ""
            reason = BLOCK_TAG.search(prev)
            body, j = [], i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
                j += 1
            yield _rel(doc), i + 2, lang, reason.group(1) if reason else None, body
            i = j + 1


def doc_commands() -> list[DocCommand]:
    out = []
    for file, first, lang, block_reason, body in doc_blocks():
        if lang not in SHELL:
            continue
        k = 0
        while k < len(body):
            start, raw = k, [body[k]]
            while raw[-1].rstrip().endswith("\\") and k + 1 < len(body):
                k += 1
                raw.append(body[k])
            k += 1
            code = " ".join(_strip_comment(r).rstrip().rstrip("\\").strip() for r in raw).strip()
            if not code:
                continue
            tag = TAG.search(" ".join(raw))
            out.append(DocCommand(file, first + start, code, "\n".join(raw),
                                  tag.group(1) if tag else block_reason))
    return out


def reason_problem(reason: str) -> str | None:
    """Why ``reason`` is not an accepted tag (None if it is)."""
    m = re.match(r"in (tests/\S+\.py)", reason)
    if m:
        return None if (ROOT / m.group(1)).is_file() else f"{m.group(1)} does not exist"
    if any(reason.startswith(r) for r in REASONS):
        return None
    return f"unknown reason '{reason}' (start it with one of: {', '.join(REASONS)}, or 'in tests/<folder>/<file>.py')"


# ------------------------------------------------------------------------------------------ what a run must show
@dataclass
class Result:
    code: int
    out: str
    err: str
    seconds: float


def _summary(cwd: Path, run: str) -> dict:
    return json.loads((cwd / run / "summary.json").read_text())


def _run_dir(res: Result) -> Path:
    """The run folder a ``consensus run`` printed (``results: PATH``)."""
    found = re.findall(r"^results: (.+)$", res.out, re.M)
    assert found, f"no 'results: PATH' line in\n{res.out}"
    return Path(found[-1])


def _files(cwd: Path, run: str, *names: str) -> None:
    missing = [n for n in names if not (cwd / run / n).is_file()]
    assert not missing, f"{run}: the docs name {missing}, the run wrote {sorted(p.name for p in (cwd / run).iterdir())}"


def check_ring6(cwd: Path, res: Result) -> None:
    s = _summary(cwd, "runs/ring6")
    # README: with the default filter the robots agree on one meeting point (within 0.1 m), pack around it within
    # the packing radius, never closer than their clearance, and the run ends once settled, well before its cap
    assert s["converged"] is True and s["converged_on"] == "targets" and s["target_spread_m"] < 0.1, s
    assert s["farthest_from_consensus_m"] <= s["packing_radius_m"] and s["min_pair_distance_m"] >= s["clearance_m"]
    assert s["end_reason"] == "converged_and_settled", s
    assert "converged: True" in res.out and "meeting points within 0.0" in res.out
    assert "ended: converged_and_settled" in res.out
    _files(cwd, "runs/ring6", "manifest.json", "params.yaml", "trajectories.csv", "plans.jsonl", "summary.json",
           "paths.png", "paths.svg", "planned_vs_actual.png")
    assert (cwd / "runs/ring6/logs").is_dir() and (cwd / "runs/ring6/bag").is_dir()


def check_leader_follower(cwd: Path, res: Result) -> None:
    assert "converged: True" in res.out, res.out


def check_disaster_headless(cwd: Path, res: Result) -> None:
    run = _run_dir(res)
    assert run.parent == cwd / "runs" and run.name.startswith("disaster-"), run     # default: runs/disaster-<time>
    _files(cwd, str(run.relative_to(cwd)), "manifest.json", "rounds.jsonl", "summary.json",
           "coverage_deviation.png")
    assert "coverage" in res.out.lower()


def check_disaster_batch(cwd: Path, res: Result) -> None:
    run = "runs/disaster-batch"
    _files(cwd, run, "report.md", "results.jsonl", "fig3_coverage_rounds.png", "fig5_deviation_coverage.png")
    report = (cwd / run / "report.md").read_text()
    check_disaster_quotes(report)


def check_list(cwd: Path, res: Result) -> None:
    for preset in ("consensus-1d", "disaster", "naming-game-bias", "theory-model", "allocation-reliability"):
        assert preset in res.out, res.out


def check_fig4(cwd: Path, res: Result) -> None:
    _files(cwd, "runs/fig4", "manifest.json", "spec.yaml", "results.jsonl", "report.md", "fig4_bias_vs_agents.png")
    records = [json.loads(line) for line in (cwd / "runs/fig4/results.jsonl").read_text().splitlines()]
    assert len(records) == 2400 and all(r["status"] == "ok" for r in records)     # "average planner: 2,400 trials"


def check_report(cwd: Path, res: Result) -> None:
    assert (cwd / "runs/fig4/report.md").stat().st_size > 500


def check_naming_run(cwd: Path, res: Result) -> None:
    s = json.loads((_run_dir(res) / "summary.json").read_text())
    assert s["N"] == 100 and s["runs"] == 100 and s["converged"] == 100, s
    assert re.search(r"collective bias toward '\w+': \d\.\d{3} ± \d\.\d{3}", res.out), res.out


def check_fig2(cwd: Path, res: Result) -> None:
    _files(cwd, "runs/ng-fig2", "report.md", "results.jsonl")


def check_naming_table(cwd: Path, res: Result) -> None:
    assert "toward 'his'" in res.out and "converged: 1000/1000" in res.out, res.out


def check_naming_robots_headless(cwd: Path, res: Result) -> None:
    assert re.search(r"converged on word \d .* at round \d+; \d+ interactions, success rate \d\.\d{3}", res.out), \
        res.out


def check_gz(cwd: Path, res: Result) -> None:
    assert (cwd / "runs/gz/world.sdf").is_file() and (cwd / "runs/gz/bridge.yaml").is_file()


def needs_tables(cwd: Path) -> str | None:
    return None if TABLES.is_file() else f"no published q tables at {TABLES} (a user's clone has no ../shared)"


def needs_ros(cwd: Path) -> str | None:
    try:
        import rclpy  # noqa: F401
    except ImportError:
        return "rclpy not installed (pip install -r requirements/ros-kilted.txt)"
    return None


@dataclass
class Run:
    check: Callable[[Path, Result], None] | None = None
    background: bool = False         # ROS runs: started first, checked last
    needs: Callable[[Path], str | None] | None = None
    env: dict = field(default_factory=dict)


#: every command the docs test runs, by its text as a shell reads it (``DocCommand.key``)
NAMING = dict(needs=needs_tables, env={"CONSENSUS_NAMING_TABLES": str(TABLES)})
RUN: dict[str, Run] = {
    ". .venv/bin/activate": Run(),
    "consensus run aggregation --robots 6 --topology ring --planner average --duration 120 --settle 5 "
    "--out runs/ring6": Run(check_ring6, background=True, needs=needs_ros),
    "consensus run aggregation --robots 10 --topology leader_follower --planner average --headless":
        Run(check_leader_follower),
    "consensus run disaster --headless": Run(check_disaster_headless),
    "consensus run disaster --headless --mode explicit --strategy majority --roles high --volatility high --seed 3":
        Run(check_disaster_headless),
    "consensus run disaster --headless --mode explicit --strategy spoke_wheel --roles high --volatility high":
        Run(check_disaster_headless),
    "consensus run disaster --headless --baseline no_interaction --seed 3 --set report_noise=0.1":
        Run(check_disaster_headless),
    "consensus experiment disaster --out runs/disaster-batch": Run(check_disaster_batch),
    "consensus experiment --list": Run(check_list),
    "consensus experiment consensus-1d --out runs/fig4": Run(check_fig4),
    "consensus report runs/fig4": Run(check_report),
    "consensus run naming-game --agents 100 --set policy=memory_invariant:0.55": Run(check_naming_run),
    "consensus experiment naming-game-bias --out runs/ng-fig2": Run(check_fig2, **NAMING),
    "consensus experiment naming-game-trajectories --out runs/ng-fig1":
        Run(lambda cwd, res: _files(cwd, "runs/ng-fig1", "report.md", "results.jsonl"), **NAMING),
    "consensus experiment naming-game-time --out runs/ng-fig4":
        Run(lambda cwd, res: _files(cwd, "runs/ng-fig4", "report.md", "results.jsonl"), **NAMING),
    "consensus run naming-game --agents 24 --set policy=table:$CONSENSUS_NAMING_TABLES#gpt-4o/his,her --set runs=1000":
        Run(check_naming_table, **NAMING),
    "consensus run naming-game-robots --robots 5 --seed 4 --headless": Run(check_naming_robots_headless),
    "consensus gazebo-world --scenario disaster --robots 3 --out runs/gz": Run(check_gz),
}


# ------------------------------------------------------------------------------------------ quoted figures
GENERATED = re.compile(r"<!-- generated: (?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- end generated -->", re.S)
QUOTE = re.compile(r"implicit CR (?P<icr>[\d.]+) / MP (?P<imp>[\d.]+) / RD (?P<ird>[\d.]+) vs explicit CR "
                   r"(?P<ecr>[\d.]+) / MP (?P<emp>[\d.]+) / RD (?P<erd>[\d.]+)".replace(" ", r"\s+"))
QUOTED_IN = ("README.md", "docs/disaster.md", "docs/scenarios.md")


def disaster_conditions(report: str) -> str:
    """The per-condition table of a disaster report, as docs/disaster.md shows it."""
    lines = report.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| Condition | n | CR | MP | RD |"))
    table = []
    for ln in lines[start:]:
        if not ln.startswith("|"):
            break
        table.append(ln.replace("| -", "| −"))
    return "\n".join(table) + "\n"


def overall_row(report: str) -> dict[str, str]:
    row = next(ln for ln in report.splitlines() if ln.startswith("| **Overall** |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    ecr, emp, erd, icr, imp, ird = cells[2:8]
    return dict(icr=icr, imp=imp, ird=ird, ecr=ecr, emp=emp, erd=erd)


def check_disaster_quotes(report: str) -> None:
    want = overall_row(report)
    for name in QUOTED_IN:
        text = (ROOT / name).read_text()
        quotes = [m.groupdict() for m in QUOTE.finditer(text)]
        assert quotes, f"{name}: no 'implicit CR ... vs explicit CR ...' quote of the disaster batch"
        for q in quotes:
            assert q == want, f"{name} quotes {q}, consensus experiment disaster gives {want} " \
                              f"(tests/docs/test_docs.py --write)"
    body = GENERATED.search((ROOT / "docs/disaster.md").read_text())
    assert body and body.group("name") == "disaster-conditions", "docs/disaster.md: generated table missing"
    assert body.group("body") == disaster_conditions(report), \
        "docs/disaster.md's per-condition table differs from the batch's report " \
        "(python tests/docs/test_docs.py --write)"


def write_generated(report: str) -> None:
    want = overall_row(report)
    for name in QUOTED_IN:
        path = ROOT / name
        text = QUOTE.sub(lambda m: "implicit CR {icr} / MP {imp} / RD {ird} vs explicit CR {ecr} / MP {emp} / RD "
                                   "{erd}".format(**want), path.read_text())
        if name == "docs/disaster.md":
            text = GENERATED.sub(lambda m: f"<!-- generated: {m.group('name')} -->\n{disaster_conditions(report)}"
                                           f"<!-- end generated -->", text)
        path.write_text(text)


# ------------------------------------------------------------------------------------------ the tests
def test_every_doc_command_is_run_or_tagged():
    problems = []
    for cmd in doc_commands():
        if cmd.key in RUN:
            if cmd.reason:
                problems.append(f"{cmd.file}:{cmd.line}: run by the docs test but tagged '{cmd.reason}': {cmd.text}")
            continue
        if not cmd.reason:
            problems.append(f"{cmd.file}:{cmd.line}: neither run by tests/docs/test_docs.py (RUN) nor tagged "
                            f"[not run: REASON]: {cmd.text}")
        elif (why := reason_problem(cmd.reason)) is not None:
            problems.append(f"{cmd.file}:{cmd.line}: {why}")
    assert not problems, "\n".join(problems)


def test_run_table_matches_the_docs():
    keys = {cmd.key for cmd in doc_commands()}
    stale = [key for key in RUN if key not in keys]
    assert not stale, f"RUN lists commands no document holds: {stale}"


def test_commands_sit_in_shell_fences():
    problems = []
    for file, first, lang, _, body in doc_blocks():
        if lang not in SHELL:
            problems += [f"{file}:{first + i}: a command in a '{lang or 'unlabelled'}' block (use ```bash)"
                         for i, ln in enumerate(body) if re.match(COMMAND_WORDS, ln.strip())]
    for doc in DOCS:
        inside = False
        for i, ln in enumerate(doc.read_text().splitlines(), 1):
            if FENCE.match(ln):
                inside = not inside
            elif not inside and re.match(r"^ {4,}" + COMMAND_WORDS, ln):
                problems.append(f"{_rel(doc)}:{i}: an indented command block (use a ```bash fence)")
    assert not problems, "\n".join(problems)


def test_the_tag_parser_sees_comments_and_continuations(tmp_path, monkeypatch):
    doc = tmp_path / "x.md"
    doc.write_text("<!-- doc-test: not run: GPU -->\n```bash\nconsensus a --b \\\n    --c   # [not run: endpoint]\n"
                   "consensus d \"e#f\"  # plain comment\n```\n```bash\n# only prose\nconsensus g\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "DOCS", [doc])
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    got = [(c.text, c.reason) for c in doc_commands()]
    assert got == [("consensus a --b --c", "endpoint"), ('consensus d "e#f"', "GPU"), ("consensus g", None)]
    assert reason_problem("long, ~47 s") is None and reason_problem("lazy") is not None
    assert reason_problem("in tests/nope.py") == "tests/nope.py does not exist"


README_MAX_LINES = 200
#: the pages that took what moved out of README.md (issue 30)
FRONT_DOOR_PAGES = ("docs/install.md", "docs/aggregation.md", "docs/nodes.md", "docs/scenarios.md", "docs/testing.md")
LINK = re.compile(r"!?\[[^\]]*\]\(([^()\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    inside, out = False, set()
    for ln in doc.read_text().splitlines():
        if FENCE.match(ln):
            inside = not inside
        elif not inside and (m := re.match(r"^#{1,6}\s+(.*)$", ln)):
            out.add(_slug(m.group(1)))
    return out


def broken_links(doc: Path) -> list[str]:
    """The relative links of ``doc`` (outside code fences) whose file, or heading, does not exist."""
    problems, inside = [], False
    for i, ln in enumerate(doc.read_text().splitlines(), 1):
        if FENCE.match(ln):
            inside = not inside
            continue
        if inside:
            continue
        for target in LINK.findall(ln):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):           # http:, https:, mailto:, ...
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            if not file.exists():
                problems.append(f"{_rel(doc)}:{i}: {target}: no such file")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                problems.append(f"{_rel(doc)}:{i}: {target}: no heading '#{anchor}' in {_rel(file)}")
    return problems


def test_readme_is_a_short_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move " \
                                           f"detail into docs/"
    text = "\n".join(lines)
    assert "](docs/architecture.md)" in text, "README.md must link the map of the code, docs/architecture.md"
    assert "\nsrc/consensus/" not in text, "README.md holds a map of the code: link docs/architecture.md instead"


@pytest.mark.parametrize("name", ["README.md", *FRONT_DOOR_PAGES])
def test_relative_links_point_to_existing_files(name):
    assert (ROOT / name).is_file(), f"{name} is gone: update FRONT_DOOR_PAGES"
    problems = broken_links(ROOT / name)
    assert not problems, "\n".join(problems)


def test_the_link_checker_finds_a_broken_link(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "there.md").write_text("# A `code` heading, with commas\n")
    doc = tmp_path / "x.md"
    doc.write_text("[ok](there.md) [ok](there.md#a-code-heading-with-commas) [web](https://example.org/none)\n"
                   "![missing](figures/none.png) [bad](there.md#nope)\n```\n[in code](nowhere.md)\n```\n")
    assert broken_links(doc) == ["x.md:2: figures/none.png: no such file",
                                 "x.md:2: there.md#nope: no heading '#nope' in there.md"]


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Run every ``RUN`` command in document order in one folder; returns {key: Result or skip reason}."""
    cwd = tmp_path_factory.mktemp("docs")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("CONSENSUS_NAMING_TABLES", None)
    (cwd / ".venv" / "bin").mkdir(parents=True)
    (cwd / ".venv" / "bin" / "activate").write_text("# the test's interpreter is the venv\n")
    order, text = [], {}
    for cmd in doc_commands():
        if cmd.key in RUN and cmd.key not in order:
            order.append(cmd.key)
            text[cmd.key] = cmd.text            # what the user types (quotes and $VARIABLES as written)
    results: dict[str, object] = {}
    background = {}
    for key in sorted(order, key=lambda k: not RUN[k].background):
        spec = RUN[key]
        skip = spec.needs(cwd) if spec.needs else None
        if skip:
            results[key] = skip
            continue
        start = time.monotonic()
        proc = subprocess.Popen(["bash", "-c", text[key]], cwd=cwd, env={**env, **spec.env}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if spec.background:
            background[key] = (proc, start)
            continue
        try:
            out, err = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results[key] = Result(proc.returncode, out, err, time.monotonic() - start)
        print(f"docs: {results[key].seconds:5.1f} s  exit {proc.returncode}  {key}")     # shown with -s
    for key, (proc, start) in background.items():
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        results[key] = Result(proc.returncode, out, err, time.monotonic() - start)
    return cwd, results


@pytest.mark.parametrize("key", list(RUN))
def test_doc_command_does_what_the_docs_say(ran, key):
    cwd, results = ran
    res = results[key]
    if isinstance(res, str):
        pytest.skip(res)
    assert res.code == 0, f"{key}\nexit {res.code}\n{res.err[-2000:]}"
    if RUN[key].check:
        RUN[key].check(cwd, res)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/docs/test_docs.py --write   "
                 "(runs the disaster preset, rewrites the quoted figures)")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([Path(sys.executable).parent / "consensus", "experiment", "disaster", "--out",
                        f"{tmp}/batch", "-q"], check=True)
        write_generated((Path(tmp) / "batch" / "report.md").read_text())
    print("rewrote the disaster figures in", ", ".join(QUOTED_IN))
