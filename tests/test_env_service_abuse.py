"""serve-env and `reinagent view` under hostile input (issue 28, section 4): real servers on
loopback. Bodies and actions are bounded, bad input is a JSON 4xx that quotes only a short prefix,
steps never run on the event loop, per-session options stay under the server's limits, SIGTERM
ends the server whatever runs, and the Host / Content-Type checks stop DNS rebinding."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import httpx
import pytest

from tests.conftest import one_line_error, run_cli
from tests.test_env_service import GUESS, Server, server_factory, wait_for  # noqa: F401 - fixture

MB = 1024 * 1024


def _json_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert "Traceback" not in error
    return error


@pytest.fixture(scope="module")
def guess():
    server = Server("--benchmark", GUESS)
    yield server
    assert server.stop() == 0


def test_bodies_and_actions_are_bounded(guess):
    big = b'{"id": "x", "action": "' + b"a" * (5 * MB) + b'"}'
    error = _json_error(guess.http.post("/step", content=big, headers={"Content-Type": "application/json"}), 413)
    assert "over 4194304 bytes" in error

    def chunks():  # no Content-Length: the server counts what arrives
        yield b'{"task_id": "'
        for _ in range(5):
            yield b"t" * MB
        yield b'"}'
    error = _json_error(guess.http.post("/create", content=chunks(), headers={"Content-Type": "application/json"}), 413)

    sid = guess.post("/create", {"task_id": "t0"}).json()["id"]
    error = _json_error(guess.post("/step", {"id": sid, "action": "Search[" + "x" * 100_000 + "]"}), 422)
    assert error.startswith("action: ") and "100000 characters" in error
    assert guess.post("/step", {"id": sid, "action": "word0"}).json()["reward"] == 1.0  # the session lives on
    guess.post("/close", {"id": sid})


def test_bad_input_is_echoed_only_as_a_short_prefix(guess):
    long_id = "t" + "9" * 500_000
    for path, body in (("/create", {"task_id": long_id}), ("/step", {"id": long_id, "action": "a"}),
                       ("/close", {"id": long_id})):
        error = _json_error(guess.post(path, body), 404)
        assert len(error) < 300 and "500001 chars" in error, error
    error = _json_error(guess.post("/create", {"task_id": "t0", "options": {"x" * 10_000: 1}}), 422)
    assert len(error) < 300 and "valid: agent, max_steps or timeout_s" in error


def test_malformed_bodies_are_json_4xx(guess):
    sid = guess.post("/create", {"task_id": "t0"}).json()["id"]
    headers = {"Content-Type": "application/json"}
    nested = b'{"id": "' + sid.encode() + b'", "action": "a", "options": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert "invalid JSON" in _json_error(guess.http.post("/step", content=nested, headers=headers), 400)
    for depth in (500, 5000):  # parsed but not a list of strings, or too deep to parse: 4xx either way
        raw = (b'{"id": "' + sid.encode() + b'", "action": "a", "options": {"internal_tests": '
               + b"[" * depth + b"]" * depth + b"}}")
        response = guess.http.post("/step", content=raw, headers=headers)
        assert response.status_code in (400, 422) and response.json()["error"]
    digits = b'{"id": "' + sid.encode() + b'", "seed": ' + b"7" * 5000 + b"}"
    assert "invalid JSON" in _json_error(guess.http.post("/reset", content=digits, headers=headers), 400)
    assert "seed" in _json_error(guess.post("/reset", {"id": sid, "seed": 2**70}), 422)
    assert guess.post("/reset", {"id": sid, "seed": 2**40}).status_code == 200
    guess.post("/close", {"id": sid})


@pytest.mark.parametrize("tests, needle", [(42, "must be a list of strings"), ([1], "must be a list of strings"),
                                           (["assert f() == 1"] * 101, "at most 100 tests")])
def test_bad_step_options_are_422(server_factory, tests, needle):  # noqa: F811
    server = _humaneval(server_factory)
    sid = server.post("/create", {"task_id": "HumanEval/0"}).json()["id"]
    error = _json_error(server.post("/step", {"id": sid, "action": "def f(): pass",
                                              "options": {"internal_tests": tests}}), 422)
    assert needle in error
    assert server.sessions() == 1  # a refused option is not an env crash: the session stays open


_HUMANEVAL: list[Server] = []


def _humaneval(server_factory) -> Server:  # noqa: F811
    if not _HUMANEVAL or _HUMANEVAL[0].proc.poll() is not None:
        _HUMANEVAL[:] = [server_factory("--benchmark", "humaneval")]
    return _HUMANEVAL[0]


def test_session_options_are_bounded_by_the_server(server_factory):  # noqa: F811
    server = server_factory("--benchmark", GUESS, "--max-timeout-s", "30")
    for options in ({"timeout_s": 1e9}, {"timeout_s": 31}, {"max_steps": 10**6}):
        error = _json_error(server.post("/create", {"task_id": "t0", "options": options}), 422)
        assert "on this server" in error
    raw = b'{"task_id": "t0", "options": {"timeout_s": 1e400}}'  # JSON's way to say infinity
    error = _json_error(server.http.post("/create", content=raw, headers={"Content-Type": "application/json"}), 422)
    assert "at most 30 s" in error and "--max-timeout-s" in error
    assert server.post("/create", {"task_id": "t0", "options": {"timeout_s": 30, "max_steps": 50}}).status_code == 200
    one_line_error(run_cli("serve-env", "--benchmark", GUESS, "--port", "0", "--max-timeout-s", "inf"),
                   "--max-timeout-s")


def test_a_step_never_blocks_other_sessions_nor_sigterm(server_factory, tmp_path: Path):  # noqa: F811
    """The env claims it never blocks (GUESS_NONBLOCKING), yet its `wait` step blocks until a gate
    file exists. Other sessions are served meanwhile, and SIGTERM ends the server though the step
    never finishes (the gate stays shut)."""
    gate = tmp_path / "gate"
    server = server_factory("--benchmark", GUESS, env={"GUESS_GATE": str(gate), "GUESS_NONBLOCKING": "1"})
    stuck = server.post("/create", {"task_id": "t0"}).json()["id"]
    other = server.post("/create", {"task_id": "t1"}).json()["id"]
    outcome: list = []
    client = httpx.Client(base_url=server.url, timeout=600)

    def step():
        try:
            outcome.append(client.post("/step", json={"id": stuck, "action": "wait"}).status_code)
        except httpx.HTTPError as err:
            outcome.append(err)
    waiter = threading.Thread(target=step, daemon=True)
    waiter.start()
    wait_for(Path(str(gate) + ".waiting").exists, "the wait step is in flight")
    quick = httpx.Client(base_url=server.url, timeout=60)
    assert quick.post("/step", json={"id": other, "action": "word1"}).json()["reward"] == 1.0
    assert quick.get("/health").json()["sessions"] == 2
    quick.close()

    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(60) == 0  # before: it waited for the stuck thread (up to 300 s here)
    waiter.join(60)
    assert outcome and outcome[0] != 200
    client.close()


# --- DNS rebinding: Host names and content types ------------------------------------------------------

def test_serve_env_accepts_only_loopback_hosts_and_json_posts(guess, server_factory):  # noqa: F811
    evil = guess.http.get("/health", headers={"Host": "evil.example"})
    assert "evil.example" in _json_error(evil, 403) and "--allow-host" in evil.json()["error"]
    for host in ("localhost", f"localhost:{guess.port}", f"127.0.0.1:{guess.port}", "[::1]:80", "app.localhost"):
        assert guess.http.get("/health", headers={"Host": host}).status_code == 200, host
    as_text = guess.http.post("/create", content=b'{"task_id": "t0"}', headers={"Content-Type": "text/plain"})
    assert "application/json" in _json_error(as_text, 415)
    form = guess.http.post("/create", data={"task_id": "t0"})
    _json_error(form, 415)
    assert guess.sessions() == 0  # neither reached the table

    allowed = server_factory("--benchmark", GUESS, "--allow-host", "envs.lab.example")
    assert allowed.http.get("/health", headers={"Host": "envs.lab.example:8000"}).status_code == 200
    _json_error(allowed.http.get("/health", headers={"Host": "evil.example"}), 403)

    tokened = server_factory("--benchmark", GUESS, "--token", "t0ken-abc")  # the token guards it: any Host
    auth = {"Authorization": "Bearer t0ken-abc"}
    assert tokened.http.get("/health", headers={"Host": "gpu-box.lab", **auth}).status_code == 200
    _json_error(tokened.http.get("/health", headers={"Host": "gpu-box.lab"}), 401)


def _viewer_root(tmp_path: Path) -> Path:
    from tests.test_browse import make_runs

    (tmp_path / "runs").mkdir()
    return make_runs(tmp_path / "runs")


def test_viewer_checks_host_and_needs_a_token_off_loopback(tmp_path):
    from tests.test_viewer import Viewer

    root = _viewer_root(tmp_path)
    viewer = Viewer(root)
    try:
        assert viewer.get("/api/runs").status_code == 200
        _json_error(viewer.get("/api/runs", headers={"Host": "evil.example"}), 403)
        _json_error(viewer.get("/", headers={"Host": "evil.example:8765"}), 403)
    finally:
        viewer.close()
    one_line_error(run_cli("view", str(root), "--host", "0.0.0.0", "--port", "0", env={"REINAGENT_VIEW_TOKEN": ""}),
                   "needs a token", "--token")


def test_viewer_token_from_the_printed_url_then_a_cookie(tmp_path):
    import os
    import re
    import subprocess

    from tests.conftest import CLI, ROOT

    root = _viewer_root(tmp_path)
    proc = subprocess.Popen([*CLI, "view", str(root), "--port", "0", "--token", "v13w-secret"], cwd=ROOT,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = proc.stdout.readline()
        found = re.search(r"viewer: (http://127\.0\.0\.1:\d+)/\?token=v13w-secret ", line)
        assert found, line
        base = found.group(1)
        with httpx.Client(base_url=base, timeout=30) as anonymous:
            wait_for(lambda: _answers(anonymous), "the viewer answers")
            _json_error(anonymous.get("/api/runs"), 401)
            _json_error(anonymous.get("/api/runs", params={"token": "wrong"}), 401)
            _json_error(anonymous.get("/api/runs", headers={"Host": "evil.example"}), 401)
        with httpx.Client(base_url=base, timeout=30) as browser:
            first = browser.get("/", params={"token": "v13w-secret"})
            assert first.status_code == 200 and "HttpOnly" in first.headers["set-cookie"]
            assert browser.get("/api/runs").status_code == 200  # the cookie carries it from now on
    finally:
        proc.terminate()
        proc.wait(30)


def _answers(client: httpx.Client) -> bool:
    try:
        client.get("/api/runs")
        return True
    except httpx.TransportError:
        return False
