"""The directory store: a folder of ordinary run directories (store.py's format, unchanged).

`--store runs` puts a new run into runs/<run id>/; the run id is the directory's name. A writer is
today's RunStore (flock'd run.lock: one writer per run).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from reinagent.errors import RunDirError
from reinagent.records import RunSpec, TrialRecord, record_json
from reinagent.runlock import RunLocked
from reinagent.store import RECORDS, Entry, RunStore, atomic_write, check_new_run_dir, is_run_dir, read_log, read_spec
from reinagent.stores.base import Store, StoreError, check_run_id


def write_run_dir(run_dir: Path, spec: RunSpec, entries: list[Entry]) -> None:
    """An ordinary run directory holding exactly these entries (export, and import into a folder)."""
    store = RunStore.create(run_dir, spec)  # refuses a directory that holds a run
    try:
        text = "".join(record_json(e) + "\n" for e in entries)
        atomic_write(run_dir / RECORDS, text)
    finally:
        store.close()


class FileStore(Store):
    kind = "directory"

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.url = str(self.root)
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"store {self.root} is a file, not a directory of runs")

    def path(self, run_id: str) -> Path:
        return self.root / check_run_id(run_id)

    def create_run(self, run_id: str, spec: RunSpec, log_dir: Path | None = None) -> RunStore:
        if is_run_dir(self.path(run_id)):
            raise StoreError(f"{self.url} already holds a run {run_id!r}; continue it with "
                             f"`reinagent resume --store {self.url} {run_id}`")
        return RunStore.create(self.path(run_id), spec)

    def open_run(self, run_id: str, log_dir: Path | None = None) -> tuple[RunStore, RunSpec, list[TrialRecord]]:
        if not is_run_dir(self.path(run_id)):
            raise self.missing(run_id)
        return RunStore.open(self.path(run_id))

    def worker(self, run_id: str) -> RunStore:
        # A run directory has one writer: workers hand records to the driver instead.
        raise StoreError(f"a directory store has one writer (the driver); workers cannot write to {self.url} "
                         "directly: use sqlite:///, postgresql:// or mongodb:// for that")

    def run_ids(self, benchmark: str | None = None) -> list[str]:
        if not self.root.is_dir():
            return []
        runs = [p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".") and is_run_dir(p)]
        specs = {p.name: read_spec(p) for p in runs}
        ids = sorted(specs, key=lambda name: (specs[name].created_at, name))
        return [i for i in ids if benchmark is None or specs[i].config.get("benchmark") == benchmark]

    def has_run(self, run_id: str) -> bool:
        return is_run_dir(self.path(run_id))

    def read_spec(self, run_id: str) -> RunSpec:
        if not self.has_run(run_id):
            raise self.missing(run_id)
        return read_spec(self.path(run_id))

    def read_log(self, run_id: str) -> list[Entry]:
        if not self.has_run(run_id):
            raise self.missing(run_id)
        return read_log(self.path(run_id))

    def import_log(self, run_id: str, spec: RunSpec, entries: list[Entry]) -> None:
        """Written in a hidden folder, then renamed into place: killed half-way, no partial run
        appears (the hidden folder is cleared by the next import)."""
        target = self.path(run_id)
        try:
            check_new_run_dir(target)
        except RunDirError:
            raise StoreError(f"{self.url} already holds a run {run_id!r}; pass another --run-id") from None
        staging = self.root / f".importing-{run_id}"
        shutil.rmtree(staging, ignore_errors=True)  # what an import killed before left
        self.root.mkdir(parents=True, exist_ok=True)
        write_run_dir(staging, spec, entries)
        try:
            if target.is_dir():
                target.rmdir()  # check_new_run_dir allows a folder without a run; rename needs it gone
            os.replace(staging, target)
        except OSError as err:
            shutil.rmtree(staging, ignore_errors=True)
            raise StoreError(f"cannot import into {target}: {err.strerror or err}; pass another --run-id") from None

    def remove_run(self, run_id: str) -> None:
        if not self.has_run(run_id):
            raise self.missing(run_id)
        try:
            writer, _, _ = RunStore.open(self.path(run_id))  # the run lock: never under a live writer
        except RunLocked as err:
            raise StoreError(str(err)) from None
        try:
            shutil.rmtree(self.path(run_id))
        finally:
            writer.close()
