"""The Store interface: where runs live (a directory of run directories, SQLite, PostgreSQL, MongoDB).

A store holds many runs, each named by a run id. The process running or resuming a run holds a
*writer* (`RunWriter`) for it: the one-writer rule of the run directory (runlock.py) holds in every
store, by a flock (directory, SQLite), an advisory lock (PostgreSQL) or a lease document (MongoDB).
Workers (a Ray executor) may append records without that lock (`Store.worker`): a record's key
(run, task, trial, sample, generation, revision) is unique, so a repeated write is a no-op.

The log of a run is what records.jsonl holds: records and supersede markers in append order, and
`store.live_records` decides what counts. A database cannot keep two rows with one key, so the key
carries two counters the file does not need:
- generation: how many supersede markers have named this (task, trial) so far. A redo written after
  a marker gets the next generation, so the superseded record and its redo coexist in the table.
- revision: a record of the same episode written again with more in it (`resume --num-trials` adds
  the reflection the old last trial skipped) is the next revision; a *different* episode of a key
  already recorded is a duplicate (a retried worker) and is dropped: the first writer wins.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from reinagent.errors import RunDirError
from reinagent.records import RunSpec, Supersede, TrialRecord, recorded_evaluator, solved_at
from reinagent.store import Entry, live_records

SCHEMA_VERSION = 1
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


class StoreError(RunDirError):
    """A store that cannot be reached, used or trusted; always one line, never a password."""


class RunWriter(Protocol):
    """What a running experiment writes through (runner.Experiment.store)."""

    run_dir: Path | None  # a local folder for errors.log (the run directory itself for a file store)

    def append(self, entry: Entry) -> None: ...
    async def append_async(self, entry: Entry) -> None: ...
    def supersede(self, keys: list[tuple[str, int]], reason: str) -> None: ...
    def update_spec(self, spec: RunSpec) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class RunInfo:
    """One line of `reinagent store ls`."""

    run_id: str
    benchmark: str
    agent: str
    strategy: str
    created_at: float
    records: int  # live (task, trial) records
    solved: int  # tasks solved in some trial
    note: str = ""  # e.g. an import that did not finish


def check_run_id(run_id: str) -> str:
    if not RUN_ID.fullmatch(run_id or ""):
        raise StoreError(f"invalid run id {run_id!r}: letters, digits, '.', '_' and '-' (up to 200)")
    return run_id


def new_run_id(benchmark: str, agent: str, strategy: str) -> str:
    """Like a default run directory's name, plus a random tail: runs started in the same second on
    two machines into one database must not collide."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{benchmark}-{agent}-{strategy}-{stamp}-{secrets.token_hex(3)}"


def record_sample(record: TrialRecord) -> int:
    """Today's records are one sample per (task, trial): 0. A sampling rollout may add the field."""
    return int(getattr(record, "sample", 0) or 0)


def same_episode(a: TrialRecord, b: TrialRecord) -> bool:
    """b is a or a later revision of it (same start, same trajectory), not another attempt."""
    return a.started_at == b.started_at and a.trajectory == b.trajectory


