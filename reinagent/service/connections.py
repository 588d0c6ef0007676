"""Limits below HTTP for the local servers (serve-env and `reinagent view`), before any token check.

Slowloris: a client opens thousands of connections and sends each request's headers a byte at a
time. uvicorn times out idle keep-alive connections only, so every such connection kept its file
descriptor; at the process's limit accept() failed, every new client timed out, and asyncio logged
a traceback per failed accept (200 MB of "Too many open files" in a minute). Here:

- a connection whose request headers are not complete HEADER_TIMEOUT_S after its first byte (or
  after it opened) is closed;
- at most `max_connections` are open (the file-descriptor limit, first raised to its hard limit,
  less a reserve); a new connection beyond that closes the oldest one that
  is not in the middle of a request (a half-sent request or an idle keep-alive), so a client that
  sends its request at once is served however many half-open connections others hold; only when
  every open connection is running a request is the new one refused;
- asyncio accepts a fraction of the limit per turn of its loop, so accepted-but-not-yet-closed
  sockets never reach it, while the kernel's accept queue is long, so a real client's connect is
  not dropped behind an attacker's;
- a log line (and its traceback) repeats at most LOG_BURST times a minute (`RepeatLimit`).

Slow bodies (issue 45): a client that sends complete headers and then withholds the body used to
count as "running a request", so it was never evicted (800 of them made both servers refuse most
new clients), and each pending body, up to guard.MAX_BODY_BYTES, was buffered for up to
guard.BODY_TIMEOUT_S (300 of them: 1.1 GB). Now a connection whose body is still arriving is
evicted like a half-sent header, oldest first, to make room; and the bytes of all bodies still
arriving are counted together: past `max_pending_body_bytes` the oldest such connections are
closed until the total is under it again.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import time
from collections import OrderedDict
from typing import Any

# A real client sends its headers in one go, within milliseconds; the bound is long (nginx's
# client_header_timeout) because every timed-out slowloris connection comes back at once, and
# that churn is what a real client queues behind.
HEADER_TIMEOUT_S = 60.0
MAX_CONNECTIONS = 65536  # at most this many open at once (fewer where file descriptors are fewer)
# Bytes of request bodies still arriving, all connections together: 16 bodies of the largest size
# the guard takes (4 MiB); real clients' bodies (an action, a program) are a few KB and arrive at once.
MAX_PENDING_BODY_BYTES = 64 << 20
ACCEPT_QUEUE = 4096  # connections the kernel holds for accept() (capped by net.core.somaxconn)
LOG_BURST = 5  # lines of one kind per LOG_WINDOW_S; the rest are counted and summarised
LOG_WINDOW_S = 60.0


def raise_fd_limit() -> int:
    """Raise this process's soft file-descriptor limit to its hard limit; return the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 16) if soft != resource.RLIM_INFINITY else 1 << 16
    if soft == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            soft = hard if soft == resource.RLIM_INFINITY else soft
    return int(soft)


class ConnectionTable:
    """The open connections of one server, oldest first, and what the guard did to them."""

    def __init__(self, max_connections: int, header_timeout_s: float,
                 max_pending_body_bytes: int = MAX_PENDING_BODY_BYTES):
        self.max_connections, self.header_timeout_s = max_connections, header_timeout_s
        self.max_pending_body_bytes = max_pending_body_bytes
        self.open: OrderedDict[Any, None] = OrderedDict()
        self.pending_body_bytes = 0  # bytes received of bodies not yet complete, all connections
        self.evicted = self.refused = self.timed_out = self.bodies_evicted = 0

    def make_room(self) -> bool:
        """Close the oldest connection that is not running a request (idle, half-sent headers, or a
        body still arriving); False when every one is running a request."""
        for conn in self.open:
            if not conn.busy() or conn.body_pending():
                self._close(conn)
                self.evicted += 1
                return True
        return False

    def shed_bodies(self) -> None:
        """Close the oldest connections whose bodies are still arriving until the bytes of all
        such bodies are within the bound."""
        for conn in list(self.open):
            if self.pending_body_bytes <= self.max_pending_body_bytes:
                return
            if conn.body_pending():
                self._close(conn)
                self.bodies_evicted += 1

    def _close(self, conn) -> None:
        self.open.pop(conn, None)
        conn.forget_body()
        conn.transport.abort()  # frees the descriptor now; uvicorn hears connection_lost


