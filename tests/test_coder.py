"""The coder agent end to end: real runner, real sandbox, a scripted model that fixes its code
only once feedback or a reflection tells it how, and a small run on the embedded model."""

from __future__ import annotations

import json

import pytest

from reinagent import benchmarks
from reinagent.runner import load_run
from tests.conftest import run_cli

BUGGY = "```python\ndef truncate_number(number: float) -> float:\n    return float(int(number))\n```"
FIXED = "The fix:\n```python\ndef truncate_number(number: float) -> float:\n    return number % 1.0\n```\nDone."
RULES = [
    {"when": "Write your reflection now",
     "reply": "Reflection: I returned the integer part, but the task asks for the decimal part. "
              "FIX-MARKER: next time return number % 1.0."},
    {"when": "(?s)You write unit tests.*truncate_number",
     "reply": "assert truncate_number(3.5) == 0.5\nassert truncate_number(1.25) == 0.25\nassert truncate_number(2.0) == 0.0"},
    # The actor fixes its code only when a reflection (FIX-MARKER) is in its prompt: the retry
    # chat's reflection turn, before its closing "[improved impl]:" turn.
    {"when": r"(?s)FIX-MARKER.*\[improved impl\]:.*truncate_number", "reply": FIXED},
    {"when": "Write the complete implementation of `truncate_number`", "reply": BUGGY},
]


def _run(tmp_path, model: str, strategy: str, *extra: str) -> tuple[dict, list]:
    run_dir = tmp_path / strategy
    proc = run_cli("run", "--benchmark", "humaneval", "--agent", "coder", "--strategy", strategy,
                   "--num-trials", "3", "--num-envs", "3", "--model", model, "--run-dir", str(run_dir),
                   "--no-cache", "--quiet", *extra)
    assert proc.returncode == 0, proc.stderr
    report = run_cli("report", str(run_dir), "--format", "json")
    assert report.returncode == 0, report.stderr
    _, records = load_run(run_dir)
    return json.loads(report.stdout), records


def test_reflexion_beats_none_with_scripted_model(tmp_path, script):
    model = script(RULES, default="I do not know.")
    none, none_records = _run(tmp_path, model, "none")
    reflexion, records = _run(tmp_path, model, "reflexion")
    assert none["success_rate"] == 0.0 and reflexion["success_rate"] == pytest.approx(1 / 3)
    # --evaluator internal (the default): pass@1 is the hidden verdict on each task's final program
    assert reflexion["evaluator"] == "internal" and reflexion["pass_at_1"] == pytest.approx(1 / 3)
    assert none["pass_at_1"] == 0.0 and none["trials"][0]["solved"] == reflexion["trials"][0]["solved"] == 0
    assert [t["solved_cumulative"] for t in reflexion["trials"]] == [0, 1, 1]

    by_key = {(r.task_id, r.trial): r for r in records}
    first, second = by_key[("HumanEval/2", 1)], by_key[("HumanEval/2", 2)]
    assert not first.success and second.success and ("HumanEval/2", 3) not in by_key
    # Every implementation, its internal-test feedback and the reflection are in the records.
    assert "float(int(number))" in first.trajectory.answer
    assert first.trajectory.extra["internal_tests"][0] == "assert truncate_number(3.5) == 0.5"
    assert "assert truncate_number(3.5) == 0.5  # output: 3.0" in first.trajectory.extra["feedback"]
    assert "FIX-MARKER" in first.reflection and second.memory == [first.reflection]
    assert "number % 1.0" in second.trajectory.answer
    # Trial 1 failed its own tests: the hidden tests never ran on it (no verdict to steer the loop);
    # trial 2 passed them, ending the loop, and the hidden tests judged it once.
    assert first.internal_passed is False and "reason" not in first.evaluation
    assert first.evaluation["benchmark_evaluations"] == 0
    assert second.internal_passed is True and second.evaluation["reason"] == "passed"
    # The tests are written once per task: trial 2 ran trial 1's without asking the model again.
    assert second.trajectory.extra["internal_tests"] == first.trajectory.extra["internal_tests"]
    assert second.trajectory.extra["internal_tests_source"] == "an earlier trial"
    assert not any(c.rollout_id and c.rollout_id.endswith("tests") for c in second.trajectory.calls)
    assert len(second.trajectory.calls) == 1 and len(first.trajectory.calls) == 2
    # A reply without code is a failed attempt with the parse error as its feedback.
    other = by_key[("HumanEval/0", 1)]
    assert other.error is None and other.trajectory.extra["feedback"].startswith("The code does not parse")

    # The hidden tests never reach a prompt: not the actor's, not the test writer's, not the
    # attempt shown to the Reflector.
    tasks = {t.task_id: t for t in benchmarks.make("humaneval").load_tasks("test")}
    from reinagent.agents.coder import CoderAgent

    for rec in [*records, *none_records]:
        hidden = tasks[rec.task_id].hidden_tests[0]
        texts = [m.content for m in rec.trajectory.messages]
        texts += [m["content"] for m in rec.trajectory.extra.get("test_generation", [])]
        texts.append(CoderAgent.render_attempt(None, tasks[rec.task_id], rec.trajectory))
        assert not any("def check(candidate)" in t or hidden in t for t in texts)


