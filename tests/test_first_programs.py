"""A programming run's single attempt: each task's first program judged after the loop.

Real runner, real sandbox and a scripted model built so that the single attempt and pass@1
disagree both ways: HumanEval/2's first program is right but its own (wrong) test fails it, so the
loop goes on and ends with a wrong program; HumanEval/0's first program is wrong and its retry,
after a reflection, is right. Under --evaluator internal the hidden tests judged neither first
program during the loop; reinagent.first_programs judges them after it.
"""

from __future__ import annotations

import json

from reinagent.report.first_programs import FIRST_PROGRAMS
from reinagent.runner import load_run
from tests.conftest import run_cli

RIGHT_2 = "```python\ndef truncate_number(number: float) -> float:\n    return number % 1.0\n```"
WRONG_2 = "```python\ndef truncate_number(number: float) -> float:\n    return float(int(number))\n```"
RIGHT_0 = ("```python\ndef has_close_elements(numbers, threshold):\n    for i, a in enumerate(numbers):\n"
           "        for j, b in enumerate(numbers):\n            if i != j and abs(a - b) < threshold:\n"
           "                return True\n    return False\n```")
WRONG_0 = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
RULES = [
    {"when": "Write your reflection now", "reply": "Reflection: FIX-MARKER I will write it another way."},
    {"when": "(?s)You write unit tests.*truncate_number", "reply": "assert truncate_number(3.5) == 0.6"},  # wrong
    {"when": "(?s)You write unit tests.*has_close_elements",
     "reply": "assert has_close_elements([1.0, 2.8, 3.0], 0.3) == True\nassert has_close_elements([1.0, 2.0], 0.5) == False"},
    # a retry (the reference's retry chat: the reflection, then "[improved impl]:" and the task)
    {"when": r"(?s)FIX-MARKER.*\[improved impl\]:.*truncate_number", "reply": WRONG_2},
    {"when": "Write the complete implementation of `truncate_number`", "reply": RIGHT_2},
    {"when": r"(?s)FIX-MARKER.*\[improved impl\]:.*has_close_elements", "reply": RIGHT_0},
    {"when": "Write the complete implementation of `has_close_elements`", "reply": WRONG_0},
]


def test_first_programs_are_judged_after_the_loop_and_reported_against_pass_at_1(tmp_path, script):
    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "humaneval", "--strategy", "reflexion", "--num-trials", "2",
                   "--num-envs", "3", "--model", script(RULES, default="I do not know."),
                   "--run-dir", str(run_dir), "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    _, records = load_run(run_dir)
    by_key = {(r.task_id, r.trial): r for r in records}
    # the loop never judged the first programs that failed their own tests
    assert "hidden_passed" not in by_key[("HumanEval/2", 1)].evaluation
    assert "hidden_passed" not in by_key[("HumanEval/0", 1)].evaluation
    verdicts = json.loads((run_dir / FIRST_PROGRAMS).read_text())["tasks"]
    assert verdicts["HumanEval/2"] == {"passed": True, "judged": "after the loop", "reason": "passed"}
    assert verdicts["HumanEval/0"]["passed"] is False and verdicts["HumanEval/0"]["judged"] == "after the loop"
    assert verdicts["HumanEval/1"]["passed"] is False  # no code: refused before any test ran
    # ... and no verdict reached any prompt: the file was written after the last record
    assert (run_dir / FIRST_PROGRAMS).stat().st_mtime >= (run_dir / "records.jsonl").stat().st_mtime

    report = run_cli("report", str(run_dir), "--format", "json")
    assert report.returncode == 0, report.stderr
    summary = json.loads(report.stdout)
    summary = summary[0] if isinstance(summary, list) else summary
    assert summary["solved_tasks"]["first_program"] == ["HumanEval/2"]
    assert summary["solved_tasks"]["by_last_trial"] == ["HumanEval/0"]
    assert summary["first_program_vs_pass_at_1"] == {"single": 1, "final": 1, "gained": 1, "lost": 1, "p_mcnemar": 1.0}
    markdown = (run_dir / "report.md").read_text()
    assert "single attempt (each task's first program, judged by the hidden tests after the loop) 1/3" in markdown
    assert "(+1, -1), McNemar exact p=1" in markdown


def test_a_resume_judges_what_an_older_run_never_judged_and_keeps_what_it_did(tmp_path, script):
    run_dir = tmp_path / "run"
    model = script(RULES, default="I do not know.")
    proc = run_cli("run", "--benchmark", "humaneval", "--strategy", "reflexion", "--num-trials", "2",
                   "--num-envs", "3", "--model", model, "--run-dir", str(run_dir), "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    path = run_dir / FIRST_PROGRAMS
    kept = json.loads(path.read_text())
    kept["tasks"]["HumanEval/0"]["marker"] = "kept"  # an earlier verdict is never judged again
    del kept["tasks"]["HumanEval/2"]  # as a run made before this file existed
    path.write_text(json.dumps(kept))
    assert run_cli("resume", str(run_dir), "--quiet").returncode == 0
    again = json.loads(path.read_text())["tasks"]
    assert again["HumanEval/2"]["passed"] is True and again["HumanEval/0"]["marker"] == "kept"


def test_a_planted_first_programs_file_is_one_line(tmp_path, script):
    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "humaneval", "--strategy", "none", "--num-trials", "1",
                   "--num-envs", "1", "--model", script(RULES, default="no"), "--run-dir", str(run_dir),
                   "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    (run_dir / FIRST_PROGRAMS).write_text('{"tasks": {"HumanEval/0": {"passed": "yes"}}}')
    bad = run_cli("report", str(run_dir), "--format", "json")
    assert bad.returncode == 2 and "first_programs.json: malformed" in bad.stderr and "Traceback" not in bad.stderr
