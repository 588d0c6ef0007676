"""How tests/data/math_judge_heldout_v3.jsonl was written (issue 54), kept for provenance only.

The procedure is in docs/math-judge.md ("A third held-out set"); this script follows it. The set is
the JSONL file, frozen in its own commit before the judge was changed for issue 54; the tests check
the file's hash, not this script, and running it again (`python -m tests.data.write_math_heldout_v3`)
reproduces the file byte for byte.

Every phrasing below was written by hand (the styles of the repo's own model output are noted
where they are copied: parse_survey/qwen2.5-coder-1.5b/gsm8k-cot-default/records.jsonl and
docs/rl_demo/base_replies.jsonl); numbers are drawn from a fixed seed. The label is the hand label:
whether the number the reply finally commits to, as a reader takes it, is the gold. A reply that
commits to no number (cut off inside an unfinished expression) is wrong. Each row: id, style,
kind (gsm8k: a word problem; arithmetic: `What is a op b?`), question, reply, gold, label, and
`why` where the label is not simply "states the gold".
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from decimal import Decimal as D
from pathlib import Path
from typing import Callable

SEED = 54
OUT = Path(__file__).with_name("math_judge_heldout_v3.jsonl")


def num(v: D, thousands: bool = False) -> str:
    """A number as an English reply writes it: 22.5, -7, 1,234.5 (with `thousands`)."""
    v = D(v).normalize()
    text = f"{v:,f}" if thousands else f"{v:f}"
    return text


def money(v: D, thousands: bool = True) -> str:
    """$22.50 style: a sign before the dollar; two decimals when not whole."""
    v = D(v)
    sign, v = ("-", -v) if v < 0 else ("", v)
    body = f"{v:,.2f}" if v != v.to_integral() else f"{int(v):,}"
    return sign + "$" + (body if thousands else body.replace(",", ""))


def q(v: D) -> D:
    """A quotient as a reply writes it: at most two decimals."""
    return D(v).quantize(D("0.01")).normalize()


def euro(v: D) -> str:
    """A European number, always unambiguous: 1.234,5; 168.000,00; 12,5 (never a lone `1.250`)."""
    v = D(v).normalize()
    whole = int(abs(v))
    frac = abs(v) - whole
    grouped = f"{whole:,}".replace(",", ".")
    sign = "-" if v < 0 else ""
    if frac:
        decimals = f"{frac:f}"[2:]
        if len(decimals) == 1 and whole >= 1000:
            decimals += "0"  # 1.234,50: a euro amount
        return f"{sign}{grouped},{decimals}"
    if whole >= 1000 and grouped.count(".") == 1:
        return f"{sign}{grouped},00"  # 168.000,00: with one group only the decimals make it unambiguous
    return sign + grouped


@dataclass(frozen=True)
class Problem:
    kind: str
    question: str
    steps: tuple[str, ...]  # worked steps, the last one ending in the answer
    answer: D
    unit: Callable[[D], str]  # the answer as a reply states it with its unit: `$18`, `-7 °C`
    say: Callable[[D], str]  # a sentence committing to a value: `Janet makes $18 every day.`
    inverse: Callable[[D], str]  # a check of a value that ends on another number: `18 ÷ 2 = 9 eggs`
    recall: str  # a closing remark that ends on an input number: `That is from her 16 eggs.`
    convert: Callable[[D], str]  # the same quantity in other units: `or 1,800 cents`
    cut: tuple[str, str]  # (steps before the cut, the unfinished last computation)
    cut_value: D  # what the unfinished expression would evaluate to
    plan: str = ""  # an opening sentence that says how the reply will go


def eggs(r: random.Random) -> Problem:
    lay, eat, bake = r.randint(14, 22), r.randint(2, 4), r.randint(3, 5)
    price = r.choice((D(2), D(3), D("1.5"), D("2.25")))
    left = lay - eat - bake
    total = left * price
    return Problem(
        "eggs", f"Janet's ducks lay {lay} eggs a day. She eats {eat} for breakfast and bakes with {bake}. She sells "
        f"the rest at ${num(price)} each. How many dollars does she make a day?",
        (f"Her ducks lay {lay} eggs a day.", f"She uses {eat} + {bake} = {eat + bake} eggs.",
         f"That leaves {lay} - {eat + bake} = {left} eggs to sell.",
         f"She sells them at {money(price)} each, so {left} × {money(price)} = {money(total)}."),
        total, money, lambda v: f"Janet makes {money(v)} every day.",
        lambda v: f"{money(v)} ÷ {money(price)} = {num(q(v / price))} eggs",
        f"That is what is left of the {lay} eggs.", lambda v: f"or {num(v * 100, True)} cents",
        (f"Her ducks lay {lay} eggs a day. She uses {eat} + {bake} = {eat + bake}, so {left} are left.",
         f"She sells them at {money(price)} each, so she makes {left} × {money(price)} ="), total, 'First I find how many eggs are left each day, then what she earns by selling them.')


def shirts(r: random.Random) -> Problem:
    n, price = r.randint(2, 9), r.choice((D("7.5"), D("2.25"), D("12.75"), D("4.5"), D("18.25")))
    total = n * price
    return Problem(
        "shirts", f"Mia buys {n} shirts at ${num(price)} each. How much does she pay, in dollars?",
        (f"Each shirt costs {money(price)}.", f"She buys {n} of them.", f"{n} × {money(price)} = {money(total)}."),
        total, money, lambda v: f"Mia pays {money(v)} for the shirts.",
        lambda v: f"{money(v)} ÷ {n} = {money(q(v / n))} per shirt",
        f"She bought {n} shirts.", lambda v: f"or {num(v * 100, True)} cents",
        (f"Each shirt costs {money(price)}.", f"That means she pays {n}×{num(price)} which means"), total, 'The total cost is the number of shirts times the price of one shirt.')


def temperature(r: random.Random) -> Problem:
    start, drop = r.randint(-5, 9), r.randint(8, 21)
    end = D(start - drop)
    return Problem(
        "temperature", f"At 6 a.m. the temperature was {start} °C. By midnight it had fallen by {drop} degrees. "
        "What was the temperature at midnight, in °C?",
        (f"It starts at {start} °C.", f"It falls by {drop} degrees.", f"{start} - {drop} = {num(end)}."),
        end, lambda v: f"{num(v)} °C", lambda v: f"At midnight it was {num(v)} °C.",
        lambda v: f"{num(v)} + {drop} = {num(v + drop)} °C, the morning temperature",
        f"The morning was {start} °C.", lambda v: f"which is {num(v * D('1.8') + 32)} °F",
        (f"It starts at {start} °C and falls by {drop} degrees.", f"So the temperature at midnight is {start} -"),
        D(start), 'The temperature at midnight is the morning temperature minus the drop.')


def balance(r: random.Random) -> Problem:
    have, bill = r.randint(20, 80), r.randint(10, 60)
    bill += have
    end = D(have - bill)
    return Problem(
        "balance", f"Leo has ${have} in his account and pays a bill of ${bill}. What is his balance now, in dollars?",
        (f"He starts with {money(D(have))}.", f"The bill is {money(D(bill))}.",
         f"{money(D(have))} - {money(D(bill))} = {money(end)}."),
        end, money, lambda v: f"His balance is {money(v)}.",
        lambda v: f"{money(v)} + {money(D(bill))} = {money(v + bill)}",
        f"He paid a bill of {money(D(bill))}.", lambda v: f"or {num(v * 100, True)} cents",
        (f"He starts with {money(D(have))} and the bill is {money(D(bill))}.", f"His balance is {have} - {bill} which is"),
        D(have - bill), 'His new balance is what he had minus the bill, and it can go below zero.')


def speed(r: random.Random) -> Problem:
    hours, kmh = r.choice((2, 4, 6, 8)), r.choice((D("12.5"), D("7.5"), D("45.5"), D("62.5"), D("15.25")))
    km = hours * kmh
    return Problem(
        "speed", f"A cyclist rides {num(km)} km in {hours} hours. What is her average speed in km per hour?",
        (f"She rides {num(km)} km.", f"It takes {hours} hours.", f"Speed = {num(km)} ÷ {hours} = {num(kmh)} km/h."),
        kmh, lambda v: f"{num(v)} km/h", lambda v: f"Her average speed is {num(v)} km/h.",
        lambda v: f"{num(v)} × {hours} = {num(v * hours)} km",
        f"The ride took {hours} hours.", lambda v: f"or {num((v * 1000 / 60).quantize(D('0.1')))} metres a minute",
        (f"She rides {num(km)} km in {hours} hours.", f"That means she rides {num(km)}/{hours} which means"), kmh, 'Average speed is the distance divided by the time taken.')


def ages(r: random.Random) -> Problem:
    friend, gap = r.randint(9, 15), r.randint(2, 4)
    anne = D(friend - gap)
    return Problem(
        "ages", f"Anne's friend is {friend} years old, and Anne is {gap} years younger. How old is Anne?",
        (f"Her friend is {friend}.", f"Anne is {gap} years younger.", f"{friend} - {gap} = {num(anne)}."),
        anne, lambda v: f"{num(v)} years old", lambda v: f"Anne is {num(v)} years old.",
        lambda v: f"{num(v)} + {gap} = {num(v + gap)}, her friend's age",
        f"Her friend is {friend}.", lambda v: f"or {num(v * 12)} months",
        (f"Her friend is {friend} and Anne is {gap} years younger.", f"So Anne is {friend} -"), D(friend), "Anne's age is her friend's age minus the difference between them.")


def salary(r: random.Random) -> Problem:
    month = r.choice((D(1250), D("1850.5"), D(2400), D("3125.75"), D(14000), D("2712.5")))
    year = month * 12
    return Problem(
        "salary", f"Sofia earns €{num(month)} a month. How much does she earn in a year, in euros?",
        (f"She earns €{num(month, True)} a month.", "A year has 12 months.",
         f"12 × €{num(month, True)} = €{num(year, True)}."),
        year, lambda v: f"€{num(v, True)}", lambda v: f"Sofia earns €{num(v, True)} a year.",
        lambda v: f"€{num(v, True)} ÷ 12 = €{num((v / 12).quantize(D('0.01')), True)} a month",
        "That is 12 monthly payments.", lambda v: f"or about €{num((v / 52).quantize(D('1')), True)} a week",
        (f"She earns €{num(month, True)} a month.", f"In a year she earns 12 × {num(month)} which means"), year, 'Her yearly pay is her monthly pay times the twelve months of a year.')


def diver(r: random.Random) -> Problem:
    first, more = r.randint(5, 18), r.randint(3, 12)
    depth = D(-(first + more))
    return Problem(
        "diver", f"A diver is at -{first} m and descends another {more} m. At what depth is she now, in metres?",
        (f"She starts at -{first} m.", f"She goes {more} m deeper.", f"-{first} - {more} = {num(depth)} m."),
        depth, lambda v: f"{num(v)} m", lambda v: f"She is now at {num(v)} m.",
        lambda v: f"{num(v)} + {more} = {num(v + more)} m, where she started",
        f"She went down {more} more metres.", lambda v: f"or {num(v * 100, True)} cm",
        (f"She starts at -{first} m and goes {more} m deeper.", f"Her depth is -{first} -"), D(-first), 'Going deeper makes the depth more negative, so I subtract the extra metres.')


def share(r: random.Random) -> Problem:
    friends = r.choice((4, 5))
    total = r.choice((45, 90, 30, 50, 110, 66))
    each = D(total) / friends
    return Problem(
        "share", f"{total} dollars are shared equally among {friends} friends. How many dollars does each friend get?",
        (f"There are {money(D(total))} to share.", f"There are {friends} friends.",
         f"{money(D(total))} ÷ {friends} = {money(each)}."),
        each, money, lambda v: f"Each friend gets {money(v)}.",
        lambda v: f"{money(v)} × {friends} = {money(v * friends)}",
        f"There were {friends} friends.", lambda v: f"or {num(v * 100, True)} cents",
        (f"There are {money(D(total))} to share among {friends} friends.",
         f"That means each gets {total}/{friends} which means"), each, "Each friend's share is the total divided by the number of friends.")


KINDS = (eggs, shirts, temperature, balance, speed, ages, salary, diver, share)


class Writer:
    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.rows: list[dict] = []

    def add(self, style: str, kind: str, question: str | None, reply: str, gold: D, label: bool,
            why: str = "") -> None:
        row = {"id": f"{style}/{sum(r['style'] == style for r in self.rows):03d}", "style": style, "kind": kind,
               "question": question, "reply": reply, "gold": num(gold), "label": label}
        if why:
            row["why"] = why
        self.rows.append(row)

    def problem(self, i: int) -> Problem:
        return KINDS[i % len(KINDS)](self.rng)

    def wrong(self, v: D) -> D:
        """A plausible wrong number: off by a little, by ten times, the sign flipped, or far."""
        r = self.rng
        kind = r.choice(("near", "near", "ten", "sign", "far"))
        if kind == "sign" and v < 0:  # a dropped sign; a positive answer made negative is no plausible slip
            return -v
        if kind == "ten":
            return v * 10 if v else D(10)
        if kind == "far":
            return v + r.randint(20, 300)
        step = D("0.5") if v != v.to_integral() else D(1)
        return v + step * r.choice((-3, -2, -1, 1, 2, 4))


def steps(p: Problem, v: D) -> list[str]:
    """The worked steps, the last one ending in `v` (a wrong reply's last step is miscalculated)."""
    last = p.steps[-1]
    return [*p.steps[:-1], last if v == p.answer else last.rsplit("=", 1)[0] + "= " + p.unit(v) + "."]


def alternate(i: int, phrasings: int) -> bool:
    """Right or wrong for reply i, so that every phrasing comes both right and wrong."""
    return (i + i // phrasings) % 2 == 0


def worked(p: Problem, v: D, sep: str = " ") -> str:
    return sep.join([p.plan, *steps(p, v)])


_ENGLISH = re.compile(r"\d[\d,]*\.\d+|\d[\d,]*")


def european_text(text: str) -> str:
    """`text` with every number written the European way, and euros for dollars."""
    return _ENGLISH.sub(lambda m: euro(D(m.group(0).replace(",", ""))), text).replace("$", "€")


# (1) a check or verification line after a committed answer: the committed answer counts
def check_line(w: Writer) -> None:
    for i in range(45):
        p = w.problem(i)
        right = i % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        t = i % 9
        if t == 0:
            reply = f"{worked(p, v)}\nThe answer is {num(v)}.\nCheck: {p.inverse(v)}, consistent."
        elif t == 1:
            reply = f"{worked(p, v, chr(10))}\n\nAnswer: {num(v)}\nVerification: {p.inverse(v)} ✓"
        elif t == 2:
            reply = f"{worked(p, v, chr(10))}\n\n**Final answer: {p.unit(v)}**\n\nLet me double-check: {p.inverse(v)}. Yes, that matches."
        elif t == 3:
            reply = f"{worked(p, v)} So the answer is {num(v)} (check: {p.inverse(v)})."
        elif t == 4:
            reply = f"{worked(p, v, chr(10))}\n\nThe answer is {p.unit(v)}.\n\nSanity check: {p.inverse(v)}, which fits the question."
        elif t == 5:
            reply = f"Thought: {worked(p, v)} Check: {p.inverse(v)}.\nAction: Finish[{num(v)}]"  # control
        elif t == 6:
            reply = f"{worked(p, v, chr(10))}\n#### {num(v)}\nCheck: {p.inverse(v)}"
        elif t == 7:
            reply = f"{worked(p, v)}\n\n{p.say(v)}\n\nTo verify: {p.inverse(v)}. ✔"
        else:
            reply = f"{worked(p, v, chr(10))}\nTherefore, the answer is $\\boxed{{{num(v)}}}$.\n\nVerification: {p.inverse(v)}."
        w.add("check-line", "gsm8k", p.question, reply, p.answer, right,
              "" if right else "the committed answer is wrong; the check is made on it")


# (1b) a check that finds an error and states a new answer: the new answer counts (a control)
def check_revises(w: Writer) -> None:
    for i in range(20):
        p = w.problem(i)
        bad = w.wrong(p.answer)
        while bad == p.answer:
            bad = w.wrong(p.answer)
        right = alternate(i, 4)
        first, last = (bad, p.answer) if right else (p.answer, bad)
        t = i % 4
        if t == 0:
            reply = (f"The answer is {num(first)}.\nCheck: {p.inverse(first)}. That does not match the question, "
                     f"so I made an error. Let me recalculate: {worked(p, last)} The answer is {num(last)}.")
        elif t == 1:
            reply = (f"Answer: {num(first)}\nVerification: {p.inverse(first)} ✗, that is wrong.\n"
                     f"Correction: the answer is {num(last)}.")
        elif t == 2:
            reply = f"{p.say(first)}\nCheck: {p.inverse(first)}. Hmm, wait, actually it is {p.unit(last)}."
        else:
            reply = (f"**Answer: {num(first)}**\n\nDouble-checking: {p.inverse(first)}, which is off. "
                     f"Sorry, the correct answer is **{num(last)}**.")
        w.add("check-revises", "gsm8k", p.question, reply, p.answer, right,
              "the check revises a wrong answer to the gold" if right else "the check revises the gold to a wrong number")


# (1c) a reply cut inside the check, after a committed answer: the committed answer counts
def cut_in_check(w: Writer) -> None:
    for i in range(18):
        p = w.problem(i)
        right = i % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        head = p.inverse(v).split("=")[0].rstrip()
        t = i % 3
        if t == 0:
            reply = f"{worked(p, v)}\nThe answer is {num(v)}.\nCheck: {head} ="
        elif t == 1:
            reply = f"{worked(p, v, chr(10))}\n\n**Answer: {p.unit(v)}**\n\nVerification: {head}"
        else:
            reply = f"{worked(p, v)} So the final answer is {num(v)}.\n\nLet me verify: {head} which means"
        w.add("cut-in-check", "gsm8k", p.question, reply, p.answer, right,
              "cut inside the check, after the committed answer" if right else
              "cut inside the check; the committed answer is wrong")


# (2) the answer stated first, then explained, ending on another number
def answer_first(w: Writer) -> None:
    for i in range(45):
        p = w.problem(i)
        right = i % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        t = i % 9
        if t == 0:
            reply = f"**{p.say(v)}**\n\n{worked(p, v)} {p.recall}"
        elif t == 1:
            reply = f"Answer: {num(v)}\n\nExplanation: {worked(p, v)} {p.recall}"
        elif t == 2:
            reply = f"{p.unit(v)}.\n\nHere's how: {worked(p, v)} {p.recall}"
        elif t == 3:
            reply = f"The answer is {num(v)}. Here is why: {worked(p, v)} {p.recall}"
        elif t == 4:
            reply = f"**Answer: {p.unit(v)}**\n\n" + "\n".join(f"- {s}" for s in steps(p, v)) + f"\n\n{p.recall}"
        elif t == 5:
            reply = f"{p.say(v)} {p.recall}"
        elif t == 6:
            reply = f"**{num(v)}**\n\nReasoning:\n{worked(p, v, chr(10))}\n{p.recall}"
        elif t == 7:
            reply = f"Final answer: {p.unit(v)}\n\nStep by step:\n" + "\n".join(
                f"{k}. {s}" for k, s in enumerate(steps(p, v), 1)) + f"\n{p.recall}"
        else:
            reply = f"### {p.say(v)}\n\nWhy: {worked(p, v)} {p.recall}"
        w.add("answer-first", "gsm8k", p.question, reply, p.answer, right,
              "answer stated first, explanation ends on another number" if right else
              "the stated answer is wrong; the explanation ends on another number")


# (2b) the answer, then the same quantity in other units: the first statement counts
def answer_then_conversion(w: Writer) -> None:
    for i in range(18):
        p = w.problem(i)
        right = i % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        t = i % 3
        if t == 0:
            reply = f"{worked(p, v)}\nThe answer is {p.unit(v)}, {p.convert(v)}."
        elif t == 1:
            reply = f"{worked(p, v, chr(10))}\n\n**Answer:** {p.unit(v)} ({p.convert(v)})"
        else:
            reply = f"{worked(p, v)} {p.say(v)[:-1]}, {p.convert(v)}."
        w.add("answer-then-conversion", "gsm8k", p.question, reply, p.answer, right,
              "the answer in the question's unit, then in another unit")


# (3) European thousands and decimal commas, where unambiguous
def european(w: Writer) -> None:
    rows = 0
    i = 0
    while rows < 36:
        p = w.problem(i)
        i += 1
        if p.kind not in ("salary", "shirts", "speed", "share", "eggs"):
            continue
        right = alternate(rows, 6)
        v = p.answer if right else w.wrong(p.answer)
        if euro(v) == num(v):  # a whole number under 1000 looks the same either way
            continue
        done = [european_text(x) for x in [p.plan, *steps(p, v)]]
        t = rows % 6
        if t == 0:
            reply = " ".join(done) + f"\nTotal: {euro(v)}"
        elif t == 1:
            reply = "\n".join(done) + f"\n\nThe result is {euro(v)}."
        elif t == 2:
            reply = f"Thought: {' '.join(done)}\nAction: Finish[{euro(v)}]"
        elif t == 3:
            reply = " ".join(done) + f" So the answer is {euro(v)} in total."
        elif t == 4:
            reply = "\n".join(f"Step {k}: {x}" for k, x in enumerate(done, 1)) + f"\n\n**Answer: {euro(v)}**"
        else:
            reply = " ".join(done) + f"\n\nAnswer: {euro(v)}"
        w.add("european", "gsm8k", p.question, reply, p.answer, right,
              "European thousands or a decimal comma" + ("" if right else ", wrong value"))
        rows += 1


# (4) a reply cut off mid-calculation: an unfinished expression is no answer
def cut_off(w: Writer) -> None:
    for i in range(36):
        p = w.problem(i)
        before, last = p.cut
        t = i % 4
        if t == 0:
            reply = f"{before} {last}"
        elif t == 1:
            reply = f"{before}\n{last}"
        elif t == 2:
            reply = f"Let's solve it step by step.\n\n{before}\n\n{last}"
        else:
            reply = f"Thought: {before} {last}"
        trap = p.cut_value == p.answer
        w.add("cut-off", "gsm8k", p.question, reply, p.answer, False,
              "cut inside an unfinished expression" + (" whose value would be the gold" if trap else ""))
    for i in range(8):  # the base model's own cut (docs/rl_demo/base_replies.jsonl)
        a, b = w.rng.randint(0, 19), w.rng.randint(0, 19)
        op = "+-"[i % 2]
        v = D(a + b if op == "+" else a - b)
        reply = ("To solve this problem, we need to" if i % 4 == 0 else f"{a} {op} {b} =" if i % 4 == 1
                 else f"To find {a} {op} {b}, we" if i % 4 == 2 else f"First, {a} {op} {b} equals")
        w.add("cut-off", "arithmetic", f"What is {a} {op} {b}?", reply, v, False, "cut before any answer")


# the repo's own model output: a long ReAct thought then Finish[N] (parse_survey gsm8k records)
def react_long(w: Writer) -> None:
    for i in range(27):
        p = w.problem(i)
        right = i % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        done = steps(p, v)
        reply = f"Thought: {' '.join(done[:-1])} Therefore, {done[-1][0].lower()}{done[-1][1:]}\nAction: Finish[{num(v)}]"
        w.add("react-long", "gsm8k", p.question, reply, p.answer, right,
              "" if right else "the last step miscalculated")


# the base model's short replies (docs/rl_demo/base_replies.jsonl): `a op b = c`, `a op b is c.`
def equation_short(w: Writer) -> None:
    r = w.rng
    for i in range(24):
        a, b = r.randint(0, 19), r.randint(0, 19)
        op = "+-"[i % 2]
        v = D(a + b if op == "+" else a - b)
        right = i % 3 != 2
        c = v if right else (D(1) if v != 1 else D(2))
        t = i % 4
        reply = (f"{a} {op} {b} = {num(c)}" if t == 0 else f"{a} {op} {b} is {num(c)}." if t == 1
                 else f"The answer is {num(c)}." if t == 2 else f"{a} {op} {b} = {num(c)}\nThe answer is {num(c)}.")
        w.add("equation-short", "arithmetic", f"What is {a} {op} {b}?", reply, v, right)


# chat models: markdown steps with a bold final answer, sometimes a closing line with no number
def markdown_steps(w: Writer) -> None:
    for i in range(27):
        p = w.problem(i)
        right = i % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        body = "\n".join(f"{k}. **Step {k}:** {s}" for k, s in enumerate(steps(p, v), 1))
        t = i % 3
        if t == 0:
            reply = f"Let's break this down step by step. {p.plan}\n\n{body}\n\n**Final Answer:** {p.unit(v)}"
        elif t == 1:
            reply = f"## Solution\n\n{p.plan}\n\n{body}\n\n### Answer\n\n{p.say(v)}\n\nI hope this helps!"
        else:
            reply = f"{body}\n\n---\n\n**Answer: {num(v)}**"
        w.add("markdown-steps", "gsm8k", p.question, reply, p.answer, right)


# chat models: LaTeX steps ending in \boxed{}, sometimes with a sentence after it
def latex_steps(w: Writer) -> None:
    for i in range(27):
        p = w.problem(i)
        right = i % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        body = "\n".join(f"\\[ \\text{{{s.rstrip('.')}}} \\]" if k % 2 else s for k, s in enumerate(steps(p, v)))
        t = i % 3
        if t == 0:
            reply = f"{body}\n\nThe final answer is $\\boxed{{{num(v)}}}$."
        elif t == 1:
            reply = f"{body}\n\n$$\\boxed{{{num(v)}}}$$\n\n{p.recall}"
        else:
            reply = f"{worked(p, v)} Hence the answer is \\(\\boxed{{{num(v)}}}\\)."
        w.add("latex-steps", "gsm8k", p.question, reply, p.answer, right,
              "" if right or t != 1 else "boxed a wrong number; a remark follows")


# GSM8K's own solution style: <<a*b=c>> calculator annotations and #### N
def gsm8k_style(w: Writer) -> None:
    for i in range(18):
        p = w.problem(i)
        right = i % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        reply = "\n".join([p.plan, *steps(p, v)]) + f"\n#### {num(v)}"
        w.add("gsm8k-style", "gsm8k", p.question, reply, p.answer, right)


# negative answers in words and signs: `-7 °C`, `−7`, `minus 7`, `-$15`
def negative_forms(w: Writer) -> None:
    rows, i = 0, 0
    while rows < 30:
        p = w.problem(i)
        i += 1
        if p.answer >= 0:
            continue
        right = alternate(rows, 6)
        v = p.answer if right else -p.answer  # wrong: the sign dropped
        a = abs(v)
        t = rows % 6
        if t == 0:
            reply = f"{worked(p, v)}\nThe answer is {'−' if v < 0 else ''}{num(a)}."
        elif t == 1:
            reply = f"{worked(p, v, chr(10))}\n\n**{p.unit(v)}**"
        elif t == 2:
            reply = f"{worked(p, v)} So it is {'minus ' if v < 0 else ''}{num(a)}."
        elif t == 3:
            reply = f"Thought: {worked(p, v)}\nAction: Finish[{'- ' if v < 0 else ''}{num(a)}]"
        elif t == 4:
            reply = f"{worked(p, v)}\n\nFinal answer: ({num(v)})"
        else:
            reply = f"{p.say(v)}"
        w.add("negative-forms", "gsm8k", p.question, reply, p.answer, right,
              "" if right else "the sign dropped")
        rows += 1


# controls for (2): a reply that opens on a number which is not its answer (a bold fact, a bold
# step, a restated given) and commits to its answer at the end: the last statement counts
def answer_last(w: Writer) -> None:
    for i in range(27):
        p = w.problem(i)
        right = i % 2 == 0
        v = p.answer if right else w.wrong(p.answer)
        done = steps(p, v)
        t = i % 3
        if t == 0:
            reply = f"**{done[0]}**\n\n" + " ".join(done[1:]) + f"\n\n{p.say(v)}"
        elif t == 1:
            reply = "\n\n".join(f"**{x}**" for x in done) + f"\n\nSo the answer is {num(v)}."
        else:
            reply = f"Given: {p.question}\n\n" + "\n".join(done) + f"\n\n{p.say(v)}"
        w.add("answer-last", "gsm8k", p.question, reply, p.answer, right,
              "opens on a number that is not the answer; the answer comes last")


def write() -> list[dict]:
    w = Writer()
    for style in (check_line, check_revises, cut_in_check, answer_first, answer_then_conversion, european,
                  cut_off, answer_last, react_long, equation_short, markdown_steps, latex_steps, gsm8k_style, negative_forms):
        style(w)
    return w.rows


if __name__ == "__main__":
    rows = write()
    OUT.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    print(f"{len(rows)} rows -> {OUT}")
