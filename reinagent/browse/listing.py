"""Finding runs under a folder and describing each in one row: what ran, how far it got, and
whether a process is writing it right now.

"Running" is decided by the run's lock file (`run.lock`): the process that writes a run holds an
exclusive flock on it, and the kernel drops that lock when the process dies, however it dies. So
a run killed with SIGKILL shows as incomplete at once, with no stale pid file to clean up.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reinagent.errors import RunDirError
from reinagent.records import recorded_evaluator, stops_loop
from reinagent.runlock import LOCK
from reinagent.store import RECORDS, SPEC, is_run_dir
from reinagent.terminal import plain

MAX_DEPTH = 4  # runs/<group>/<run> and the committed <bench>_runs/<setting>/<run> are 2-3 deep
Status = Literal["running", "finished", "incomplete"]


PROC_LOCKS = Path("/proc/locks")


def is_running(run_dir: Path) -> bool:
    """True while some process holds the run's lock; a missing lock file means nobody does.

    On Linux the kernel's lock table (/proc/locks) is read rather than probing with a flock of our
    own: a probe, however short, could make a writer that starts at that instant fail its
    non-blocking exclusive lock and refuse to run. Elsewhere a shared non-blocking flock is taken
    and dropped at once (it never waits, so a viewer cannot stall a run)."""
    path = Path(run_dir) / LOCK
    try:
        st = path.stat()
    except OSError:
        return False
    try:
        table = PROC_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return _probe(path)
    # lines look like "1: FLOCK  ADVISORY  WRITE 4242 fe:00:5308813 0 EOF" (major:minor in hex)
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return any(f" {where} " in line and "FLOCK" in line for line in table.splitlines())


def _probe(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False  # a filesystem without flock: we cannot tell, so do not claim it runs
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def discover(root: str | Path, max_depth: int = MAX_DEPTH) -> list[Path]:
    """Run directories at or under `root`, sorted by path; a run's own subfolders are not searched."""
    root = Path(root)
    if not root.exists():
        raise RunDirError(f"{root} does not exist; name the folder that holds your runs "
                          "(runs/ by default, e.g. `reinagent runs hotpot_runs`)")
    if not root.is_dir():
        raise RunDirError(f"{root} is a file, not a folder of runs")
    if is_run_dir(root):
        return [root]
    found: list[Path] = []
    level = [root]
    # Each real directory once, by (device, inode): 30 `ln -s .` links in a folder made every
    # listing walk 30^4 paths (94 s, 1.9 GB); a link to a run already listed lists it once.
    seen = {_identity(root)}
    for _ in range(max_depth):
        below: list[Path] = []
        for folder in level:
            try:
                children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
            except OSError:
                continue
            for child in children:
                identity = _identity(child)
                if identity is None or identity in seen:
                    continue
                seen.add(identity)
                (found if is_run_dir(child) else below).append(child)
        level = below
    return sorted(found)


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the directory `path` leads to (links followed); None when it is gone."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


@dataclass
class RunInfo:
    """One run as the list shows it. `run_id` is its path relative to the listed folder."""

    run_id: str
    run_dir: Path
    benchmark: str
    agent: str
    strategy: str
    model: str
    split: str
    status: Status
    num_tasks: int
    num_trials: int
    trials_started: int  # highest trial with at least one record
    solved: int
    errors: int
    records: int
    created_at: float
    last_update: float  # mtime of records.jsonl (or spec.json before the first record)
    rollout: str = "react"  # how an episode explored: react, tot, mcts, multi-turn
    current_trial: dict[str, int] = field(default_factory=dict)  # trial, attempted, expected
    # records the run holds when done, as far as known: a task solved at trial s stops there
    records_expected: int = 0
    summary: dict[str, Any] = field(default_factory=dict, repr=False)
    evaluator: str | None = None  # programming: internal (pass@1) or hidden (an oracle's pass@N)

    @property
    def judged(self) -> str:
        """Said next to the solved count: how a programming run's success was judged."""
        return {"hidden": "oracle: hidden tests every trial", "internal": "pass@1"}.get(self.evaluator or "", "")

    @property
    def started(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.created_at)) if self.created_at else ""

    def to_json(self) -> dict[str, Any]:
        keys = ("run_id", "benchmark", "agent", "strategy", "rollout", "model", "split", "status", "num_tasks",
                "num_trials", "trials_started", "solved", "errors", "records", "created_at",
                "last_update", "current_trial", "started", "evaluator", "judged", "records_expected")
        return {k: getattr(self, k) for k in keys} | {"run_dir": str(self.run_dir)}


class RunCache:
    """Loaded runs, re-read only when their files change (a viewer polls every few seconds)."""

    def __init__(self) -> None:
        self._entries: dict[Path, tuple[tuple, Any]] = {}

    def load(self, run_dir: Path):
        """The run as a `LoadedRun` (spec, latest record per (task, trial), summary)."""
        from reinagent.report.loading import LoadedRun
        from reinagent.report.summary import summarize_records
        from reinagent.runner import load_run

        key = _fingerprint(run_dir)
        hit = self._entries.get(run_dir)
        if hit and hit[0] == key:
            return hit[1]
        spec, records = load_run(run_dir)
        loaded = LoadedRun(run_dir, spec, records, summarize_records(spec, records, str(run_dir)))
        self._entries[run_dir] = (key, loaded)
        return loaded


