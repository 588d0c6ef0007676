"""`reinagent report --store URL ID...` and `reinagent report URL [ID...]`: report runs that live in
a store. Each run is exported (`store export`'s lossless copy) to an ordinary run directory named
by its run id in a temporary folder, the report reads those, and the folder is removed after."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from reinagent.stores.base import StoreError, check_run_id


def name_store_run(summary: dict, url: str) -> None:
    """A summary of a run read from a store names that store and the run's id; its run_dir (a
    temporary copy, gone when the report is printed) becomes None."""
    from reinagent.redact import redact

    run_id = Path(summary["run_dir"]).name
    summary.update(run_dir=None, store=redact(url), run_id=run_id)


def store_url_of(args: Sequence[str], store: str | None) -> tuple[str | None, list[str]]:
    """(store URL, run ids) for report's arguments; (None, args) when they are run directories.
    `--store URL` makes every argument a run id; without it a first argument with a scheme
    (sqlite:///, postgresql://, mongodb://) is the store and the rest its run ids."""
    from reinagent.stores import is_directory

    if store is not None:
        return store, list(args)
    if args and not is_directory(args[0]):
        return args[0], list(args[1:])
    return None, list(args)


@contextmanager
def store_runs(args: Sequence[str], store: str | None = None) -> Iterator[list[str]]:
    """The run directories to report: `args` themselves, or the store's runs exported to a
    temporary folder (every run of the store when no id is given), removed on exit."""
    url, ids = store_url_of(args, store)
    if url is None:
        yield list(args)
        return
    from reinagent.stores import open_store
    from reinagent.stores.file import write_run_dir

    folder = Path(tempfile.mkdtemp(prefix="reinagent-report-"))
    try:
        with open_store(url, create=False) as db:
            known = db.run_ids()
            for run_id in ids:
                if run_id not in known:
                    raise db.missing(check_run_id(run_id))
            paths = []
            for run_id in ids or known:
                write_run_dir(folder / run_id, db.read_spec(run_id), db.read_log(run_id))
                paths.append(str(folder / run_id))
            if not paths:
                raise StoreError(f"no runs in {db.url}")
        yield paths
    finally:
        shutil.rmtree(folder, ignore_errors=True)
