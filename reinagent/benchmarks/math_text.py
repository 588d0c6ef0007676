"""How a math reply is cleaned before math-verify reads it (reinagent/benchmarks/math_judge.py).

Chat models write numbers math-verify does not read, or reads wrongly: markdown bold (`**18**`,
which the old guard read as a power tower), backticks and quotes, the Unicode minus `−3`, a
parenthesised `(-3)`, a mixed number `2 1/2` (read as 1), an aside `18 (9 eggs × $2)` (read as
18 * 9), scientific notation `1.2 \\times 10^3` (read as 10^3), an exclamation mark after a number
(`1500!`, read as a factorial). `clean` rewrites each into the plain number it stands for (an aside
is dropped); everything else is left as written.

A reply may also restate its question (`What is 0 + 3?`) or correct itself (`The answer is 17.
Wait, actually 18`): `without_restatements` removes the question's own text and its expression left
unevaluated, and `correction` finds the last self-correction that states a number.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from reinagent.benchmarks.math_words import spelled

MAX_EXPONENT = 100  # 10^k past this is left as written (and math_judge's guard refuses a tower)

_MINUS = re.compile(r"[\u2212\ufe63\uff0d]|(?:^|(?<=[\s(=\[{:]))[\u2012\u2013\u2014](?=[ \t]?\$?\d)", re.M)
# runs of blank space carry no meaning for a number, and math-verify's own patterns take time
# quadratic in their length (a 19,000-space gap: 60-120 s); they become one space or one blank line
_BLANKS, _BLANK_LINES = re.compile(r"[^\S\n]++"), re.compile(r"\n(?:[^\S\n]*+\n)++")
# thousands separated by a no-break, narrow no-break or thin space: `1 234 567`
_SPACED_THOUSANDS = re.compile(r"(?<=\d)[\u00a0\u202f\u2009](?=\d{3}(?!\d))")
# a number denied is not the answer: `The answer is not 12, but 13.`, `18, not 17`, `It isn't 12; it's 13`
_DENIED = re.compile(r"\b(?:not|isn['’]t|wasn['’]t)[ \t]+-?\$?\d[\d,]*(?:\.\d+)?(?:[ \t]*+[,;:]?[ \t]*+but\b)?", re.I)
# markdown emphasis: 1-3 stars around text that neither starts nor ends with a space, not glued
# to an operand on the left (`2**3**2` is a power, `**18**` is bold)
_EMPHASIS = re.compile(r"(?<![\w)\]}*])(\*{1,3})(?=[^\s*])([^*\n]+?)(?<=[^\s*])\1(?!\*)")
_UNDERLINE = re.compile(r"(?<!\w)(__)(?=\S)([^_\n]+?)(?<=\S)__(?!\w)")
_LATEX_BOLD = re.compile(r"\\(?:textbf|mathbf|boldsymbol|bm)\s*\{([^{}]*)\}")
_NUMBER = r"-?\$?\d[\d,]*(?:\.\d+)?%?"
_QUOTED = re.compile(rf"[\"'“”‘’«»]\s*({_NUMBER})\s*[\"'“”‘’«»]")
_PARENTHESISED = re.compile(rf"(?<![\w)\]}}^])\(\s*({_NUMBER})\s*\)")
# an aside after a number, `18 (9 eggs × $2)`: math-verify reads `18 (9` as 18 * 9
_ASIDE = re.compile(r"(?<=\d)[ \t]*+\((?=[^()\n]*?[A-Za-z])[^()\n]*+\)")  # a letter inside; one scan
# European thousands, where unambiguous (issue 54): dots between groups of three with a decimal
# comma (`1.234,5`, `168.000,00`: math-verify reads 1.234 and 168.000) or two dot groups and more
# (`1.234.567`); a lone `1.250` may be 1.25 and stays as written. A decimal comma alone (`12,5`)
# math-verify reads as 12.5 already.
_EURO_DECIMAL = re.compile(r"(?<![\d.,])(\d{1,3}(?:\.\d{3})++),(\d++)(?![.,]\d)")
_EURO_GROUPS = re.compile(r"(?<![\d.,])\d{1,3}(?:\.\d{3}){2,}+(?![\d,]|\.\d)")
# a minus before a currency sign, `-$17`: math-verify takes `$` for math mode and reads no number
_MINUS_CURRENCY = re.compile(r"(?:^|(?<=[\s=(:\[]))-[$€£](?=\d)", re.M)
_MIXED = re.compile(r"(?<![\d.,/])(\d+)\s+(\d+)\s*/\s*(\d+)(?![\d/]|\.\d)")
_BANG = re.compile(r"(?<=\d)\s*!(?!=)")
# `^3`, `**3`, `^{3}`, `^(3)`; not the first step of a tower (`10^3^2`)
_POWER = (r"\s*(?:\^|\*\*)\s*(?:\{\s*([-+]?\d{1,3})\s*\}|\(\s*([-+]?\d{1,3})\s*\)|([-+]?\d{1,3}))"
          r"(?![\d^]|\.\d|\s*(?:\^|\*\*))")
_SCIENTIFIC = re.compile(r"(?<![\w.^])(\d+(?:\.\d+)?)\s*(?:\\times|\\cdot|×|·|\*|x)\s*10" + _POWER)
_TEN_POWER = re.compile(r"(?<![\w.^*×])10" + _POWER)
_E_NOTATION = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[eE]([-+]?\d{1,3})(?!\w|\.\d)")

CORRECTION = re.compile(
    r"\b(?:wait|actually|correction|oops|sorry|on second thought|i mean|i meant|scratch that|"
    r"let me (?:re-?check|re-?calculate|recompute|redo|correct)|i made an? (?:mistake|error))\b|\bno\s*[,.!:;]",
    re.I)
_FILLER = re.compile(
    r"^(?:[\s,.:;!\-]|\b(?:no|wait|actually|sorry|oops|so|ok|okay|hmm|it['’]?s|it is|that['’]?s|that is|rather|"
    r"instead|make that|should be|i meant?|the (?:correct |right |real |final )?answer (?:is|should be))\b)*", re.I)
# a retraction: when nothing stated follows it, the reply has withdrawn its answer (`The answer is
# 12. Wait, no.`); `Actually I used 3 bags` is no retraction
_RETRACTION = re.compile(
    r"\bno\b[ \t]*+[.!]|\b(?:that|this|it)(?:['’]s|[ \t]+is|[ \t]+was)[ \t]+(?:wrong|incorrect|not[ \t]+(?:right|correct))\b"
    r"|\bi made an? (?:mistake|error)\b|\bscratch that\b", re.I)
_STATED = re.compile(r"^(?:-?[$€£]?\d|\\boxed|\\frac|\\dfrac)")
# an answer cue: what a reply says where it commits to its answer (also math_layout's test of a commitment)
CUE = re.compile(r"\banswer\b|\\boxed|####|\bfinish\s*\[", re.I)

# the operation of an arithmetic question, and how a reply may spell each operator
_QUESTION_EXPR = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:\s*[-+*×÷^/]\s*-?\d+(?:\.\d+)?)+")
# (`plus` and `minus` between numbers are symbols already: math_words.spelled)
_SPELLINGS = {"+": r"\+", "-": r"-", "*": r"(?:\*|×|x|\\times|\\cdot|times)",
              "×": r"(?:\*|×|x|\\times|\\cdot|times)", "÷": r"(?:÷|/|\\div|divided by)",
              "/": r"(?:/|÷|\\div|divided by)", "^": r"(?:\^|\*\*)"}


def _plain(mantissa: str, exponent: str) -> str | None:
    try:
        power = int(exponent)
        if abs(power) > MAX_EXPONENT:
            return None
        text = format(Decimal(mantissa).scaleb(power), "f")
    except (InvalidOperation, ValueError):
        return None
    return text.rstrip("0").rstrip(".") if "." in text else text


def _scientific(match: re.Match) -> str:
    groups = [g for g in match.groups() if g is not None]
    mantissa, exponent = (groups[0], groups[1]) if len(groups) == 2 else ("1", groups[0])
    return _plain(mantissa, exponent) or match.group(0)


def _mixed(match: re.Match) -> str:
    whole, top, bottom = (int(g) for g in match.groups())
    if not 0 < top < bottom:  # `20 40/2` is not a mixed number
        return match.group(0)
    return f"\\frac{{{whole * bottom + top}}}{{{bottom}}}"


def clean(text: str) -> str:
    """`text` with each number written as math-verify reads it (see the module docstring)."""
    # `\$91` is a dollar sign escaped for LaTeX: math-verify reads `\$91` as no number (and `$`
    # would open math mode), so the escaped sign goes
    text = _SPACED_THOUSANDS.sub(",", text.replace("\\$", ""))
    text = _EURO_DECIMAL.sub(lambda m: m.group(1).replace(".", "") + "." + m.group(2), text)
    text = _MINUS_CURRENCY.sub("-", _EURO_GROUPS.sub(lambda m: m.group(0).replace(".", ""), text))
    text = _BLANKS.sub(" ", _BLANK_LINES.sub("\n\n", text))
    text = spelled(_MINUS.sub("-", text)).replace("`", "")
    text = _DENIED.sub(" ", text)
    for _ in range(3):  # nested emphasis: ***18***, **_18_**
        text = _UNDERLINE.sub(r"\2", _EMPHASIS.sub(r"\2", text))
    text = _LATEX_BOLD.sub(r"\1", text)
    text = _QUOTED.sub(r"\1", text)
    text = _PARENTHESISED.sub(r" \1", _ASIDE.sub("", text))
    text = _BANG.sub("", text)
    text = _SCIENTIFIC.sub(_scientific, text)
    text = _TEN_POWER.sub(_scientific, text)
    text = _E_NOTATION.sub(lambda m: _plain(m.group(1), m.group(2)) or m.group(0), text)
    return _MIXED.sub(_mixed, text)


def correction(text: str) -> str | None:
    """The text of the last self-correction that states a number (`Wait, actually 18` -> `18`), up
    to the next correction; None when the reply never corrects itself."""
    marks = list(CORRECTION.finditer(text))
    for i in range(len(marks) - 1, -1, -1):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        tail = text[marks[i].end():end]
        if CUE.search(tail) or _STATED.match(_FILLER.sub("", tail, count=1)):
            return tail
    return None


def retracted(text: str) -> bool:
    """Whether the reply withdraws its answer and states no number after (`The answer is 12. Wait, no.`)."""
    last = None
    for last in _RETRACTION.finditer(text):
        pass
    return last is not None and not any(c.isdigit() for c in text[last.end():])


def _operation_pattern(expression: str) -> str:
    parts = re.findall(r"\d+(?:\.\d+)?|[-+*×÷^/]", expression)
    pattern, previous_number = [], False
    for part in parts:
        if part[0].isdigit():
            pattern.append(r"(?:\(\s*)?" + re.escape(part) + r"(?:\s*\))?")
            previous_number = True
        elif part == "-" and not previous_number:  # a sign, as in `3 - -4`
            pattern.append("-")
        else:
            pattern.append(_SPELLINGS[part])
            previous_number = False
    return r"(?<![\w.])" + r"\s*".join(pattern) + r"(?![\d.])"


def without_restatements(text: str, question: str | None) -> str:
    """`text` without the question's own words and its operation: a reply that only restates
    `What is 0 + 3?` (or `0 + 3`, `\\boxed{0 + 3}`) states no answer, while `0 + 3 = 3` keeps its
    result."""
    if not question or not question.strip():
        return text
    words = clean(question).split()  # cleaned as the reply was: `twenty` is 20 in both
    text = re.sub(r"\s+".join(map(re.escape, words)), " ", text, flags=re.I)
    for expression in _QUESTION_EXPR.findall(clean(question)):
        if not re.search(r"[-+*×÷^]", expression[1:]):
            continue  # a fraction such as 3/4 is a number, not the question's operation
        # `0 + 3 = 3` keeps `= 3`, which math-verify reads as 3
        text = re.sub(_operation_pattern(expression), " ", text, flags=re.I)
        operands = re.findall(r"\d+(?:\.\d+)?", expression)
        if len(operands) == 2:  # the operands listed: `The sum of 0 and 5.`, `Finish[0, 5]`
            a, b = map(re.escape, operands)
            text = re.sub(rf"(?<![\w.]){a}(?:[ \t]*+,[ \t]*+|[ \t]+and[ \t]+){b}(?![\d.])", " ", text, flags=re.I)
    return text
