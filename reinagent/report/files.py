"""The report files a finished `reinagent run` or `resume` leaves in its run directory:
report.md (the markdown tables) and report.html (the self-contained page with curves, drill-down
and search trees), so the page the README shows needs no second command."""

from __future__ import annotations

from pathlib import Path

REPORT_FILES = ("report.md", "report.html")


def write_report_files(run_dir: str | Path) -> list[Path]:
    """Write report.md and report.html into `run_dir` (atomically: a reader never sees half a
    page) and return their paths."""
    from reinagent.report.html import report_html
    from reinagent.report.loading import load
    from reinagent.report.markdown import report_markdown

    run_dir = Path(run_dir)
    runs = load([run_dir])
    texts = {"report.md": report_markdown([r.summary for r in runs]),
             "report.html": report_html(runs, title=f"reinagent report: {run_dir.name}")}
    written = []
    for name in REPORT_FILES:
        path = run_dir / name
        partial = path.with_name(f".{name}.partial")
        partial.write_text(texts[name], encoding="utf-8")
        partial.replace(path)
        written.append(path)
    return written
