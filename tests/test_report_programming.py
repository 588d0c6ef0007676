"""A programming run's report: unchanged retries and the own tests' false positives and
negatives, with the counts they are taken over (report/programming.py)."""

from __future__ import annotations

import json

from reinagent.records import TrialRecord, Trajectory
from reinagent.report.programming import own_tests, own_tests_line, retry_unchanged, retry_unchanged_line


def _rec(task: str, trial: int, code: str, own: bool, error: str | None = None) -> TrialRecord:
    return TrialRecord(task_id=task, trial=trial, trajectory=Trajectory(answer=code), internal_passed=own, error=error)


RECORDS = [
    _rec("a", 1, "def f(): return 1", False), _rec("a", 2, "def f(): return 1", False),  # copied
    _rec("b", 1, "def g(): return 1", False), _rec("b", 2, "def g(): return 2", True),   # changed
    _rec("c", 1, "def h(): return 1", False), _rec("c", 2, "def h(): return 1 ", True),  # one byte more
    _rec("d", 1, "def k(): return 1", True),
    _rec("e", 1, "def m(): return 1", False), _rec("e", 2, "", False, error="model error: down"),  # not judged
]


def test_a_retry_is_unchanged_only_when_byte_identical():
    """Mutants: compare stripped code, or count errored retries -- the counts move."""
    assert retry_unchanged(RECORDS) == {"retried": 3, "unchanged": 1}
    line = retry_unchanged_line({"retry_unchanged": retry_unchanged(RECORDS)})
    assert "1 of 3 retries" in line


def test_own_tests_false_positives_and_negatives_with_their_denominators():
    first = {"a": {"passed": True}, "b": {"passed": False}, "c": {"passed": False}, "d": {"passed": False},
             "e": {"passed": False}}
    got = own_tests(RECORDS, first)
    # d passed its own tests and failed the hidden ones; a failed its own and passed the hidden
    assert got["false_positive"] == 1 and got["passed_own"] == 1
    assert got["false_negative"] == 1 and got["failed_own"] == 4 and got["judged"] == 5
    line = own_tests_line({"own_tests": got})
    assert "false positives 1/1 (100%)" in line and "false negatives 1/4 (25%)" in line
    assert own_tests(RECORDS, None) is None


def test_the_report_json_of_a_coder_run_has_both(tmp_path, script):
    from tests.conftest import run_cli

    model = script([{"when": "You write unit tests", "reply": "assert truncate_number(3.5) == 0.5"}],
                   default="```python\ndef truncate_number(number):\n    return 0.5\n```")
    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "humaneval", "--num-envs", "3", "--num-trials", "2", "--model", model,
                   "--strategy", "last_attempt_and_reflexion", "--run-dir", str(run_dir), "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(run_cli("report", str(run_dir), "--format", "json").stdout)
    assert set(report["retry_unchanged"]) == {"retried", "unchanged"}
    # the scripted model answers every retry with the same program: each retry is unchanged
    assert report["retry_unchanged"]["retried"] >= 1
    assert report["retry_unchanged"]["unchanged"] == report["retry_unchanged"]["retried"]
    assert report["own_tests"]["judged"] == 3
    text = run_cli("report", str(run_dir)).stdout
    assert "retries unchanged:" in text and "own tests on the first programs:" in text


def test_a_reflection_with_nothing_of_the_model_s_own_is_empty_and_said_in_the_report(tmp_path, script):
    """Bad input from the Reflector: a reply that only echoes the attempt is recorded as an empty
    reflection (the raw reply beside it), never a crash or a copied example, and the report says so."""
    from reinagent.runner import load_run
    from tests.conftest import run_cli

    model = script([{"when": "Write your reflection now", "reply": "Failed attempt:\nTask: the same task again\nReflection:"},
                    {"when": "You write unit tests", "reply": "assert truncate_number(3.5) == 0.5"}],
                   default="```python\ndef truncate_number(number):\n    return 0.0\n```")
    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "humaneval", "--num-envs", "1", "--num-trials", "2", "--model", model,
                   "--strategy", "reflexion", "--run-dir", str(run_dir), "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    _, records = load_run(run_dir)
    first = next(r for r in records if r.trial == 1)
    assert first.reflection == "" and first.reflection_raw.startswith("Failed attempt:")
    assert next(r for r in records if r.trial == 2).memory == []
    report = json.loads(run_cli("report", str(run_dir), "--format", "json").stdout)
    assert report["empty_reflections"] == 1
    assert "1 reflection(s) kept nothing" in run_cli("report", str(run_dir)).stdout
