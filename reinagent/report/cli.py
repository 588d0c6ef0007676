"""`reinagent report DIR [--format markdown|json]`."""

from __future__ import annotations

import json

import click


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True)
def report(run_dirs, fmt) -> None:
    """Summarise one or more run directories (complete, in progress, or killed)."""
    from reinagent.report.summary import summarize, to_markdown

    summaries = [summarize(d) for d in run_dirs]
    if fmt == "json":
        click.echo(json.dumps(summaries[0] if len(summaries) == 1 else summaries, indent=2))
    else:
        click.echo("\n".join(to_markdown(s) for s in summaries))
