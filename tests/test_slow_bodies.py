"""Slow bodies (issue 45, item 4): connections that send complete headers and then withhold the body
are evicted, oldest first, like half-sent headers, and the bytes of all bodies still arriving are
bounded together. Real hardened servers (connections.py + guard.py) on loopback, with small caps
and the guard's body timeout raised past the test, so only eviction can free a connection."""

from __future__ import annotations

import socket

import httpx
import pytest
from starlette.middleware import Middleware

from reinagent.service import guard
from tests.test_slowloris import _answers, _closed_by_server, _InProcess, _poll

HEADERS = (b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n")


@pytest.fixture
def guarded(monkeypatch):
    monkeypatch.setattr(guard, "BODY_TIMEOUT_S", 600.0)  # no 408 frees anything during the test
    servers = []

    def start(**limits) -> _InProcess:
        servers.append(_InProcess(middleware=[Middleware(guard.Guard, settings=guard.GuardSettings())], **limits))
        return servers[-1]
    yield start
    for server in servers:
        server.close()


def _withheld(port: int, n: int, declared: int, sent: bytes = b"") -> list[socket.socket]:
    """n connections, each with complete headers and `sent` of a `declared`-byte body, then nothing."""
    held = []
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(HEADERS % declared + sent)
        held.append(sock)
    return held


def test_connections_withholding_their_bodies_are_evicted_to_serve_others(guarded):
    server = guarded(header_timeout_s=600, max_connections=8)
    held = _withheld(server.port, 20, 100, b'{"a": ')
    try:
        _poll(lambda: _answers(server.port, "/health"), "a full request is served with 20 bodies withheld at a cap of 8")
        table = server.server.table
        assert table.evicted >= 12 and len(table.open) <= 8
        assert _closed_by_server(held[0])  # the oldest went first
        with httpx.Client(timeout=30) as client:  # a whole POST is served too
            answer = client.post(f"http://127.0.0.1:{server.port}/echo", content=b'{"a": 1}',
                                 headers={"Content-Type": "application/json"})
        assert answer.text == "8"
    finally:
        for sock in held:
            sock.close()


def test_the_bytes_of_bodies_still_arriving_are_bounded(guarded):
    cap = 1 << 20
    server = guarded(header_timeout_s=600, max_connections=10_000, max_pending_body_bytes=cap)
    table = server.server.table
    chunk = b"[" + b"1," * 150_000  # 300 KB of a 4 MB body, then nothing
    held = []
    try:
        for _ in range(10):  # 3 MB sent in all, three times the cap
            held += _withheld(server.port, 1, 4_000_000, chunk)
            _poll(lambda: table.pending_body_bytes <= cap, "the pending bodies are shed to the cap")
        _poll(lambda: table.bodies_evicted >= 6, "the oldest pending bodies are closed")
        assert table.pending_body_bytes <= cap
        assert _closed_by_server(held[0]) and not _closed_by_server(held[-1])  # oldest first, newest kept
        with httpx.Client(timeout=30) as client:
            answer = client.post(f"http://127.0.0.1:{server.port}/echo", content=b"[" + b"1," * 1000 + b"1]",
                                 headers={"Content-Type": "application/json"})
        assert answer.text == "2003" and table.pending_body_bytes <= cap
    finally:
        for sock in held:
            sock.close()
