"""Keep API keys out of logs, run directories, cache keys and error messages."""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.I)
# Common key shapes, caught even when the key did not come from our environment.
_SECRET_SHAPES = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\b(?:Bearer|bearer)\s+[A-Za-z0-9._\-]{8,}"),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),  # user:password@ in URLs
]
# `?password=X`, `&sslpassword=X`, `?api_key=X` in URLs, and libpq's `password=X` keywords: the
# parameter's name stays, its value goes
_SECRET_PARAM = re.compile(r"(?i)((?:^|[?&;\s])(?:[\w.-]*(?:password|passwd|secret|token(?!s)|api[_-]?key)[\w.-]*|pass|pwd)=)"
                           r"(?!\*\*\*)[^&\s#;'\"]+")
# Variables the run reads a credential from (--api-key-env names any variable): their values are
# secrets whatever their names say
_CREDENTIAL_VARIABLES: set[str] = set()


def note_credential_variable(name: str | None) -> None:
    """Treat the value of `name` as a secret from now on (called where a key is read from it)."""
    if name:
        _CREDENTIAL_VARIABLES.add(name)


def secret_values() -> list[str]:
    """Values of environment variables whose names say they are secrets, or that hold a credential."""
    return sorted(
        (v for k, v in os.environ.items()
         if (_SECRET_NAME.search(k) or k in _CREDENTIAL_VARIABLES) and len(v) >= 6),
        key=len,
        reverse=True,
    )


def redact(text: str) -> str:
    for value in secret_values():
        text = text.replace(value, "***")
    for shape in _SECRET_SHAPES:
        text = shape.sub("***", text)
    return _SECRET_PARAM.sub(r"\1***", text)
