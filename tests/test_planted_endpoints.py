"""A run directory cannot spend your secrets (issue 45, item 1): `resume` and `branch` send a key
only where this user said on this command line, or where this user sealed the run's endpoints on
this machine (reinagent/seal.py). A planted spec.json naming a capture server and a variable gets
one line and exit 2, and the capture server on loopback sees no request at all; a URL's userinfo
is redacted even where a server echoes it back bare."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from reinagent.llm.fake_server import FakeOpenAIServer
from tests.conftest import one_line_error, run_cli

CANARY_VAR = "PLANTED_CANARY_SECRET"
CANARY = "canary-value-6b1d0c"
SERVER_CANARY = "server-canary-93ae71"


class _Capture(ThreadingHTTPServer):
    """Records the Authorization header of every request, whatever its method, and answers like
    an OpenAI-compatible server (`/models` and `/chat/completions`), optionally echoing it back."""

    def __init__(self, echo: bool = False):
        self.auths: list[str] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                capture.auths.append(self.headers.get("Authorization", ""))
                self._reply(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                auth = self.headers.get("Authorization", "")
                capture.auths.append(auth)
                if echo:  # the credentials as sent (Base64) and decoded, bare, as some servers do
                    raw = auth.split(" ", 1)[-1]
                    decoded = base64.b64decode(raw + "==").decode(errors="replace") if raw else ""
                    self._reply(400, {"error": {"message": f"refused {raw} ({decoded}; {decoded.split(':')[-1]})",
                                                "type": "auth"}})
                    return
                self._reply(200, {"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "Thought: done.\nAction: Finish[unknown]"}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


@pytest.fixture
def env(tmp_path):
    """Both canaries set, and this test's own sealing key (a fresh machine)."""
    return {CANARY_VAR: CANARY, "REINAGENT_SERVER_API_KEY": SERVER_CANARY,
            "REINAGENT_STATE_DIR": str(tmp_path / "state")}


def _run(run_dir: Path, base_url: str, env: dict, *extra: str):
    return run_cli("run", "--benchmark", "hotpotqa", "--agent", "cot-context", "--num-trials", "2",
                   "--num-envs", "1", "--model", "openai/fake", "--base-url", base_url, "--run-dir", str(run_dir),
                   "--no-cache", "--quiet", *extra, env=env)


def _plant(run_dir: Path, base_url: str, api_key_env: str | None) -> None:
    """Point the run's spec.json at another server and variable, as an attacker who wrote it would."""
    spec = json.loads((run_dir / "spec.json").read_text())
    spec["config"]["base_url"], spec["config"]["api_key_env"] = base_url, api_key_env
    (run_dir / "spec.json").write_text(json.dumps(spec))


@pytest.fixture
def planted(tmp_path, env):
    """A finished 2-trial run (this user's) whose spec.json then names a capture server."""
    run_dir = tmp_path / "run"
    with FakeOpenAIServer() as ours:
        first = _run(run_dir, ours.base_url, env)
        assert first.returncode == 0, first.stderr
    return run_dir


def _no_canary(capture: _Capture) -> None:
    assert not any(CANARY in a or SERVER_CANARY in a for a in capture.auths), capture.auths


def test_resume_of_a_planted_spec_sends_no_key_and_asks_for_the_endpoints(planted, env):
    with _Capture() as capture:
        _plant(planted, capture.base_url, CANARY_VAR)
        out = run_cli("resume", str(planted), "--num-trials", "3", "--quiet", env=env)
        assert out.returncode == 2
        one_line_error(out, "--base-url URL", "--api-key-env VAR", CANARY_VAR)
        assert capture.auths == []  # not even the pre-run check reached it


def test_the_server_key_is_not_sent_to_a_planted_url_either(planted, env):
    with _Capture() as capture:
        _plant(planted, capture.base_url, None)  # no variable named: REINAGENT_SERVER_API_KEY would go
        out = run_cli("resume", str(planted), "--num-trials", "3", "--quiet", env=env)
        one_line_error(out, "--base-url URL")
        assert capture.auths == []


def test_branch_of_a_planted_run_sends_no_key(planted, env, tmp_path):
    with _Capture() as capture:
        _plant(planted, capture.base_url, CANARY_VAR)
        out = run_cli("branch", str(planted), "--strategy", "none", "--run-dir", str(tmp_path / "b"),
                      "--num-trials", "3", "--quiet", env=env)
        assert out.returncode == 2
        one_line_error(out, "--base-url URL", "--api-key-env VAR")
        assert capture.auths == [] and not (tmp_path / "b").exists()


