"""The run directory: the single source of truth of a run.

    spec.json       RunSpec, written once (atomically) when the run starts
    records.jsonl   one TrialRecord per (task, trial), appended and fsynced as soon as it ends

A run killed at any moment (SIGKILL included) leaves at most one partial last line, which the next
open drops before appending; every complete line is a finished (task, trial) that is never redone.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from pydantic import ValidationError

from reinagent.errors import RunDirError
from reinagent.records import RunSpec, TrialRecord

SPEC = "spec.json"
RECORDS = "records.jsonl"


def atomic_write(path: Path, text: str) -> None:
    """Write via a temp file + rename, so readers see the old or the new file, never half."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def is_run_dir(path: Path) -> bool:
    return (path / SPEC).is_file()


def read_spec(run_dir: Path) -> RunSpec:
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise RunDirError(f"run directory {run_dir} does not exist")
    if not is_run_dir(run_dir):
        raise RunDirError(f"{run_dir} is not a reinagent run directory (no {SPEC})")
    try:
        return RunSpec.model_validate_json((run_dir / SPEC).read_text(encoding="utf-8"))
    except (ValidationError, ValueError) as err:
        raise RunDirError(f"{run_dir / SPEC} is corrupt: {str(err).splitlines()[0]}") from None


def read_records(run_dir: Path, *, tolerate_partial_tail: bool = True) -> list[TrialRecord]:
    """All complete records, in the order they were appended.

    A malformed line in the middle is corruption and is reported with its line number; a
    malformed *last* line without its newline is a write cut short by a kill and is ignored.
    """
    path = Path(run_dir) / RECORDS
    if not path.exists():
        return []
    records: list[TrialRecord] = []
    data = path.read_bytes()
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        is_tail = number == len(lines)  # no newline after it: possibly cut short
        try:
            records.append(TrialRecord.model_validate_json(raw))
        except (ValidationError, ValueError) as err:
            if is_tail and tolerate_partial_tail:
                break
            detail = str(err).splitlines()[0]
            raise RunDirError(f"corrupt record file {path}, line {number}: {detail}") from None
    return records


class RunStore:
    """Appends records to a run directory; safe to call from many coroutines and threads."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._lock = threading.Lock()  # one writer (write + fsync) at a time
        self._queue_lock = threading.Lock()  # guards the group-commit queue below
        self._queued: list[str] = []
        self._enqueued = 0  # lines ever queued
        self._durable = 0  # lines written and fsynced

    @classmethod
    def create(cls, run_dir: Path, spec: RunSpec) -> "RunStore":
        run_dir = Path(run_dir)
        if is_run_dir(run_dir):
            raise RunDirError(
                f"{run_dir} already holds a run; use `reinagent resume {run_dir}` or another --run-dir"
            )
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(run_dir / SPEC, spec.model_dump_json(indent=2))
        return cls(run_dir)

    @classmethod
    def open(cls, run_dir: Path) -> tuple["RunStore", RunSpec, list[TrialRecord]]:
        spec = read_spec(run_dir)
        records = read_records(run_dir)
        store = cls(run_dir)
        store._drop_partial_tail()
        return store, spec, records

    def _drop_partial_tail(self) -> None:
        """Cut a last line that a kill left without its newline, so appends start clean."""
        path = self.run_dir / RECORDS
        if not path.exists():
            return
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            with open(path, "r+b") as fh:
                fh.truncate(keep)
                os.fsync(fh.fileno())

    def append(self, record: TrialRecord) -> None:
        # One write() of one whole line, then fsync: the record is durable before we move on.
        line = record.model_dump_json() + "\n"
        with self._lock, open(self.run_dir / RECORDS, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    async def append_async(self, record: TrialRecord) -> None:
        """`append` for coroutines: returns once the record is durable, without blocking the event
        loop. Records that finish together share one write and one fsync (group commit): an fsync
        takes ~10 ms on a virtual disk, and 100 episodes ending at once must not queue 100 of them."""
        import asyncio

        line = record.model_dump_json() + "\n"
        with self._queue_lock:  # queued here, on the loop, so the first writer takes every line
            self._queued.append(line)
            self._enqueued += 1
            ticket = self._enqueued
        await asyncio.to_thread(self._commit, ticket)

    def _commit(self, ticket: int) -> None:
        with self._lock:
            if self._durable >= ticket:
                return  # an earlier writer's batch carried this line
            with self._queue_lock:
                lines, self._queued = self._queued, []
                upto = self._enqueued
            try:
                with open(self.run_dir / RECORDS, "a", encoding="utf-8") as fh:
                    fh.write("".join(lines))
                    fh.flush()
                    os.fsync(fh.fileno())
            except BaseException:
                with self._queue_lock:  # not durable: the next writer tries these lines again
                    self._queued[:0] = lines
                raise
            self._durable = upto

    def write_json(self, name: str, data: object) -> None:
        atomic_write(self.run_dir / name, json.dumps(data, indent=2, default=str))
