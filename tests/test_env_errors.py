"""Truthful observations and errors (issue 36, 5): what a program with no tests is told, and what
`serve-env` answers (both protocols, real servers on loopback) to absurd ids and to a request still
running when it is stopped: a short JSON error with a real status, never a plain-text 500 and a
traceback in the log."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import httpx
import pytest

from reinagent import make
from reinagent.config import RunConfig
from tests.test_env_service import GUESS, server_factory, wait_for  # noqa: F401 - fixture

JSON = {"Content-Type": "application/json"}


def _json_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert len(error) < 400 and "Traceback" not in error, error
    return error


def _no_traceback(server) -> None:
    """The server's log after it stopped: no traceback, no CancelledError."""
    assert server.proc.wait(60) == 0
    log = server.proc.stderr.read()
    assert "Traceback" not in log and "CancelledError" not in log and "Exception in ASGI" not in log, log[-2000:]


# --- what a program is told -------------------------------------------------------------------------------

def test_a_program_without_tests_is_told_it_ran_and_nothing_was_tested():
    bench = make("humaneval")
    task = bench.load_tasks("test")[0]
    env = bench.make_env(task, RunConfig(benchmark="humaneval", timeout_s=30))
    try:
        env.reset()
        env.set_internal_tests([])
        obs, reward, *_ = env.step(task.header + task.canonical)
        assert obs == "The code ran without error; there were no unit tests to run."
        assert reward == 1.0  # as before: nothing failed
        env.reset()
        obs, reward, *_ = env.step("raise SystemExit(3)")  # fails with no test to blame
        assert obs.startswith("The code failed before any test ran (") and "(passed)" not in obs, obs
        assert reward == 0.0
    finally:
        env.close()
        bench.close()


# --- ids nobody could have been given ------------------------------------------------------------------------

def test_a_4000_digit_idx_is_echoed_only_as_a_prefix(server_factory):  # noqa: F811
    server = server_factory("--benchmark", GUESS)
    idx = b"9" * 4000
    for path, body in (("/reset", b'{"idx": ' + idx + b"}"), ("/step", b'{"action": "a", "idx": ' + idx + b"}")):
        error = _json_error(server.http.post(path, content=body, headers=JSON), 404)
        assert "4000 chars" in error and "9" * 61 not in error, error
    server.stop()
    _no_traceback(server)


def test_agentgym_absurd_ids_are_json_4xx(server_factory):  # noqa: F811
    server = server_factory("--benchmark", GUESS, "--protocol", "agentgym")
    env_id = server.http.post("/create").json()["id"]
    cases = [
        (b'{"id": "\xc2\xb2", "action": "a"}', 422),  # "²": a digit to str.isdigit, not to int()
        (b'{"id": "' + b"5" * 5000 + b'", "action": "a"}', 422),
        (b'{"id": ' + b"5" * 5000 + b', "action": "a"}', 400),  # past Python's 4300-digit int limit
        (b'{"id": ' + b"5" * 4000 + b', "action": "a"}', 404),  # a number, just not an id given out
        (b'{"id": ' + str(env_id).encode() + b', "action": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400),
    ]
    for body, status in cases:
        error = _json_error(server.http.post("/step", content=body, headers=JSON), status)
        assert "5" * 61 not in error, error
    _json_error(server.http.get("/observation?id=%C2%B2"), 422)
    _json_error(server.http.post("/reset", content=b'{"id": 0, "data_idx": ' + b"7" * 4000 + b"}", headers=JSON), 404)
    assert server.http.get(f"/observation?id={env_id}").status_code == 200  # still serving
    server.stop()
    _no_traceback(server)


# --- a request in flight when the server stops ----------------------------------------------------------------

@pytest.mark.parametrize("protocol", ["reinagent", "agentgym"])
def test_a_request_cut_off_by_sigterm_gets_a_json_503(server_factory, tmp_path: Path, protocol):  # noqa: F811
    """GuessEnv's `wait` step blocks until a gate file exists, which never comes: SIGTERM's grace
    period (2 s) ends with the step still running, and its client gets a JSON 503."""
    gate = tmp_path / "gate"
    server = server_factory("--benchmark", GUESS, "--protocol", protocol, env={"GUESS_GATE": str(gate)})
    if protocol == "agentgym":
        env_id = server.http.post("/create").json()["id"]
        server.post("/reset", {"id": env_id, "data_idx": 0})
    else:
        env_id = server.post("/create", {"task_id": "t0"}).json()["id"]
    answers: list = []
    client = httpx.Client(base_url=server.url, timeout=120)

    def step() -> None:
        try:
            answers.append(client.post("/step", json={"id": env_id, "action": "wait"}))
        except httpx.HTTPError as err:
            answers.append(err)
    waiter = threading.Thread(target=step, daemon=True)
    waiter.start()
    wait_for(Path(str(gate) + ".waiting").exists, "the wait step is in flight")
    server.proc.send_signal(signal.SIGTERM)
    waiter.join(120)
    client.close()
    assert answers and isinstance(answers[0], httpx.Response), answers
    assert "shutting down" in _json_error(answers[0], 503)
    _no_traceback(server)
