"""Keep API keys out of logs, run directories, cache keys and error messages.

Three kinds of secret are removed (docs/security.md lists them):
- values of environment variables that hold credentials (by name, or named by --api-key-env);
- whatever a URL carries besides where it points: its userinfo (`user:pw@`, `TOKEN@`, `:pw@`)
  and every query and fragment value (`?key=S`, `#access_token=S`), in any URL in the text;
- credentials by shape: `sk-...`, `ghp_...`, `hf_...`, `AIza...`, AWS key ids, `Bearer`/`Basic`
  authorisations, and the values of secret-named fields however they are written
  (`api_key=V`, `x-api-key: V`, `"api_key": "V"`, `--api-key V`).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Sequence

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.I)
# Provider key shapes, caught even when the key did not come from our environment.
_SECRET_SHAPES = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),  # OpenAI, Anthropic (sk-ant-)
    re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,})"),  # GitHub
    re.compile(r"\bhf_[A-Za-z0-9]{16,}"),  # Hugging Face
    re.compile(r"\bgsk_[A-Za-z0-9]{16,}"),  # Groq
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{8,}"),  # Slack
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"),  # Google
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{16,}"),  # GitLab
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\b(?:Bearer|bearer)\s+[A-Za-z0-9._~+/=\-]{8,}"),  # authorisation values
]
# A parameter whose name says it holds a secret (the name stays, its value goes): the name may
# carry any prefix or suffix (`sslpassword`, `X-Amz-Signature`), since `=` follows at once.
_PARAM_NAME = (r"(?:[\w.-]*(?:password|passwd|secret|token(?!s)|api[_-]?key|apikey|access[_-]?key|signature"
               r"|credential|private[_-]?key)[\w.-]*|pass|pwd|auth|key|sig)")
# name=value (URL parameters, libpq keywords, shell assignments, --flag=value)
_SECRET_PARAM = re.compile(rf"(?i)((?:^|[?&;\s#,(]|--?){_PARAM_NAME}=)(?!\*\*\*)[^&\s#;'\",)]+")
# The stricter name of a header, a JSON field or a flag: whole words only (`x-api-key`,
# `client_secret`), so that prose ("TokenizerError: ...", "max_tokens: 5") keeps its values.
_NAME = (r"\b(?:[a-z0-9]+[-_])*(?:password|passwd|secret|token|api[-_]?key|apikey|authorization|credentials?"
         r"|private[-_]?key|access[-_]?key(?:[-_]?id)?|signature|cookie)\b")
_SCHEME_WORD = r"(?:(?:Basic|Bearer|Digest|Token|Negotiate|AWS4-HMAC-SHA256)[ \t]+)?"
# name: value (HTTP headers, YAML); `Authorization: Basic X` loses its scheme word's value too
_SECRET_HEADER = re.compile(rf"(?i)({_NAME}:[ \t]*)(?!\*\*\*)(?!//)({_SCHEME_WORD}[^\s,;'\"}}]+)")
# "name": "value" (JSON, Python reprs)
_SECRET_QUOTED = re.compile(rf"""(?i)((['"]){_NAME}\2\s*[:=]\s*(['"]))(?!\*\*\*)(?:(?!\3).)*""")
# --name value (a command line written as one string)
_SECRET_FLAG = re.compile(rf"(?i)((?:^|\s)--?{_NAME}\s+)(?!\*\*\*)(?!-)(\S+)")
# scheme://[userinfo@]host[path][?query][#fragment]; quotes and brackets end a URL in prose
_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s/?#'\"<>]*@)?([^\s?#'\"<>]*)(\?[^\s#'\"<>]*)?(#[^\s'\"<>]*)?")
_CREDENTIAL_VARIABLES: set[str] = set()
_CREDENTIAL_VALUES: set[str] = set()


def note_credential_variable(name: str | None) -> None:
    """Treat the value of `name` as a secret from now on (called where a key is read from it)."""
    if name:
        _CREDENTIAL_VARIABLES.add(name)


def note_url_credentials(url: str | None) -> None:
    """Treat a URL's userinfo as a secret from now on, in every form a server may echo it back:
    the password, `user:password` (decoded, as sent) and its Base64 (the `Authorization: Basic`
    value HTTP clients make of it). redact() already hides it inside a URL; an echo is bare."""
    if not url or "@" not in url:
        return
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return
    if user is None and password is None:
        return
    pair = f"{unquote(user or '')}:{unquote(password or '')}"
    forms = {pair, base64.b64encode(pair.encode()).decode(), unquote(password or ""), password or ""}
    if not password:  # `TOKEN@host`: the user name is the secret
        forms |= {unquote(user or ""), user or ""}
    _CREDENTIAL_VALUES.update(f for f in forms if len(f) >= 4)


def secret_values() -> list[str]:
    """Values of environment variables whose names say they are secrets, or that hold a credential,
    and the URL credentials noted while running."""
    return sorted(
        {*(v for k, v in os.environ.items()
           if (_SECRET_NAME.search(k) or k in _CREDENTIAL_VARIABLES) and len(v) >= 6), *_CREDENTIAL_VALUES},
        key=len,
        reverse=True,
    )


def _values_hidden(part: str) -> str:
    """`?a=1&b=2` -> `?a=***&b=***`; a part without names (`?S`, `#S`) is one value."""
    lead, body = part[0], part[1:]
    if not body:
        return part
    items = re.split(r"([&;])", body)
    out = [item if item in "&;" or not item else
           (item.split("=", 1)[0] + "=***" if "=" in item else "***") for item in items]
    return lead + "".join(out)


def _url(match: re.Match) -> str:
    scheme, userinfo, rest, query, fragment = match.groups()
    text = scheme + ("***@" if userinfo else "") + rest
    return text + (_values_hidden(query) if query else "") + (_values_hidden(fragment) if fragment else "")


def redact_url(url: str) -> str:
    """A URL as it may be recorded: no userinfo, no query or fragment value (names kept)."""
    return redact(url)


def redact(text: str) -> str:
    for value in secret_values():
        text = text.replace(value, "***")
    text = _URL.sub(_url, text)
    for shape in _SECRET_SHAPES:
        text = shape.sub("***", text)
    text = _SECRET_QUOTED.sub(r"\1***", text)
    text = _SECRET_HEADER.sub(r"\1***", text)
    text = _SECRET_FLAG.sub(r"\1***", text)
    return _SECRET_PARAM.sub(r"\1***", text)


_FLAG = re.compile(rf"(?i)^--?{_NAME}$")


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line as it may be recorded: every argument redacted, and the argument after a
    secret-named flag (`--api-key V`, `--token V`) replaced whole."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if i and _FLAG.match(argv[i - 1]) and not arg.startswith("-"):
            out.append("***")
        else:
            out.append(redact(arg))
    return out
