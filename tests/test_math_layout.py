"""The math judge on long replies (issue 54): a check after the answer, the answer stated first,
European thousands, a reply cut mid-calculation; the frozen sets v3 (the judge was changed
against it) and v4 (written after the change, frozen before any judge ran on it), the issue's
reproductions, each rule's bounds, and linear-time reading of the new patterns."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from reinagent.benchmarks.math_judge import judge, read_answer
from reinagent.benchmarks.math_layout import cut_off, stated_first, without_check, without_conversions
from tests.math_heldout import HELDOUT_V3, HELDOUT_V4, load
from tests.test_math_heldout import _env_and_evaluate

# each written and committed before the judge read it (docs/math-judge.md): a changed file is a new set
FROZEN = {HELDOUT_V3: "aaea2e48ea4d431ee5ad1f51da3935bcc4d21c3f5e89daeca99ebf3c8da05f89",  # abf48f3
          HELDOUT_V4: "e5bce31b64a76b99aa532945950dd28f86816b59d9dfd3a6da528d61a0f9cafe"}  # 687d18f
# plain prose that opens on the answer and closes on a given (`Anne is 11 years old. Her friend is
# 13.`): which sentence answers is a matter of meaning; the judge reads the last (a false fail)
V3_MISSES = {"answer-first/014", "answer-first/032"}


def test_the_issue_54_sets_are_the_frozen_ones():
    for path, digest in FROZEN.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, path.name
    v3, v4 = load(HELDOUT_V3), load(HELDOUT_V4)
    assert (len(v3), len({r.id for r in v3}), Counter(r.label for r in v3)) == (406, 406, {True: 188, False: 218})
    assert (len(v4), len({r.id for r in v4}), Counter(r.label for r in v4)) == (145, 145, {True: 63, False: 82})
    golds = Counter("negative" if r.gold.startswith("-") else "decimal" if "." in r.gold else "whole" for r in v3)
    assert golds == {"whole": 156, "negative": 140, "decimal": 110}


def test_every_v3_reply_is_judged_as_labelled_but_two_false_fails():
    # docs/math-judge.md: 404 of 406 (357 before the change; a training score)
    wrong = {r.id for r in load(HELDOUT_V3) if judge(r.reply, r.gold, question=r.question).success is not r.label}
    assert wrong == V3_MISSES
    assert all(r.label for r in load(HELDOUT_V3) if r.id in V3_MISSES)  # false fails: no false pass


def test_every_v4_reply_is_judged_as_labelled():
    # 142 of 145 when first scored (three `Quick check -` lines not read as checks); 145 since
    wrong = [(r.id, r.reply) for r in load(HELDOUT_V4) if judge(r.reply, r.gold, question=r.question).success is not r.label]
    assert wrong == []


def test_the_environment_and_evaluate_agree_on_the_issue_54_sets():
    split = [(r.id, *_env_and_evaluate(r.reply, r.gold, r.question))
             for r in [*load(HELDOUT_V3), *load(HELDOUT_V4)]]
    assert [s for s in split if s[1] != float(s[2])] == []


# issue 54's reproductions: each was misjudged at ca40b00
@pytest.mark.parametrize(("reply", "gold", "right"), [
    ("The answer is 105.\nCheck: 105 + 3 = 108, consistent.", "105", True),  # a check line after the answer
    ("The answer is 105.\nCheck: 105 + 3 = 108, consistent.", "108", False),
    ("Answer: 390\nVerification: 390 × 2 = 780 ✓", "390", True),
    ("Answer: 390\nVerification: 390 × 2 = 780 ✓", "780", False),
    ("**Anne is 8 years old.**\n\nShe is two years younger than her friend. Her friend is 10.", "8", True),
    ("**Anne is 8 years old.**\n\nShe is two years younger than her friend. Her friend is 10.", "10", False),
    ("The total is 1.234,5 euros.", "1234.5", True),  # European thousands
    ("The total is 1.234,5 euros.", "1.234", False),
    ("She earns 168.000,00 € a year.", "168000", True),
    ("She earns 168.000,00 € a year.", "168", False),
    ("That means he runs 60/10 which means", "6", False),  # an unfinished expression at a cut
    ("She makes 52 / 4 =", "13", False),
])
def test_issue_54_reproductions(reply, gold, right):
    assert judge(reply, gold).success is right
    assert _env_and_evaluate(reply, gold, None) == (float(right), right)


@pytest.mark.parametrize(("reply", "gold", "right"), [
    # a check that finds a fault, or hesitates, is a correction: the new number counts
    ("The answer is 105.\nCheck: 105 + 3 = 109, which is wrong, so the answer is 106.", "106", True),
    ("The answer is 105.\nCheck: 105 + 3 = 109 ≠ 108. Hmm, actually it is 106.", "106", True),
    ("The answer is 105.\nCheck: 105 + 3 = 109 ≠ 108. Hmm, actually it is 106.", "105", False),
    ("She earns €32,550 a year.\nCheck: €32,550 ÷ 12 = €2,712.5. Wait, actually it is €32,547.", "32550", False),
    # without an answer cue, a check must start from the number stated before it
    ("She had 108 - 3 = 105 stickers.\n\nCheck: 105 + 3 = 108 stickers, as the question says.", "105", True),
    ("She has 16 eggs.\nCheck: 16 - 7 = 9 eggs left, and 9 × $2 = $18.", "18", True),  # a given, not a result
    ("She has 16 eggs. Let me check how many are left: 16 - 7 = 9.", "9", True),  # no check heading
    ("The answer is 105.\nCheck: 105 + 3 =", "105", True),  # cut inside the check
    # an opening that is a given (an operand after) or a label is not an answer stated first
    ("**Her ducks lay 16 eggs.**\n\n16 - 7 = 9 eggs are sold at $2 each, so she makes $18.", "18", True),
    ("**Step 1:** 16 - 7 = 9.\n**Step 2:** 9 × 2 = 18.", "18", True),
    ("Her friend is 10.\n\nAnne is 2 years younger, so Anne is 8.", "8", True),  # plain, not derived after
    ("Anne is 8 years old.\n\n10 - 2 = 8, and her friend is 10.", "8", True),  # plain, derived after
    ("# 24 km\n\nShe rides 8 km an hour for 3 hours: 8 × 3 = 24. She rode 3 hours.", "24", True),
    # European numbers only where unambiguous: a lone group is read the English way
    ("It costs 1.250 euros.", "1.25", True),
    ("The town has 1.234.567 people.", "1234567", True),
    ("Total: 12,5", "12.5", True),
    # the same quantity in other units after the answer; a sum is no conversion
    ("It takes 150 minutes, or 2.5 hours.", "150", True),
    ("It takes 150 minutes, or 2.5 hours.", "2.5", False),
    ("At midnight it was -15 °C, which is 5 °F.", "-15", True),
    ("She sold 12 eggs on Monday and 6 on Tuesday, which is 18 eggs in total.", "18", True),
    ("He sold 6, which is 18 dollars.", "18", True),  # 6 has no unit: a result, not a conversion
    # a cut: after a finished sentence the reply is read; after a committed answer that answer
    ("The total is 18 dollars. So", "18", True),
    ("The answer is 6. That means he runs 60/10 which means", "6", True),
    ("She uses 4 + 3 = 7, so 11 are left. She sells them at $3 each, so she makes 11 × $3 =", "11", False),
    # a minus before a currency sign
    ("Her balance is -$17.", "-17", True),
    ("Her balance is -$17.", "17", False),
    ("$41 - $58 = -$17", "-17", True),
])
def test_the_new_readings_keep_their_bounds(reply, gold, right):
    assert judge(reply, gold).success is right


# Linear time, as tests/test_math_heldout.py: 100 KB built against each new pattern, the result
# asserted; the timeout only stops a hang
BIG = 100_000


@pytest.mark.timeout(600)
def test_the_new_patterns_read_100_kb_in_one_pass():
    checks = "Check: 5 + 1 = 6. " * (BIG // 18)
    assert without_check("The answer is 5.\n" + checks) == "The answer is 5.\n"
    assert without_check("Wait, " * (BIG // 6) + "Check: 5") .startswith("Wait")
    assert stated_first("**8**\n" + "8 = 8 " * (BIG // 6)) == "8"
    assert stated_first("**8**\n" + "8 + 1 " * (BIG // 6)) is None
    assert without_conversions("$5, or 500 cents. " * (BIG // 18)) == "$5. " * (BIG // 18)
    assert without_conversions("5 years" + " " * BIG + ", or") == "5 years" + " " * BIG + ", or"
    assert cut_off("1 + " * (BIG // 4)) == "" and cut_off("a. " * (BIG // 3) + "So") == ("a. " * (BIG // 3)).rstrip()
    assert read_answer("1" + ".000" * (BIG // 4))[0] is not None
    assert read_answer("1.000" * (BIG // 5) + ",5")[0] is not None
