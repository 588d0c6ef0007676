"""Text from outside made valid Unicode where it enters (programs, model servers, environments).

A Python str may hold lone UTF-16 surrogates (`'\\ud800'`, half an emoji `'\\ud83d'`): a program
can raise them, and JSON's `\\ud83d` escape decodes to one. No UTF-8 writer takes them (pydantic's
JSON, SQLite, PostgreSQL, BSON, a file opened as UTF-8), so one such character would stop every
record, cache entry and resume after it. Each lone surrogate becomes U+FFFD; a surrogate *pair*
stored as two code points is joined into the character it encodes.
"""

from __future__ import annotations

from typing import Any


def valid_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (the same object when already valid)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def valid_data(value: Any, depth: int = 0) -> Any:
    """`value` (parsed JSON, a dumped record) with valid_text applied to every str in it, keys
    included (containers are copied; past 200 levels of nesting a value is kept as it is)."""
    kind = type(value)
    if kind is str:
        return valid_text(value)
    if depth > 200:
        return value
    if kind is dict:
        return {valid_data(k, depth + 1): valid_data(v, depth + 1) for k, v in value.items()}
    if kind is list or kind is tuple:
        return kind(valid_data(v, depth + 1) for v in value)
    return value


def clipped(text: str, limit: int, what: str = "text") -> str:
    """`text` cut to about `limit` characters, saying how much was cut (records and reports must
    stay readable whatever size a server or a program answers with)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{what} clipped: {len(text):,} characters, the first {limit:,} kept]"
