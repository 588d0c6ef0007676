"""Secrets stay where they belong (issue 28, section 5): a resume against another server does not
send it the old server's key; passwords in URL query parameters are redacted; the value of the
variable --api-key-env names is redacted whatever that name is."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from reinagent.llm.fake_server import FakeOpenAIServer
from tests.conftest import run_cli

KEY_A = "a-server-key-0123456789"


def _auths(server: FakeOpenAIServer) -> set[str | None]:
    return {h.get("Authorization") for h in server.headers_seen}


def _run(run_dir: Path, base_url: str, *extra: str, env: dict | None = None):
    return run_cli("run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--num-trials", "1",
                   "--num-envs", "1", "--model", "openai/fake", "--base-url", base_url, "--run-dir", str(run_dir),
                   "--no-cache", "--quiet", *extra, env=env)


def test_resume_on_another_server_drops_the_old_servers_key(tmp_path):
    env = {"MY_KEY": KEY_A, "REINAGENT_SERVER_API_KEY": ""}
    run_dir = tmp_path / "r"
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b, FakeOpenAIServer() as c:
        first = _run(run_dir, a.base_url, "--api-key-env", "MY_KEY", env=env)
        assert first.returncode == 0, first.stderr
        assert _auths(a) == {f"Bearer {KEY_A}"}

        moved = run_cli("resume", str(run_dir), "--num-trials", "2", "--base-url", b.base_url, "--quiet", env=env)
        assert moved.returncode == 0, moved.stderr
        assert b.count > 0 and not any(KEY_A in (h or "") for h in _auths(b))  # A's key never reached B
        spec = json.loads((run_dir / "spec.json").read_text())
        assert spec["config"]["api_key_env"] is None
        change = spec["history"][-1]["changes"]["api_key_env"]
        assert change["from"] == "MY_KEY" and change["to"] is None and "--api-key-env again" in change["why"]

        # named again, the key goes where the user said
        again = run_cli("resume", str(run_dir), "--num-trials", "3", "--base-url", c.base_url,
                        "--api-key-env", "MY_KEY", "--quiet", env=env)
        assert again.returncode == 0, again.stderr
        assert c.count > 0 and _auths(c) == {f"Bearer {KEY_A}"}
        assert "why" not in json.loads((run_dir / "spec.json").read_text())["history"][-1]["changes"]["api_key_env"]


def test_resume_on_the_same_server_keeps_the_key(tmp_path):
    env = {"MY_KEY": KEY_A}
    with FakeOpenAIServer() as a:
        assert _run(tmp_path / "r", a.base_url, "--api-key-env", "MY_KEY", env=env).returncode == 0
        again = run_cli("resume", str(tmp_path / "r"), "--num-trials", "2", "--quiet", env=env)
        assert again.returncode == 0, again.stderr
        assert _auths(a) == {f"Bearer {KEY_A}"}


class _EchoingServer(ThreadingHTTPServer):
    """A model server that puts the key it was sent into its error message (without 'Bearer')."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                data = json.dumps({"error": {"message": f"key {key} is not valid here", "type": "auth"}}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_the_value_of_the_named_variable_is_redacted_whatever_its_name(tmp_path):
    value = "plain-value-4f2a9c"  # no sk- shape, and the variable's name says nothing of secrets
    server = _EchoingServer()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        out = _run(tmp_path / "r", url, "--api-key-env", "MODEL_ACCESS", env={"MODEL_ACCESS": value})
    finally:
        server.shutdown()
        server.server_close()
    records = (tmp_path / "r" / "records.jsonl").read_text()
    assert "is not valid here" in records + out.stderr  # the server's message did arrive
    for where in (records, out.stdout, out.stderr, *(p.read_text() for p in (tmp_path / "r").glob("*.log"))):
        assert value not in where


def test_redact_hides_passwords_in_query_parameters():
    from reinagent.redact import redact

    assert redact("postgresql://u@db.lab/runs?password=hunter2x") == "postgresql://u@db.lab/runs?password=***"
    assert redact("postgresql://u@h/db?sslmode=require&sslpassword=p4ss&application_name=a") == \
        "postgresql://u@h/db?sslmode=require&sslpassword=***&application_name=a"
    assert redact("host=h password=abc123 dbname=runs") == "host=h password=*** dbname=runs"
    assert redact("mongodb://h/?authSource=admin&apiKey=zz9") == "mongodb://h/?authSource=admin&apiKey=***"
    for harmless in ("max_tokens=256", "bypass=1", "compass=north", "http://h/?q=passage"):
        assert redact(harmless) == harmless

