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


def secret_values() -> list[str]:
    """Values of environment variables whose names say they are secrets."""
    return sorted(
        (v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 6),
        key=len,
        reverse=True,
    )


def redact(text: str) -> str:
    for value in secret_values():
        text = text.replace(value, "***")
    for shape in _SECRET_SHAPES:
        text = shape.sub("***", text)
    return text
