"""The math judge of GSM8K and arithmetic: HuggingFace's math-verify compares a reply with the gold.

What is read, in order:
1. the reply is cleaned (reinagent/benchmarks/math_text.py, math_words.py): markdown bold,
   backticks, quotes, `\\$`, the Unicode minus, a sign followed by a space (`- 3`, `minus 3`), a
   leading plus, number words (`twelve`), magnitudes (`18 thousand`, `18k`), no-break-space
   thousands, European thousands (`1.234,5`), `-$17`, `(-3)`, mixed numbers, scientific notation
   and `1500!` become plain numbers; a denied number (`not 12, but 13`) is removed; `plus` and
   `minus` between numbers become operators;
2. the answer's place: the text inside the last `Finish[...]` (ours: math-verify does not know it),
   else inside the last `<answer>...</answer>`, else GSM8K's last `#### N` line, else nothing when
   the reply retracts its answer and states no number after (`The answer is 12. Wait, no.`), else
   the last self-correction that states a number (`The answer is 17. Wait, actually 18` is 18),
   else the whole reply, read where it commits to its answer (math_layout.py, issue 54): a check
   after the answer, the same quantity in other units and a calculation cut off at the end are no
   answer, and an answer stated first and then explained is that answer;
3. a restatement of the question (its words, its operation left unevaluated: `0 + 3`, `What is
   0 + 3?`, or its operands listed: `The sum of 0 and 3.`) is removed when the question is known;
   math-verify then picks the answer (`\\boxed{}`, "the answer is", the last expression) and
   compares values with the gold; an equation picked whole (`$6 \\times 6 = 36$`) answers with its
   right-hand side;
4. the answer must be one stated number: an operation left for the reader (`12 - 16`, `2^3`), a
   number that is an operand of one (`What is 0 + 3?` without the question), or a multiple of pi,
   of i or of a root (`18\\pi`, `18i`) is no answer; several values (`\\boxed{\\{11, 12\\}}`,
   `Finish[0, 5]`, `14 or 15`) are an answer, recorded as written, and never right. math-verify alone
   would evaluate the first and read the second as 3, so echoing an arithmetic question would earn
   the reward. Fractions, percentages, signs and powers of ten are numbers.

The agreement with hand labels and with math-verify alone is in docs/math-judge.md
(`python -m tests.math_battery` and, on replies the judge was not built with, `python -m
tests.math_heldout` print it; tests/test_math_judge.py and tests/test_math_heldout.py assert it).
Every pattern reads a reply in time linear in its length (tests/test_math_heldout.py).

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

from reinagent.benchmarks.math_layout import cut_off, stated_first, without_check, without_conversions
from reinagent.benchmarks.math_text import clean, correction, retracted, without_restatements

# Every pattern here scans a reply once (issue 44: a 100 KB reply is judged in time linear in its
# size): Finish[...] and <answer> are found by their last opening, never by a scan from each one
# to a closing that may not come; no two unbounded runs of the same characters stand side by side.
_FINISH_OPEN = re.compile(r"finish\s*+\[", re.I)
_TAG_OPEN, _TAG_CLOSE = re.compile(r"<answer>", re.I), re.compile(r"</answer>", re.I)
_HASHES = re.compile(r"####[ \t]*+([^\n]*)")  # GSM8K's own answer line; the last one counts
# what sympy would evaluate for minutes: 9^9^9, 10**10**10, 2^{123456}, (99999 + 1)! (a `!` right
# after a number is an exclamation mark: math_text.clean drops it)
_RUNAWAY = re.compile(r"(\*\*|\^)[\s{(]*[-\d.]+[\s})]*(\*\*|\^)|(\*\*|\^)[\s{(]*\d{5,}|[)}]\s*!(?!=)")
# an operation between two numbers (a fraction a/b, a percentage and a leading sign are numbers)
_OPERATION = re.compile(r"[\d.)}]\s*+(?:[-+*×÷^]|\\times|\\cdot|\\div)[-(\\{\s]*[\d.(\\{]")
# a number that is the right operand of an operation: `0 + 3`'s 3, unless a result follows it
# (`plus` is `+` by then, math_words.spelled; after a word too: the 3 of `12 apples, plus 3 pears`
# is no answer)
_OPERAND = re.compile(r"[\w)]\s*+,?\s*+(?:[-+*×÷^/]|\\times|\\cdot|\\div|\btimes)[-(\s]*+$", re.I)
_RESULT_AFTER = re.compile(r"\s*+(?:\)\s*+)?(?:=|is\b|equals\b)", re.I)
# ... or the left operand of one: `0-4=`'s 0
_OPERATOR_AFTER = re.compile(r"\s*+(?:[-+*×÷^/]|\\times|\\cdot|\\div|times\b)[-(\s]*+\d", re.I)
# ... or a multiple of pi, of i or of a root: `18\pi`, `18π`, `18i`, `18\sqrt{2}` are not 18
_MULTIPLE_AFTER = re.compile(r"i\b|\s*+(?:\\pi\b|π|\\sqrt|\\cdot\s*+\\pi\b)")
# an answer of several values: `0, 5`, `14 or 15`, `0 and 5` (a set is found by its parse)
_LIST = r"(?:[ \t]*+,[ \t]++|[ \t]++(?:or|and)[ \t]++)"
_SEVERAL = re.compile(rf"\d{_LIST}-?\$?\d", re.I)
# ... and a number picked from such a list is no answer: `between 3 and 5`, `14 or 15`
_LISTED_BEFORE, _LISTED_AFTER = re.compile(rf"\d{_LIST}-?\$?$", re.I), re.compile(rf"{_LIST}-?\$?\d", re.I)
_SETS = {"FiniteSet", "Tuple", "Interval", "Union", "list", "tuple"}
MAX_CHARS = 20_000  # a reply past this is judged on its last MAX_CHARS characters


@dataclass(frozen=True)
class Verdict:
    success: bool
    answer: str | None  # the answer as the reply wrote it (Finish's text, else math-verify's pick)
    value: str | None  # its value as math-verify read it ("18", "1/2"), None without an answer


def finish_text(reply: str | None) -> str | None:
    """The text inside the reply's last `Finish[...]`, or None when it has none."""
    reply = reply or ""
    close = reply.rfind("]")
    opening = None
    for found in _FINISH_OPEN.finditer(reply):
        if found.end() > close:
            break
        opening = found
    if opening is None:
        return None
    return reply[opening.end():reply.index("]", opening.end())].strip()


