"""A battery of model-style math replies whose verdict is known by construction (issue 27).

Each case is (reply, gold, truth): the reply states either the gold number or a different one in
one of many formats a model writes (Finish[...], "The answer is", \\boxed{}, LaTeX fractions, an
expression ending in the result, currency and thousands separators, a working-out with other
numbers before the answer). Built from a fixed seed, so the battery and its agreement are the same
on every machine; docs/math-judge.md reports the agreement of the judge on it.
"""

from __future__ import annotations

import random

SEED = 27


def _comma(n: int) -> str:
    return f"{n:,}"


# format name -> (value, rng) -> reply stating `value` as the final answer
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


def battery(size_per_format: int = 70) -> list[tuple[str, str, str, bool]]:
    """[(format, reply, gold, truth)]: half right, half wrong, for every format."""
    rng = random.Random(SEED)
    cases = []
    for name, make in FORMATS.items():
        for i in range(size_per_format):
            gold = rng.choice((rng.randint(0, 99), rng.randint(100, 9999), rng.randint(10_000, 2_000_000)))
            if name == "last-number" or rng.random() < 0.1 and name in ("finish", "answer-is", "boxed"):
                gold = gold if name == "last-number" else -gold
            truth = i % 2 == 0
            value = gold if truth else _wrong(gold, rng)
            cases.append((name, make(value, rng), str(gold), truth))
    return cases
