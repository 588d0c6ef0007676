"""Where a long math reply commits to its answer (issue 54): reinagent/benchmarks/math_judge.py asks
this module before math-verify picks an answer from the whole reply.

math-verify picks the last expression of a reply, which is not the answer when the reply goes on
after committing to it:

- a check or verification after the answer (`The answer is 105.` then `Check: 105 + 3 = 108,
  consistent.`): the check is dropped when an answer cue comes before it or it starts from a
  number the reply computed, unless it finds a fault, hesitates or states an answer of its own
  (`Check: ... ✗, so the answer is 104` is a correction, read as before);
- the answer stated first and explained after (`**Anne is 8 years old.**` then `... Her friend is
  10.`): an opening line set apart (bold, a heading, `Answer: 8`, a bare `8 years`) with one
  number is the answer, when the explanation states no other answer and never uses that number
  as an operand (`**Her ducks lay 16 eggs.**` then `16 - 3 = 13 ...` opens on a given, not an answer);
- the same quantity in other units after the answer (`$27.50, or 2,750 cents`, `-15 °C, which is
  5 °F`): the conversion is dropped;
- a reply cut off inside an unfinished expression (`That means he runs 60/10 which means`,
  `so she makes 9 × $2 =`): a reply that ends mid-calculation answers only with what it committed
  to, with an answer cue, before the cut; else it has no answer (a cut after a finished sentence,
  `... is 18 dollars. So`, is read without its unfinished words).

Each works on the cleaned text (math_text.clean), except the opening's emphasis, which cleaning
removes and which is looked at in the reply as written. Every pattern scans its input once.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from decimal import Decimal, InvalidOperation

from reinagent.benchmarks.math_text import CORRECTION, CUE, clean, correction

_NUMBER = re.compile(r"(?<![\w.])-?[$€£]?\d[\d,]*(?:\.\d+)?")
# a check of the answer, at the start of a sentence, a line or a parenthesis: `Check:`,
# `Verification:`, `Let me double-check:`, `To verify,`, `(check: ...)`, `Sanity check —`, `We can
# check this:`; its colon, comma or dash, or the number right after it, makes it a heading
_CHECK = re.compile(
    r"(?:^|(?<=[\n.!;(]))[ \t]*+(?:(?:let me|let's|let us|to|i(?:'ll| will)|we can|we|now|and)[ \t]+)?"
    r"(?:(?:a|one|quick|quickly|final|last|another)[ \t]+)?"
    r"(?:double[- ]?check(?:ing)?|check(?:ing)?|verif(?:y|ying|ication)|sanity[ \t]+check|confirm(?:ing|ation)?|proof)"
    r"(?:[ \t]+(?:my|the|this|our|that|it)(?:[ \t]+(?:answer|result|work|solution|calculation))?)?"
    r"(?:[ \t]*+[:,—–]|[ \t]+-[ \t]|[ \t]+(?=[-$€£]?\d))", re.I | re.M)
# a check that finds a fault or hesitates: what follows it is a correction, read as before (math_text)
_FAULT = re.compile(r"≠|✗|✘|\b(?:wrong|incorrect|mistake|error|off|mismatch|(?:does not|doesn't|do not|don't) match|"
                    r"wait|actually|hmm|oops|sorry|correction)\b", re.I)
# the end of a reply cut off mid-calculation: an operator, or a word that announces what comes next
_DANGLING = re.compile(
    r"(?:[-+*/×÷^=(]|\\times|\\cdot|\\div|\b(?:which|that|means|is|are|was|equals?|gives|get|makes|so|then|and|of|"
    r"to|by|we|plus|minus|times|divided|multiplied|the|a|an|because|since|therefore|thus|hence)\b)[ \t]*+$", re.I)
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")
# units that make `N unit, or M other-unit` one quantity written twice (not `14, or 15 apples`)
_UNIT = (r"(?:°[ \t]?[CF]\b|[a-z]+/[a-z]+\b|(?:cents?|dollars?|euros?|pounds?|years?[ \t]+old|years?|months?|"
         r"weeks?|days?|hours?|minutes?|seconds?|km|cm|mm|kg|g|lb|lbs|ft|feet|inches|miles?|metres?|meters?|m|"
         r"litres?|liters?|ml)\b)")
_CONVERSION = re.compile(
    rf"(?<![-+*/×÷^]\s)(?<![-+*/×÷^])(?P<first>(?<![\w.])-?(?P<cur>[$€£])?\d[\d,]*(?:\.\d+)?)[ \t]*+(?P<unit>{_UNIT})?"
    rf"(?P<clause>[ \t]*+(?:,[ \t]*+(?:or|which[ \t]+is|i\.e\.|that[ \t]+is)|\([ \t]*+(?:or|i\.e\.)?)[ \t]*+"
    rf"(?:about[ \t]+|approximately[ \t]+|roughly[ \t]+|around[ \t]+|~)?-?[$€£]?\d[\d,]*(?:\.\d+)?[ \t]*+"
    rf"(?P<other>{_UNIT})[^\n.;)]*+\)?)", re.I)
# an opening set apart from what follows: a bold span at the very start (not a label such as
# `**Step 1:**`), a heading, an answer line, a bare number with its unit
_BOLD_START = re.compile(r"^[ \t]*+(\*\*|__)(?=\S)([^*_\n]+?)(?<=\S)\1")
_LABEL = re.compile(r":$|^(?:step|part|case|method|solution|problem|question|example|given)\b", re.I)
_HEADING = re.compile(r"^#{1,6}[ \t]")
_ANSWER_LINE = re.compile(r"^(?:\*\*)?(?:final[ \t]+)?answer\b", re.I)
_BARE = re.compile(r"^[-−]?[$€£]?\d[\d,]*(?:\.\d+)?(?:[ \t]*+[^\s\d.:]+){0,3}[ \t]*+\.?[ \t]*$")
_OPERATOR_AFTER = re.compile(r"[ \t]*+(?:[-+*/×÷^]|\\times|\\cdot|\\div)")
_OPERATOR_BEFORE = re.compile(r"(?:[-+*/×÷^]|\\times|\\cdot|\\div)[ \t]*+[$€£]?$")
_RESULT_BEFORE = re.compile(r"=[ \t]*+[$€£]?$")


def _value(text: str) -> Decimal | None:
    try:
        return Decimal(re.sub(r"[$€£,]", "", text))
    except InvalidOperation:
        return None


def without_check(text: str) -> str:
    """`text` without a check of its committed answer: the first check after which the reply
    states no answer, finds no fault and makes no correction, when an answer cue comes before it
    or the check starts from the number stated just before it, a number the reply computed
    (`... = 105.` then `Check: 105 + 3 = 108`). One scan of each pattern."""
    checks = list(_CHECK.finditer(text))
    if not checks:
        return text
    # after the last cue, fault or correction word, a check is only a check
    last = max((m.end() for p in (CUE, _FAULT, CORRECTION) for m in p.finditer(text)), default=-1)
    numbers = list(_NUMBER.finditer(text))
    starts = [n.start() for n in numbers]
    cue = CUE.search(text)
    derived: dict[Decimal | None, int] = {}  # a value -> where the reply first computed it (`= 105`)
    for number in numbers:
        if _RESULT_BEFORE.search(text[max(0, number.start() - 8):number.start()]):
            derived.setdefault(_value(number.group(0)), number.start())
    for check in checks:
        if check.end() <= last:
            continue
        before = bisect_left(starts, check.start()) - 1  # the last number before the check
        if before < 0:
            continue
        following = bisect_left(starts, check.end())  # the first number of the check
        after = numbers[following] if following < len(numbers) else None
        value = _value(numbers[before].group(0))
        same = (after is not None and _value(after.group(0)) == value
                and derived.get(value, len(text)) < check.start())  # `She has 16 eggs. Check: 16 - 7 ...` is no check
        if (cue is not None and cue.start() < check.start()) or same:
            return text[:check.start()]
    return text


def cut_off(text: str) -> str | None:
    """None when `text` does not end mid-sentence; else what it may be read for: the text before
    its unfinished sentence, when that sentence computes nothing (`... is 18 dollars. So`) or the
    text before it states an answer cue; else "" (a calculation cut short: no answer)."""
    text = text.rstrip()
    if not _DANGLING.search(text):
        return None
    ends = list(_SENTENCE_END.finditer(text))
    before = text[:ends[-1].end()] if ends else ""
    unfinished = text[len(before):]
    return before if CUE.search(before) or not re.search(r"\d|[-+*/×÷^=]", unfinished) else ""


def without_conversions(text: str) -> str:
    """`text` without the same quantity restated in other units after a number (`$27.50, or 2,750
    cents`, `5 years old, or 60 months`, `-15 °C, which is 5 °F`)."""
    def drop(found: re.Match) -> str:
        first = (found["cur"] or (found["unit"] or "")).lower()
        if not first or first == found["other"].lower():
            return found.group(0)
        return found.group(0)[:found.start("clause") - found.start()]

    return _CONVERSION.sub(drop, text)


def _opening(reply: str) -> tuple[str, str, bool] | None:
    """(the opening, the rest, whether the opening is set apart) of a reply that goes on after it."""
    bold = _BOLD_START.match(reply)
    if bold and reply[bold.end():].strip() and not _LABEL.search(bold.group(2).strip()):
        return bold.group(2), reply[bold.end():], True
    head, _, rest = reply.strip().partition("\n")
    if not rest.strip():
        return None
    if _HEADING.match(head) or _ANSWER_LINE.match(head) or _BARE.match(head.strip()):
        return head, rest, True
    return (head, rest, False) if rest.startswith("\n") else None  # a plain first paragraph


def stated_first(reply: str) -> str | None:
    """The reply's opening, cleaned, when it states the answer first (see the module docstring):
    one number in it, and the rest states no other answer and uses that number only as a result;
    a plain first paragraph (not bold, no heading) must also be derived after (`... = 8`). None
    otherwise."""
    found = _opening(reply)
    if found is None:
        return None
    first, rest = clean(found[0]), clean(found[1])
    numbers = _NUMBER.findall(first)
    if len(numbers) != 1 or CUE.search(rest) or correction(rest) is not None:
        return None
    value, derived = _value(numbers[0]), False
    for number in _NUMBER.finditer(rest):
        if _value(number.group(0)) != value:
            continue
        before = rest[max(0, number.start() - 16):number.start()]  # bounded: one scan in all
        if _OPERATOR_AFTER.match(rest, number.end()) or _OPERATOR_BEFORE.search(before):
            return None  # an operand: the opening states a given
        derived = derived or bool(_RESULT_BEFORE.search(before))
    return first if found[2] or derived else None
