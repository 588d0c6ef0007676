"""The math judge on replies it was not built with (issue 44): the frozen held-out set, the issue's
reproductions, the environment and `evaluate` agreeing, signs end to end, and linear-time reading."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter

import pytest
import yaml

from reinagent import benchmarks, run
from reinagent.benchmarks.gsm8k import MathEnv, MathTask
from reinagent.benchmarks.math_judge import finish_text, judge, read_answer
from reinagent.benchmarks.math_text import clean, correction, without_restatements
from reinagent.records import Trajectory
from reinagent.runner import load_run
from tests.math_heldout import HELDOUT, load

# written and committed (1e3bd27) before the judge was changed; a changed file is a new set
FROZEN_SHA256 = "36277cc0a90fbc84e0b3a6b418e28d5b1b00e5542aa7f1c7a6b4df908141ebfd"


def test_the_heldout_set_is_the_frozen_one():
    assert hashlib.sha256(HELDOUT.read_bytes()).hexdigest() == FROZEN_SHA256
    rows = load()
    assert len(rows) == 624 and len({r.id for r in rows}) == 624
    assert Counter(r.kind for r in rows) == {"gsm8k": 480, "arithmetic": 144}
    assert Counter(r.label for r in rows) == {True: 301, False: 323}


def test_every_heldout_reply_is_judged_as_labelled():
    # docs/math-judge.md: 624 of 624 (python -m tests.math_heldout prints the table)
    wrong = [(r.id, r.reply, r.gold) for r in load() if judge(r.reply, r.gold, question=r.question).success is not r.label]
    assert wrong == []


def _env_and_evaluate(reply: str, gold: str, question: str | None) -> tuple[float, bool]:
    """(the reward MathEnv gives the reply, `evaluate`'s verdict on the answer the env recorded)."""
    task = MathTask(task_id="t", question=question or "How many?", answer=gold)
    env = MathEnv(task, max_steps=1)
    env.reset()
    _, reward, _, _, info = env.step(reply)
    evaluation = asyncio.run(benchmarks.make("gsm8k").evaluate(task, Trajectory(answer=info["answer"]), None))
    return reward, evaluation.success


def test_the_environment_and_evaluate_agree_on_every_heldout_reply():
    # the env judges the reply, `evaluate` re-judges the answer the env recorded: they must agree
    # (issue 44: `\boxed{\{11, 12\}}` was a reward of 0 and a success)
    split = [(r.id, *_env_and_evaluate(r.reply, r.gold, r.question), r.label) for r in load()]
    assert [s for s in split if not (s[1] == float(s[2]) == float(s[3]))] == []


# issue 44's reproductions: each was misjudged at 862ab4b
@pytest.mark.parametrize(("reply", "gold", "question", "right"), [
    ("$6 \\times \\$6 = \\$36$", "36", None, True),  # an inline equation ending in the result
    ("$1750 \\times 4 = 7000 \\text{ widgets}$", "7000", None, True),
    ("seven", "7", None, True),  # number words
    ("She has twelve dollars left.", "12", None, True),
    ("The answer is \\$124 on Saturday, since she works for 9 hours instead!", "124", None, True),
    ("The answer is \\$124 on Saturday, since she works for 9 hours instead!", "9", None, False),
    ("She pays \\$91.", "91", None, True),  # `\$` outside math mode
    ("The answer is 1\u00a0234.", "1234", None, True),  # a no-break space between thousands
    ("The answer is 12. Wait, no. It’s 13.", "13", None, True),  # the later self-correction
    ("The answer is 12. Wait, no. It’s 13.", "12", None, False),
    ("The answer is not 12, but 13.", "13", None, True),
    ("The answer is not 12, but 13.", "12", None, False),
    ("The answer is 12. Wait, no.", "12", None, False),  # retracted, nothing stated after
    ("Finish[- 3]", "-3", None, True),  # a sign followed by a space
    ("Finish[- 3]", "3", None, False),
    ("The answer is \u2212 3", "-3", None, True),
    ("The answer is \u2212 3", "3", None, False),
    ("Finish[- 5]", "5", None, False),
    ("minus 5", "-5", None, True),
    ("- 5", "-5", None, True),
    ("18 thousand", "18", None, False),
    ("18 thousand", "18000", None, True),
    ("18k", "18", None, False),
    ("18\\pi", "18", None, False),
    ("18i", "18", None, False),
    ("The sum of 0 and 5.", "5", "What is 0 + 5?", False),  # the operands listed
    ("Finish[0, 5]", "5", "What is 0 + 5?", False),
    ("+12", "12", None, True),
    ("\\[12\\]", "12", None, True),
    ("\\boxed{\\{11, 12\\}}", "12", None, False),  # two values are not one answer
    ("#### 12\n#### 13", "13", None, True),  # several #### lines: the last counts
    ("#### 12\n#### 13", "12", None, False),
    ("The answer is 7 plus 5.", "5", None, False),  # `plus` is an operator, 5 its operand
    ("0 plus 5", "5", "What is 0 + 5?", False),
    ("7 plus 5 equals 12.", "12", None, True),
    ("The answer is 5. Wait, actually 6. No, wait, it's 7.", "7", None, True),  # the last correction
    ("The answer is 5. Wait, actually 6. No, wait, it's 7.", "6", None, False),
])
def test_issue_44_reproductions(reply, gold, question, right):
    assert judge(reply, gold, question=question).success is right
    assert _env_and_evaluate(reply, gold, question) == (float(right), right)


@pytest.mark.parametrize(("reply", "gold", "right"), [
    ("Total = 7 + 5 = 12 apples, plus 3 pears.", "3", False),  # `plus` after a word is still an operator
    ("She has 5 cats + 3", "3", False),  # a `+` and a space after a word: an operation, not a sign
    ("Each one costs $5, so the total is $20.", "20", True),  # `one` as a pronoun stays a word
    ("She needs between 3 and 5 cups.", "5", False),  # a number picked from a list is no answer
    ("So she needs five thousand two hundred bricks.", "5200", True),
    ("It costs $1.5k.", "1500", True),
])
def test_the_new_readings_keep_their_bounds(reply, gold, right):
    assert judge(reply, gold).success is right


def test_a_set_is_an_answer_recorded_as_written_and_wrong():
    assert read_answer("Finish[0, 5]") == ("0, 5", ())
    env = MathEnv(MathTask(task_id="t", question="Which?", answer="12"), max_steps=1)
    env.reset()
    obs, reward, terminated, _, info = env.step("\\boxed{\\{11, 12\\}}")
    assert (reward, terminated) == (0.0, True) and info["answer"] is not None


SIGNED = [("Thought: {a} - {b} = - {c}.\nAction: Finish[- {c}]", "spaced minus"),
          ("Thought: negative.\nAction: Finish[\u2212 {c}]", "Unicode minus and a space"),
          ("Thought: negative.\nAction: Finish[minus {c}]", "the word minus")]


@pytest.mark.parametrize(("template", "why"), SIGNED)
def test_the_arithmetic_environment_rewards_only_the_right_sign(template, why):
    # issue 44: a false pass here is an RL reward a policy collects with the wrong sign
    bench = benchmarks.make("arithmetic20")
    tasks = bench.load_tasks("test")
    negative = next(t for t in tasks if int(t.answer) < -1)
    positive = next(t for t in tasks if int(t.answer) == -int(negative.answer))
    c = -int(negative.answer)
    reply = template.format(a=negative.a, b=negative.b, c=c)

    class Cfg:
        max_steps = 1

    for task, reward in ((negative, 1.0), (positive, 0.0)):
        env = bench.make_env(task, Cfg())
        env.reset(seed=0)
        _, got, terminated, _, info = env.step(reply)
        assert (got, terminated) == (reward, True), (why, task.question)
        verdict = asyncio.run(bench.evaluate(task, Trajectory(answer=info["answer"]), Cfg()))
        assert verdict.success is (reward == 1.0) and verdict.detail["predicted"] == str(-c)


def test_a_run_credits_a_spaced_minus_only_for_the_negative_answer(tmp_path):
    # the whole trial loop (agent, environment, evaluate) on a scripted model that always answers
    # `Finish[- c]`: right for `a - b = -c`, wrong for the task whose answer is +c
    tasks = benchmarks.make("arithmetic").load_tasks("test")
    negative = next(t for t in tasks if int(t.answer) < -1)
    positive = next(t for t in tasks if int(t.answer) == -int(negative.answer))
    reply = f"Thought: it is negative.\nAction: Finish[- {-int(negative.answer)}]"
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"rules": [], "default": reply}))
    run_dir = run(benchmark="arithmetic", split="test", num_envs=len(tasks), num_trials=1, model=f"scripted:{script}",
                  strategy="none", run_dir=str(tmp_path / "run"), cache=False, progress=False)
    records = {r.task_id: r for r in load_run(run_dir)[1]}
    assert records[negative.task_id].success and not records[positive.task_id].success
    assert {t for t, r in records.items() if r.success} == {t.task_id for t in tasks if t.answer == negative.answer}


