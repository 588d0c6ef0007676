"""`store.query(run=..., benchmark=..., success=...)`: live records across runs, for analysis.

Supersede markers and revisions are applied per run first (a superseded record never shows up),
then the filters; `as_frame=True` gives one pandas row per (run, task, trial).
"""

from __future__ import annotations

from pydantic import BaseModel

from reinagent.records import TrialRecord, Usage

COLUMNS = ["run_id", "benchmark", "agent", "strategy", "task_id", "trial", "success", "reward", "f1", "error",
           "steps", "end_reason", "reflection", "calls", "prompt_tokens", "completion_tokens", "cost_usd",
           "wall_s"]


class StoredRecord(BaseModel):
    """A record and the run it belongs to."""

    run_id: str
    benchmark: str
    agent: str | None = None
    strategy: str | None = None
    record: TrialRecord


def query(store, *, run: str | None = None, benchmark: str | None = None, success: bool | None = None,
          as_frame: bool = False):
    if run is not None and not store.has_run(run):
        raise store.missing(run)
    ids = [run] if run is not None else store.run_ids(benchmark=benchmark)
    rows: list[StoredRecord] = []
    for run_id in ids:
        cfg = store.read_spec(run_id).config
        if benchmark is not None and cfg.get("benchmark") != benchmark:
            continue
        for rec in store.read_records(run_id):
            if success is None or rec.success == success:
                rows.append(StoredRecord(run_id=run_id, benchmark=str(cfg.get("benchmark")), agent=cfg.get("agent"),
                                         strategy=cfg.get("strategy"), record=rec))
    return to_frame(rows) if as_frame else rows


def to_frame(rows: list[StoredRecord]):
    import pandas as pd

    data = []
    for row in rows:
        r = row.record
        usage = Usage.of(r.calls)
        data.append({"run_id": row.run_id, "benchmark": row.benchmark, "agent": row.agent,
                     "strategy": row.strategy, "task_id": r.task_id, "trial": r.trial, "success": r.success,
                     "reward": r.reward, "f1": r.f1, "error": r.error, "steps": len(r.trajectory.steps),
                     "end_reason": r.trajectory.end_reason, "reflection": r.reflection, "calls": usage.calls,
                     "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                     "cost_usd": usage.cost_usd, "wall_s": r.wall_s})
    return pd.DataFrame(data, columns=COLUMNS)
