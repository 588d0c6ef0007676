"""Numbers and signs written out, rewritten as digits before math-verify reads a reply
(reinagent/benchmarks/math_text.py calls `spelled` first; issue 44).

math-verify reads none of these, or reads them wrongly: number words (`seven`, `twelve dollars`,
`one hundred and five`), magnitudes (`18 thousand`, `18k`, `2.5 million`: read as 18 and 2.5),
a sign followed by a space (`Finish[- 3]` and `The answer is − 3`: read as +3, an RL reward a
policy could collect with the wrong sign), a leading plus (`+12`: no answer), and the words
`plus`, `minus` and `negative` (`0 plus 5` is an operation, `minus 5` is -5).

Every pattern here scans its input once: no two unbounded repetitions over the same characters
(tests/test_math_heldout.py feeds 100 KB inputs).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if i > 1}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_WORD = "|".join(sorted([*_UNITS, *_TENS, *_SCALES], key=len, reverse=True))
# a run of number words: `seven`, `twenty-one`, `one hundred and five`, `three thousand two hundred`
_WORDS = re.compile(rf"\b(?:{_WORD})\b(?:(?:[ \t]+and)?[ \t-]+(?:{_WORD})\b)*", re.I)
# `one` as a pronoun is no number: `the one`, `each one`, `one of them`, `one another`
_PRONOUN_BEFORE = re.compile(r"\b(?:the|each|every|no|this|that|which|any|some|another|a|an|last|only)[ \t]+$", re.I)
_PRONOUN_AFTER = re.compile(r"[ \t]+(?:of|another|by|or)\b", re.I)

_NUMERAL = r"\d[\d,]*(?:\.\d+)?"
# `18 thousand`, `$2.5 million`, `18k`, `18K` (not `18 km`, `18kg`)
_MAGNITUDE = re.compile(rf"(?<![\w.,])({_NUMERAL})(?:[ \t]*(thousand|million|billion)\b|([kK])\b)", re.I)

# what a sign or an operator word means depends on what stands before it: a number (or a closing
# bracket) makes it an operator, anything else a sign. `(\S)?` takes that character: the scan
# reaches it before the gap, so the gap is never split. A sign at the start of a line is a sign:
# `- 5` alone is -5 (a markdown bullet `- 18 apples` is then read as -18, never as a false pass).
WORD_OPERATORS = {"plus": "+", "minus": "-"}
_SIGN = re.compile(r"(\S)?([ \t]*)(?:([-+])|\b(minus|negative|plus)\b)([ \t]*)(?=\$?\d)", re.I)
_OPERAND_END = set("0123456789)]}%")


def _number(words: str) -> str | None:
    """The value of a run of number words, or None when it is not one number (`one two`)."""
    total, current, last = 0, 0, None  # last: the kind of the previous word
    for word in re.findall(r"[a-z]+", words.lower()):
        if word == "and":
            if last != "scale":
                return None
            continue
        if word in _UNITS or word in _TENS:
            value = _UNITS.get(word, _TENS.get(word))
            # `twenty one` is 21; `one two`, `twelve three` and `twenty thirty` are not a number
            if last == "unit" or (last == "ten" and (word in _TENS or value >= 10)):
                return None
            current += value
            last = "ten" if word in _TENS else "unit"
        elif word == "hundred":
            if last not in ("unit", "ten") or current >= 100:  # `nineteen hundred`, not `hundred hundred`
                return None
            current *= 100
            last = "scale"
        else:
            if last is None:
                return None
            total += current * _SCALES[word]
            current, last = 0, "scale"
    return str(total + current) if last is not None else None


def _words(match: re.Match) -> str:
    text, run = match.string, match.group(0)
    if run.lower() == "one" and (_PRONOUN_BEFORE.search(text, max(0, match.start() - 12), match.start())
                                 or _PRONOUN_AFTER.match(text, match.end())):
        return run
    return _number(run) or run


def _magnitude(match: re.Match) -> str:
    try:
        value = Decimal(match.group(1).replace(",", "")) * (_SCALES[match.group(2).lower()] if match.group(2) else 1000)
    except InvalidOperation:
        return match.group(0)
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _sign(match: re.Match) -> str:
    before, gap, symbol, word, after = match.groups()
    before, word = before or "", (word or "").lower()
    if word == "negative":
        return f"{before}{gap}-"
    operator = symbol or WORD_OPERATORS.get(word)
    if operator is None:  # a word not read as an operator
        return match.group(0)
    if before and before in _OPERAND_END:  # an operator: `7 minus 2` is `7 - 2`; `5 - 3` stays as written
        return f"{before}{gap}{operator} " if word else match.group(0)
    if operator == "+":  # `+12` is 12; `apples, plus 3` and `cats + 3` are operations
        return before + gap if symbol and not after else f"{before}{gap}+ "
    return f"{before}{gap}-"  # `- 3`, `minus 3`, `negative 3` are -3


def spelled(text: str) -> str:
    """`text` with number words, magnitudes and spelled or spaced signs as digits (module docstring)."""
    text = _WORDS.sub(_words, text)
    text = _MAGNITUDE.sub(_magnitude, text)
    return _SIGN.sub(_sign, text)
