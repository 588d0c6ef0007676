"""The math judge of GSM8K and arithmetic: HuggingFace's math-verify compares a reply with the gold.

What is read, in order:
1. the reply is cleaned (reinagent/benchmarks/math_text.py): markdown bold, backticks, quotes,
   the Unicode minus, `(-3)`, mixed numbers, scientific notation and `1500!` become plain numbers;
2. the answer's place: the text inside the last `Finish[...]` (ours: math-verify does not know it),
   else inside the last `<answer>...</answer>`, else GSM8K's `#### N` line, else the last
   self-correction that states a number (`The answer is 17. Wait, actually 18` is 18), else the
   whole reply;
3. a restatement of the question (its words, or its operation left unevaluated: `0 + 3`,
   `What is 0 + 3?`) is removed when the question is known; math-verify then picks the answer
   (`\\boxed{}`, "the answer is", the last expression) and compares values with the gold;
4. the answer must be a stated number: an operation left for the reader (`12 - 16`, `2^3`), or a
   number that is the last operand of one (`What is 0 + 3?` without the question), is no answer.
   math-verify alone would evaluate the first and read the second as 3, so echoing an arithmetic
   question would earn the reward. Fractions, percentages, signs and powers of ten are numbers.

The agreement with hand labels and with math-verify alone is in docs/math-judge.md
(`python -m tests.math_battery` prints it; tests/test_math_judge.py asserts it).

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

from reinagent.benchmarks.math_text import clean, correction, without_restatements

_FINISH_WORD = re.compile("finish", re.I)  # finish_text: `finish\s*\[([^\]]*)\]` in linear time
_OPEN_BRACKET = re.compile(r"\s*+\[")
_ANSWER_TAG = re.compile(r"<answer>(?P<arg>.*?)(?:</answer>|$)", re.I | re.S)
_HASHES = re.compile(r"####[ \t]*([^\n]*)")  # GSM8K's own answer line
# what sympy would evaluate for minutes: 9^9^9, 10**10**10, 2^{123456}, (99999 + 1)! (a `!` right
# after a number is an exclamation mark: math_text.clean drops it)
_RUNAWAY = re.compile(r"(\*\*|\^)[\s{(]*[-\d.]+[\s})]*(\*\*|\^)|(\*\*|\^)[\s{(]*\d{5,}|[)}]\s*!(?!=)")
# an operation between two numbers (a fraction a/b, a percentage and a leading sign are numbers)
# (Possessive `*+` throughout, issue 45: adjacent `\s*[-(]*\s*` would retry every split of a long
# run of spaces. `[-(\\{]*\s*[\d.(\\{]` also matched a `(`, `\` or `{` inside the run: the second
# branch says so without giving back.)
_OPERATION = re.compile(r"[\d.)}]\s*+(?:[-+*×÷^]|\\times|\\cdot|\\div)\s*+(?:[-(\\{]*+\s*+[\d.(\\{]|-*+[(\\{])")
# a number that is the right operand of an operation: `0 + 3`'s 3, unless a result follows it
_OPERAND = re.compile(r"[\d)]\s*+(?:[-+*×÷^/]|\\times|\\cdot|\\div|\bplus|\bminus|\btimes)\s*+[-(]*+\s*+$", re.I)
_RESULT_AFTER = re.compile(r"\s*+\)?+\s*+(?:=|is\b|equals\b)", re.I)
# ... or the left operand of one: `0-4=`'s 0
_OPERATOR_AFTER = re.compile(r"\s*+(?:[-+*×÷^/]|\\times|\\cdot|\\div|plus\b|minus\b|times\b)\s*+[-(]*+\s*+\d", re.I)
MAX_CHARS = 20_000  # a reply past this is judged on its last MAX_CHARS characters


@dataclass(frozen=True)
class Verdict:
    success: bool
    answer: str | None  # the answer as the reply wrote it (Finish's text, else math-verify's pick)
    value: str | None  # its value as math-verify read it ("18", "1/2"), None without an answer


def finish_text(reply: str | None) -> str | None:
    r"""The text inside the reply's last `Finish[...]`, or None when it has none: what the last
    match of `finish\s*\[([^\]]*)\]` (left to right, not overlapping) holds, found in one pass.
    The pattern itself rescans the rest of the reply at every `finish[` that is never closed
    (200 KB of them: 32 s); here one `]` search answers for every later `finish[` too."""
    text, at, last = reply or "", 0, None
    while (word := _FINISH_WORD.search(text, at)) is not None:
        opened = _OPEN_BRACKET.match(text, word.end())
        if opened is None:
            at = word.start() + 1
            continue
        close = text.find("]", opened.end())
        if close == -1:  # no `]` anywhere after: no later `finish[` can close either
            break
        last, at = text[opened.end():close], close + 1
    return last.strip() if last is not None else None


def _tagged(text: str) -> str | None:
    found = list(_ANSWER_TAG.finditer(text))
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


def _unevaluated(text: str, parsed: tuple) -> bool:
    """Whether math-verify's pick is an operation, or an operand of one, rather than a stated number:
    `12 - 16`, `2^3`; the 3 of `What is 0 + 3?` (math-verify reads that as 3), the 0 of `0-4=`."""
    picked = str(parsed[-1])
    if _OPERATION.search(picked):
        return True
    found = list(re.finditer(r"(?<![\d.])" + re.escape(picked) + r"(?!\d|\.\d)", text))
    if not found or not re.fullmatch(r"-?\d+(?:\.\d+)?", picked):
        return False
    where = found[-1]
    if _OPERATOR_AFTER.match(text, where.end()):
        return True
    return bool(_OPERAND.search(text[:where.start()])) and not _RESULT_AFTER.match(text, where.end())


def _read(text: str, question: str | None) -> tuple[tuple, bool]:
    """(math-verify's parse of the answer in `text`, whether a number was refused as unevaluated)."""
    kept = without_restatements(text, question)
    parsed = _parse(kept)
    if parsed and _unevaluated(kept, parsed):
        return (), True
    return parsed, not parsed and kept != text and bool(_parse(text))


def read_answer(reply: str | None, question: str | None = None) -> tuple[str | None, tuple]:
    """(the answer as written, math-verify's parse of it); (None, ()) when the reply gives none.
    With `question`, a restatement of it is not an answer (see the module docstring)."""
    if not reply:
        return None, ()
    inside = finish_text(reply)
    if inside is None:
        inside = _tagged(reply)
    if inside is not None:
        parsed, refused = _read(clean(inside[-MAX_CHARS:]), question)
        # a submitted expression is recorded as submitted, and judged wrong
        return (inside, parsed) if parsed or refused else (None, ())
    text = clean(reply[-MAX_CHARS:])
    hashed = _HASHES.findall(text)
    for place in (hashed[-1] if hashed else None, correction(text), text):
        parsed = _read(place, question)[0] if place is not None else ()
        if parsed:
            return str(parsed[-1]), parsed
    return None, ()


def judge(reply: str | None, gold: str, question: str | None = None) -> Verdict:
    """Whether `reply` answers `gold` (the text after GSM8K's `#### `), by math-verify. Pass the
    task's `question` so that restating it is never credited."""
    answer, parsed = read_answer(reply, question)
    if answer is None or not parsed:
        return Verdict(False, answer, None)
    want = _parse(clean(gold))
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
