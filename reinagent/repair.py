"""`reinagent repair DIR`: move the lines of records.jsonl that do not parse into a quarantine file.

Corruption in the middle of records.jsonl (a disk error, a hand edit) stops every reader with
file:line. Repair keeps every good record and marker in its order, appends each bad line to
records.quarantine.jsonl (as JSON: line number, the text, the parse error, when), and only then
replaces records.jsonl atomically, all under the run lock, so no writer appends meanwhile. A kill
between the two steps at worst quarantines the same lines twice; no record is ever lost.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from reinagent.runfiles import MAX_RECORDS_BYTES, read_bounded
from reinagent.runlock import open_no_follow
from reinagent.store import QUARANTINE, RECORDS, RunStore, atomic_write, parse_line, read_spec


@dataclass
class RepairReport:
    run_dir: Path
    kept: int = 0  # records and markers kept
    moved: list[int] = field(default_factory=list)  # 1-based line numbers moved to quarantine

    def describe(self) -> str:
        path = self.run_dir / RECORDS
        if not self.moved:
            return f"{path}: all {self.kept} lines are sound; nothing moved"
        lines = ", ".join(str(n) for n in self.moved)
        return (f"{path}: moved line{'s' if len(self.moved) > 1 else ''} {lines} to "
                f"{self.run_dir / QUARANTINE}; kept {self.kept} good lines")


def _quarantined(number: int, raw: bytes, problem: str, now: float) -> str:
    entry: dict[str, object] = {"line": number, "error": problem, "repaired_at": now}
    try:
        entry["text"] = raw.decode("utf-8")
    except UnicodeDecodeError:  # keep undecodable bytes exactly
        entry["base64"] = base64.b64encode(raw).decode("ascii")
    return json.dumps(entry, ensure_ascii=False) + "\n"


def repair(run_dir: str | Path) -> RepairReport:
    run_dir = Path(run_dir)
    read_spec(run_dir)  # a clear error when this is not a run
    store = RunStore(run_dir)
    store.lock.acquire()
    try:
        report = RepairReport(run_dir)
        path = run_dir / RECORDS
        if not path.exists():
            return report
        good: list[bytes] = []
        bad: list[str] = []
        now = time.time()
        # a regular file, bounded (a planted /dev/zero or FIFO is one line, not a hang)
        for number, raw in enumerate(read_bounded(path, MAX_RECORDS_BYTES).split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                parse_line(raw)
            except ValueError as err:
                report.moved.append(number)
                bad.append(_quarantined(number, raw, str(err).splitlines()[0], now))
            else:
                good.append(raw)
        report.kept = len(good)
        if bad:
            with os.fdopen(open_no_follow(run_dir / QUARANTINE, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a",
                           encoding="utf-8") as fh:
                fh.write("".join(bad))
                fh.flush()
                os.fsync(fh.fileno())
            atomic_write(path, b"".join(line + b"\n" for line in good))
        return report
    finally:
        store.close()



@click.command(name="repair")
@click.argument("run_dir", type=click.Path(file_okay=False))
def repair_command(run_dir) -> None:
    """Move corrupt lines of a run's records.jsonl to records.quarantine.jsonl, keeping every good record."""
    click.echo(repair(run_dir).describe())
