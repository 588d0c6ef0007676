"""Reading run directories for reports: one place that finds runs and reads them once.

Only the run directory is read (spec.json + records.jsonl): no benchmark data, no model, no
network. A run still being written or killed mid-line reads fine (the store drops a partial tail).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reinagent.errors import RunDirError
from reinagent.records import RunSpec, TrialRecord, recorded_evaluator, solved_at
from reinagent.report.first_programs import read_first_programs
from reinagent.store import is_run_dir, read_records, read_spec


@dataclass
class LoadedRun:
    """One run as the reports see it: its spec, de-duplicated records and summary."""

    run_dir: Path
    spec: RunSpec
    records: list[TrialRecord]  # one per (task, trial), the latest when a trial was redone
    summary: dict[str, Any]

    def records_of(self, task_id: str) -> list[TrialRecord]:
        return sorted((r for r in self.records if r.task_id == task_id), key=lambda r: r.trial)

    @property
    def evaluator(self) -> str | None:
        """The run's `--evaluator` (None: a benchmark judged by its own verdict only)."""
        return recorded_evaluator(self.spec.config)

    def solved_at(self, task_id: str) -> int | None:
        """The trial at which the task's loop stopped with a success, as its score counts it."""
        return solved_at(self.records_of(task_id), self.evaluator)


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
        inner = _distinct(sorted(p for p in path.iterdir() if p.is_dir() and is_run_dir(p))) if path.is_dir() else []
        if not inner:
            raise RunDirError(f"{path} is not a reinagent run directory (no spec.json) and holds none")
        found.extend(inner)
    return found


def _distinct(paths: list[Path]) -> list[Path]:
    """Each real directory once (links to a run already named are dropped)."""
    seen: set[tuple[int, int]] = set()
    kept = []
    for path in paths:
        st = path.stat()
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            kept.append(path)
    return kept


def read_run(run_dir: str | Path) -> tuple[RunSpec, list[TrialRecord]]:
    """Spec and live records (one per (task, trial), supersede markers applied), straight from the
    store: reports never import the runner and the model machinery behind it."""
    return read_spec(Path(run_dir)), read_records(Path(run_dir))


def holds_runs(path: str | Path) -> bool:
    """A run directory, or a folder with run directories in it."""
    path = Path(path)
    return is_run_dir(path) or (path.is_dir() and any(p.is_dir() and is_run_dir(p) for p in path.iterdir()))


def load(paths: list[str | Path] | str | Path) -> list[LoadedRun]:
    """Every run named by `paths`, read and summarised."""
    from reinagent.report.summary import summarize_records

    runs = []
    for run_dir in find_run_dirs(paths):
        spec, records = read_run(run_dir)
        summary = summarize_records(spec, records, str(run_dir), first_programs=read_first_programs(run_dir))
        runs.append(LoadedRun(run_dir, spec, records, summary))
    return runs


# What defines one experiment whose strategies a notebook compares: everything but the strategy.
EXPERIMENT_KEYS = ("benchmark", "agent", "model", "split", "rollout", "task_ids")


def strategy_runs(runs: list[LoadedRun], like: LoadedRun) -> tuple[list[LoadedRun], list[LoadedRun]]:
    """The runs among `runs` of `like`'s experiment (its benchmark, agent, model, split, rollout
    and tasks; any strategy or seed), and the others. The notebooks' "Strategies side by side"
    pooled every run of the benchmark in runs/ (other models, other task sets) without a word."""
    key = tuple(str(like.summary.get(k)) for k in EXPERIMENT_KEYS)
    same = [r for r in runs if tuple(str(r.summary.get(k)) for k in EXPERIMENT_KEYS) == key]
    return same, [r for r in runs if r not in same]


def strategy_runs_line(same: list[LoadedRun], others: list[LoadedRun], folder: str | Path) -> str:
    """What a strategy comparison holds and what it left out, in one line."""
    names = ", ".join(f"{r.run_dir.name} ({r.summary.get('strategy')})" for r in same)
    line = f"{len(same)} run(s) of this experiment (same benchmark, agent, model, split, rollout and tasks) in {folder}: {names}"
    return line + (f"; {len(others)} other run(s) there left out" if others else "")
