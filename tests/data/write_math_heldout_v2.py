"""How tests/data/math_judge_heldout_v2.jsonl was written (issue 44), kept for provenance only.

The set is the JSONL file, frozen in its own commit before the judge was changed; this script is
not run by the tests, and running it again (`python -m tests.data.write_math_heldout_v2`) must
reproduce the file byte for byte (tests/test_math_heldout.py checks the file's hash, not this).

Every reply below is a phrasing written by hand; numbers are drawn from a fixed seed. The label is
the hand label: whether the number the reply finally states, as a reader takes it, is the gold.
A reply that states no single number (a retraction without a new number, a set of two values, the
question's operands listed, a multiple of pi or of i) is labelled wrong. Each row: id, style, kind
(gsm8k: word-problem style; arithmetic: `What is a op b?` with operands 0..19), question, reply,
gold, label, and `why` when the label is not simply "states the gold".
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 44
OUT = Path(__file__).with_name("math_judge_heldout_v2.jsonl")

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def words(n: int, hyphen: bool = True, with_and: bool = False) -> str:
    """English words for 0 <= n < 1,000,000 ("forty-two", "one hundred and five")."""
    if n < 0:
        return "minus " + words(-n, hyphen, with_and)
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (("-" if hyphen else " ") + _ONES[ones] if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        head = _ONES[hundreds] + " hundred"
        return head + ((" and " if with_and else " ") + words(rest, hyphen) if rest else "")
    thousands, rest = divmod(n, 1000)
    head = words(thousands, hyphen) + " thousand"
    return head + ((" and " if with_and and rest < 100 else " ") + words(rest, hyphen, with_and) if rest else "")


def comma(n: int) -> str:
    return f"{n:,}"


class Writer:
    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.rows: list[dict] = []

    def add(self, style: str, kind: str, question: str | None, reply: str, gold, label: bool, why: str = "") -> None:
        row = {"id": f"{style}/{sum(r['style'] == style for r in self.rows):03d}", "style": style, "kind": kind,
               "question": question, "reply": reply, "gold": str(gold), "label": label}
        if why:
            row["why"] = why
        self.rows.append(row)

    def near(self, v: int) -> int:
        """A plausible wrong number: off by a little, by ten times, or far."""
        r = self.rng
        kind = r.choice(("near", "near", "ten", "far"))
        if kind == "near":
            return v + r.choice((-3, -2, -1, 1, 2, 4))
        if kind == "ten":
            return v * 10 if v else 10
        return v + r.randint(5, 300)


def arithmetic_question(r: random.Random, op: str | None = None) -> tuple[str, int, str, int, int]:
    a, b, op = r.randint(0, 19), r.randint(0, 19), op or r.choice("+-")
    return f"What is {a} {op} {b}?", a, op, b, a + b if op == "+" else a - b


def latex_equation(w: Writer) -> None:
    r = w.rng
    for i in range(36):
        a, b = r.randint(2, 12), r.randint(3, 60)
        v = a * b
        right = i % 3 != 2
        # right: the equation's result is the gold; wrong: the gold is a*b but the reply miscalculates
        stated = v if right else w.near(v)
        t = i % 6
        question = f"Mia buys {a} shirts at ${b} each. How much does she pay?"
        if t == 0:
            reply = f"Each shirt costs \\${b}, so the total is $ {a} \\times \\${b} = \\${stated}$."
        elif t == 1:
            reply = f"She buys {a} shirts.\n\n${a} \\times \\${b} = \\${stated}$"
        elif t == 2:
            question = f"A machine makes {b} widgets an hour for {a} hours. How many widgets does it make?"
            reply = f"Widgets made: ${b} \\times {a} = {stated} \\text{{ widgets}}$"
        elif t == 3:
            question = f"A machine makes {b} widgets an hour for {a} hours. How many widgets does it make?"
            reply = f"In {a} hours it makes $ {b} \\cdot {a} = {stated}$ widgets."
        elif t == 4:
            reply = f"Total cost: $\\${b} \\times {a} = \\${stated}$."
        else:
            question = f"Tom reads {b} pages a day for {a} days. How many pages does he read?"
            reply = f"He reads ${b}$ pages a day, so in ${a}$ days he reads ${b} \\times {a} = {stated}$ pages."
        w.add("latex-equation", "gsm8k", question, reply, v, right, "" if right else "miscalculated result")


def number_words(w: Writer) -> None:
    r = w.rng
    for i in range(40):
        v = r.choice((r.randint(0, 19), r.randint(20, 99), r.randint(100, 999)))
        right = i % 2 == 0
        stated = v if right else w.near(v)
        t = i % 8
        if t == 0:
            reply = f"The answer is {words(stated)}."
        elif t == 1:
            reply = f"After paying the bills, she has {words(stated)} dollars left."
        elif t == 2:
            reply = f"Thought: I count them.\nAction: Finish[{words(stated)}]"
        elif t == 3:
            reply = f"So the answer is {words(stated, hyphen=False, with_and=True)}."
        elif t == 4:
            reply = f"Answer: {words(stated).capitalize()} apples."
        elif t == 5:
            reply = f"She had {r.randint(20, 40)} stickers and gave some away. She has {words(stated)} stickers now."
        elif t == 6:
            reply = f"The final answer is {words(stated)} dollars."
        else:
            reply = f"That makes {words(stated)} cookies in all."
        w.add("number-words", "gsm8k", None, reply, v, right)
    for i in range(12):  # arithmetic in words, negatives included
        question, a, op, b, v = arithmetic_question(r, "-" if i % 2 else "+")
        right = i % 3 != 2
        stated = v if right else -v if v else 1
        text = words(stated)
        reply = (f"Thought: {a} {op} {b} is {text}.\nAction: Finish[{text}]" if i % 2 == 0
                 else f"The answer is {text}.")
        w.add("number-words", "arithmetic", question, reply, v, right)


def number_after_answer(w: Writer) -> None:
    r = w.rng
    for i in range(36):
        v, h = r.randint(40, 400), r.randint(2, 12)
        right = i % 2 == 0
        # wrong: the stated answer is off, and the gold is the number that follows it (a trap)
        gold = v if right else h
        t = i % 6
        if t == 0:
            reply = f"The answer is \\${v} on Saturday, since she works for {h} hours instead!"
        elif t == 1:
            reply = f"So the answer is {v}. That is {h} more than last week."
        elif t == 2:
            reply = f"Final answer: {v} marbles, shared among {h} friends."
        elif t == 3:
            reply = f"The answer is {v} dollars, which she earns in {h} days."
        elif t == 4:
            reply = f"**Answer:** {v} minutes. (It takes {h} laps.)"
        else:
            reply = f"She will have {v} stamps, so the answer is {v}. She started with {h} albums."
        w.add("number-after-answer", "gsm8k", None, reply, gold, right,
              "" if right else "the gold is the number after the stated answer")


def escaped_dollar(w: Writer) -> None:
    r = w.rng
    for i in range(30):
        v = r.choice((r.randint(5, 99), r.randint(100, 9999), r.randint(10_000, 99_999)))
        right = i % 2 == 0
        stated = v if right else w.near(v)
        t = i % 5
        if t == 0:
            reply = f"She pays \\${stated} in total."
        elif t == 1:
            reply = f"The total cost is \\${comma(stated)}."
        elif t == 2:
            reply = f"Answer: \\${stated}.00"
        elif t == 3:
            reply = f"He spent \\${r.randint(2, 9)} on lunch and has \\${comma(stated)} left."
        else:
            reply = f"So the answer is \\${comma(stated)}"
        w.add("escaped-dollar", "gsm8k", None, reply, v, right)


def nbsp_thousands(w: Writer) -> None:
    r = w.rng
    spaces = ("\u00a0", "\u202f", "\u2009")
    for i in range(30):
        v = r.choice((r.randint(1000, 9999), r.randint(10_000, 999_999), r.randint(1_000_000, 9_999_999)))
        right = i % 2 == 0
        stated = v if right else w.near(v)
        shown = comma(stated).replace(",", spaces[i % 3])
        t = i % 5
        if t == 0:
            reply = f"The answer is {shown}."
        elif t == 1:
            reply = f"She earns {shown} dollars a year."
        elif t == 2:
            reply = f"Action: Finish[{shown}]"
        elif t == 3:
            reply = f"Total: ${shown}"
        else:
            reply = f"In all, the farm has {shown} chickens."
        w.add("nbsp-thousands", "gsm8k", None, reply, v, right)


def self_correction(w: Writer) -> None:
    r = w.rng
    for i in range(40):
        v = r.randint(3, 500)
        first = w.near(v)
        t = i % 8
        # half: the gold is the corrected number (right); half: the gold is the retracted one (wrong)
        right = i % 2 == 0
        gold = v if right else first
        if t == 0:
            reply = f"The answer is {first}. Wait, no. It's {v}."
        elif t == 1:
            reply = f"The answer is {first}. Wait, no. It’s {v}."
        elif t == 2:
            reply = f"So {first}. Hmm, wait, I forgot the tax. The total is {v}."
        elif t == 3:
            reply = f"The answer is {first}. Actually no: {v}."
        elif t == 4:
            reply = f"The answer is {w.near(v)}. Wait, actually {first}. No, wait, it's {v}."
        elif t == 5:
            reply = f"I get {first}. Let me recompute: {v}."
        elif t == 6:
            reply = f"The answer is {first}... no, sorry, the correct answer is {v}."
        else:
            reply = f"The answer is {first}.\nCorrection: the answer is {v}."
        w.add("self-correction-later", "gsm8k", None, reply, gold, right,
              "" if right else "the gold is the retracted number")
    for i in range(12):  # a retraction with no new number states no answer
        v = r.randint(3, 500)
        t = i % 4
        reply = (f"The answer is {v}. Wait, no.", f"So it's {v}. No, that's wrong.",
                 f"The answer is {v}. Wait, that's not right.", f"I think {v}. Hmm, no.")[t]
        w.add("retraction", "gsm8k", None, reply, v, False, "retracted without a new number")


def not_but(w: Writer) -> None:
    r = w.rng
    for i in range(30):
        v = r.randint(2, 300)
        other = w.near(v)
        right = i % 2 == 0
        gold = v if right else other
        t = i % 5
        reply = (f"The answer is not {other}, but {v}.", f"It isn't {other}; it's {v}.",
                 f"The total is {v}, not {other}.", f"The answer is not {other} but {v}.",
                 f"Not {other}: the answer is {v}.")[t]
        w.add("not-but", "gsm8k", None, reply, gold, right, "" if right else "the gold is the denied number")


def sign_space(w: Writer) -> None:
    r = w.rng
    for i in range(48):
        # half the tasks have a negative answer, half a positive one; the reply states the negative
        a = r.randint(0, 9)
        b = r.randint(a + 1, 19)
        c = b - a
        negative = i % 2 == 0
        question = f"What is {a} - {b}?" if negative else f"What is {a} + {c - a}?" if c >= a else f"What is {c} + 0?"
        gold = -c if negative else c
        t = i % 8
        reply = (f"Thought: {a} - {b} = - {c}.\nAction: Finish[- {c}]",
                 f"The answer is \u2212 {c}",
                 f"Action: Finish[\u2212 {c}]",
                 f"The answer is minus {c}.",
                 f"Answer: - {c}",
                 f"Thought: it is negative.\nAction: Finish[minus {c}]",
                 f"The result is \u2013 {c}.",
                 f"\\boxed{{- {c}}}")[t]
        w.add("sign-space", "arithmetic", question, reply, gold, negative,
              "" if negative else "the reply states the negative of the gold")


def magnitude(w: Writer) -> None:
    r = w.rng
    for i in range(36):
        n = r.randint(2, 99)
        t = i % 6
        mult, shown = ((1000, f"{n} thousand"), (1000, f"{n}k"), (1_000_000, f"{n} million"),
                       (1000, f"${n}k"), (1000, f"{n}K"), (1_000_000, f"{n}.5 million"))[t]
        value = n * mult if t != 5 else n * mult + mult // 2
        right = i % 2 == 0
        gold = value if right else n
        reply = (f"The answer is {shown}.", f"She sold {shown} units.", f"Final answer: {shown} dollars",
                 f"He earns {shown} a year.", f"Finish[{shown}]", f"The city has {shown} people.")[t]
        w.add("magnitude", "gsm8k", None, reply, gold, right, "" if right else "the gold is the bare mantissa")


def pi_imaginary(w: Writer) -> None:
    r = w.rng
    for i in range(30):
        n = r.randint(2, 99)
        t = i % 10
        if t < 6:  # a multiple of pi or of i is not the number
            reply = (f"The area is {n}\\pi square feet.", f"The answer is ${n}\\pi$.", f"That is {n}π cm.",
                     f"The answer is {n}i.", f"\\boxed{{{n}i}}", f"\\boxed{{{n}\\sqrt{{2}}}}")[t]
            w.add("pi-imaginary", "gsm8k", None, reply, n, False, "a multiple of pi, i or sqrt 2 is not the number")
        else:  # a word after the number that starts with i or pi is a unit
            reply = (f"The answer is {n} pies.", f"She bought {n} items.", f"It is {n} inches long.",
                     f"Finish[{n} pizzas]")[t - 6]
            w.add("pi-imaginary", "gsm8k", None, reply, n, True)


def operands_listed(w: Writer) -> None:
    r = w.rng
    for i in range(36):
        b = r.randint(1, 19)
        a = 0 if i % 3 else r.randint(1, 19)
        question, v = f"What is {a} + {b}?", a + b
        t = i % 6
        reply, label = ((f"The sum of {a} and {b}.", False), (f"Finish[{a}, {b}]", False),
                        (f"Thought: I add {a} and {b}.\nAction: Finish[{a} and {b}]", False),
                        (f"The sum of {a} and {b} is {v}.", True), (f"Adding {a} and {b} gives {v}.", True),
                        (f"Thought: add {a} and {b}.\nAction: Finish[{v}]", True))[t]
        w.add("operands-listed", "arithmetic", question, reply, v, label, "" if label else "the operands, not a sum")


def explicit_plus(w: Writer) -> None:
    r = w.rng
    for i in range(24):
        v = r.randint(1, 500)
        right = i % 2 == 0
        stated = v if right else w.near(v)
        reply = (f"+{stated}", f"Finish[+{stated}]", f"The answer is +{stated}.", f"The change is +{stated} points.")[i % 4]
        w.add("explicit-plus", "gsm8k", None, reply, v, right)


def display_math(w: Writer) -> None:
    r = w.rng
    for i in range(24):
        v = r.randint(1, 2000)
        right = i % 2 == 0
        stated = v if right else w.near(v)
        a = r.randint(1, max(1, stated - 1)) if stated > 1 else 0
        reply = (f"\\[{stated}\\]", f"The total is\n\\[\n{stated}\n\\]", f"\\[ {a} + {stated - a} = {stated} \\]",
                 f"So\n\\[ \\text{{answer}} = {stated} \\]")[i % 4]
        w.add("display-math", "gsm8k", None, reply, v, right)


def boxed_set(w: Writer) -> None:
    r = w.rng
    for i in range(24):
        v = r.randint(2, 40)
        t = i % 6
        if t < 4:
            reply = (f"\\boxed{{\\{{{v - 1}, {v}\\}}}}", f"\\boxed{{\\{{{v}, {v + 1}\\}}}}", f"\\boxed{{{v}, {v + 1}}}",
                     f"Finish[{v - 1} or {v}]")[t]
            w.add("boxed-set", "gsm8k", None, reply, v, False, "two values are not one answer")
        else:
            reply = (f"\\boxed{{{v}}}", f"The answer is $\\boxed{{{v}}}$.")[t - 4]
            w.add("boxed-set", "gsm8k", None, reply, v, True)


def several_hashes(w: Writer) -> None:
    r = w.rng
    for i in range(30):
        v = r.randint(2, 900)
        first = w.near(v)
        right = i % 2 == 0
        gold = v if right else first
        t = i % 3
        reply = (f"She has {first} apples.\n#### {first}\nWait, I forgot the {v - first if v > first else 2} she bought.\n#### {v}",
                 f"#### {first}\n#### {v}",
                 f"First attempt:\n#### {first}\nChecking again, the total is {v}.\n#### {v}")[t]
        w.add("several-hashes", "gsm8k", None, reply, gold, right, "" if right else "the gold is the first #### line")


def plus_operator(w: Writer) -> None:
    r = w.rng
    for i in range(36):
        b = r.randint(1, 19)
        a = 0 if i % 2 else r.randint(1, 19)
        v = a + b
        t = i % 6
        if t < 3:  # with the arithmetic question known
            question = f"What is {a} + {b}?"
            reply, label = ((f"{a} plus {b}", False), (f"The answer is {a} plus {b}.", False),
                            (f"{a} plus {b} equals {v}.", True))[t]
            w.add("plus-operator", "arithmetic", question, reply, v, label, "" if label else "the sum left unevaluated")
        else:  # GSM8K style, no operation in the question: `a plus b` is still an operation, not b
            reply, label = ((f"The answer is {a} plus {b}.", False), (f"So she pays {a} plus {b}.", False),
                            (f"{a} plus {b} makes {v} in all.", True))[t - 3]
            w.add("plus-operator", "gsm8k", "How many does she have in all?", reply, b if not label else v, label,
                  "" if label else "the gold is the last operand of a sum left unevaluated")


def plain(w: Writer) -> None:
    r = w.rng
    for i in range(40):
        v = r.choice((r.randint(0, 99), r.randint(100, 9999), r.randint(10_000, 500_000)))
        right = i % 2 == 0
        stated = v if right else w.near(v)
        a = r.randint(2, 9)
        t = i % 8
        reply = (f"The answer is {stated}.", f"Therefore, she has {comma(stated)} apples left.",
                 f"Thought: {a} bags in all.\nAction: Finish[{stated}]", f"\\boxed{{{stated}}}",
                 f"**Final Answer:** {comma(stated)}",
                 f"Step 1: {a} boxes.\nStep 2: {a} * {r.randint(2, 9)} more.\nSo the total is {stated}.",
                 f"She earns ${comma(stated)} per month.", f"The answer is: {stated}")[t]
        w.add("plain", "gsm8k", None, reply, v, right)
    for i in range(30):
        question, a, op, b, v = arithmetic_question(r)
        right = i % 2 == 0
        stated = v if right else (-v if v and i % 4 == 1 else v + r.choice((-1, 1)))
        reply = (f"Thought: {a} {op} {b} = {stated}.\nAction: Finish[{stated}]", f"{a} {op} {b} = {stated}",
                 f"The answer is {stated}.")[i % 3]
        w.add("plain", "arithmetic", question, reply, v, right)


def write() -> list[dict]:
    w = Writer()
    for part in (latex_equation, number_words, number_after_answer, escaped_dollar, nbsp_thousands, self_correction,
                 not_but, sign_space, magnitude, pi_imaginary, operands_listed, explicit_plus, display_math, boxed_set,
                 several_hashes, plus_operator, plain):
        part(w)
    return w.rows


if __name__ == "__main__":
    rows = write()
    OUT.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    print(f"{len(rows)} replies written to {OUT}")