def test_last_attempt_shows_previous_code_and_feedback(tmp_path, script):
    rules = [
        {"when": "(?s)You write unit tests.*truncate_number", "reply": RULES[1]["reply"]},
        # Seeing its own failing test output (`# output: 3.0`) is what makes this model fix it.
        {"when": r"(?s)# output: 3\.0.*\[improved impl\]:.*truncate_number", "reply": FIXED},
        {"when": "Write the complete implementation of `truncate_number`", "reply": BUGGY},
    ]
    report, records = _run(tmp_path, script(rules, default="no"), "last_attempt")
    assert [t["solved_cumulative"] for t in report["trials"]] == [0, 1, 1]
    second = next(r for r in records if r.task_id == "HumanEval/2" and r.trial == 2)
    # the reference's retry chat without the reflection turns: the previous program is the
    # assistant's turn, its test results and the signature the user's last
    roles = [m.role for m in second.trajectory.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"], roles
    previous, results = second.trajectory.messages[2].content, second.trajectory.messages[3].content
    assert "float(int(number))" in previous and previous.startswith("```python")
    assert results.startswith("[unit test results from previous impl]:") and "# output: 3.0" in results
    assert "[reflection on previous impl]" not in results and "[improved impl]:" in results


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_small_run_on_the_embedded_model(tmp_path):
    # About 2 minutes on an idle 2-core machine (128 tokens per call); far more under load.
    run_dir = tmp_path / "local"
    proc = run_cli("run", "--benchmark", "humaneval", "--agent", "coder", "--strategy", "reflexion",
                   "--num-trials", "2", "--num-envs", "2", "--model", "local", "--max-tokens", "128",
                   "--num-internal-tests", "3", "--run-dir", str(run_dir), "--quiet", timeout=1700)
    assert proc.returncode == 0, proc.stderr
    _, records = load_run(run_dir)
    assert {r.task_id for r in records} == {"HumanEval/0", "HumanEval/1"}
    # Whatever the model wrote, the recorded verdict must be the one its answer earns: the
    # hidden tests, run again here on the recorded answer, agree with the record.
    from reinagent.programming.extract import syntax_error

    bench = benchmarks.make("humaneval")
    try:
        for rec in records:
            assert rec.error is None, rec.error
            answer = rec.trajectory.answer
            assert answer is not None and rec.trajectory.extra["feedback"]
            assert rec.trajectory.calls[0].completion_tokens > 0  # the model wrote something
            if "reason" not in rec.evaluation:  # --evaluator internal: failed its own tests, trials left
                assert rec.evaluation["hidden"].startswith("not run") and rec.trial < 2
                assert not rec.success and rec.internal_passed is False
                continue
            assert rec.success == (rec.evaluation["reason"] == "passed") and rec.reward == float(rec.success)
            if not answer.strip() or syntax_error(answer) is not None:  # judged before any sandbox
                assert rec.evaluation["reason"] == "syntax" and not rec.success
                continue
            if rec.evaluation["reason"] == "timeout":  # how long a program runs is the machine's
                continue
            # It finished in the run's time limit; a generous one here keeps load out of it.
            again = bench.check_solutions({rec.task_id: answer}, timeout_s=60.0)[rec.task_id]
            assert (again.passed, again.reason) == (rec.success, rec.evaluation["reason"]), (rec.task_id, rec.trial, again)
    finally:
        bench.close()