_default_cache = RunCache()


def run_info(run_dir: Path, root: Path | None = None, cache: RunCache | None = None) -> RunInfo:
    loaded = (cache or _default_cache).load(Path(run_dir))
    s = loaded.summary
    trials_started = max((r.trial for r in loaded.records), default=0)
    running = is_running(run_dir)
    status: Status = "running" if running else ("finished" if s["status"] == "complete" else "incomplete")
    rel = Path(run_dir).relative_to(root).as_posix() if root and Path(run_dir) != root else Path(run_dir).name
    records_path = Path(run_dir) / RECORDS
    stamp = (records_path if records_path.exists() else Path(run_dir) / SPEC).stat().st_mtime
    return RunInfo(
        run_id=rel, run_dir=Path(run_dir), benchmark=str(s["benchmark"]), agent=str(s["agent"]),
        strategy=str(s["strategy"]), model=str(s["model"]), split=str(s.get("split") or ""),
        status=status, num_tasks=s["num_tasks"], num_trials=s["num_trials"], trials_started=trials_started,
        solved=s["trials"][-1]["solved_cumulative"] if s["trials"] else 0, errors=s["num_errors"],
        records=s["num_records"], created_at=s.get("created_at") or 0.0, last_update=stamp,
        rollout=str(s.get("rollout") or "react"), current_trial=_current_trial(loaded, trials_started), summary=s,
        evaluator=s.get("evaluator"),
        records_expected=_records_expected(loaded, s["num_trials"]),
    )


def _records_expected(loaded, num_trials: int) -> int:
    """One record per (task, trial) up to the trial that ended the task's loop (its Evaluator passed
    it: the hidden verdict, or the program's own tests under --evaluator internal), else every trial's."""
    evaluator = recorded_evaluator(loaded.spec.config)
    solved_at: dict[str, int] = {}
    for r in loaded.records:
        if stops_loop(r, evaluator):
            solved_at[r.task_id] = min(r.trial, solved_at.get(r.task_id, r.trial))
    return sum(solved_at.get(task_id, num_trials) for task_id in loaded.spec.task_ids)


def outside(run_dir: Path, root: Path) -> str | None:
    """Why `run_dir` (found under `root`) is not `root`'s to serve: it, or a file of it a reader
    opens, resolves (links followed) outside `root`; None when all of it is inside."""
    real_root = Path(root).resolve()
    for path in (Path(run_dir), Path(run_dir) / SPEC, Path(run_dir) / RECORDS):
        if not path.resolve().is_relative_to(real_root):
            return f"{path} leads outside {root} (a link); not served"
    return None


def list_runs(root: str | Path, cache: RunCache | None = None, *, contained: bool = False
              ) -> tuple[list[RunInfo], list[str]]:
    """Every run under `root`, and one line per run directory that could not be read (a corrupt
    spec must not hide the other runs). `contained` (the viewer): a run that leads outside `root`
    through a link is one such line, never read."""
    root = Path(root)
    infos, problems = [], []
    for run_dir in discover(root):
        if contained and (why := outside(run_dir, root)):
            problems.append(why)
            continue
        try:
            infos.append(run_info(run_dir, root, cache))
        except RunDirError as err:
            problems.append(str(err))
    return infos, problems


def _current_trial(loaded, trial: int) -> dict[str, int]:
    """Episodes done in the newest trial, out of the tasks still unsolved when it began."""
    if trial == 0:
        return {"trial": 0, "attempted": 0, "expected": len(loaded.spec.task_ids)}
    evaluator = recorded_evaluator(loaded.spec.config)
    solved_before = {r.task_id for r in loaded.records if stops_loop(r, evaluator) and r.trial < trial}
    attempted = sum(r.trial == trial for r in loaded.records)
    return {"trial": trial, "attempted": attempted, "expected": len(loaded.spec.task_ids) - len(solved_before)}


def _fingerprint(run_dir: Path) -> tuple:
    out = []
    for name in (SPEC, RECORDS):
        try:
            st = (Path(run_dir) / name).stat()
            out.append((st.st_mtime_ns, st.st_size))
        except FileNotFoundError:
            out.append(None)
    return tuple(out)


def runs_table(infos: list[RunInfo]) -> str:
    """The list as aligned text columns for the terminal."""
    header = ["run", "benchmark", "agent", "strategy", "rollout", "model", "status", "trials", "records", "solved",
              "errors", "started"]
    # "trials" is the newest trial begun; "records" what is done of what the run needs (5/5 trials
    # said nothing of an interrupted run's 11 of 15 records)
    # every cell through `plain`: a planted model name's OSC 0 retitled the terminal (issue 54)
    rows = [[plain(cell) for cell in (
             i.run_id, i.benchmark, i.agent, i.strategy, i.rollout, _short(i.model), i.status,
             f"{i.trials_started}/{i.num_trials}", f"{i.records}/{i.records_expected}",
             f"{i.solved}/{i.num_tasks}" + (f" ({i.judged})" if i.judged else ""),
             str(i.errors), i.started)]
            for i in infos]
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows])


def _short(model: str, limit: int = 40) -> str:
    """Scripted models are file paths; their tail is what tells two apart."""
    return model if len(model) <= limit else "..." + model[-(limit - 3):]
