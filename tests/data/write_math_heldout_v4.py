"""How tests/data/math_judge_heldout_v4.jsonl was written (issue 54), kept for provenance only.

The third set (math_judge_heldout_v3.jsonl) was frozen before the judge changed and then used to
change it, so its score after the change is a training score. This fourth, small set was written
after the change, with problems and phrasings that neither the third set nor any probe used, and
committed before any judge ran on it: its score is the honest held-out figure. Same procedure
(docs/math-judge.md), same label rule: right when the number the reply finally commits to, as a
reader takes it, is the gold; a reply cut inside an unfinished calculation commits to nothing.
Running it again (`python -m tests.data.write_math_heldout_v4`) reproduces the file byte for byte.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from decimal import Decimal as D
from pathlib import Path

SEED = 5454
OUT = Path(__file__).with_name("math_judge_heldout_v4.jsonl")


def num(v: D) -> str:
    return f"{D(v).normalize():f}"


@dataclass(frozen=True)
class Problem:
    question: str
    steps: tuple[str, ...]
    answer: D
    unit: str  # the unit after the number, `km`, `cookies`; "$" means a dollar sign before it
    given: str  # a sentence restating one given number of the question, used as an operand in steps
    check: str  # a check of the answer: `{v}` is where the stated value goes


def stated(p: Problem, v: D) -> str:
    return f"${num(v)}" if p.unit == "$" else f"{num(v)} {p.unit}"


def train(r: random.Random) -> Problem:
    speed, hours = r.choice((48, 64, 72, 85)), r.choice((D("1.5"), D("2.5"), D("0.75")))
    km = speed * hours
    return Problem(f"A train travels at {speed} km/h for {num(hours)} hours. How far does it go, in km?",
                   (f"Distance is speed times time.", f"{speed} × {num(hours)} = {num(km)}."), km, "km",
                   f"The train goes {speed} km each hour.", f"{{v}} ÷ {num(hours)} = {{q}} km/h")


def cookies(r: random.Random) -> Problem:
    batches, each, eaten = r.randint(3, 6), r.choice((12, 18, 24)), r.randint(5, 15)
    left = D(batches * each - eaten)
    return Problem(f"Sam bakes {batches} batches of {each} cookies and his family eats {eaten}. How many cookies are left?",
                   (f"{batches} × {each} = {batches * each} cookies baked.", f"{batches * each} - {eaten} = {num(left)} left."),
                   left, "cookies", f"Sam bakes {batches} batches.", f"{{v}} + {eaten} = {{q}} cookies baked")


def discount(r: random.Random) -> Problem:
    price, off = r.choice((D(40), D(65), D(90), D(125))), r.choice((10, 15, 30))
    pay = price * (100 - off) / 100
    return Problem(f"A jacket costs ${num(price)} and is {off}% off. How much does Ana pay, in dollars?",
                   (f"The discount is {off}% of ${num(price)} = ${num(price * off / 100)}.",
                    f"${num(price)} - ${num(price * off / 100)} = ${num(pay)}."), pay, "$",
                   f"The jacket costs ${num(price)} before the sale.", f"{{v}} + {num(price * off / 100)} = {{q}} dollars")


def stock(r: random.Random) -> Problem:
    start, fall, rise = r.randint(20, 40), r.randint(45, 70), r.randint(3, 9)
    change = D(-fall + rise)
    return Problem(f"A share loses ${fall} on Monday and gains ${rise} on Tuesday. What is its total change, in dollars?",
                   (f"Monday: -{fall}.", f"Tuesday: +{rise}.", f"-{fall} + {rise} = {num(change)}."), change, "$",
                   f"It gained ${rise} on Tuesday.", f"{{v}} - {rise} = {{q}}, Monday's loss")


def average(r: random.Random) -> Problem:
    scores = [r.randint(60, 99) for _ in range(4)]
    mean = D(sum(scores)) / 4
    return Problem(f"Lena scored {', '.join(map(str, scores))} on four tests. What is her average score?",
                   (f"The sum is {' + '.join(map(str, scores))} = {sum(scores)}.", f"{sum(scores)} ÷ 4 = {num(mean)}."),
                   mean, "points", f"Her first test was {scores[0]}.", f"{{v}} × 4 = {{q}}, the sum")


def budget(r: random.Random) -> Problem:
    monthly, months = r.choice((D("1250.5"), D(2300), D("3450.25"), D(4100))), r.choice((6, 18, 24))
    total = monthly * months
    return Problem(f"A shop pays ${num(monthly)} rent a month. How much rent does it pay in {months} months, in dollars?",
                   (f"Rent is ${num(monthly)} a month.", f"{months} × ${num(monthly)} = ${num(total)}."), total, "$",
                   f"The rent is ${num(monthly)} a month.", f"{{v}} ÷ {months} = {{q}} a month")


KINDS = (train, cookies, discount, stock, average, budget)


def euro(v: D) -> str:
    v = D(v).normalize()
    whole, frac = int(abs(v)), abs(v) - int(abs(v))
    grouped = f"{whole:,}".replace(",", ".")
    sign = "-" if v < 0 else ""
    if frac:
        return f"{sign}{grouped},{f'{frac:.2f}'[2:]}"
    if whole >= 1000 and grouped.count(".") == 1:
        return f"{sign}{grouped},00"
    return sign + grouped


class Writer:
    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.rows: list[dict] = []

    def add(self, style: str, p: Problem, reply: str, label: bool, why: str = "") -> None:
        row = {"id": f"{style}/{sum(r['style'] == style for r in self.rows):03d}", "style": style, "kind": "gsm8k",
               "question": p.question, "reply": reply, "gold": num(p.answer), "label": label}
        if why:
            row["why"] = why
        self.rows.append(row)

    def wrong(self, v: D) -> D:
        r = self.rng
        if v < 0 and r.random() < 0.4:
            return -v
        return v + r.choice((D(-2), D(-1), D(1), D(3), D("0.5"), D(10)))


def q(p: Problem, v: D) -> str:
    """The check's result for a stated value v (what the check computes from it)."""
    text = p.check
    op = text.split("{v}")[1].split("=")[0].strip()
    sign, operand = op[0], D(op[1:].strip())
    result = {"÷": v / operand, "×": v * operand, "+": v + operand, "-": v - operand}[sign]
    return text.replace("{v}", num(v)).replace("{q}", num(result.quantize(D("0.01")).normalize()))


