"""The report files a finished `reinagent run` or `resume` leaves in its run directory:
report.md (the markdown tables) and report.html (the self-contained page with curves, drill-down
and search trees), so the page the README shows needs no second command."""

from __future__ import annotations

from pathlib import Path

REPORT_FILES = ("report.md", "report.html")


def write_report_files(run_dir: str | Path) -> list[Path]:
    """Write report.md and report.html into `run_dir` and return their paths: each under a fresh
    name, then renamed over its own (runfiles.replace_file), so a reader never sees half a page and
    a link planted at either name (or at any scratch name) is never written through. Both are
    `plain` text, as `reinagent report` prints them: `cat report.md` must not drive a terminal."""
    from reinagent.report.html import report_html
    from reinagent.report.loading import load
    from reinagent.report.markdown import report_markdown
    from reinagent.runfiles import replace_file
    from reinagent.terminal import plain

    run_dir = Path(run_dir)
    runs = load([run_dir])
    texts = {"report.md": report_markdown([r.summary for r in runs]),
             "report.html": report_html(runs, title=f"reinagent report: {run_dir.name}")}
    written = []
    for name in REPORT_FILES:
        written.append(replace_file(run_dir / name, plain(texts[name])))
    return written
