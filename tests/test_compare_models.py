"""scripts/compare_models.py: two runs of one benchmark by two models, paired task by task. The runs
are written here by hand, so every count is known."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import ROOT

SCRIPT = ROOT / "scripts" / "compare_models.py"


def write_run(folder, trials: dict[str, list[tuple[str, bool]]], first: dict[str, bool]) -> None:
    """trials: task -> [(program, solved) per trial]; first: task -> its first program's hidden verdict."""
    folder.mkdir()
    records = [{"task_id": task, "trial": i + 1, "success": solved, "answer": program,
                "trajectory": {"calls": []}, "started_at": 0.0, "finished_at": 1.0}
               for task, attempts in trials.items() for i, (program, solved) in enumerate(attempts)]
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "first_programs.json").write_text(json.dumps(
        {"what": "test", "judged_at": 0.0, "tasks": {t: {"passed": p} for t, p in first.items()}}))


def test_gains_losses_and_same_programs_are_counted_task_by_task(tmp_path):
    # T0: both right at once. T1: A's first program wrong, retried right; B's first right.
    # T2: A right, B wrong for good. T3: in A only (not paired).
    write_run(tmp_path / "a", {"T0": [("p0", True)], "T1": [("p1", False), ("p1b", True)], "T2": [("p2", True)],
                               "T3": [("p3", True)]},
              {"T0": True, "T1": False, "T2": True, "T3": True})
    write_run(tmp_path / "b", {"T0": [("p0", True)], "T1": [("q1", True)], "T2": [("q2", False), ("q2b", False)]},
              {"T0": True, "T1": True, "T2": False})
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "a"), str(tmp_path / "b"), "--json"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    result = json.loads(out)
    assert result["tasks"] == 3 and result["same_first_program"] == 1
    assert {k: result["single"][k] for k in ("a", "b", "gained", "lost")} == {"a": 2, "b": 2, "gained": 1, "lost": 1}
    assert {k: result["pass1"][k] for k in ("a", "b", "gained", "lost")} == {"a": 3, "b": 2, "gained": 0, "lost": 1}
    assert result["single"]["p"] == 1.0


def test_a_folder_that_is_no_run_is_one_line_exit_2(tmp_path):
    (tmp_path / "a").mkdir()
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "a"), str(tmp_path / "a")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "not a run directory" in proc.stderr and "Traceback" not in proc.stderr