def _tagged(text: str) -> str | None:
    opening = None
    for opening in _TAG_OPEN.finditer(text):
        pass
    if opening is None:
        return None
    closing = _TAG_CLOSE.search(text, opening.end())
    return text[opening.end():closing.start() if closing else len(text)].strip()


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
    if any(p.match(text, where.end()) for p in (_OPERATOR_AFTER, _MULTIPLE_AFTER, _LISTED_AFTER)):
        return True
    if _LISTED_BEFORE.search(text, 0, where.start()):
        return True
    return bool(_OPERAND.search(text[:where.start()])) and not _RESULT_AFTER.match(text, where.end())


def _equation_result(parsed: tuple) -> tuple:
    """An equation picked whole (`$6 \\times 6 = 36$`, `\\[ 389 + 768 = 1157 \\]`) answers with its
    right-hand side, read again: math-verify keeps the equation, which is no number."""
    if len(parsed) < 2 or not getattr(parsed[0], "is_Relational", False) or "=" not in str(parsed[-1]):
        return parsed
    return _parse(str(parsed[-1]).rsplit("=", 1)[1]) or parsed


def _several(parsed: tuple) -> bool:
    return type(parsed[0]).__name__ in _SETS


def _read(text: str, question: str | None) -> tuple[tuple, str | None]:
    """(math-verify's parse of the answer in `text`, why a number found was refused: "unevaluated"
    for an operation or an operand of one, the set as written for a set of values; None if not refused)."""
    kept = without_restatements(text, question)
    parsed = _equation_result(_parse(kept))
    if parsed and _several(parsed):
        return (), str(parsed[-1])
    if parsed and _unevaluated(kept, parsed):
        return (), "unevaluated"
    return parsed, "unevaluated" if not parsed and kept != text and bool(_parse(text)) else None


def read_answer(reply: str | None, question: str | None = None) -> tuple[str | None, tuple]:
    """(the answer as written, math-verify's parse of it); (None, ()) when the reply gives none.
    With `question`, a restatement of it is not an answer (see the module docstring). A set of
    values (`\\boxed{\\{11, 12\\}}`, `Finish[0, 5]`) is an answer, recorded as written, and never
    right: the parse is then ()."""
    if not reply:
        return None, ()
    inside = finish_text(reply)
    if inside is None:
        inside = _tagged(reply)
    if inside is not None:
        text = clean(inside[-MAX_CHARS:])
        if _SEVERAL.search(text):
            return inside, ()
        parsed, refused = _read(text, question)
        # a submitted expression is recorded as submitted, and judged wrong
        return (inside, parsed) if parsed or refused else (None, ())
    text = clean(reply[-MAX_CHARS:])
    hashed = _HASHES.findall(text)
    if not hashed and retracted(text):
        return None, ()
    # where a long reply commits to its answer (math_layout): a check after it is no answer, a
    # reply cut mid-calculation answers only with what it committed to before the cut
    text = without_conversions(without_check(text))
    committed = cut_off(text)
    if committed is not None and not hashed:
        if not committed:
            return None, ()
        text = committed
    first = stated_first(reply[-MAX_CHARS:])
    for place in (hashed[-1] if hashed else None, correction(text), first, text):
        if place is None:
            continue
        parsed, refused = _read(place, question)
        if parsed:
            return str(parsed[-1]), parsed
        if refused not in (None, "unevaluated"):  # a set: an answer, and wrong
            return refused, ()
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
