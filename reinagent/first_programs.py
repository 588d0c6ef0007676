"""The single attempt inside a programming run: each task's first program, judged after the loop.

A Reflexion run on HumanEval or MBPP reports pass@1 of the program each task's loop stopped with.
What that gained over a single attempt is only measurable on the *same* first programs: trial 1's,
greedy and shared by every strategy branched from the run. Under `--evaluator internal` the
hidden tests judged only the program a loop stopped with, so a first program whose own tests
failed was never judged (judging it during the loop would leak the hidden verdict into the loop).
Here, once the loop has ended, every first program not judged yet is judged by the hidden tests
exactly as the loop judges (the benchmark's `evaluate`), and the verdicts go to
`first_programs.json` in the run directory, never into a prompt. A first program the loop already
judged (its trial-1 record carries the hidden verdict) keeps that verdict, so a flaky program
cannot disagree with itself. Reports read the file (reinagent.report.first_programs)
as `solved_tasks.first_program`, tested against the run's pass@1 with McNemar.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from reinagent.records import TrialRecord
from reinagent.report.first_programs import FIRST_PROGRAMS, read_first_programs
from reinagent.store import atomic_write, read_records


def recorded_verdict(record: TrialRecord) -> bool | None:
    """The hidden verdict a trial-1 record already holds (None: the loop never judged it)."""
    return record.success if "hidden_passed" in record.evaluation or record.evaluation.get("reason") == "syntax" else None


async def judge_first_programs(exp: Any) -> Path | None:
    """Judge the first programs of `exp`'s run that have no verdict yet; the file it wrote, or
    None when the run is not a programming run in a run directory."""
    bench, store = exp.benchmark, exp.store
    run_dir = getattr(store, "run_dir", None)
    if not hasattr(bench, "hidden_job") or run_dir is None or not (Path(run_dir) / "records.jsonl").is_file():
        return None
    run_dir = Path(run_dir)
    known = read_first_programs(run_dir) or {}
    firsts = {r.task_id: r for r in read_records(run_dir) if r.trial == 1 and r.error is None}
    tasks = {t.task_id: t for t in exp.tasks}
    verdicts: dict[str, dict[str, Any]] = dict(known)
    todo = [tid for tid in firsts if tid not in verdicts and tid in tasks]
    if not todo:
        return run_dir / FIRST_PROGRAMS if verdicts else None
    for tid in todo:
        record = firsts[tid]
        recorded = recorded_verdict(record)
        if recorded is not None:
            verdicts[tid] = {"passed": recorded, "judged": "in the loop"}
            continue
        evaluation = await bench.evaluate(tasks[tid], record.trajectory, exp.plan.task_settings)
        verdicts[tid] = {"passed": evaluation.success, "judged": "after the loop",
                         "reason": evaluation.detail.get("reason")}
    data = {"what": "each task's trial-1 program judged by the hidden tests after the loop (never shown to it)",
            "judged_at": time.time(), "tasks": dict(sorted(verdicts.items()))}
    path = run_dir / FIRST_PROGRAMS
    atomic_write(path, json.dumps(data, indent=1) + "\n")
    return path
