"""The run directory: the single source of truth of a run.

    spec.json                  RunSpec, written atomically when the run starts; `history` lists
                               later changes (resume --num-trials, --from-trial, --retry-errors)
    records.jsonl              one TrialRecord per (task, trial), appended and fsynced as soon as it
                               ends, and `supersede` markers (records.Supersede)
    run.lock                   flock'd by the one process writing to the run (see runlock.py)
    records.quarantine.jsonl   lines `reinagent repair` moved out of records.jsonl

Reading: lines in order; a marker drops the (task, trial)s it lists from what was read before it;
a later record of a (task, trial) replaces an earlier one. A run killed at any moment (SIGKILL
included) leaves at most one partial last line; the next writer cuts it (or, when it is a complete
record missing only its newline, completes it) before appending. A failed write (disk full) is cut
back to where it started, so the file always ends with a whole line.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

from pydantic import ValidationError

from reinagent.errors import RunDirError
from reinagent.records import RunSpec, Supersede, TrialRecord, first_non_finite, record_json
from reinagent.runfiles import MAX_LINE_BYTES, MAX_SPEC_BYTES, iter_lines, read_bounded, replace_file, tail
from reinagent.runlock import RunLock, open_no_follow
from reinagent.terminal import shell_word
from reinagent.text import shown

SPEC = "spec.json"
RECORDS = "records.jsonl"
QUARANTINE = "records.quarantine.jsonl"

Entry = TrialRecord | Supersede
# The highest trial number a record may carry: a run's trials are at most config.MAX_TRIALS, but an
# RL run records its training step as the trial (reinagent/rl/loop.py), and steps run to thousands.
# Readers build one row per trial up to the highest one, so a planted `trial: 1e9` is refused here.
MAX_RECORD_TRIAL = 100_000


def atomic_write(path: Path, text: str | bytes) -> None:
    """Write via a fresh temp file + rename, so readers see the old or the new file, never half,
    and no link at any name in the folder is written through (runfiles.replace_file)."""
    replace_file(path, text)


def is_run_dir(path: Path) -> bool:
    return (path / SPEC).is_file()


def read_spec(run_dir: Path) -> RunSpec:
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise RunDirError(f"run directory {run_dir} does not exist")
    if not is_run_dir(run_dir):
        if (run_dir / SPEC).is_symlink():  # a dangling link: say what is there, not that nothing is
            raise RunDirError(f"{run_dir / SPEC} is a symbolic link to nothing; a run directory's files "
                              "are regular files (a planted or broken run directory?)")
        raise RunDirError(f"{run_dir} is not a reinagent run directory (no {SPEC})")
    try:
        spec = RunSpec.model_validate_json(read_bounded(run_dir / SPEC, MAX_SPEC_BYTES))
    except (ValidationError, ValueError) as err:
        raise RunDirError(f"{run_dir / SPEC} is corrupt: {str(err).splitlines()[0]}") from None
    check_spec_values(spec, run_dir / SPEC)
    return spec


def check_spec_values(spec: RunSpec, where: Path) -> None:
    """A RunDirError when a setting in the spec is outside what `run` accepts: readers size tables
    by them (a planted `num_trials: 1e9` grew every reader to gigabytes). Settings of older
    versions that no longer exist, and values that are not numbers, are left to their readers."""
    from reinagent.config import RunConfig

    for name, value in spec.config.items():
        field = RunConfig.model_fields.get(name)
        if field is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        low = next((b for bound in field.metadata for b in (getattr(bound, "ge", None),
                                                            getattr(bound, "gt", None)) if b is not None), None)
        high = next((b for bound in field.metadata for b in (getattr(bound, "le", None),
                                                             getattr(bound, "lt", None)) if b is not None), None)
        if (high is not None and value > high) or (low is not None and value < low) or value != value:
            raise RunDirError(f"{where}: {name} is {shown(value)}, outside what a run accepts "
                              f"({low if low is not None else '-inf'} to {high if high is not None else 'inf'}); "
                              f"a planted or broken spec?")
    if isinstance(spec.config.get("num_trials"), float):  # a count, as every reader takes it
        raise RunDirError(f"{where}: num_trials is {shown(spec.config['num_trials'])}, not a whole number")
    steps = spec.settings.get("steps")  # an RL run's planned steps: its reports' trials
    if isinstance(spec.settings.get("rl"), dict) and steps is not None and (
            not isinstance(steps, int) or isinstance(steps, bool) or not 0 <= steps <= MAX_RECORD_TRIAL):
        raise RunDirError(f"{where}: settings.steps is {shown(steps)}, outside 0 to {MAX_RECORD_TRIAL}; a planted or broken spec?")


# What a non-finite number can look like in a line (JSON's parser reads NaN, Infinity and 1e999):
# only a line that matches is walked for one, so a sound run is read at the same speed.
_MAYBE_NON_FINITE = re.compile(rb"NaN|Infinity|[eE]\+?\d{3}|\d{300}")


def parse_line(raw: bytes) -> Entry:
    """One line of records.jsonl; ValueError (pydantic's ValidationError is one) when malformed,
    when a trial number is outside 1..MAX_RECORD_TRIAL (readers size tables by it), or when it
    holds a NaN or infinity: the writers never write one (episode.py), pydantic would write it
    back as null, and a timestamp of inf broke every report (issue 45)."""
    if raw.lstrip().startswith(b'{"kind"'):  # markers are written with `kind` first
        entry: Entry = Supersede.model_validate_json(raw)
        trials = [trial for _, trial in entry.keys]
    else:
        entry = TrialRecord.model_validate_json(raw)
        trials = [entry.trial]
    if any(not 1 <= trial <= MAX_RECORD_TRIAL for trial in trials):
        raise ValueError(f"a trial number outside 1 to {MAX_RECORD_TRIAL}")
    if _MAYBE_NON_FINITE.search(raw) and (found := first_non_finite(entry.model_dump())) is not None:
        raise ValueError(f"{found[0]} is {found[1]}, which JSON cannot hold")
    return entry


def _problem(err: Exception) -> str:
    return str(err).splitlines()[0]


def read_log(run_dir: Path) -> list[Entry]:
    """Every record and marker, in the order they were appended.

    A malformed line in the middle is corruption, reported as file:line; a malformed *last* line
    without its newline is a write cut short by a kill and is ignored.
    """
    path = Path(run_dir) / RECORDS
    if not path.exists():
        return []
    entries: list[Entry] = []
    for number, raw, complete in iter_lines(path):  # a regular file, each line bounded
        if not raw.strip():
            continue
        try:
            entries.append(parse_line(raw))
        except ValueError as err:
            if not complete:  # no newline after it: cut short
                break
            raise RunDirError(
                f"corrupt record file {path}:{number} (line {number}): {_problem(err)}; "
                f"`reinagent repair {shell_word(run_dir)}` moves bad lines to {QUARANTINE}"
            ) from None
    return entries


def live_records(entries: list[Entry]) -> list[TrialRecord]:
    """The records that count: one per (task, trial), the last one appended, minus those a later
    marker superseded; in the order the kept records were appended."""
    live: dict[tuple[str, int], TrialRecord] = {}
    for entry in entries:
        if isinstance(entry, Supersede):
            for task_id, trial in entry.keys:
                live.pop((task_id, trial), None)
        else:
            key = (entry.task_id, entry.trial)
            live.pop(key, None)  # re-inserted last: the list follows the order of appends
            live[key] = entry
    return list(live.values())


def read_records(run_dir: Path) -> list[TrialRecord]:
    """The live records of a run (see `live_records`)."""
    return live_records(read_log(run_dir))


def check_new_run_dir(run_dir: Path) -> None:
    """`run --run-dir D` needs D to be new (or an empty folder): a run there is resumed instead."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"--run-dir {run_dir} is a file, not a directory; pass a new directory")
    if is_run_dir(run_dir) or (run_dir / RECORDS).exists():
        raise RunDirError(f"{run_dir} already holds a run; continue it with `reinagent resume {shell_word(run_dir)}` "
                          "or pass another --run-dir")


class RunStore:
    """Appends to a run directory; safe to call from many coroutines and threads of the one
    process that holds the run's lock (taken on create/open, or on the first append)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.lock = RunLock(self.run_dir)
        self._lock = threading.Lock()  # one writer (write + fsync) at a time
        self._queue_lock = threading.Lock()  # guards the group-commit queue below
        self._queued: list[str] = []
        self._enqueued = 0  # lines ever queued
        self._durable = 0  # lines written and fsynced

    @classmethod
    def create(cls, run_dir: Path, spec: RunSpec) -> "RunStore":
        run_dir = Path(run_dir)
        check_new_run_dir(run_dir)
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:  # /proc/x, a read-only disk, no permission: one line, not a traceback
            raise RunDirError(f"cannot create run directory {run_dir}: {err.strerror or err}; "
                              "pass a --run-dir in a folder you can write") from None
        store = cls(run_dir)
        store.lock.acquire()
        try:
            check_new_run_dir(run_dir)  # again under the lock: two `run`s on one new directory
            atomic_write(run_dir / SPEC, record_json(spec, indent=2))
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def open(cls, run_dir: Path) -> tuple["RunStore", RunSpec, list[TrialRecord]]:
        """Lock the run, then read it: nobody appends between the read and our first write."""
        spec = read_spec(run_dir)  # a clear error for a missing or foreign directory first
        store = cls(run_dir)
        store.lock.acquire()
        try:
            spec = read_spec(run_dir)
            records = read_records(run_dir)
            store._mend_tail()
        except BaseException:
            store.close()
            raise
        return store, spec, records

    def close(self) -> None:
        self.lock.release()

    def discard_unstarted(self, made_dir: bool) -> bool:
        """Remove what `create` wrote (spec.json, run.lock) when no record was written: a run that
        failed to start (a Ray cluster that timed out) must not make the same command then say the
        directory "already holds a run". Call after close(); False (and nothing removed) once any
        record exists or the folder holds anything else."""
        from reinagent.runlock import LOCK

        names = {p.name for p in self.run_dir.iterdir()} if self.run_dir.is_dir() else set()
        if read_log(self.run_dir) or not names <= {SPEC, RECORDS, LOCK}:
            return False
        for name in names:
            (self.run_dir / name).unlink(missing_ok=True)
        if made_dir:
            self.run_dir.rmdir()
        return True

    def _mend_tail(self) -> None:
        """A last line without its newline: a complete record gets its newline (nothing finished is
        lost); a line cut short by a kill is cut off, so appends start on a clean line."""
        path = self.run_dir / RECORDS
        if not path.exists():
            return
        data = tail(path, MAX_LINE_BYTES + 1)  # read_log has bounded every line
        if not data or data.endswith(b"\n"):
            return
        keep = path.stat().st_size - len(data) + data.rfind(b"\n") + 1
        try:
            parse_line(data[data.rfind(b"\n") + 1:])
        except ValueError:
            fd = open_no_follow(path, os.O_WRONLY)
            try:
                os.ftruncate(fd, keep)
                os.fsync(fd)
            finally:
                os.close(fd)
        else:
            self._write(b"\n")

    def _write(self, data: bytes) -> None:
        """Append `data` and fsync; on any failure (disk full, file size limit, a signal) cut the
        file back to where this write started, so it never ends in a partial line."""
        self.lock.acquire()  # a store made with RunStore(dir) locks on its first append
        path = self.run_dir / RECORDS
        fd = open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            start = os.fstat(fd).st_size  # we hold the run lock: nobody else appends
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except BaseException as err:
                os.ftruncate(fd, start)
                os.fsync(fd)
                if isinstance(err, OSError):
                    raise RunDirError(
                        f"could not write {path}: {err.strerror or err}; it was cut back to its last "
                        f"complete record; free space, then `reinagent resume {shell_word(self.run_dir)}`"
                    ) from None
                raise
        finally:
            os.close(fd)

    def append(self, entry: Entry) -> None:
        # One write of whole lines, then fsync: the record is durable before we move on.
        with self._lock:
            self._write((record_json(entry) + "\n").encode("utf-8"))

    def supersede(self, keys: list[tuple[str, int]], reason: str) -> None:
        """Durably retire these (task, trial) records before anything redoes them."""
        self.append(Supersede(keys=sorted(keys), reason=reason, at=time.time()))

    async def append_async(self, record: Entry) -> None:
        """`append` for coroutines: returns once the record is durable, without blocking the event
        loop. Records that finish together share one write and one fsync (group commit): an fsync
        takes ~10 ms on a virtual disk, and 100 episodes ending at once must not queue 100 of them."""
        import asyncio

        line = record_json(record) + "\n"
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
                self._write("".join(lines).encode("utf-8"))
            except BaseException:
                with self._queue_lock:  # not durable: the next writer tries these lines again
                    self._queued[:0] = lines
                raise
            self._durable = upto

    def update_spec(self, spec: RunSpec) -> None:
        self.lock.acquire()
        atomic_write(self.run_dir / SPEC, record_json(spec, indent=2))