def body(p: Problem, v: D) -> list[str]:
    last = p.steps[-1]
    return [*p.steps[:-1], last if v == p.answer else last.rsplit("=", 1)[0] + f"= {num(v)}."]


def checks(w: Writer) -> None:
    forms = ("{b}\nSo the answer is {s}.\n\nLet me confirm: {c}. ✅",
             "{b}\n\n**Answer: {n}**\n\nQuick check - {c}, good.",
             "{b} Final answer: {n}.\n\nDouble check: {c}.",
             "{b}\n\nThe answer is {n}.\nProof: {c}.",
             "{b}\nAnswer: {s}\n\nChecking my work, {c}.",
             "{b}\n\nFinal answer: {n}\n\nVerify: {c}")
    for i in range(36):
        p = KINDS[i % len(KINDS)](w.rng)
        right = (i + i // len(forms)) % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        reply = forms[i % len(forms)].format(b=" ".join(body(p, v)), s=stated(p, v), n=num(v), c=q(p, v))
        w.add("check", p, reply, right, "" if right else "the committed answer is wrong")


def answer_first(w: Writer) -> None:
    forms = ("**Result: {s}**\n\n{b} {g}",
             "# {n}\n\n{b} {g}",
             "{s}\n\nBecause: {b} {g}",
             "**{n}** is the answer. {b} {g}",
             "__{s}__\n\nWorking: {b}\n{g}")
    for i in range(30):
        p = KINDS[i % len(KINDS)](w.rng)
        right = (i + i // len(forms)) % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        reply = forms[i % len(forms)].format(b=" ".join(body(p, v)), s=stated(p, v), n=num(v), g=p.given)
        w.add("answer-first", p, reply, right, "answer first, then the working and a given")


def european(w: Writer) -> None:
    forms = ("{b}\nThe answer is {e}.", "Action: Finish[{e}]", "{b}\n\nTotal: € {e}", "**{e}**")
    i = rows = 0
    while rows < 20:
        p = KINDS[i % len(KINDS)](w.rng)
        i += 1
        right = (rows + rows // len(forms)) % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        if euro(v) == num(v):
            continue
        b = " ".join(body(p, v)).replace("$", "€")
        reply = forms[rows % len(forms)].format(b=b, e=euro(v))
        w.add("european", p, reply, right, "European thousands or a decimal comma")
        rows += 1


def cut(w: Writer) -> None:
    forms = ("{first} Then {rest} ×", "{first}\nSo we take {rest} and", "{first} This gives us {rest} which gives us",
             "{first}\n\nThe remaining amount is {rest} -", "{first} Now, {rest} /")
    for i in range(25):
        p = KINDS[i % len(KINDS)](w.rng)
        first = p.steps[0]
        rest = p.steps[-1].rsplit("=", 1)[0].strip()
        reply = forms[i % len(forms)].format(first=first, rest=rest)
        w.add("cut-off", p, reply, False, "cut inside an unfinished calculation")
    for i in range(10):  # a control: cut after a committed answer
        p = KINDS[i % len(KINDS)](w.rng)
        right = i % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        reply = " ".join(body(p, v)) + f"\nThe final answer is {num(v)}.\nTo double-check, we compute {q(p, v).split('=')[0]}="
        w.add("cut-after-answer", p, reply, right, "cut in a check after the committed answer")


def controls(w: Writer) -> None:
    forms = ("**{g}**\n\n{b}\n\nIn total: {s}.",
             "{b}\nCheck: {c} ✗, that's not right. Recomputing gives {n2}. The answer is {n2}.",
             "{b} That is {s} (that is, {n} in all).",
             "{g}\n\n{b}")
    for i in range(24):
        p = KINDS[i % len(KINDS)](w.rng)
        right = (i + i // len(forms)) % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        t = i % len(forms)
        if t == 1:
            bad = w.wrong(p.answer)
            while bad == p.answer:
                bad = w.wrong(p.answer)
            reply = forms[t].format(b=" ".join(body(p, bad)), c=q(p, bad), n2=num(v))
            why = "a check finds the fault; the corrected answer counts"
        else:
            reply = forms[t].format(b=" ".join(body(p, v)), g=p.given, s=stated(p, v), n=num(v))
            why = "opens on a given; the answer comes last"
        w.add("control", p, reply, right, why)


def write() -> list[dict]:
    w = Writer()
    for style in (checks, answer_first, european, cut, controls):
        style(w)
    return w.rows


if __name__ == "__main__":
    rows = write()
    OUT.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    print(f"{len(rows)} rows -> {OUT}")
