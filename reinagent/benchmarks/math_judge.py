"""The math judge of GSM8K and arithmetic: HuggingFace's math-verify compares a reply with the gold.

Only `Finish[...]` is ours (math-verify does not know it): when a reply has one, the text inside the
last one is what is judged; otherwise the whole reply is, and math-verify decides which expression
is the answer (`\\boxed{}`, "the answer is", `$...$`, the last expression, LaTeX fractions). The
answer must be a stated number: math-verify evaluates an unfinished expression (`12 - 16 =` reads as
-4), so a reply that only restates an arithmetic question would earn the reward; when its pick is an
operation between numbers (`12 - 16`, `5 * 3`, `2^3`), the reply's last number is the answer instead
(as lm-evaluation-harness's GSM8K "flexible-extract" reads it). The
measured agreement with answers known by construction is in docs/math-judge.md
(tests/test_math_judge.py builds the battery).

math-verify bounds its own work with `signal.alarm`, which works only on the main thread and would
cancel pytest-timeout's alarm; we turn it off and bound the work ourselves instead: a reply with an
exponent tower or a many-digit exponent or factorial (the inputs on which sympy computes for
minutes) is not judged (no answer), the same on every thread, so a verdict never depends on where
it ran. The sympy work is imported lazily (about a second), on the first judgement.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import lru_cache

_FINISH = re.compile(r"finish\s*\[(?P<arg>[^\]]*)\]", re.I)
# what sympy would evaluate for minutes: 9^9^9, 10**10**10, 2^{123456}, 12345!
_RUNAWAY = re.compile(
    r"(\*\*|\^)[\s{(]*[-\d.]+[\s})]*(\*\*|\^)|(\*\*|\^)[\s{(]*\d{5,}|\d{4,}\s*!"
)
# an operation between two numbers (a fraction a/b, a percentage and a leading sign are numbers)
_OPERATION = re.compile(r"[\d.)}]\s*(?:[-+*×÷^]|\\times|\\cdot|\\div)\s*[-(\\{]*\s*[\d.(\\{]")
# a number, its sign only when no digit stands before it ("0-4" has 0 and 4, not -4)
_LAST_NUMBER = re.compile(r"(?<![\d.])-?\d+(?:\.\d+)?")
MAX_CHARS = 20_000  # a reply past this is judged on its last MAX_CHARS characters


@dataclass(frozen=True)
class Verdict:
    success: bool
    answer: str | None  # the answer as the reply wrote it (Finish's text, else math-verify's pick)
    value: str | None  # its value as math-verify read it ("18", "1/2"), None without an answer


def finish_text(reply: str | None) -> str | None:
    """The text inside the reply's last `Finish[...]`, or None when it has none."""
    found = list(_FINISH.finditer(reply or ""))
    return found[-1].group("arg").strip() if found else None


@lru_cache(maxsize=1)
def _math_verify():
    import math_verify

    # It warns once that timeouts are off; we know (see the module docstring).
    for name in ("math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return math_verify


@lru_cache(maxsize=4096)
def _parse(text: str) -> tuple:
    if _RUNAWAY.search(text):
        return ()
    mv = _math_verify()
    try:
        return tuple(mv.parse(text[-MAX_CHARS:], parsing_timeout=None))
    except Exception:  # noqa: BLE001 - whatever a model writes is "no answer", never a crash
        return ()


def read_answer(reply: str | None) -> tuple[str | None, tuple]:
    """(the answer as written, math-verify's parse of it); (None, ()) when the reply gives none."""
    if not reply:
        return None, ()
    inside = finish_text(reply)
    text = inside if inside is not None else reply
    parsed = _parse(text)
    if parsed and _OPERATION.search(str(parsed[-1])):
        # an expression left for the reader to evaluate is not an answer: its last number is
        numbers = _LAST_NUMBER.findall(text.replace(",", ""))
        parsed = _parse(numbers[-1]) if numbers else ()
    if not parsed:
        return None, ()
    written = inside if inside is not None else str(parsed[-1])
    return written, parsed


def judge(reply: str | None, gold: str) -> Verdict:
    """Whether `reply` answers `gold` (the text after GSM8K's `#### `), by math-verify."""
    answer, parsed = read_answer(reply)
    if answer is None:
        return Verdict(False, None, None)
    want = _parse(gold)
    try:
        same = bool(want) and bool(_math_verify().verify(list(want), list(parsed), timeout_seconds=None))
    except Exception:  # noqa: BLE001 - an expression sympy cannot compare is not a match
        same = False
    return Verdict(same, answer, _shown(parsed[0]))


def _shown(value) -> str:
    """A number as a person reads it: 18 (not 18.0000000000000), 13 for an unevaluated 52/4, 1/2."""
    try:
        import sympy

        if isinstance(value, sympy.Basic) and value.is_number:
            return str(sympy.nsimplify(value, rational=True))
    except Exception:  # noqa: BLE001 - what it cannot simplify it shows as parsed
        pass
    return str(value)
