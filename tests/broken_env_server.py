"""A deliberately broken env server (stdlib only, as someone's first try might look), for
`reinagent check-env` to catch: `done` disagrees with `terminated`/`truncated`, an unknown
session id is answered 200, a body without `action` is answered 200, `/close` never forgets, an
unknown task is created (200). GET /opened lists the sessions created and never asked to close.

    python -m tests.broken_env_server      # prints: serving broken on http://127.0.0.1:PORT
"""

from __future__ import annotations

import json
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    sessions: set[str] = set()
    close_asked: set[str] = set()

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, {"status": "ok", "benchmark": "broken", "sessions": len(self.sessions)})
        elif self.path == "/tasks":
            self._send(200, {"tasks": ["a", "b"]})
        elif self.path == "/opened":
            self._send(200, {"opened": sorted(self.sessions - self.close_asked)})
        else:
            self._send(404, {"error": "no such endpoint"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._send(400, {"error": "invalid JSON"})
            return
        if self.path == "/create":
            if not isinstance(body.get("task_id"), str):  # broken: any task id is "known"
                self._send(422, {"error": "task_id: field required"})
                return
            sid = str(uuid.uuid4())
            self.sessions.add(sid)
            self._send(200, {"id": sid})
        elif self.path == "/reset":
            self._send(200, {"id": body.get("id") or "default", "state": "start", "observation": "start", "info": {}})
        elif self.path == "/step":
            # broken: no validation, no 404, and done=True while neither terminated nor truncated
            self._send(200, {"state": "ok", "observation": "ok", "reward": 0, "done": True,
                             "terminated": False, "truncated": False, "info": {}})
        elif self.path == "/close":
            self.close_asked.add(str(body.get("id")))
            self._send(200, {"closed": True})  # broken: the session is never removed
        else:
            self._send(404, {"error": "no such endpoint"})


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"serving broken on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
