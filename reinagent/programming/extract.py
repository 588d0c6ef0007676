"""Getting Python code and unit tests out of a model's free-form reply.

Models wrap code in fences (with or without a language tag, sometimes never closed), write bare
code, or surround it with prose. Nothing here executes code: parsing is `ast.parse` only.
"""

from __future__ import annotations

import ast
import re
import warnings

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```|\Z)", re.S | re.M)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3", "pycon"}
_CODE_START = re.compile(r"^(def |async def |class |import |from \S+ import |@\w)")
# What ast.parse raises for code it cannot parse: ValueError for null bytes, MemoryError for
# `x = ` and 100,000 `-` (the parser's stack), RecursionError for a long `1+1+...`. Each is the
# model's failed attempt, never the framework's error.
PARSE_ERRORS = (SyntaxError, ValueError, MemoryError, RecursionError)


def quiet_parse(code: str) -> ast.Module:
    """ast.parse without the DeprecationWarnings that model code ('\\d' in a str) triggers."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(code)


def parses(code: str) -> bool:
    try:
        quiet_parse(code)
    except PARSE_ERRORS:
        return False
    return True


def syntax_error(code: str) -> str | None:
    """The SyntaxError as one line ('SyntaxError: ... (line N)'), or None when the code parses."""
    try:
        quiet_parse(code)
    except SyntaxError as err:
        return f"SyntaxError: {err.msg} (line {err.lineno})"
    except ValueError as err:  # null bytes
        return f"ValueError: {err}"
    except MemoryError:
        return "SyntaxError: the parser ran out of memory (code nested too deeply)"
    except RecursionError:
        return "SyntaxError: the parser's recursion limit was exceeded (an expression nested too deeply)"
    return None


def defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\(", code, re.M) is not None


def code_blocks(text: str) -> list[str]:
    """Fenced blocks tagged as Python or untagged, in order (an unclosed last fence counts)."""
    return [body for tag, body in _FENCE.findall(text) if tag.lower() in _PYTHON_TAGS]


def extract_code(text: str, entry_point: str | None = None) -> str:
    """The implementation in `text`: best fenced block, else the code part of bare text.

    Prefers a block that defines `entry_point` and parses; returns unparseable code as is (the
    caller reports its SyntaxError as feedback) rather than inventing something.
    """
    text = text.replace("\r\n", "\n")
    blocks = [b.strip("\n") for b in code_blocks(text) if b.strip()]
    if blocks:
        if entry_point:
            blocks = [b for b in blocks if defines(b, entry_point)] or blocks
        good = [b for b in blocks if parses(b) and not _only_tests(b)]
        return (good or blocks)[0] + "\n"
    return _bare_code(text, entry_point).strip("\n") + "\n"


def _only_tests(code: str) -> bool:
    """A block of asserts or prints only (a model's usage example, not the implementation)."""
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return bool(lines) and all(ln.startswith(("assert ", "print(")) for ln in lines)


def _bare_code(text: str, entry_point: str | None) -> str:
    if parses(text) and _has_code(text):
        return text
    lines = text.split("\n")
    starts = [i for i, ln in enumerate(lines) if _CODE_START.match(ln)]
    if not starts:
        return text
    chunk = lines[starts[0] :]
    # Trailing prose ("This function works by ...") is cut: the longest prefix that parses.
    for end in range(len(chunk), 0, -1):
        candidate = "\n".join(chunk[:end])
        if parses(candidate) and (not entry_point or defines(candidate, entry_point)):
            return candidate
    # Prose between code parts: drop unindented lines that are not Python on their own.
    kept = [ln for ln in chunk if not ln.strip() or ln[0] in " #@" or _is_statement(ln)]
    joined = "\n".join(kept)
    return joined if parses(joined) else "\n".join(chunk)


def _has_code(text: str) -> bool:
    try:
        tree = quiet_parse(text)
    except PARSE_ERRORS:
        return False
    # A sentence that happens to parse ("Done") is a lone expression; real code defines things.
    return any(not isinstance(node, ast.Expr) for node in tree.body)


def _is_statement(line: str) -> bool:
    probe = line + "\n    pass" if line.rstrip().endswith(":") else line
    try:
        tree = quiet_parse(probe)
    except PARSE_ERRORS:
        return False
    return not (len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)
                and isinstance(tree.body[0].value, (ast.Name, ast.Constant)))


def extract_tests(text: str, entry_point: str, limit: int) -> list[str]:
    """Up to `limit` distinct one-line `assert` statements that call `entry_point`."""
    text = text.replace("\r\n", "\n")
    found: list[str] = []
    for raw in text.split("\n"):
        line = raw.strip().strip("`").strip()
        if not line.startswith("assert ") or line in found:
            continue
        if not parses(line) or not re.search(rf"\b{re.escape(entry_point)}\s*\(", line):
            continue
        found.append(line)
        if len(found) >= limit:
            break
    return found


def doctest_asserts(prompt: str, entry_point: str, limit: int) -> list[str]:
    """`>>> f(x)` followed by a one-line `y` in a docstring, turned into `assert f(x) == y`.

    Line-based on purpose: doctest's own parser rejects a docstring whose closing quotes or
    surrounding fence are indented differently from the examples.
    """
    tests: list[str] = []
    lines = prompt.replace("\r\n", "\n").split("\n")
    for i, line in enumerate(lines[:-1]):
        stripped = line.strip()
        if not stripped.startswith(">>> ") or entry_point not in stripped:
            continue
        want = lines[i + 1].strip()
        if not want or want.startswith((">>>", '"""', "'''", "```", "...")):
            continue
        candidate = f"assert {stripped[4:].strip()} == {want}"
        if parses(candidate) and candidate not in tests:
            tests.append(candidate)
        if len(tests) >= limit:
            break
    return tests
