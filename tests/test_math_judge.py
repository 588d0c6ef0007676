"""The math judge (math-verify with our Finish[...]) and `reinagent check-answers` (issue 27, 1-2)."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest

from reinagent.benchmarks.math_judge import judge, read_answer
from tests.conftest import one_line_error, run_cli
from tests.math_battery import ECHOES, EDGE_CASES, FORMATS, STYLES, battery, echoes, gsm8k_references

# every style issue 36 names: bold, 1500!, powers and scientific notation, restatements, backticks,
# quotes, <answer> tags, the Unicode minus, (-3), mixed numbers, self-corrections
ISSUE_36_STYLES = {"bold-answer-is", "bold-finish", "bold-steps", "exclamation", "power-of-ten", "scientific-boxed",
                   "echo-bare", "echo-question", "echo-finish", "echo-boxed", "backticks", "double-quotes",
                   "curly-quotes", "answer-tag", "unicode-minus", "parenthesised", "mixed-number", "self-correction"}


def test_battery_of_hand_labelled_replies_is_judged_as_labelled():
    cases = battery()
    styles = Counter(case.style for case in cases)
    assert len(cases) >= 1000 and len(FORMATS) + len(STYLES) >= 30 and ISSUE_36_STYLES <= set(styles)
    assert all(n >= 50 for style, n in styles.items() if style != "edge")
    labels = Counter(case.truth for case in cases)
    assert labels[True] >= 1000 and labels[False] >= 1000
    wrong = [(c.style, c.reply, c.gold) for c in cases if judge(c.reply, c.gold, question=c.question).success is not c.truth]
    # docs/math-judge.md reports this agreement (python -m tests.math_battery prints it)
    assert wrong == []


def test_gsm8k_reference_solutions_are_credited_in_every_ending():
    verdicts = Counter()
    for case in gsm8k_references():
        verdicts[case.style, judge(case.reply, case.gold, question=case.question).success] += 1
    # the issue asks for 99.5% (1,313 of 1,319); docs/math-judge.md reports 1,319 in each
    assert {style for style, _ in verdicts} == {"#### N", "The answer is **N**.", "\\boxed{N}"}
    assert all(verdicts[style, True] >= 1313 for style, _ in verdicts)


def test_no_restatement_of_any_arithmetic_task_is_credited():
    cases = echoes()
    assert len(cases) == 1000 * len(ECHOES)
    with_question = [c.reply for c in cases if judge(c.reply, c.gold, question=c.question).success]
    alone = [c.reply for c in cases if judge(c.reply, c.gold).success]
    assert (with_question, alone) == ([], [])
    # the echoes that matter: the last operand is the answer (`0 + 3`, gold 3)
    assert sum(c.gold == c.reply.rstrip("?=.]}").split()[-1] for c in cases) >= 100


@pytest.mark.parametrize(("reply", "gold", "question", "truth"), EDGE_CASES)
def test_edge_cases_written_by_hand(reply, gold, question, truth):
    assert judge(reply, gold, question=question).success is truth


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
    ("12 - 16 =", "-4", None, False),
    ("What is 14 - 14? 14 - 14 = ", "0", None, False),
    ("So 5 * 3 = ", "15", None, False),
    ("0-4=", "-4", None, False),
    ("12 - 16 = -4", "-4", "-4", True),
    ("Finish[12 - 16]", "-4", "12 - 16", False),  # a submitted expression is recorded, and wrong
    ("The answer is 2^3", "8", None, False),
    ("The answer is 50%", "50", "50", True),
    # issue 36
    ("The answer is **18**.", "18", "18", True),
    ("Action: Finish[**18**]", "18", "**18**", True),  # recorded as written
    ("<answer>-3</answer>", "-3", "-3", True),
    ("The answer is 17. Wait, actually 18", "18", "18", True),
    ("The answer is 17. Wait, actually 18", "17", "18", False),
    ("It is 10^3 grams.", "1000", "1000", True),
    ("So 1.2 x 10^3 in all.", "1200", "1200", True),
    ("What is 0 + 3?", "3", None, False),  # without the question too: math-verify alone reads 3
    ("3 - 0 =", "3", None, False),
    # GSM8K's answer line wins over an earlier "answer" (math-verify alone picks the 5)
    ("To express the answer as a percentage: 32 / 96 * 100% = 33.333...%, which rounds down to 33%\n#### 33",
     "33", "33", True),  # GSM8K test/226's reference solution
    ("\\boxed{99999!}", "99999", "99999", True),  # `!` after a number is punctuation, never a factorial
    ("", "0", None, False),
    (None, "0", None, False),
])
def test_finish_is_ours_and_the_rest_is_math_verify(reply, gold, answer, success):
    verdict = judge(reply, gold)
    assert (verdict.answer, verdict.success) == (answer, success)


@pytest.mark.parametrize(("reply", "answer"), [
    ("0 + 3", None), ("What is 0 + 3?", None), ("\\boxed{0 + 3}", None), ("0 + 3 =", None),
    ("What is 0 plus 3? Let me think.", None),
    ("Finish[0 + 3]", "0 + 3"),  # submitted: recorded as written, judged wrong
    ("0 + 3 = 3", "3"), ("What is 0 + 3? 3", "3"), ("0 + 3 is 3.", "3"), ("The answer is 3", "3"),
])
def test_a_restatement_of_the_question_is_never_an_answer(reply, answer):
    verdict = judge(reply, "3", question="What is 0 + 3?")
    assert (verdict.answer, verdict.success) == (answer, answer == "3")


def test_the_served_math_environments_know_their_question():
    from reinagent import make
    from reinagent.benchmarks.gsm8k import MathEnv

    task = next(t for t in make("arithmetic20").load_tasks("test") if t.a == 0 and t.op == "+")  # gold b
    env = MathEnv(task, max_steps=1)
    env.reset()
    assert env.step(f"What is 0 + {task.b}?")[1:3] == (0.0, False)
    env.reset()
    assert env.step(f"0 + {task.b} = {task.b}")[1:3] == (1.0, True)
    # GSM8K test/4 ends "... if the size of Wendi's flock is 20 chickens?", gold 20: math-verify
    # alone credits the question copied back; the environment knows its question
    bench = make("gsm8k")
    task = bench.load_tasks("test")[4]
    assert task.answer == "20" and judge(task.question, "20").success
    env = MathEnv(task, max_steps=1)
    env.reset()
    assert env.step(task.question)[1] == 0.0
    env.reset()
    assert env.step(f"{task.question} She needs 20 cups.")[1:3] == (1.0, True)


@pytest.mark.timeout(300)  # sympy would compute 10**10**10 for far longer: a hang fails, no clock is read
def test_runaway_expressions_are_no_answer_and_return_at_once():
    for reply in ("The answer is 9^9^9^9", "10**10**10", "Finish[2^{123456}]", "It is (99999 + 1)!", "10^{100000}"):
        assert read_answer(reply) == (None, ())
    assert read_answer("It is 99999!")[0] == "99999"  # an exclamation mark, not a factorial


def test_verdict_is_the_same_off_the_main_thread():
    # math-verify's own timeout (signal.alarm) raises off the main thread; ours never does
    cases = battery(size_per_format=4)
    here = [judge(c.reply, c.gold, question=c.question) for c in cases]
    there: list = []
    worker = threading.Thread(target=lambda: there.extend(judge(c.reply, c.gold, question=c.question) for c in cases))
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
    # arithmetic20 too; restating the question is no answer
    rows = [{"task_id": "test/0+9", "answer": "0 + 9"}, {"task_id": "test/0+9", "answer": "**9**"}]
    assert {"test/0+9"} <= {t.task_id for t in make("arithmetic20").load_tasks("test")}
    proc = run_cli("check-answers", "--benchmark", "arithmetic20", "--answers", _write(tmp_path / "t.jsonl", rows))
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line) for line in proc.stdout.splitlines()] == [
        {"task_id": "test/0+9", "success": False, "answer": None},
        {"task_id": "test/0+9", "success": True, "answer": "9"}]
    question = make("gsm8k").load_tasks("test")[4].question  # its last number is its gold, 20
    proc = run_cli("check-answers", "--benchmark", "gsm8k", "--answers",
                   _write(tmp_path / "q.jsonl", [{"task_id": "test/4", "answer": question}]))
    assert json.loads(proc.stdout) == {"task_id": "test/4", "success": False, "answer": None}
    # HotpotQA dev-0000's gold is "yes": curly quotes make it wrong under the official EM
    rows = [{"task_id": "dev-0000", "answer": "Thought: both American.\nAction: Finish[yes]"},
            {"task_id": "dev-0000", "answer": "Finish[“yes”]"}, {"task_id": "dev-0000", "answer": "\"yes\""}]
    proc = run_cli("check-answers", "--benchmark", "hotpotqa", "--answers", _write(tmp_path / "h.jsonl", rows))
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(g["success"], g["answer"], g["em_lenient"]) for g in got] == [
        (True, "yes", True), (False, "“yes”", True), (True, "\"yes\"", True)]


@pytest.mark.parametrize(("benchmark", "content", "needles"), [
    ("mmlu", '{"task_id": "test/0", "answer": "1"}\n', ("unknown benchmark 'mmlu'", "gsm8k", "arithmetic20", "hotpotqa")),
    ("humaneval", '{"task_id": "test/0", "answer": "1"}\n', ("unknown benchmark 'humaneval'", "check-solutions")),
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


def test_rl_demo_baseline_rejudged_from_its_kept_replies():
    # docs/math-judge.md and docs/rl.md: the base model's 300 greedy replies (kept), judged by this
    # judge, solve exactly the 49 tasks the demo recorded under the previous judge (16.3%)
    import subprocess
    import sys

    from tests.conftest import ROOT

    rows = [json.loads(line) for line in (ROOT / "docs/rl_demo/base_replies.jsonl").read_text().splitlines()]
    recorded = json.loads((ROOT / "docs/rl_demo/base.json").read_text(encoding="utf-8"))
    solved = {r["task_id"] for r in rows if judge(r["reply"], r["gold"], question=r["question"]).success}
    assert len(rows) == 300 and solved == set(recorded["solved"]) and len(solved) == 49
    proc = subprocess.run([sys.executable, "scripts/rl_eval_replies.py", "--rejudge", "docs/rl_demo/base_replies.jsonl"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "success: 49/300 (16.3%)", proc.stderr
