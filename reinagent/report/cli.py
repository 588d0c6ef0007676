"""`reinagent report DIR... [--format markdown|html|json] [--plot FILE.png] [--output FILE]`.

Markdown and JSON import neither pandas nor matplotlib, so they start fast; only HTML and
--plot load matplotlib.
"""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["markdown", "html", "json"]), default="markdown",
              show_default=True, help="markdown tables, one self-contained HTML page, or JSON.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Also write success rate vs trial (PNG), one line per run.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the report here instead of stdout.")
@click.option("--max-tasks", type=click.IntRange(min=0), help="HTML: drill down into at most this many tasks per run.")
@click.option("--title", default="reinagent report", show_default=True, help="HTML: page title.")
def report(run_dirs, fmt, plot, output, max_tasks, title) -> None:
    """Summarise run directories (complete, in progress or killed); several runs are compared
    side by side. A folder holding runs (e.g. runs/) stands for every run in it."""
    from reinagent.report.loading import load

    runs = load(list(run_dirs))
    summaries = [r.summary for r in runs]
    if fmt == "json":
        # One run: one object (issue 2's contract); several: a list of them, in the order given.
        text = json.dumps(summaries[0] if len(summaries) == 1 else summaries, indent=2) + "\n"
    elif fmt == "html":
        from reinagent.report.html import report_html

        text = report_html(runs, title=title, max_tasks=max_tasks)
    else:
        from reinagent.report.markdown import report_markdown

        text = report_markdown(summaries).rstrip("\n") + "\n"
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(text, encoding="utf-8")
        click.echo(f"report: {output}", err=True)
    else:
        click.echo(text, nl=False)
    if plot:
        from reinagent.report.plots import save_learning_curve

        click.echo(f"plot: {save_learning_curve(summaries, plot)}", err=True)
