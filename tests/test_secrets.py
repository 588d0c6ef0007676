"""Secrets stay where they belong (issue 28, section 5): a resume against another server does not
send it the old server's key; passwords in URL query parameters are redacted; the value of the
variable --api-key-env names is redacted whatever that name is."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from reinagent.llm.fake_server import FakeOpenAIServer
from tests.conftest import one_line_error, run_cli

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

    assert redact("postgresql://u@db.lab/runs?password=hunter2x") == "postgresql://***@db.lab/runs?password=***"
    assert redact("postgresql://h/db?sslmode=require&sslpassword=p4ss&application_name=a") == \
        "postgresql://h/db?sslmode=***&sslpassword=***&application_name=***"
    assert redact("host=h password=abc123 dbname=runs") == "host=h password=*** dbname=runs"
    assert redact("mongodb://h/?authSource=admin&apiKey=zz9") == "mongodb://h/?authSource=***&apiKey=***"
    for harmless in ("max_tokens=256", "bypass=1", "compass=north", "q=passage", "TokenizerError: bad input",
                     "max_tokens: 5", "Basic arithmetic", "http://127.0.0.1:8000/v1"):
        assert redact(harmless) == harmless



# Issue 38 section 5: every userinfo and every query or fragment value of a URL is a secret, and
# the credential shapes the redactor used to pass.
LEAKS = {
    "http://host/v1?key=S3cr3tValue": "S3cr3tValue",
    "http://host/v1?auth=S3cr3tValue": "S3cr3tValue",
    "http://host/v1#access_token=S3cr3tValue": "S3cr3tValue",
    "http://:S3cr3tValue@host/v1": "S3cr3tValue",
    "http://S3cr3tValue@host/v1": "S3cr3tValue",
    "redis://:S3cr3tValue@h:6379/0": "S3cr3tValue",
    "x-api-key: S3cr3tValue": "S3cr3tValue",
    "api-key: S3cr3tValue": "S3cr3tValue",
    "Authorization: Basic dXNlcjpTM2NyM3Q=": "dXNlcjpTM2NyM3Q=",
    '{"api_key": "S3cr3tValue"}': "S3cr3tValue",
    "--api-key S3cr3tValue": "S3cr3tValue",
    "password: S3cr3tValue": "S3cr3tValue",
    "https://b.s3.amazonaws.com/o?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE&X-Amz-Signature=fe5f80f77d5fa3beca038a248ff0":
        "fe5f80f77d5fa3beca038a248ff0",
    "s3 url ...&Signature=fe5f80f77d5fa3beca038a&AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE": "fe5f80f77d5fa3beca038a",
    "key AKIAIOSFODNN7EXAMPLE used": "AKIAIOSFODNN7EXAMPLE",
    "token ghp_abcdefghijklmnopqrstuvwxyz0123456789": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "token hf_abcdefghijklmnopqrstuvwxyzABCDEFGH": "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "token gsk_abcdefghijklmnopqrstuvwxyz0123": "gsk_abcdefghijklmnopqrstuvwxyz0123",
    "token xoxb-1234567890-abcdefghij": "xoxb-1234567890-abcdefghij",
    "token AIzaSyA1234567890abcdefghijklmnopqrstu": "AIzaSyA1234567890abcdefghijklmnopqrstu",
}


def test_redact_hides_url_credentials_and_key_shapes():
    from reinagent.redact import redact

    for text, secret in LEAKS.items():
        shown = redact(text)
        assert secret not in shown and "***" in shown, (text, shown)
    # what a URL points to stays readable
    assert redact("http://host:8000/v1?key=S#frag") == "http://host:8000/v1?key=***#***"
    assert redact("see 'http://u:p@h/x?a=1&b=2'.") == "see 'http://***@h/x?a=***&b=***'."


def test_redact_argv_hides_the_value_after_a_secret_flag():
    from reinagent.redact import redact_argv

    argv = ["reinagent", "run", "--api-key", "V4lue1", "--token=V4lue2", "--base-url", "http://h/v1?key=V4lue3",
            "--num-trials", "3"]
    shown = redact_argv(argv)
    assert not any(v in " ".join(shown) for v in ("V4lue1", "V4lue2", "V4lue3"))
    assert shown[:3] == ["reinagent", "run", "--api-key"] and shown[-2:] == ["--num-trials", "3"]


def test_spec_json_holds_no_url_secret_and_resume_asks_for_the_url_again(tmp_path):
    secret = "S3cr3tInUrl"
    with FakeOpenAIServer() as server:
        url = f"http://user:{secret}@{server.base_url.removeprefix('http://')}?key={secret}#access_token={secret}"
        first = _run(tmp_path / "r", url, env={"REINAGENT_SERVER_API_KEY": ""})
        assert first.returncode == 0, first.stderr
        spec_text = (tmp_path / "r" / "spec.json").read_text()
        assert secret not in spec_text
        spec = json.loads(spec_text)
        assert "?key=***" in spec["config"]["base_url"] and "?key=***" in " ".join(spec["command"])

        again = run_cli("resume", str(tmp_path / "r"), "--num-trials", "2", "--quiet")
        one_line_error(again, "recorded without its credentials", "--base-url")
        fine = run_cli("resume", str(tmp_path / "r"), "--num-trials", "2", "--base-url", url, "--quiet")
        assert fine.returncode == 0, fine.stderr
        assert secret not in (tmp_path / "r" / "spec.json").read_text()
