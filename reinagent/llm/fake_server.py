"""A real OpenAI-compatible HTTP server on loopback: a public testing utility (like inspect_ai's
mock model), used by our tests, perf scripts and fault campaign, and meant for users' own tests of
agents, rollouts and backends without a hosted model. Standard library only; safe to import.

It answers `POST /v1/chat/completions` after a fixed latency (with `honour_seed`, like vLLM, a
sampled request's text is drawn from its `seed`: one seed, one answer), can fail chosen requests (HTTP
429 with Retry-After, 5xx, a dropped connection, and broken 200s: an HTML page, invalid JSON,
`message: null`, no choices, a body cut short) and records every request it saw, with the
Authorization header it carried and when it arrived and was answered, so retries, key routing,
concurrency, caching and kills are tested against real sockets rather than mocks.

    with FakeOpenAIServer(latency_s=0.2) as server:
        ... --model openai/fake --base-url {server.base_url}

With `upstream` (a real server's base URL) it is a fault-injecting proxy: every request that no
fault answers is forwarded there and its answer relayed as it came; "slow" holds a request for
`slow_s` before forwarding it (a reply slower than the client's timeout). The tests of the openai
and litellm backends against llama.cpp's server use it (tests/test_llamacpp.py).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[list[dict[str, Any]]], str]
# a fault plan maps the 1-based request number to an HTTP status ("429", "500", "503", "400",
# ...), "drop" (connection closed, no answer), "slow" (answered after slow_s) or one of BROKEN_200
# (status 200, not a completion)
Faults = dict[int, str]
BROKEN_200 = ("html", "badjson", "null_message", "no_choices", "cut", "cut_eof")


def default_reply(messages: list[dict[str, Any]]) -> str:
    last = messages[-1]["content"] if messages else ""
    if "failed attempt" in last.lower():
        return "I answered without checking the context. Next time I will read both paragraphs first."
    return "Thought: I will answer directly.\nAction: Finish[unknown]"


class _Server(ThreadingHTTPServer):
    # 100 episodes connect at once; the default listen backlog of 5 drops their SYNs, and each
    # dropped one waits a full second to retry: a delay real servers (backlog 2048) do not have.
    request_queue_size = 1024

    def handle_error(self, request, client_address) -> None:
        # A client killed mid-connection (the kill campaign does that on purpose) is no error.
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class FakeOpenAIServer:
    def __init__(self, *, latency_s: float = 0.0, reply: Reply = default_reply,
                 faults: Faults | None = None, fault_when: Callable[[dict[str, Any]], str | None] | None = None,
                 retry_after_s: float = 0.05, host: str = "127.0.0.1",
                 honour_seed: Callable[[list[dict[str, Any]], int], str] | None = None,
                 upstream: str | None = None, slow_s: float = 5.0):
        self.latency_s = latency_s
        self.upstream = upstream.rstrip("/") if upstream else None  # proxy to this server's /v1
        self.slow_s = slow_s
        self.reply = reply
        # a sampled request carrying `seed`: its answer is honour_seed(messages, seed), so equal
        # seeds give equal answers (what a seed-honouring server such as vLLM does)
        self.honour_seed = honour_seed
        self.faults = dict(faults or {})
        self.fault_when = fault_when  # a fault chosen by the request's content (e.g. one task)
        self.retry_after_s = retry_after_s
        self.requests: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []
        # per request: [monotonic time received, monotonic time its answer was written or None]
        self.timings: list[list[float | None]] = []
        self._lock = threading.Lock()
        self._server = _Server((host, 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def in_flight(self, at: float, window_s: float = 0.0) -> int:
        """Requests received by monotonic time `at` and not answered by `at - window_s`: those a
        client killed at `at` may not have stored yet."""
        with self._lock:
            return sum(1 for got, done in self.timings if got <= at and (done is None or done > at - window_s))

    def __enter__(self) -> "FakeOpenAIServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers_seen.append(dict(self.headers))
                    server.timings.append([time.monotonic(), None])
                    number = len(server.requests)
                try:
                    self._answer(body, number)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client is gone (killed, or it gave up): nobody to answer
                finally:
                    with server._lock:
                        server.timings[number - 1][1] = time.monotonic()

            def _answer(self, body: dict[str, Any], number: int) -> None:
                fault = server.faults.get(number) or (server.fault_when(body) if server.fault_when else None)
                if server.latency_s:
                    time.sleep(server.latency_s)
                if fault == "slow":
                    time.sleep(server.slow_s)
                    fault = None
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fault in BROKEN_200:
                    self._broken(fault, number, body)
                    return
                if fault:
                    self._send(int(fault), {"error": {"message": f"injected {fault}", "type": "fault"}},
                               {"Retry-After": str(server.retry_after_s)} if fault == "429" else {})
                    return
                if server.upstream:
                    self._raw(*_forward(f"{server.upstream}/chat/completions", body))
                    return
                seed = body.get("seed")
                if server.honour_seed is not None and isinstance(seed, int) and body.get("temperature"):
                    text = server.honour_seed(body.get("messages", []), seed)
                else:
                    text = server.reply(body.get("messages", []))
                for stop in body.get("stop") or []:
                    if stop and stop in text:
                        text = text[: text.index(stop)]
                prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
                self._send(200, {
                    "id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split()),
                              "total_tokens": prompt_tokens + len(text.split())},
                })

            def _broken(self, fault: str, number: int, body: dict[str, Any]) -> None:
                completion = {"id": f"chatcmpl-{number}", "object": "chat.completion", "model": "fake"}
                if fault == "html":
                    self._raw(200, b"<!DOCTYPE html><html><body><h1>Sign in to the proxy</h1></body></html>",
                              "text/html; charset=utf-8")
                elif fault == "badjson":
                    self._raw(200, b'{"choices": [oops]}', "application/json")
                elif fault == "null_message":
                    self._send(200, {**completion, "choices": [{"index": 0, "finish_reason": "stop", "message": None}]})
                elif fault == "no_choices":
                    self._send(200, {**completion, "choices": []})
                else:  # a body cut short: half of a good completion, then the connection closes
                    data = json.dumps({**completion, "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": server.reply(body.get("messages", []))}}]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    if fault == "cut":  # announces the whole length, sends half
                        self.send_header("Content-Length", str(len(data)))
                    else:  # "cut_eof": no length; the body ends where the connection does
                        self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)

            def _raw(self, status: int, data: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _forward(url: str, body: dict[str, Any]) -> tuple[int, bytes, str]:
    """The upstream's answer to `body` as (status, bytes, content type); an upstream that cannot be
    reached is a 502, as a reverse proxy answers."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "application/json")
    except urllib.error.HTTPError as err:
        return err.code, err.read(), err.headers.get("Content-Type", "application/json")
    except (urllib.error.URLError, OSError) as err:
        return 502, json.dumps({"error": {"message": f"upstream unreachable: {err}", "type": "proxy"}}).encode(), \
            "application/json"
