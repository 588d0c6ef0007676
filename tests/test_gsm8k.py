"""GSM8K: data and provenance, the final-number rule, the math environment, whole runs via the CLI."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from reinagent import make
from reinagent.benchmarks.gsm8k import NO_NUMBER, MathEnv, answers_match, extract_answer
from reinagent.config import RunConfig
from reinagent.env import check_env
from reinagent.paths import DATA_DIR
from reinagent.runner import load_run
from tests.conftest import one_line_error, run_cli

DATA = DATA_DIR / "gsm8k"


def test_splits_counts_and_gold_answers():
    bench = make("gsm8k-v1")
    test, train = bench.load_tasks("test"), bench.load_tasks("train")
    assert (len(test), len(train)) == (1319, 7473)
    first = test[0]
    assert first.task_id == "test/0" and first.question.startswith("Janet’s ducks lay 16 eggs")
    assert first.answer == "18" and first.gold == 18
    assert "<<" not in first.solution and first.solution.endswith("every day at the farmer’s market.")
    assert train[2].answer == "5" and test[2].answer == "70000"
    # every gold answer is a whole number the matcher reads back
    assert all(t.gold.denominator == 1 and answers_match(t.answer, t.answer) for t in (*test, *train))
    assert any(t.gold < 0 for t in (*test, *train)) and any("," in t.answer for t in train)


def test_unknown_split_is_one_line_error():
    one_line_error(run_cli("run", "--benchmark", "gsm8k", "--split", "dev"), "unknown split 'dev'", "test", "train")


def test_provenance_records_counts_and_checksums():
    text = (DATA / "PROVENANCE.md").read_text(encoding="utf-8")
    assert "MIT" in text and "openai/grade-school-math" in text
    for name, rows in (("test.jsonl", 1319), ("train.jsonl", 7473)):
        digest = hashlib.sha256((DATA / name).read_bytes()).hexdigest()
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}`"))
        assert f"| {rows} |" in row and digest in row, row
        assert len((DATA / name).read_text(encoding="utf-8").splitlines()) == rows
    assert (DATA / "LICENSE").read_text().startswith("MIT License")


# reply -> the answer as written (None: no answer): Finish's text (ours), else math-verify's pick
EXTRACTION = [
    ("Thought: 9 * 2 = 18.\nAction: Finish[18]", "18"),
    ("Action: Finish[$1,234.00]", "$1,234.00"),
    ("Finish[18 dollars]", "18 dollars"),  # judged by its number (18), recorded as written
    ("Finish[about 5 apples, or 8]", "about 5 apples, or 8"),  # math-verify reads 8 in it
    ("Thought: 3 then 4.\nAction: Finish[none]", None),  # Finish without a number is no answer
    ("So she makes 18 a day. The answer is 18.", "18"),
    ("The answer is $70,000, not 3 houses.", "70000"),  # the number after the cue, not the last
    ("#### -5", "-5"),
    ("16 - 3 - 4 = 9 eggs, 9 * 2 = 18", "18"),  # last number
    ("16-3-4=9", "9"),  # dashes after digits are minus signs of subtraction, not negatives
    ("It loses $-12 overall", "-12"),
    ("Action: Finish[3/4]", "3/4"),
    ("She makes 52 / 4 = ", None),  # an unfinished expression (issue 54: was read as the division, 13)
    ("She makes 52 / 4 = 13.", "13"),
    ("I cannot solve this.", None),
    ("", None),
]


@pytest.mark.parametrize(("reply", "answer"), EXTRACTION)
def test_final_number_rule(reply, answer):
    assert extract_answer(reply) == answer


MATCHES = [  # "eighteen" is 18 since issue 44 (number words are read)
    ("18", "18", True), ("18.0", "18", True), ("$18", "18", True), ("18.00", "18", True),
    ("1,234", "1234", True), ("1234", "1,234", True), ("$1,234.00", "1234", True), ("-5", "-5", True),
    ("5", "-5", False), ("18.5", "18", False), ("180", "18", False), ("1,2", "12", False),
    ("36/2", "18", True), (None, "18", False), ("eighteen", "18", True), ("", "0", False),
]


@pytest.mark.parametrize(("prediction", "gold", "same"), MATCHES)
def test_numeric_answer_matching(prediction, gold, same):
    assert answers_match(prediction, gold) is same


def test_math_env_judges_numbers_and_never_raises_on_garbage():
    task = make("gsm8k").load_tasks("test")[0]  # gold 18
    env = MathEnv(task, max_steps=2)
    obs, _ = env.reset()
    assert obs == f"Question: {task.question}"
    obs, reward, terminated, truncated, info = env.step("I have no idea \x00 ]]][[")
    assert (obs, reward, terminated, truncated, info["answer"]) == (NO_NUMBER, 0.0, False, False, None)
    assert env.step("still nothing")[3] is True  # the step budget ends an unanswered episode
    env.reset()
    assert env.step("Finish[$18.00]")[:3] == ("Answer submitted: $18.00", 1.0, True)
    env.reset()
    assert env.step("The answer is 17")[:3] == ("Answer submitted: 17", 0.0, True)
    check_env(make("gsm8k").make_env(task, RunConfig(benchmark="gsm8k")), ["nothing", "Finish[18]"])


def test_prompt_examples_come_from_train_and_are_ours():
    from reinagent.agents.prompts import gsm8k as prompts

    bench = make("gsm8k")
    test_questions = {t.question for t in bench.load_tasks("test")}
    train = bench.load_tasks("train")
    shown = re.findall(r"^Question: (.*)$", prompts.COT_EXAMPLES + "\n" + prompts.REFLECTION_EXAMPLES, re.M)
    assert len(shown) == 5
    for question in shown:
        row = next(t for t in train if " ".join(t.question.split()) == question)
        assert row.question not in test_questions
        # the reasoning is ours: no dataset solution line is copied into the examples
        assert not any(line in prompts.COT_EXAMPLES for line in row.solution.splitlines() if len(line) > 30)
    # the worked examples reach the right answers (train rows 0, 1 and 2, in that order)
    assert re.findall(r"Finish\[([^\]]*)\]", prompts.COT_EXAMPLES) == [t.answer for t in train[:3]]


def test_scripted_run_via_cli_reports_accuracy(tmp_path, script):
    # Task test/0 (gold 18) is solved at once; test/1 (gold 3) only after the reflection reaches
    # the prompt; the Reflector's prompt carries the GSM8K reflection examples.
    actor = script([
        {"when": "Janet’s ducks", "reply": "Thought: 16 - 3 - 4 = 9 eggs, 9 * 2 = $18.\nAction: Finish[$18.00]"},
        {"when": "(?s)^(?=.*lessons you wrote down)(?=.*A robe takes)", "reply": "Thought: 2 + 1 = 3.\nAction: Finish[3]"},
        {"when": "A robe takes", "reply": "Thought: 2 bolts.\nAction: Finish[2]"},
    ], default="Thought: no idea.")
    reflector = script([{"when": "half of the pages still left", "reply": "I forgot the white fiber; add it next time."}])
    run_dir = tmp_path / "gsm"
    proc = run_cli("run", "--benchmark", "gsm8k", "--num-envs", "3", "--num-trials", "2", "--model", actor,
                   "--reflector-model", reflector, "--run-dir", str(run_dir), "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr
    spec, records = load_run(run_dir)
    assert spec.config["agent"] == "cot" and spec.config["split"] == "test"
    by = {(r.task_id, r.trial): r for r in records}
    assert set(by) == {("test/0", 1), ("test/1", 1), ("test/1", 2), ("test/2", 1), ("test/2", 2)}
    assert by["test/0", 1].success and by["test/0", 1].answer == "$18.00"
    assert by["test/0", 1].evaluation == {"gold": "18", "predicted": "18", "benchmark_evaluations": 1}
    assert not by["test/1", 1].success and by["test/1", 1].reflection == "I forgot the white fiber; add it next time."
    assert by["test/1", 2].success and by["test/1", 2].memory == [by["test/1", 1].reflection]
    # a reply without a number is an observation, and an unanswered episode is wrong
    lost = by["test/2", 1]
    assert not lost.success and lost.error is None and lost.answer is None
    assert lost.trajectory.steps[0].observation == NO_NUMBER and lost.trajectory.end_reason == "step_budget"
    report = json.loads(run_cli("report", str(run_dir), "--format", "json").stdout)
    assert report["benchmark"] == "gsm8k" and report["num_tasks"] == 3
    assert report["success_rate"] == pytest.approx(2 / 3)
    low, high = report["success_ci"]
    assert 0 < low < 2 / 3 < high < 1  # a Wilson interval around 2 of 3
    assert "success rate [95% CI]" in run_cli("report", str(run_dir)).stdout


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_embedded_model_answers_one_problem(tmp_path):
    run_dir = tmp_path / "local"
    proc = run_cli("run", "--benchmark", "gsm8k", "--num-envs", "1", "--num-trials", "1", "--model", "local",
                   "--max-tokens", "96", "--run-dir", str(run_dir), "--no-cache", "--quiet", timeout=1700)
    assert proc.returncode == 0, proc.stderr
    _, records = load_run(run_dir)
    (rec,) = records
    assert rec.task_id == "test/0" and rec.error is None
    assert rec.trajectory.calls[0].completion_tokens > 0 and rec.trajectory.steps[0].output.strip()
    # whatever the model wrote, the verdict is the one the final-number rule gives it
    sent = rec.trajectory.steps[0].action or rec.trajectory.steps[0].output
    assert rec.answer == extract_answer(sent)
    assert rec.success == answers_match(rec.answer, "18")


def test_gymnasium_check_env_passes():
    # registered like every benchmark (reinagent/service/gym.py); random text actions never raise.
    # (With the CoT default of one step, a reply without a number truncates at once, which the
    # checker takes for a broken env; a longer budget lets it see the invalid-answer observation.)
    from tests.test_gym import _check

    _check("reinagent/gsm8k-v1", max_steps=3)