def test_a_run_made_by_another_user_or_machine_asks_too(tmp_path, env):
    # sealed with another key (another machine's state directory): the seal does not verify here
    run_dir = tmp_path / "run"
    with FakeOpenAIServer() as ours:
        assert _run(run_dir, ours.base_url, {**env, "REINAGENT_STATE_DIR": str(tmp_path / "elsewhere")},
                    "--api-key-env", CANARY_VAR).returncode == 0
        before = ours.count
        out = run_cli("resume", str(run_dir), "--num-trials", "3", "--quiet", env=env)
        one_line_error(out, "did not seal it", "--base-url URL --api-key-env VAR")
        assert ours.count == before  # nothing from the refused resume


def test_endpoints_named_on_the_command_line_are_used_and_sealed(planted, env, tmp_path):
    with _Capture() as capture, FakeOpenAIServer() as mine:
        _plant(planted, capture.base_url, CANARY_VAR)
        told = run_cli("resume", str(planted), "--num-trials", "3", "--base-url", mine.base_url,
                       "--api-key-env", "MY_KEY", "--quiet", env={**env, "MY_KEY": "my-own-key-12345"})
        assert told.returncode == 0, told.stderr
        assert {h.get("Authorization") for h in mine.headers_seen} == {"Bearer my-own-key-12345"}
        # now sealed by this user: the next resume needs no flags, and goes to the same server
        again = run_cli("resume", str(planted), "--num-trials", "4", "--quiet", env={**env, "MY_KEY": "my-own-key-12345"})
        assert again.returncode == 0, again.stderr
        _no_canary(capture)
        assert capture.auths == []


def test_branch_with_the_endpoints_named_runs(planted, env, tmp_path):
    with _Capture() as capture, FakeOpenAIServer() as mine:
        _plant(planted, capture.base_url, CANARY_VAR)
        out = run_cli("branch", str(planted), "--strategy", "none", "--run-dir", str(tmp_path / "b"),
                      "--num-trials", "3", "--base-url", mine.base_url, "--quiet",
                      env={**env, "REINAGENT_SERVER_API_KEY": "server-key-for-mine"})
        assert out.returncode == 0, out.stderr
        assert mine.count > 0 and capture.auths == []
        spec = json.loads((tmp_path / "b" / "spec.json").read_text())
        assert spec["config"]["base_url"] == mine.base_url and spec["config"]["api_key_env"] is None


def test_a_sealed_run_resumes_without_flags(tmp_path, env):
    run_dir = tmp_path / "run"
    with FakeOpenAIServer() as ours:
        assert _run(run_dir, ours.base_url, env, "--api-key-env", CANARY_VAR).returncode == 0
        again = run_cli("resume", str(run_dir), "--num-trials", "3", "--quiet", env=env)
        assert again.returncode == 0, again.stderr
        assert {h.get("Authorization") for h in ours.headers_seen} == {f"Bearer {CANARY}"}


def test_url_credentials_echoed_back_are_redacted(tmp_path, env):
    password = "Pa55wordInUrl"
    with _Capture(echo=True) as server:
        url = server.base_url.replace("http://", f"http://someone:{password}@")
        out = _run(tmp_path / "r", url, {**env, "REINAGENT_SERVER_API_KEY": ""})
        assert any(a.startswith("Basic ") for a in server.auths)  # it was sent, as httpx sends userinfo
    records = (tmp_path / "r" / "records.jsonl").read_text()
    assert "refused" in records + out.stderr  # the echo did arrive
    encoded = base64.b64encode(f"someone:{password}".encode()).decode()
    for where in (records, out.stdout, out.stderr, *(p.read_text() for p in (tmp_path / "r").glob("*.log"))):
        assert password not in where and encoded not in where


def test_a_planted_ray_cluster_is_not_joined(planted, env):
    spec = json.loads((planted / "spec.json").read_text())
    spec["config"]["executor"], spec["config"]["ray_address"] = "ray", "127.0.0.1:1"
    spec["config"]["base_url"] = spec["config"]["api_key_env"] = None  # only the cluster is planted
    spec["config"]["model"] = "scripted:nowhere.yaml"
    (planted / "spec.json").write_text(json.dumps(spec))
    out = run_cli("resume", str(planted), "--num-trials", "3", "--quiet", env=env)
    one_line_error(out, "--ray-address HOST:PORT", "127.0.0.1:1")
    assert out.returncode == 2
