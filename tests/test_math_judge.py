"""The math judge (math-verify with our Finish[...]) and `reinagent check-answers` (issue 27, 1-2)."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest

from reinagent.benchmarks.math_judge import judge, read_answer
from tests.conftest import one_line_error, run_cli
from tests.math_battery import FORMATS, battery


def test_battery_of_generated_replies_is_judged_as_constructed():
    cases = battery()
    assert len(cases) >= 1000 and len(FORMATS) >= 12
    assert Counter(truth for *_, truth in cases) == {True: len(cases) // 2, False: len(cases) // 2}
    wrong = [(fmt, reply, gold) for fmt, reply, gold, truth in cases if judge(reply, gold).success is not truth]
    # docs/math-judge.md reports this agreement: 1050 of 1050 (the old first-number matcher: 946)
    assert wrong == []


@pytest.mark.parametrize(("reply", "gold", "answer", "success"), [
    ("Thought: 9 * 2 = 18.\nAction: Finish[18]", "18", "18", True),
    ("The answer is 18. Action: Finish[17]", "18", "17", False),  # Finish (ours) decides
    ("Action: Finish[$1,234.00]", "1234", "$1,234.00", True),
    ("Action: Finish[none]", "18", None, False),  # Finish without a number is no answer
    ("The answer is 9 + 9 = 18", "18", "18", True),  # the result, not the first number after the cue
    ("The answer is 9 + 9 = 18", "9", "18", False),
    ("So we get \\boxed{18}.", "18", "18", True),
    ("The answer is $\\frac{37}{2}$", "18", "\\frac{37}{2}", False),  # a fraction is its value, not its numerator
    ("The answer is $\\frac{36}{2}$", "18", "\\frac{36}{2}", True),
    ("#### -5", "-5", "-5", True),
    ("I cannot solve this.", "18", None, False),
    # restating the question is not answering it: math-verify alone reads `12 - 16 =` as -4
    ("12 - 16 =", "-4", "16", False),
    ("What is 14 - 14? 14 - 14 = ", "0", "14", False),
    ("So 5 * 3 = ", "15", "3", False),
    ("0-4=", "-4", "0", False),
    ("12 - 16 = -4", "-4", "-4", True),
    ("Finish[12 - 16]", "-4", "12 - 16", False),  # Finish's text is recorded; its last number judged
    ("The answer is 2^3", "8", "3", False),
    ("The answer is 50%", "50", "50", True),
    ("", "0", None, False),
    (None, "0", None, False),
])
def test_finish_is_ours_and_the_rest_is_math_verify(reply, gold, answer, success):
    verdict = judge(reply, gold)
    assert (verdict.answer, verdict.success) == (answer, success)


@pytest.mark.timeout(300)  # sympy would compute 10**10**10 for far longer: a hang fails, no clock is read
def test_runaway_expressions_are_no_answer_and_return_at_once():
    for reply in ("The answer is 9^9^9^9", "10**10**10", "Finish[2^{123456}]", "It is 99999!"):
        assert read_answer(reply) == (None, ())


def test_verdict_is_the_same_off_the_main_thread():
    # math-verify's own timeout (signal.alarm) raises off the main thread; ours never does
    cases = battery(size_per_format=4)
    here = [judge(reply, gold) for _, reply, gold, _ in cases]
    there: list = []
    worker = threading.Thread(target=lambda: there.extend(judge(reply, gold) for _, reply, gold, _ in cases))
    worker.start()
    worker.join(timeout=120)
    assert there == here and any(v.success for v in here)


def _write(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def test_check_answers_prints_one_line_per_input_in_order(tmp_path):
    rows = [
        {"task_id": "test/1", "answer": "Thought: 2 + 1.\nAction: Finish[3]"},  # gold 3
        {"task_id": "test/0", "answer": "The answer is 9 + 9 = 18"},  # gold 18
        {"task_id": "test/0", "answer": "The answer is 16 - 3 = 13"},
        {"task_id": "test/2", "answer": "no idea"},
    ]
    proc = run_cli("check-answers", "--benchmark", "gsm8k", "--answers", _write(tmp_path / "a.jsonl", rows))
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines == [
        {"task_id": "test/1", "success": True, "answer": "3"},
        {"task_id": "test/0", "success": True, "answer": "18"},
        {"task_id": "test/0", "success": False, "answer": "13"},
        {"task_id": "test/2", "success": False, "answer": None},
    ]
    assert "2/4 answers correct (gsm8k)" in proc.stderr


def test_check_answers_arithmetic_and_hotpotqa_official_em(tmp_path):
    from reinagent import make

    test, train = make("arithmetic").load_tasks("test")[0], make("arithmetic").load_tasks("train")[0]
    rows = [{"task_id": train.task_id, "answer": f"Thought: {train.solution}\nAction: Finish[{train.answer}]"},
            {"task_id": test.task_id, "answer": f"Finish[{int(test.answer) + 1}]"}]
    proc = run_cli("check-answers", "--benchmark", "arithmetic", "--answers", _write(tmp_path / "m.jsonl", rows))
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line) for line in proc.stdout.splitlines()] == [
        {"task_id": train.task_id, "success": True, "answer": train.answer},
        {"task_id": test.task_id, "success": False, "answer": str(int(test.answer) + 1)}]
    # HotpotQA dev-0000's gold is "yes": curly quotes make it wrong under the official EM
    rows = [{"task_id": "dev-0000", "answer": "Thought: both American.\nAction: Finish[yes]"},
            {"task_id": "dev-0000", "answer": "Finish[“yes”]"}, {"task_id": "dev-0000", "answer": "\"yes\""}]
    proc = run_cli("check-answers", "--benchmark", "hotpotqa", "--answers", _write(tmp_path / "h.jsonl", rows))
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(g["success"], g["answer"], g["em_lenient"]) for g in got] == [
        (True, "yes", True), (False, "“yes”", True), (True, "\"yes\"", True)]


@pytest.mark.parametrize(("benchmark", "content", "needles"), [
    ("mmlu", '{"task_id": "test/0", "answer": "1"}\n', ("unknown benchmark 'mmlu'", "gsm8k", "hotpotqa")),
    ("gsm8k", '{"task_id": "test/99999", "answer": "1"}\n', ("a.jsonl:1", "unknown task_id 'test/99999'")),
    ("gsm8k", '{"task_id": "test/0", "answer": "1"}\nnot json\n', ("a.jsonl:2", "malformed JSON")),
    ("gsm8k", '{"task_id": "test/0"}\n', ("a.jsonl:1", "'task_id' and 'answer'")),
    ("gsm8k", "\n", ("holds no answers",)),
])
def test_check_answers_bad_input_is_one_line_exit_2(tmp_path, benchmark, content, needles):
    path = tmp_path / "a.jsonl"
    path.write_text(content, encoding="utf-8")
    proc = run_cli("check-answers", "--benchmark", benchmark, "--answers", str(path))
    one_line_error(proc, *needles)
    assert proc.returncode == 2 and proc.stdout == ""
