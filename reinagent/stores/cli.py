"""`reinagent store init|ls|export|import|rm`: create a store's schema, list the runs of a store,
copy one out to an ordinary run directory (which `reinagent report` reads), copy a run directory in,
delete a run."""

from __future__ import annotations

import time
from pathlib import Path

import click

from reinagent.terminal import shell_word


@click.group()
def store() -> None:
    """Runs in a store (a directory of runs, sqlite:///, postgresql://, mongodb://): init, ls, export, import, rm."""


@store.command(name="init")
@click.argument("url")
def init(url: str) -> None:
    """Create a store's tables and indexes (a PostgreSQL database must exist: `createdb NAME`) and
    say what was created; run again, it changes nothing and says so."""
    from reinagent.stores import SCHEMA_VERSION, is_directory, open_store

    if is_directory(url):
        folder = Path(url.removeprefix("file://"))
        existed = folder.is_dir()
        folder.mkdir(parents=True, exist_ok=True)
        click.echo(f"{'folder of runs ' + str(folder) + ' exists' if existed else 'created folder ' + str(folder)}; "
                   f"run with --store {url}")
        return
    with open_store(url, create=True) as db:
        created = getattr(db, "created_tables", None)
        runs = len(db.run_ids())
        if created is None:  # MongoDB: collections appear with their first document; indexes now
            click.echo(f"{db.url}: indexes ready (schema version {SCHEMA_VERSION}), {runs} run(s); "
                       f"run with --store {db.url}")
        elif created:
            click.echo(f"{db.url}: created tables {', '.join(created)} and their indexes (schema version "
                       f"{SCHEMA_VERSION}); run with --store {db.url}")
        else:
            click.echo(f"{db.url}: the reinagent tables were already there (schema version {SCHEMA_VERSION}, "
                       f"{runs} run(s)); nothing changed")


@store.command(name="ls")
@click.argument("url")
def ls(url: str) -> None:
    """List the runs of a store: id, benchmark, agent, strategy, start time, records, tasks solved."""
    from reinagent.stores import open_store

    with open_store(url, create=False) as db:
        runs = db.list_runs()
        if not runs:
            click.echo(f"no runs in {db.url}", err=True)
            return
        click.echo(f"{'run id':<56} {'benchmark':<10} {'agent':<12} {'strategy':<27} {'started':<16} records solved")
        for r in runs:
            started = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at))
            click.echo(f"{r.run_id:<56} {r.benchmark:<10} {r.agent:<12} {r.strategy:<27} {started:<16} "
                       f"{r.records:>7} {r.solved:>6}" + (f" {r.note}" if r.note else ""))


@store.command(name="export")
@click.argument("url")
@click.argument("run_id")
@click.argument("run_dir", type=click.Path(file_okay=False))
def export(url: str, run_id: str, run_dir: str) -> None:
    """Write run RUN_ID of the store to RUN_DIR, a new run directory (every record and supersede
    marker in order, and the spec with its history)."""
    from reinagent.stores import open_store
    from reinagent.stores.file import write_run_dir

    with open_store(url, create=False) as db:
        spec, entries = db.read_spec(run_id), db.read_log(run_id)
    write_run_dir(Path(run_dir), spec, entries)
    click.echo(f"exported {run_id}: {len(entries)} entries to {run_dir}; report: reinagent report {shell_word(run_dir)}")


@store.command(name="import")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.argument("url")
@click.option("--run-id", help="Id of the run in the store (default: the directory's name).")
def import_(run_dir: str, url: str, run_id: str | None) -> None:
    """Copy the run directory RUN_DIR into the store as a new run (lossless: `store export` gives it back)."""
    from reinagent.store import read_log, read_spec
    from reinagent.stores import open_store

    path = Path(run_dir)
    spec, entries = read_spec(path), read_log(path)
    run_id = run_id or path.resolve().name
    with open_store(url) as db:
        db.import_log(run_id, spec, entries)
        shown = db.url
    click.echo(f"imported {run_dir} as run {run_id}: {len(entries)} entries into {shown}")


@store.command(name="rm")
@click.argument("url")
@click.argument("run_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def rm(url: str, run_id: str, yes: bool) -> None:
    """Delete run RUN_ID and all its records from the store (refused while a run or resume writes it)."""
    from reinagent.errors import ReinagentError
    from reinagent.stores import open_store

    with open_store(url, create=False) as db:
        if not db.has_run(run_id):
            raise db.missing(run_id)
        if not yes and not click.confirm(f"delete run {run_id} and its records from {db.url}?", default=False):
            raise ReinagentError("nothing deleted (pass --yes to delete without asking)")
        db.remove_run(run_id)
        click.echo(f"removed run {run_id} from {db.url}")
