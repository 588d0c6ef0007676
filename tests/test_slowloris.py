"""Slowloris against serve-env and `reinagent view` (issue 38, section 2), scaled down: real servers
on loopback with a low file-descriptor limit and more half-open connections than it. The full bar
(22,000 connections from two clients against 20,000 descriptors) is scripts/slowloris.py."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import re
import resource
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import CLI, ROOT
from tests.test_env_service import GUESS

SERVER_FDS = 256
HALF_OPEN = 600  # well past the server's descriptors


def _limit_fds():
    resource.setrlimit(resource.RLIMIT_NOFILE, (SERVER_FDS, SERVER_FDS))


def _start(kind: str, tmp_path: Path) -> tuple[subprocess.Popen, int, str, Path]:
    log = tmp_path / "server.log"
    if kind == "view":
        (tmp_path / "runs").mkdir()
        args, path, pattern = ["view", str(tmp_path / "runs"), "--port", "0"], "/api/runs", r"127\.0\.0\.1:(\d+)/"
    else:
        args, path, pattern = ["serve-env", "--benchmark", GUESS, "--port", "0"], "/health", r"127\.0\.0\.1:(\d+)"
    proc = subprocess.Popen([*CLI, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=open(log, "wb"), text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=_limit_fds)
    line = proc.stdout.readline()
    found = re.search(pattern, line)
    assert found, (line, log.read_text())
    return proc, int(found.group(1)), path, log


def _half_open(port: int, n: int) -> list[socket.socket]:
    """n connections, each with a request line and one header sent, never finished."""
    held = []
    for _ in range(n):
        sock = socket.socket()
        sock.settimeout(10)
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        except OSError:  # the kernel's queue is full: what we hold is enough
            sock.close()
            break
        held.append(sock)
    return held


def _answers(port: int, path: str) -> bool:
    try:
        with httpx.Client(timeout=10) as client:
            return client.get(f"http://127.0.0.1:{port}{path}").status_code == 200
    except httpx.HTTPError:
        return False


def _poll(condition, what: str, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, f"timed out waiting until {what}"
        time.sleep(0.1)


@pytest.mark.parametrize("kind", ["serve-env", "view"])
def test_server_answers_while_more_half_open_connections_than_descriptors_are_held(kind, tmp_path):
    proc, port, path, log = _start(kind, tmp_path)
    held: list[socket.socket] = []
    try:
        _poll(lambda: _answers(port, path), "the server answers")
        held = _half_open(port, HALF_OPEN)
        assert len(held) > SERVER_FDS
        for _ in range(3):  # answered however many half-sent requests others hold
            _poll(lambda: _answers(port, path), f"{path} answers with {len(held)} half-open connections held")
        assert proc.poll() is None
        assert log.stat().st_size < 64 * 1024, log.read_text()[-2000:]  # no traceback per refused accept
    finally:
        for sock in held:
            sock.close()
        proc.terminate()
        proc.wait(30)


class _InProcess:
    """A hardened uvicorn server in a thread, with limits a test can wait for."""

    def __init__(self, middleware=(), **limits):
        from starlette.applications import Starlette
        from starlette.responses import PlainTextResponse
        from starlette.routing import Route

        import uvicorn

        from reinagent.service.connections import hardened_server

        async def health(request):
            return PlainTextResponse("ok")

        async def echo(request):
            return PlainTextResponse(str(len(await request.body())))

        app = Starlette(routes=[Route("/health", health), Route("/echo", echo, methods=["POST"])],
                        middleware=list(middleware))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = hardened_server(uvicorn.Config(app, log_level="warning", lifespan="off"), **limits)
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True)
        self.thread.start()
        _poll(lambda: self.server.started, "the server starts")

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def _closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1024) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_half_sent_headers_time_out_and_the_oldest_half_open_makes_room():
    server = _InProcess(header_timeout_s=0.5, max_connections=10_000)
    try:
        slow = _half_open(server.port, 1)[0]
        _poll(lambda: _closed_by_server(slow), "the server closes a connection whose headers never end")
        assert server.server.table.timed_out >= 1
        assert _answers(server.port, "/health")
    finally:
        server.close()

    server = _InProcess(header_timeout_s=600, max_connections=8)
    try:
        held = _half_open(server.port, 20)
        _poll(lambda: _answers(server.port, "/health"), "a full request is served at the cap")
        assert server.server.table.evicted >= 12
        assert len(server.server.table.open) <= 8
        assert _closed_by_server(held[0])  # the oldest half-open ones went first
        for sock in held:
            sock.close()
    finally:
        server.close()


def test_a_repeated_log_line_and_its_traceback_are_bounded():
    from reinagent.service.connections import RepeatLimit

    stream = io.StringIO()
    logger = logging.getLogger("test.slowloris.repeats")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.addFilter(RepeatLimit(burst=5, window_s=3600))
    try:
        for fd in range(10_000):
            try:
                raise OSError(24, "Too many open files")
            except OSError:
                logger.error("socket.accept() out of system resource\nsocket: fd=%d", fd, exc_info=True)
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert text.count("socket.accept()") == 5 and text.count("Traceback") == 1
    assert len(text) < 4096


def test_a_body_sent_a_byte_at_a_time_is_refused_with_408(monkeypatch):
    from starlette.middleware import Middleware

    from reinagent.service import guard

    monkeypatch.setattr(guard, "BODY_TIMEOUT_S", 0.5)
    server = _InProcess(middleware=[Middleware(guard.Guard, settings=guard.GuardSettings())])
    try:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{\"a\": ")  # 7 of the 100 bytes, then nothing
        answer = sock.recv(4096)  # waits (up to the socket's 60 s) for the server's answer
        assert answer.startswith(b"HTTP/1.1 408"), answer
        sock.close()
        with httpx.Client(timeout=30) as client:  # a whole body is still served
            answered = client.post(f"http://127.0.0.1:{server.port}/echo", content=b'{"a": 1}',
                                   headers={"Content-Type": "application/json"})
        assert answered.status_code == 200 and answered.text == "8"
    finally:
        server.close()