def guarded_protocol(base: type, table: ConnectionTable) -> type:
    """A subclass of uvicorn's HTTP protocol (h11 or httptools) that applies the limits above.

    It relies only on what both protocols share: `cycle` is the current request's
    RequestResponseCycle, set as soon as its headers are parsed, with `response_complete`."""

    class Guarded(base):
        _table = table

        def busy(self) -> bool:
            cycle = getattr(self, "cycle", None)
            return cycle is not None and not cycle.response_complete

        def body_pending(self) -> bool:
            """Headers in, body still arriving (`more_body`: both protocols clear it at its end)."""
            return self.busy() and bool(getattr(self.cycle, "more_body", False))

        def forget_body(self) -> None:
            table.pending_body_bytes -= self._body_bytes
            self._body_bytes = 0

        def connection_made(self, transport) -> None:
            self._refused, self._waiting_since, self._timer, self._body_bytes = False, time.monotonic(), None, 0
            self.transport = transport
            if len(table.open) >= table.max_connections and not table.make_room():
                self._refused = True
                table.refused += 1
                transport.abort()
                return
            table.open[self] = None
            super().connection_made(transport)
            self._arm(table.header_timeout_s)

        def connection_lost(self, exc) -> None:
            if self._refused:
                return
            table.open.pop(self, None)
            self.forget_body()
            if self._timer is not None:
                self._timer.cancel()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._waiting_since is None and not self.busy():  # the first byte of the next request
                self._waiting_since = time.monotonic()
                self._arm(table.header_timeout_s)
            super().data_received(data)
            if self.busy():
                self._waiting_since = None
            if self.body_pending():  # counted (the headers' bytes with it) until the body is whole
                self._body_bytes += len(data)
                table.pending_body_bytes += len(data)
                if table.pending_body_bytes > table.max_pending_body_bytes:
                    table.shed_bodies()
            elif self._body_bytes:
                self.forget_body()

        def _arm(self, delay: float) -> None:
            if self._timer is None:
                self._timer = self.loop.call_later(delay, self._expire)

        def _expire(self) -> None:
            self._timer = None
            if self._waiting_since is None or self.transport.is_closing():
                return
            left = self._waiting_since + table.header_timeout_s - time.monotonic()
            if left > 0:
                self._arm(left)
                return
            table.timed_out += 1
            table.open.pop(self, None)
            self.transport.abort()

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


def _protocol_of(http: Any) -> type:
    if not isinstance(http, str):
        return http
    if http == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    if http == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    return AutoHTTPProtocol


def hardened_server(config, *, max_connections: int = MAX_CONNECTIONS, header_timeout_s: float = HEADER_TIMEOUT_S,
                    max_pending_body_bytes: int = MAX_PENDING_BODY_BYTES):
    """A uvicorn.Server for `config` with the limits above (`server.table` counts what they did).

    Two queues matter: asyncio accepts up to `config.backlog` sockets per turn of the loop (each a
    descriptor until its connection is closed), so that is kept a fraction of the limit; the
    kernel's queue of connections waiting for accept() is made as long as the system allows
    (ACCEPT_QUEUE), so a real client's SYN is not dropped behind an attacker's connects (a dropped
    SYN is retried only after 1 s, then 3 s)."""
    import uvicorn

    fds = raise_fd_limit()
    # The server's own files (sessions' workers, sandboxes' pipes) and one turn's accepted sockets
    # stay within the reserve; the rest may be connections, so that attackers beyond it are few
    # and the kernel's queue (where a real client waits its turn) stays short.
    reserve = max(min(256, fds // 2), min(1024, fds // 8))
    config.backlog = max(16, min(config.backlog, reserve // 4))
    table = ConnectionTable(max(8, min(max_connections, fds - reserve)), header_timeout_s, max_pending_body_bytes)
    config.http = guarded_protocol(_protocol_of(config.http), table)

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            for sock in sockets or ():
                with contextlib.suppress(OSError):
                    sock.listen(ACCEPT_QUEUE)  # after asyncio's listen(backlog): only the kernel's queue grows

    server = Server(config)
    server.table = table
    limit_log_repeats()  # after uvicorn.Config, which sets up its loggers
    return server


class RepeatLimit(logging.Filter):
    """At most LOG_BURST records of one kind (logger, level, message template) per LOG_WINDOW_S,
    a traceback only the first time a kind is seen; what was dropped is counted on the next line
    of that kind that passes."""

    def __init__(self, burst: int = LOG_BURST, window_s: float = LOG_WINDOW_S):
        super().__init__()
        self.burst, self.window_s = burst, window_s
        self.kinds: dict[tuple, list] = {}  # kind -> [window start, passed in window, dropped, traced]

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.levelno, str(record.msg).split("\n", 1)[0][:200])
        now = time.monotonic()
        state = self.kinds.setdefault(kind, [now, 0, 0, False])
        if now - state[0] >= self.window_s:
            state[0], state[1] = now, 0
        if state[1] >= self.burst:
            state[2] += 1
            return False
        state[1] += 1
        if record.exc_info or record.exc_text or record.stack_info:
            if state[3]:
                record.exc_info = record.exc_text = record.stack_info = None
            state[3] = True
        if state[2]:
            record.msg, record.args = f"{record.getMessage()} ({state[2]} more like this not logged)", None
            state[2] = 0
        return True


_LIMITED = ("asyncio", "uvicorn", "uvicorn.error", "uvicorn.access")


def limit_log_repeats() -> None:
    """Put one RepeatLimit on the loggers a server under attack writes to (once per process)."""
    for name in _LIMITED:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RepeatLimit) for f in logger.filters):
            logger.addFilter(RepeatLimit())
