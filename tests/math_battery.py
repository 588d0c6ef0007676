"""Batteries for the math judge (issues 27 and 36), with hand labels; `python -m tests.math_battery`
prints the agreement figures docs/math-judge.md reports.

1. `battery()`: model-style replies, each (style, reply, gold, question, truth). The truth is the hand
   label: whether the number the reply finally states is the gold. Built from a fixed seed in 45
   styles: the 15 of issue 27 (Finish[...], "the answer is", \\boxed{}, LaTeX fractions, currency,
   working-out before the total, ...), 20 of issue 36 (markdown bold, `1500!`, powers of ten and
   scientific notation, backticks, quotes, <answer> tags, the Unicode minus, `(-3)`, mixed numbers,
   self-corrections), six restatements of an arithmetic question (never an answer) and four
   evaluations of it, plus `EDGE_CASES` written by hand.
2. `gsm8k_references()`: GSM8K's 1,319 test solutions as the dataset writes them, in three endings
   (`#### N`, `The answer is **N**.`, `\\boxed{N}`): each should be credited.
3. `echoes()`: every `arithmetic` and `arithmetic20` task (1,000) restated unevaluated in six ways:
   none may be credited.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

SEED = 27


@dataclass(frozen=True)
class Case:
    style: str
    reply: str
    gold: str
    truth: bool  # the hand label
    question: str | None = None


def _comma(n: int) -> str:
    return f"{n:,}"


def _neg(v: int) -> str:
    return f"−{abs(v)}" if v < 0 else str(v)


def _wrong(gold: int, rng: random.Random) -> int:
    # a near miss, an off-by-ten or a sign flip: the mistakes a model makes
    choice = rng.choice(("near", "ten", "sign", "far"))
    if choice == "near":
        return gold + rng.choice((-2, -1, 1, 2))
    if choice == "ten":
        return gold * 10 if gold else 10
    if choice == "sign" and gold:
        return -gold
    return gold + rng.randint(3, 500)


# style -> (value, rng) -> reply stating `value` as the final answer (issue 27's formats)
FORMATS = {
    "finish": lambda v, r: f"Thought: I add them up.\nAction: Finish[{v}]",
    "finish-dollars": lambda v, r: f"Thought: the total cost.\nAction: Finish[${_comma(v)}]",
    "finish-unit": lambda v, r: f"Action: Finish[{v} apples]",
    "finish-decimal": lambda v, r: f"Action: Finish[{v}.00]",
    "answer-is": lambda v, r: f"She has {r.randint(2, 9)} bags, so the answer is {v}.",
    "answer-is-expression": lambda v, r: (lambda a: f"The answer is {a} + {v - a} = {v}")(r.randint(1, 50)),
    "answer-colon": lambda v, r: f"Step 1: {r.randint(2, 99)} items.\nAnswer: {v}",
    "boxed": lambda v, r: f"Adding the parts gives the total. \\boxed{{{v}}}",
    "boxed-inline": lambda v, r: f"So the final answer is $\\boxed{{{v}}}$.",
    "latex-frac": lambda v, r: f"The answer is $\\frac{{{2 * v}}}{{2}}$.",
    "dfrac-boxed": lambda v, r: f"Hence \\boxed{{\\dfrac{{{3 * v}}}{{3}}}}.",
    "last-number": lambda v, r: (lambda a: f"{a} - {a - v} = {v}")(r.randint(100, 200) + abs(v)),
    "working-then-total": lambda v, r: (
        f"First {r.randint(2, 30)} * {r.randint(2, 9)} = {r.randint(10, 99)} cookies. "
        f"Then the total is {_comma(v)}."),
    "currency-sentence": lambda v, r: f"It costs ${_comma(v)} in total.",
    "hash": lambda v, r: f"She sells the rest.\n#### {v}",
}

# issue 36: what chat models write that the judge misread
STYLES = {
    "bold-answer-is": lambda v, r: f"The answer is **{v}**.",
    "bold-finish": lambda v, r: f"Thought: I add them up.\nAction: Finish[**{v}**]",
    "bold-steps": lambda v, r: (lambda a: f"**1.** She buys {a} packs.\n**2.** Each holds {r.randint(2, 9)}.\n"
                                          f"The answer is {v}.")(r.randint(2, 40)),
    "bold-heading": lambda v, r: f"**Step 1:** {r.randint(2, 9)} * {r.randint(2, 9)}.\n**Final answer:** **{_comma(v)}**",
    "bold-italic": lambda v, r: f"So she earns ***${_comma(v)}*** per week.",
    "exclamation": lambda v, r: f"The answer is {v}!",
    "backticks": lambda v, r: f"The answer is `{v}`.",
    "double-quotes": lambda v, r: f'The answer is "{v}".',
    "curly-quotes": lambda v, r: f"Final answer: “{_comma(v)}”",
    "answer-tag": lambda v, r: (f"<think>{r.randint(2, 9)} boxes of {r.randint(2, 30)} each.</think>\n"
                                f"<answer>{v}</answer>"),
    "unicode-minus": lambda v, r: f"The answer is {_neg(v)}.",
    "parenthesised": lambda v, r: f"The answer is ({v}).",
    "self-correction": lambda v, r: f"The answer is {v + r.choice((-3, -1, 1, 2, 10))}. Wait, actually {v}.",
    "self-correction-no": lambda v, r: (lambda w: f"So the answer is {w}. No, wait, it's {v}.")(v + r.randint(1, 9)),
    "self-correction-recompute": lambda v, r: (lambda a: f"The answer is {v + 5}. Oops, I made a mistake: "
                                                         f"{a} - {a - v} = {v}.")(abs(v) + r.randint(5, 50)),
    "check-after-answer": lambda v, r: (lambda a: f"The answer is {v}. Let me check: {a} + {v - a} = {v}. "
                                                  f"Actually I used {r.randint(2, 9)} bags.")(r.randint(1, 9)),
}


def _power_cases(rng: random.Random, n: int) -> list[Case]:
    cases = []
    for i in range(n):
        k, truth = rng.randint(2, 9), i % 2 == 0
        mantissa = rng.choice(("1.2", "2.5", "3", "4.75", "7.1"))
        style = rng.choice(("power-of-ten", "scientific-boxed", "scientific-e"))
        gold = 10 ** k if style == "power-of-ten" else int(float(mantissa) * 10 ** k)
        shown = k if truth else k + rng.choice((-1, 1))
        reply = {"power-of-ten": f"That is 10^{shown} grains.",
                 "scientific-boxed": f"\\boxed{{{mantissa} \\times 10^{shown}}}",
                 "scientific-e": f"The answer is {mantissa}e{shown}."}[style]
        cases.append(Case(style, reply, str(gold), truth))
    return cases


def _mixed_cases(rng: random.Random, n: int) -> list[Case]:
    cases = []
    for i in range(n):
        whole, den = rng.randint(1, 20), rng.choice((2, 4, 8))
        top = rng.randrange(1, den, 2)
        gold = whole + top / den
        truth = i % 2 == 0
        shown_whole = whole if truth else whole + rng.choice((-1, 1))
        cases.append(Case("mixed-number", f"She needs {shown_whole} {top}/{den} cups of flour in all.", f"{gold:g}", truth))
    return cases


def _arithmetic_question(rng: random.Random) -> tuple[str, int, int, str, int]:
    a, b, op = rng.randint(0, 19), rng.randint(0, 19), rng.choice("+-")
    return f"What is {a} {op} {b}?", a, b, op, a + b if op == "+" else a - b


# restating the question (never an answer) and evaluating it (an answer): (a, op, b, value) -> reply
ECHOES = {
    "echo-bare": lambda a, op, b: f"{a} {op} {b}",
    "echo-question": lambda a, op, b: f"What is {a} {op} {b}?",
    "echo-finish": lambda a, op, b: f"Action: Finish[{a} {op} {b}]",
    "echo-boxed": lambda a, op, b: f"\\boxed{{{a} {op} {b}}}",
    "echo-unfinished": lambda a, op, b: f"{a} {op} {b} =",
    "echo-answer-is": lambda a, op, b: f"The answer is {a} {op} {b}.",
}
EVALUATED = {
    "evaluated-equation": lambda a, op, b, v: f"{a} {op} {b} = {v}",
    "evaluated-after-question": lambda a, op, b, v: f"What is {a} {op} {b}? {v}",
    "evaluated-finish": lambda a, op, b, v: f"Thought: {a} {op} {b} = {v}.\nAction: Finish[{v}]",
    "evaluated-answer-is": lambda a, op, b, v: f"The answer is {v}.",
}

# written by hand: (reply, gold, question, truth)
EDGE_CASES = [
    ("The answer is **18**.", "18", None, True),
    ("Finish[**18**]", "18", None, True),
    ("**1.** Add the eggs. The answer is 18.", "18", None, True),
    ("The answer is 1500!", "1500", None, True),
    ("10^3", "1000", None, True),
    ("\\boxed{1.2 \\times 10^3}", "1200", None, True),
    ("0 + 3", "3", "What is 0 + 3?", False),
    ("What is 0 + 3?", "3", "What is 0 + 3?", False),
    ("Finish[0 + 3]", "3", "What is 0 + 3?", False),
    ("\\boxed{0 + 3}", "3", "What is 0 + 3?", False),
    ("0 + 3 = 3", "3", "What is 0 + 3?", True),
    ("The answer is 3", "3", "What is 0 + 3?", True),
    ("What is 0 plus 3?", "3", "What is 0 + 3?", False),
    ("12 - 16 =", "-4", "What is 12 - 16?", False),
    ("12 - 16 = -4", "-4", "What is 12 - 16?", True),
    ("The answer is `18`.", "18", None, True),
    ('The answer is "18".', "18", None, True),
    ("<answer>18</answer>", "18", None, True),
    ("The answer is −3.", "-3", None, True),
    ("The answer is (-3).", "-3", None, True),
    ("The answer is 2 1/2.", "2.5", None, True),
    ("The answer is 17. Wait, actually 18", "18", None, True),
    ("The answer is 17. Wait, actually 18", "17", None, False),
    ("The answer is 18. Actually I used 3 bags.", "18", None, True),
    ("The answer is 2^3", "8", None, False),  # an operation left for the reader is no answer
    ("Finish[12 - 16]", "-4", None, False),
    ("Janet’s ducks lay 16 eggs per day. How many are left?", "16",
     "Janet’s ducks lay 16 eggs per day. How many are left?", False),  # the GSM8K question copied
    ("Pages 3–5 are torn, so 12 remain.", "12", None, True),  # an en dash between numbers is no minus
    ("**Answer:** $1,234.50", "1234.5", None, True),
    ("The answer is 5 - (-3) = 8.", "8", None, True),
    ("She scored 3 goals! The answer is 7.", "7", None, True),
    ("The answer is 18, not 17.", "18", None, True),
    ("I cannot solve this.", "18", None, False),
    ("2**3**2", "512", None, False),  # a power tower is not judged
    ("**18**", "18", None, True),
    ("The total is 5 + 13 = 18.", "18", None, True),
    ("I think it's 17, no wait, 18.", "18", None, True),
    ("The answer is 1,000,000!", "1000000", None, True),
    ("What is 7 - 2? The answer is 5.", "5", "What is 7 - 2?", True),
    ("7 - 2", "5", "What is 7 - 2?", False),  # math-verify alone evaluates it: 5
    ("(7 - 2)", "5", "What is 7 - 2?", False),
    ("7 minus 2", "2", "What is 7 - 2?", False),
    ("Thought: 7 - 2 = 5.\nAction: Finish[5]", "5", "What is 7 - 2?", True),
    ("The answer is 18 apples and 3 pears.", "18", None, True),
    ("It takes 2.5 x 10^2 seconds.", "250", None, True),
    ("6 * 3 = 18. Wait, she ate 3, so 18 - 3 = 15.\n#### 15", "15", None, True),
    ("Actually, she has 3 bags of 6 apples, so 18 apples.", "18", None, True),
    ("Sorry, the answer is 18.", "18", None, True),
    ("The answer is 18 (9 eggs × $2).", "18", None, True),
]


def battery(size_per_format: int = 60) -> list[Case]:
    """Hand-labelled replies: half right and half wrong in every style, the edge cases, and
    restatements (all wrong) and evaluations of arithmetic questions."""
    rng = random.Random(SEED)
    cases: list[Case] = []
    for name, make in {**FORMATS, **STYLES}.items():
        for i in range(size_per_format):
            gold = rng.choice((rng.randint(0, 99), rng.randint(100, 9999), rng.randint(10_000, 2_000_000)))
            if name in ("unicode-minus", "parenthesised"):  # styles of negative numbers
                gold = -gold - 1
            elif name in ("finish", "answer-is", "boxed", "self-correction") and rng.random() < 0.1:
                gold = -gold
            elif name == "exclamation":
                gold = rng.randint(1000, 99_999)
            truth = i % 2 == 0
            value = gold if truth else _wrong(gold, rng)
            cases.append(Case(name, make(value, rng), str(gold), truth))
    cases += _power_cases(rng, 3 * size_per_format)
    cases += _mixed_cases(rng, size_per_format)
    for i in range(size_per_format):
        for name, make in ECHOES.items():
            question, a, b, op, value = _arithmetic_question(rng)
            cases.append(Case(name, make(a, op, b), str(b if i % 2 == 0 else value), False, question))
        for name, make in EVALUATED.items():
            question, a, b, op, value = _arithmetic_question(rng)
            truth = i % 2 == 0
            cases.append(Case(name, make(a, op, b, value if truth else value + rng.choice((-1, 1))),
                              str(value), truth, question))
    cases += [Case("edge", reply, gold, truth, question) for reply, gold, question, truth in EDGE_CASES]
    return cases


def gsm8k_references() -> list[Case]:
    """GSM8K's 1,319 test solutions as the dataset writes them, ending three ways (all right)."""
    import json

    from reinagent.paths import DATA_DIR

    cases = []
    for line in (DATA_DIR / "gsm8k" / "test.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        worked, _, gold = row["answer"].rpartition("#### ")
        gold = gold.strip()
        for ending in ("#### {}", "The answer is **{}**.", "\\boxed{{{}}}"):
            cases.append(Case(ending.format("N"), worked + ending.format(gold), gold, True, row["question"]))
    return cases


def echoes() -> list[Case]:
    """Every arithmetic and arithmetic20 task restated unevaluated in each ECHOES way (all wrong)."""
    from reinagent.benchmarks.arithmetic import all_tasks

    cases = []
    for top, size in ((9, 60), (19, 300)):
        for tasks in all_tasks(top, size).values():
            for task in tasks:
                for name, make in ECHOES.items():
                    cases.append(Case(name, make(task.a, task.op, task.b), task.answer, False, task.question))
    return cases


def math_verify_alone(case: Case) -> bool:
    """math-verify 0.9's own verdict on the whole reply (it does not know Finish[...] or questions)."""
    from reinagent.benchmarks.math_judge import _math_verify

    mv = _math_verify()  # math_verify itself, with its timeout warnings quiet
    try:
        return bool(mv.verify(mv.parse(case.gold, parsing_timeout=None),
                              mv.parse(case.reply, parsing_timeout=None), timeout_seconds=None))
    except Exception:  # noqa: BLE001 - what it cannot read is not a match
        return False


def agreement(cases: list[Case], with_question: bool = True) -> dict[str, Counter]:
    """style -> Counter of 'judge' (our judge agrees with the label), 'math-verify' (the library
    alone agrees), 'credited' (our judge's successes), 'n'."""
    from reinagent.benchmarks.math_judge import judge

    table: dict[str, Counter] = {}
    for case in cases:
        row = table.setdefault(case.style, Counter())
        ours = judge(case.reply, case.gold, question=case.question if with_question else None).success
        row["n"] += 1
        row["credited"] += ours
        row["judge"] += ours is case.truth
        row["math-verify"] += math_verify_alone(case) is case.truth
    return table


def _total(table: dict[str, Counter]) -> Counter:
    return sum(table.values(), Counter())


def main() -> None:
    cases = battery()
    table = agreement(cases)
    total = _total(table)
    print(f"## Hand-labelled battery: {total['n']} replies in {len(table)} styles\n")
    print("| style | replies | judge agrees | math-verify alone agrees |\n| --- | --- | --- | --- |")
    for style, row in table.items():
        print(f"| {style} | {row['n']} | {row['judge']} | {row['math-verify']} |")
    print(f"| **all** | {total['n']} | {total['judge']} | {total['math-verify']} |\n")
    refs = agreement(gsm8k_references())
    print("## GSM8K's 1,319 test solutions, three endings: credited\n")
    print("| ending | judge | math-verify alone |\n| --- | --- | --- |")
    for style, row in refs.items():
        print(f"| `{style}` | {row['credited']} of {row['n']} | {row['math-verify']} of {row['n']} |")
    print("\n## Restatements of every arithmetic and arithmetic20 task: false passes\n")
    print("| restatement | tasks | judge, with the question | judge, reply alone | math-verify alone |")
    print("| --- | --- | --- | --- | --- |")
    known, alone = agreement(echoes()), agreement(echoes(), with_question=False)
    for style, row in known.items():
        print(f"| {style} | {row['n']} | {row['credited']} | {alone[style]['credited']} | "
              f"{row['n'] - row['math-verify']} |")


if __name__ == "__main__":
    main()