# Linear time: each reader is fed 100 KB built to make a backtracking pattern retry from every
# position or try every split of a long run; the result is asserted, and the timeout only stops a
# hang (no clock is read). The judge reads the last MAX_CHARS (20,000) characters of a reply (and
# finds Finish[...] and <answer> in all of it), so each reply is 100 KB with the trap at its end.
BIG = 100_000
PAD = "She counts the eggs again. " * (BIG // 27 + 1)  # no number in it


@pytest.mark.timeout(600)
def test_the_judge_reads_100_kb_adversarial_replies_in_one_pass():
    gap = 15_000
    replies = [
        ("Finish[" * (BIG // 7 + 1), None),  # many openings, no closing: scanned from each, quadratic
        ("Finish[" * (BIG // 7 + 1) + "18]", "18"),
        ("<answer>" * (BIG // 8), None),
        ("<answer>" * (BIG // 8) + "18</answer>", "18"),
        (PAD + "0 + 5" + " " * gap + ")", None),  # an operand, a long gap, no result after it
        (PAD + "The answer is 18 (" + "a" * gap, "18"),  # an aside that never closes
        (PAD + "The answer is not 5" + " " * gap + "but 6", "6"),
        (PAD + "The answer is 12. Wait, no" + " " * gap + ".", None),
        (PAD + "- " * (gap // 2) + "3", "-3"),
        (PAD + "one " * (gap // 4), None),
        (PAD + "**" + "a" * gap, None),
        (PAD + "#" * gap, None),
        (PAD + "Wait, " * (gap // 6) + "actually 18", "18"),
        (PAD + "'" + " " * gap, None),
    ]
    for reply, answer in replies:
        assert len(reply) >= BIG and read_answer(reply)[0] == answer, reply[-40:]
    # the cleaning and the restatement check, on 100 KB at once
    assert finish_text("Finish[a] " + "Finish[" * (BIG // 7)) == "a"
    assert clean("x" + " " * BIG + "y") == "x y" and clean("(" * BIG) == "(" * BIG
    assert clean("18 (" + "a" * BIG) == "18 (" + "a" * BIG and clean("*" + "a" * BIG) == "*" + "a" * BIG
    assert clean("minus " * (BIG // 6) + "3").endswith("-3")
    assert correction("Wait, " * (BIG // 6) + "actually 18") == " 18"
    assert without_restatements("0" + " " * BIG + "+", "What is 0 + 3?").split() == ["0", "+"]
