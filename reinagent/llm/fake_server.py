"""A real OpenAI-compatible HTTP server on loopback, for tests and performance scripts.

It answers `POST /v1/chat/completions` after a fixed latency, can fail chosen requests (HTTP
429 with Retry-After, 5xx, a dropped connection) and records every request it saw, so retries,
concurrency and caching are tested against real sockets rather than mocks.

    with FakeOpenAIServer(latency_s=0.2) as server:
        ... --model openai/fake --base-url {server.base_url}
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[list[dict[str, Any]]], str]
# a fault plan maps the 1-based request number to "429", "500", "503", "400" or "drop"
Faults = dict[int, str]


def default_reply(messages: list[dict[str, Any]]) -> str:
    last = messages[-1]["content"] if messages else ""
    if "failed attempt" in last.lower():
        return "I answered without checking the context. Next time I will read both paragraphs first."
    return "Thought: I will answer directly.\nAction: Finish[unknown]"


class _Server(ThreadingHTTPServer):
    # 100 episodes connect at once; the default listen backlog of 5 drops their SYNs, and each
    # dropped one waits a full second to retry: a delay real servers (backlog 2048) do not have.
    request_queue_size = 1024


class FakeOpenAIServer:
    def __init__(self, *, latency_s: float = 0.0, reply: Reply = default_reply,
                 faults: Faults | None = None, fault_when: Callable[[dict[str, Any]], str | None] | None = None,
                 retry_after_s: float = 0.05, host: str = "127.0.0.1"):
        self.latency_s = latency_s
        self.reply = reply
        self.faults = dict(faults or {})
        self.fault_when = fault_when  # a fault chosen by the request's content (e.g. one task)
        self.retry_after_s = retry_after_s
        self.requests: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []
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
                    number = len(server.requests)
                fault = server.faults.get(number) or (server.fault_when(body) if server.fault_when else None)
                if server.latency_s:
                    time.sleep(server.latency_s)
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fault:
                    self._send(int(fault), {"error": {"message": f"injected {fault}", "type": "fault"}},
                               {"Retry-After": str(server.retry_after_s)} if fault == "429" else {})
                    return
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