class Store(ABC):
    """A place holding runs. `url` is shown to users and never carries a password."""

    url: str
    kind: str

    # -- runs ---------------------------------------------------------------------------------
    @abstractmethod
    def create_run(self, run_id: str, spec: RunSpec, log_dir: Path | None = None) -> RunWriter:
        """A new run, locked for the caller; StoreError when the id exists."""

    @abstractmethod
    def open_run(self, run_id: str, log_dir: Path | None = None) -> tuple[RunWriter, RunSpec, list[TrialRecord]]:
        """Lock the run, then read it: nobody appends between the read and our first write."""

    @abstractmethod
    def worker(self, run_id: str) -> RunWriter:
        """An append-only writer without the run lock (Ray workers): idempotent record writes."""

    @abstractmethod
    def run_ids(self, benchmark: str | None = None) -> list[str]:
        """Every run id, oldest first."""

    @abstractmethod
    def read_spec(self, run_id: str) -> RunSpec: ...

    @abstractmethod
    def read_log(self, run_id: str) -> list[Entry]:
        """Records and markers in the order they were appended (records.jsonl's lines)."""

    def close(self) -> None:
        """Drop connections."""

    # -- derived ------------------------------------------------------------------------------
    def read_records(self, run_id: str) -> list[TrialRecord]:
        return live_records(self.read_log(run_id))

    def has_run(self, run_id: str) -> bool:
        return run_id in self.run_ids()

    def list_runs(self) -> list[RunInfo]:
        out = []
        for run_id in self.run_ids():
            spec = self.read_spec(run_id)
            try:
                records, note = self.read_records(run_id), ""
            except StoreError:  # listed all the same, with why it cannot be read
                records, note = [], "(import unfinished: run `store import` again)"
            cfg = spec.config
            out.append(RunInfo(run_id, str(cfg.get("benchmark")), str(cfg.get("agent")),
                               str(cfg.get("strategy")), spec.created_at, len(records),
                               _solved(records, recorded_evaluator(cfg)), note))
        return out

    def import_log(self, run_id: str, spec: RunSpec, entries: list[Entry]) -> None:
        """Copy a run in, entry by entry, keeping every record and marker in order (lossless)."""
        writer = self.create_run(run_id, spec)
        try:
            for entry in entries:
                (writer.append if isinstance(entry, Supersede)
                 else writer.append_replacing)(entry)  # type: ignore[attr-defined]
        finally:
            writer.close()

    def remove_run(self, run_id: str) -> None:
        """Delete a run and everything it holds (`reinagent store rm`); StoreError while a writer
        holds it, or when there is no such run."""
        raise StoreError(f"{self.url} cannot remove runs")

    def query(self, run: str | None = None, benchmark: str | None = None, success: bool | None = None,
              *, as_frame: bool = False):
        from reinagent.stores.query import query

        return query(self, run=run, benchmark=benchmark, success=success, as_frame=as_frame)

    def missing(self, run_id: str) -> StoreError:
        return StoreError(f"no run {run_id!r} in {self.url}; `reinagent store ls {self.url}` lists its runs")

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class DatabaseRuns(ABC):
    """`open_run` and `worker` of the database stores (sql.py, mongo.py), which differ only in
    the writer they hand out (`run_writer`)."""

    @abstractmethod
    def run_writer(self, run_id: str, log_dir: Path | None, *, locked: bool) -> RunWriter:
        """A writer for one run, holding the run's lock when `locked`."""

    def open_run(self, run_id: str, log_dir: Path | None = None) -> tuple[RunWriter, RunSpec, list[TrialRecord]]:
        if not self.has_run(check_run_id(run_id)):
            raise self.missing(run_id)
        writer = self.run_writer(run_id, log_dir, locked=True)  # the lock first, then the read
        try:
            return writer, self.read_spec(run_id), self.read_records(run_id)
        except BaseException:
            writer.close()
            raise

    def worker(self, run_id: str) -> RunWriter:
        if not self.has_run(check_run_id(run_id)):
            raise self.missing(run_id)
        return self.run_writer(run_id, None, locked=False)


class AsyncAppend:
    """`append_async` for writers whose `append` blocks (a database round trip): in a thread, so
    the event loop keeps running episodes meanwhile. And `supersede`, which appends a marker."""

    def append(self, entry: Entry) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    async def append_async(self, entry: Entry) -> None:
        await asyncio.to_thread(self.append, entry)

    def supersede(self, keys: list[tuple[str, int]], reason: str) -> None:
        self.append(Supersede(keys=sorted(keys), reason=reason, at=time.time()))


def _solved(records: list[TrialRecord], evaluator: str | None) -> int:
    """Tasks whose loop stopped with a success (records.solved_at), as the reports count them."""
    by_task: dict[str, list[TrialRecord]] = {}
    for rec in records:
        by_task.setdefault(rec.task_id, []).append(rec)
    return sum(solved_at(recs, evaluator) is not None for recs in by_task.values())
