"""``consensus report RUN_DIR``: report.md and figures of a (finished or interrupted) sweep.

report.md holds, in this order:

1. a header: study and description; trial counts — planned (grid points x trials), recorded ok, recorded
   failed, not run yet — and the failure reasons tallied (most frequent first); median and total trial time;
2. the run: created, git revision, backend, model, python, command line (from manifest.json);
3. the resolved spec (spec.yaml);
4. ``trials.png``: ok / failed / not run per grid point (where in the sweep failures sit);
5. the study's own lines: ``Study.report(records, RUN_DIR)`` with the records of the sweep's trials in
   expansion order (failed ones included), which also writes the study's PNG figures.

A study report that raises does not lose the rest: report.md is written with the error in place of the
study's section, the traceback goes to experiment.log, and ``write_report`` raises ``ReportFailed``.
"""
from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

from consensus.errors import ConsensusError
from consensus.experiments.runner import (LOG_FILE, RESULTS_FILE, RunLog, load_run_spec, read_results,
                                          records_in_sweep, trial_log)
from consensus.experiments.spec import ExperimentSpec, dump_spec, grid, point_label, trial_key
from consensus.experiments.study import Study

REPORT_FILE = "report.md"
TRIALS_FIGURE = "trials.png"
MAX_REASONS = 10


class ReportFailed(ConsensusError):
    """The study's report raised; report.md was written with the error instead of the study's section."""


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return text.replace("|", "\\|")


def header_lines(spec: ExperimentSpec, study: Study, records: Sequence[dict], missing: int,
                 manifest: Mapping) -> list[str]:
    """Sections 1-3 of the module docstring."""
    ok = sum(r["status"] == "ok" for r in records)
    failed = len(records) - ok
    planned = len(records) + missing
    lines = [f"# Experiment `{spec.study}`", "", study.description, "",
             f"**Trials:** {planned} planned ({spec.grid_size()} grid point(s) x {spec.trials}): "
             f"**{ok} ok**, **{failed} failed**, {missing} not run yet.", ""]
    elapsed = [float(r.get("elapsed_s") or 0.0) for r in records]
    if elapsed:
        lines += [f"Trial time: median {statistics.median(elapsed):.4g} s, total {sum(elapsed):.4g} s "
                  "(summed over trials).", ""]
    if failed:
        tally = Counter(r.get("reason") or "(no reason)" for r in records if r["status"] != "ok")
        lines += ["## Failures", "", "| trials | reason |", "|---:|---|"]
        lines += [f"| {n} | {_cell(reason)} |" for reason, n in tally.most_common(MAX_REASONS)]
        rest = tally.most_common()[MAX_REASONS:]
        if rest:
            lines.append(f"| {sum(n for _, n in rest)} | ({len(rest)} other reasons) |")
        lines += ["", f"Tracebacks of trials that raised: `{LOG_FILE}`.", ""]
    lines += ["## Run", ""]
    for key in ("created", "git_revision", "backend", "model", "python", "platform"):
        if manifest.get(key):
            lines.append(f"- {key}: `{manifest[key]}`")
    if manifest.get("command"):
        lines.append(f"- command: `{' '.join(str(a) for a in manifest['command'])}`")
    lines += ["", "## Spec", "", "```yaml", dump_spec(spec).rstrip(), "```", ""]
    return lines


MAX_LABELLED_POINTS = 40   # beyond this the status figure draws areas instead of labelled bars


def trials_figure(spec: ExperimentSpec, records: Mapping[str, dict], out_png: Path) -> Path:
    """Stacked bars: ok / failed / not run per grid point."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    axes = list(spec.sweep)
    points = grid(spec)
    counts = []
    for point in points:
        statuses = [records[k]["status"] if k in records else "missing"
                    for k in (trial_key(point, axes, i) for i in range(spec.trials))]
        counts.append([statuses.count("ok"), statuses.count("failed"), statuses.count("missing")])
    labels = [point_label(p, axes) or "(no sweep)" for p in points]
    many = len(points) > MAX_LABELLED_POINTS
    fig = Figure(figsize=(16.0 if many else min(2.0 + 0.5 * len(points), 16.0), 3.6))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    series = (("ok", "tab:green"), ("failed", "tab:red"), ("not run", "lightgray"))
    if many:   # one bar per point would take minutes to draw and be unreadable: stacked areas, no point labels
        x = list(range(len(points)))
        ax.stackplot(x, *([c[j] for c in counts] for j in range(3)), colors=[c for _, c in series],
                     labels=[name for name, _ in series], step="mid")
        ax.set_xlabel(f"grid point (1..{len(points)}, in sweep order; see results.jsonl)")
    else:
        bottom = [0] * len(points)
        for j, (name, color) in enumerate(series):
            heights = [c[j] for c in counts]
            ax.bar(range(len(points)), heights, bottom=bottom, color=color, label=name)
            bottom = [b + h for b, h in zip(bottom, heights)]
        ax.set_xticks(range(len(points)), labels, rotation=45 if len(points) > 4 else 0, ha="right", fontsize=7)
    ax.set_ylabel("trials")
    ax.set_title(f"{spec.study}: trial status per grid point", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_png, format="png", dpi=110)
    return out_png


def write_report(run_dir: str | Path, studies: Mapping[str, Study]) -> Path:
    """Write RUN_DIR/report.md and the figures; return the report's path (module docstring)."""
    run_dir = Path(run_dir)
    spec = load_run_spec(run_dir, studies)
    study = studies[spec.study]
    all_records = read_results(run_dir / RESULTS_FILE)
    records, missing = records_in_sweep(spec, all_records)
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    lines = header_lines(spec, study, records, missing, manifest)
    if len(all_records) > len(records):
        lines += [f"({len(all_records) - len(records)} record(s) in {RESULTS_FILE} are not trials of this spec "
                  "and were left out.)", ""]
    trials_figure(spec, all_records, run_dir / TRIALS_FIGURE)
    lines += [f"![trial status per grid point]({TRIALS_FIGURE})", "", "## Results", ""]
    error = None
    try:
        with RunLog(run_dir / LOG_FILE):
            try:
                lines += [str(line) for line in study.report(records, run_dir)]
            except Exception:
                trial_log.exception("study %s: report failed", spec.study)
                raise
    except Exception as exc:  # noqa: BLE001 - the header and the data must survive a broken study report
        error = f"{type(exc).__name__}: {exc}"
        lines += [f"**The study's report failed:** `{_cell(error, 400)}` (traceback in `{LOG_FILE}`)."]
    path = run_dir / REPORT_FILE
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    if error:
        raise ReportFailed(f"study {spec.study}: report failed ({error}); {path} written without its section")
    return path
