"""`reinagent report DIR... [--format markdown|html|json] [--plot FILE.png] [--output FILE]`.

Markdown and JSON import neither pandas nor matplotlib, so they start fast; only HTML and
--plot load matplotlib. A directory holding an RL training log (report/training.py) adds its
loss, reward and KL curves: a section of the HTML page, a table in markdown, and with --plot a
second figure FILE-training.png.
"""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["markdown", "html", "json"]), default="markdown",
              show_default=True, help="markdown tables, one self-contained HTML page, or JSON.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Also write success rate vs trial (PNG), one line per run.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the report here instead of stdout.")
@click.option("--max-tasks", type=click.IntRange(min=0), help="HTML: drill down into at most this many tasks per run.")
@click.option("--title", default="reinagent report", show_default=True, help="HTML: page title.")
@click.option("--store", help="The store holding the runs (sqlite:///..., postgresql://..., mongodb://..., a directory of runs); the arguments are then run ids.")
def report(run_dirs, fmt, plot, output, max_tasks, title, store) -> None:
    """Summarise run directories (complete, in progress or killed); several runs are compared
    side by side. A folder holding runs (e.g. runs/) stands for every run in it; a directory
    with an RL training log (train_metrics.jsonl or metrics.jsonl) adds its training curves.
    Runs in a store: `reinagent report --store URL ID...` or `reinagent report URL [ID...]`
    (no id: every run of the store)."""
    from reinagent.report.loading import holds_runs, load
    from reinagent.report.training import find_training_logs
    from reinagent.stores.report import name_store_run, store_runs, store_url_of

    if not run_dirs and store is None:
        raise click.UsageError("give run directories (or a folder of runs such as runs/), or --store URL "
                               "for every run of a store")
    url, _ = store_url_of(run_dirs, store)
    # a store's runs are exported to a temporary folder, removed when the command ends
    run_dirs = click.get_current_context().with_resource(store_runs(run_dirs, store))

    run_paths, training = [], []
    for path in run_dirs:
        logs = find_training_logs([path])
        training += logs
        if not logs or holds_runs(path):
            run_paths.append(path)  # not a run and no log either: load() names the problem
    runs = load(run_paths) if run_paths else []
    for run in runs if url else []:
        name_store_run(run.summary, url)  # the store and run id, not the temporary copy's folder
    summaries = [r.summary for r in runs]
    if fmt == "json":
        # One run: one object (issue 2's contract); several: a list of them, in the order given.
        # Training logs alone: their steps, one object per log.
        items = summaries or [{"training_log": str(log.path), "steps": log.rows} for log in training]
        if len(summaries) > 1:  # each pair's McNemar over the tasks both failed at trial 1
            from reinagent.report.labels import unique_labels
            from reinagent.report.significance import retry_comparisons

            comparisons = retry_comparisons(summaries)
            for label, s in zip(unique_labels(summaries), summaries):
                s["retry_comparisons"] = [c for c in comparisons if label in (c["base"], c["other"])]
        from reinagent.records import finite_or_none

        # strict JSON: Python would print NaN/Infinity, which no other JSON reader accepts
        text = json.dumps(finite_or_none(items[0] if len(items) == 1 else items), indent=2, allow_nan=False) + "\n"
    elif fmt == "html":
        from reinagent.report.html import report_html

        text = report_html(runs, title=title, max_tasks=max_tasks, training=training)
    else:
        from reinagent.report.markdown import report_markdown
        from reinagent.report.training import training_markdown

        parts = [report_markdown(summaries)] if summaries else []
        parts += [training_markdown(training)] if training else []
        text = "\n".join(p.rstrip("\n") + "\n" for p in parts)
    if fmt != "json":  # JSON escapes control characters itself
        from reinagent.terminal import plain

        text = plain(text)  # run text must not drive a terminal (stdout, or `cat` of the file)
    if output:
        from reinagent.runfiles import replace_file

        Path(output).parent.mkdir(parents=True, exist_ok=True)
        replace_file(output, text)  # often into a run directory: never through a link planted there
        click.echo(f"report: {output}", err=True)
    else:
        click.echo(text, nl=False)
    if plot:
        from reinagent.report.plots import save_learning_curve
        from reinagent.report.training import save_training_plot

        if summaries:
            click.echo(f"plot: {save_learning_curve(summaries, plot)}", err=True)
        for i, log in enumerate(training):
            path = Path(plot)
            name = f"{path.stem}-training{'' if len(training) == 1 else f'-{i + 1}'}{path.suffix or '.png'}"
            click.echo(f"plot: {save_training_plot(log, path.with_name(name))}", err=True)
