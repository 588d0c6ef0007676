"""What a local HTTP server checks before its routes see a request (serve-env and `reinagent view`).

A web page the user opens can make the browser send requests to 127.0.0.1: through DNS rebinding
(evil.example first resolves to the page's server, then to 127.0.0.1) it even reads the answers.
Two checks stop that: the `Host` header must be a loopback name or one the user allows (a rebound
page sends `Host: evil.example`), and a POST must say `Content-Type: application/json` (a cross-site
form or `text/plain` fetch cannot, without a CORS preflight that these servers never grant). A
server with a token needs neither check (a rebound page does not know the token), so it accepts
any Host: that is how a token-guarded server on 0.0.0.0 is reached by its machine's name.

The request body is read here with a bound (413 beyond it), so a 400 MB POST never reaches JSON
parsing. Every refusal is one JSON object `{"error": ...}` that quotes at most a short prefix of
what the client sent.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

MAX_BODY_BYTES = 4 * 1024 * 1024  # a coder's program with its tests is a few KB; 4 MiB is generous
BODY_TIMEOUT_S = 30.0  # for the whole body, once the headers are in (connections.py times those)
ECHO_CHARS = 60  # at most this much of a client's bad input is quoted back


def short(value: object, limit: int = ECHO_CHARS) -> str:
    """repr(value), cut to `limit` characters: an error message never echoes a 50 MB id back."""
    try:
        text = value if isinstance(value, str) else str(value)
    except ValueError:  # an int past Python's 4300-digit printing limit
        return "(a number too long to print)"
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} chars)"


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):  # RFC 6761: always the loopback
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name part of a Host header: `[::1]:8000` -> `::1`, `a.example:80` -> `a.example`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@dataclass
class GuardSettings:
    token: str | None = None  # a token accepts any Host; without one only loopback and allowed names
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)  # "*" allows any
    max_body_bytes: int = MAX_BODY_BYTES
    #: where else a token may come from than `Authorization: Bearer T` (the viewer: a browser
    #: opens `/?token=T` once and then carries a cookie)
    token_cookie: str | None = None
    #: AgentGym's clients POST /create with no body and no content type: an empty body carries no
    #: payload to smuggle, so it may come without one (the agentgym protocol only)
    empty_post_ok: bool = False

    @classmethod
    def of(cls, token: str | None, allow_hosts: Iterable[str] = (), **kw) -> GuardSettings:
        return cls(token=token or None, allowed_hosts=frozenset(h.lower() for h in allow_hosts), **kw)

    def host_ok(self, header: str) -> bool:
        if self.token or "*" in self.allowed_hosts:
            return True
        name = host_name(header)
        return bool(name) and (is_loopback(name) or name in self.allowed_hosts)


class Refused(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


async def _reply(send, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware: Host, token, content type and body size, in that order."""

    def __init__(self, app, settings: GuardSettings):
        self.app, self.settings = app, settings
        self._expected = f"Bearer {settings.token}".encode() if settings.token else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        set_cookie: dict[str, str] = {}
        try:
            self._check_host(headers)
            set_cookie = self._check_token(scope, headers)
            if scope["method"] in ("POST", "PUT", "PATCH"):
                if not (self.settings.empty_post_ok and _empty(headers)):
                    self._check_json(headers)
                receive = await self._bounded_body(headers, receive)
        except Refused as err:
            return await _reply(send, err.status, err.message, err.headers)
        except _ClientGone:  # before its body was whole: nobody to answer, nothing to run
            return None
        if set_cookie:
            send = _with_headers(send, set_cookie)
        return await self.app(scope, receive, send)

    def _check_host(self, headers: dict[str, str]) -> None:
        host = headers.get("host", "")
        if not self.settings.host_ok(host):
            raise Refused(403, f"Host {short(host_name(host))} is not a loopback name; start the server "
                               "with --allow-host NAME to accept it (or give it a token)")

    def _check_token(self, scope, headers: dict[str, str]) -> dict[str, str]:
        if self._expected is None:
            return {}
        if hmac.compare_digest(headers.get("authorization", "").encode(), self._expected):
            return {}
        name = self.settings.token_cookie
        if name:
            token = self.settings.token.encode()
            cookie = SimpleCookie()
            try:
                cookie.load(headers.get("cookie", ""))
            except Exception:  # noqa: BLE001 - a malformed cookie header is no token
                cookie = SimpleCookie()
            if name in cookie and hmac.compare_digest(cookie[name].value.encode(), token):
                return {}
            given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [""])[0]
            if hmac.compare_digest(given.encode(), token):
                # HttpOnly: page scripts never read it; SameSite=Strict: other sites' pages never send it
                return {"set-cookie": f"{name}={self.settings.token}; HttpOnly; SameSite=Strict; Path=/"}
        hint = " (open the URL the server printed, with its ?token=)" if name else ""
        raise Refused(401, f"missing or wrong bearer token{hint}", {"WWW-Authenticate": "Bearer"})

    def _check_json(self, headers: dict[str, str]) -> None:
        kind = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind != "application/json" and not (kind.startswith("application/") and kind.endswith("+json")):
            raise Refused(415, f"POST bodies must be Content-Type: application/json, got {short(kind)}")

    async def _bounded_body(self, headers: dict[str, str], receive):
        """Read the whole body (refusing it past the bound) and hand the app a replay of it."""
        limit = self.settings.max_body_bytes
        too_big = f"request body over {limit} bytes"
        declared = headers.get("content-length")
        if declared is not None and (not declared.strip().isdigit() or int(declared) > limit):
            raise Refused(413, too_big)
        chunks, size, until = [], 0, asyncio.get_running_loop().time() + BODY_TIMEOUT_S
        while True:
            try:  # a body sent a byte at a time would hold its connection (and a thread) forever
                async with asyncio.timeout_at(until):
                    message = await receive()
            except TimeoutError:
                raise Refused(408, f"request body not received within {BODY_TIMEOUT_S:g} s") from None
            if message["type"] != "http.request":  # the client went away (or was evicted: connections.py)
                raise _ClientGone
            size += len(message.get("body", b""))
            if size > limit:
                raise Refused(413, too_big)
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        return _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}], receive)


class _ClientGone(Exception):
    """The client disconnected before the whole body arrived."""


def _empty(headers: dict[str, str]) -> bool:
    return headers.get("content-length", "0").strip() == "0" and "transfer-encoding" not in headers


def _replay(messages: list[dict], then=None):
    async def receive():
        if messages:
            return messages.pop(0)
        if then is not None:
            return await then()  # after the body: http.disconnect when the client goes
        return {"type": "http.disconnect"}
    return receive


def _with_headers(send, extra: dict[str, str]):
    async def wrapped(message):
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []),
                                              *((k.encode(), v.encode()) for k, v in extra.items())]}
        await send(message)
    return wrapped
