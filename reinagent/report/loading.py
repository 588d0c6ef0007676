"""Reading run directories for reports: one place that finds runs and reads them once.

Only the run directory is read (spec.json + records.jsonl): no benchmark data, no model, no
network. A run still being written or killed mid-line reads fine (the store drops a partial tail).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reinagent.errors import RunDirError
from reinagent.records import RunSpec, TrialRecord
from reinagent.store import is_run_dir


@dataclass
class LoadedRun:
    """One run as the reports see it: its spec, de-duplicated records and summary."""

    run_dir: Path
    spec: RunSpec
    records: list[TrialRecord]  # one per (task, trial), the latest when a trial was redone
    summary: dict[str, Any]

    def records_of(self, task_id: str) -> list[TrialRecord]:
        return sorted((r for r in self.records if r.task_id == task_id), key=lambda r: r.trial)


def find_run_dirs(paths: list[str | Path] | str | Path) -> list[Path]:
    """Run directories named by `paths`; a folder that holds runs (e.g. runs/) stands for them all.

    Order is kept as given (it is the column order of a comparison); runs found inside a folder
    are sorted by name so that reports are reproducible.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise RunDirError(f"run directory {path} does not exist")
        if is_run_dir(path):
            found.append(path)
            continue
        inner = sorted(p for p in path.iterdir() if p.is_dir() and is_run_dir(p)) if path.is_dir() else []
        if not inner:
            raise RunDirError(f"{path} is not a reinagent run directory (no spec.json) and holds none")
        found.extend(inner)
    return found


def load(paths: list[str | Path] | str | Path) -> list[LoadedRun]:
    """Every run named by `paths`, read and summarised."""
    from reinagent.report.summary import summarize_records
    from reinagent.runner import load_run

    runs = []
    for run_dir in find_run_dirs(paths):
        spec, records = load_run(run_dir)
        runs.append(LoadedRun(run_dir, spec, records, summarize_records(spec, records, str(run_dir))))
    return runs
