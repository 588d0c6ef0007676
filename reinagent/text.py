"""Text from outside made valid Unicode where it enters (programs, model servers, environments).

A Python str may hold lone UTF-16 surrogates (`'\\ud800'`, half an emoji `'\\ud83d'`): a program
can raise them, and JSON's `\\ud83d` escape decodes to one. No UTF-8 writer takes them (pydantic's
JSON, SQLite, PostgreSQL, BSON, a file opened as UTF-8), so one such character would stop every
record, cache entry and resume after it. Each lone surrogate becomes U+FFFD; a surrogate *pair*
stored as two code points is joined into the character it encodes.
"""

from __future__ import annotations

import reprlib
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


class _Shown(reprlib.Repr):
    """reprlib's bounded repr, with whole numbers of any size: repr() of an int past 4,300 digits
    raises ValueError, and one of a million digits takes seconds."""

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:
            return f"<a whole number of about {int(x.bit_length() * 0.30103) + 1:,} digits>"
        return super().repr_int(x, level)


_SHOWN = _Shown()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxtuple, _SHOWN.maxdict, _SHOWN.maxset = 2, 4, 4, 4, 4
_SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 80, 80, 40


def shown(value: Any, limit: int = 120) -> str:
    """A short repr of `value` for an error line, in time bounded whatever `value` is: a YAML
    alias bomb (a list that holds itself 9 deep 9 wide: 387 million items shared) printed in full
    took 57 s and 2.9 GB before failing, and a 100,000-digit number could not be printed at all."""
    text = _SHOWN.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
