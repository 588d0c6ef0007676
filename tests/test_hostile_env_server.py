"""A hostile environment server (issue 38, section 3): a 503 whose Retry-After says 1e9 or inf, error
bodies and observations of tens of megabytes. The client keeps its retry budget whatever the server
says, reads at most MAX_ANSWER_BYTES of an answer, and clips what reaches records and reports."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from reinagent.service.client import MAX_ANSWER_BYTES, MAX_OBSERVATION_CHARS, EnvClient, EnvServiceError, HttpEnv
from tests.conftest import run_cli, write_script

MB = 1 << 20


class Hostile(ThreadingHTTPServer):
    """A server of the env protocol whose answers are set per path: (status, headers, body bytes)."""

    daemon_threads = True

    def __init__(self, answers: dict):
        self.answers = answers

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                answer = self.server.answers.get(self.path)
                if callable(answer):
                    answer = answer(body)
                status, headers, data = answer or (404, {}, b'{"error": "no such endpoint"}')
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:  # the client stopped reading: as it should
                    pass

            do_GET = do_POST = _answer

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


def _ok(payload: dict) -> tuple:
    return 200, {}, json.dumps(payload).encode()


@pytest.mark.parametrize("retry_after", ["1e9", "inf", "nan", "-3"])
def test_retry_after_never_stretches_the_retry_budget(retry_after):
    busy = (503, {"Retry-After": retry_after}, b'{"error": "busy"}')
    with Hostile({"/create": busy}) as server:
        env = HttpEnv(EnvClient(server.url, retry_s=1.0), "a")
        outcome: list = []
        worker = threading.Thread(target=lambda: outcome.append(_raised(env.reset)), daemon=True)
        worker.start()
        worker.join(120)  # generous: the budget is 1 s; the old client slept 1e9 s (or forever)
        assert not worker.is_alive(), f"Retry-After: {retry_after} stalled the episode past its retry budget"
        assert isinstance(outcome[0], EnvServiceError) and "still busy" in str(outcome[0])


def _raised(call):
    try:
        call()
    except Exception as err:  # noqa: BLE001
        return err
    return None


def test_answers_are_read_up_to_the_cap_and_clipped():
    huge_error = (500, {}, json.dumps({"error": "x" * (3 * MB)}).encode())
    over_cap = _ok({"observation": "o" * (MAX_ANSWER_BYTES + MB), "reward": 0})
    with Hostile({"/create": _ok({"id": "s"}), "/reset": _ok({"observation": "r" * (3 * MB), "info": {"t": "i" * MB}}),
                  "/step": lambda body: huge_error if body.get("action") == "err" else over_cap}) as server:
        env = HttpEnv(EnvClient(server.url, retry_s=0), "a")
        obs, info = env.reset()
        assert 3 * MB > len(obs) <= MAX_OBSERVATION_CHARS + 200 and "clipped" in obs
        assert len(info["t"]) < MB and "clipped" in info["t"]
        with pytest.raises(EnvServiceError) as error:
            env.step("err")
        assert len(str(error.value)) < 2000
        with pytest.raises(EnvServiceError, match="more than 8 MiB"):
            env.step("go")


def test_a_run_against_a_hostile_server_keeps_records_and_reports_small(tmp_path):
    def step(body):
        if body.get("action") == "err":
            return 500, {}, json.dumps({"error": "e" * (4 * MB)}).encode()
        return _ok({"observation": "s" * (4 * MB), "reward": 0, "terminated": True})

    answers = {"/health": _ok({"status": "ok", "benchmark": "hostile", "sessions": 0}), "/tasks": _ok({"tasks": ["a", "b"]}),
               "/create": lambda body: _ok({"id": body["task_id"]}), "/close": _ok({"closed": True}),
               "/reset": lambda body: _ok({"observation": f"task {body['id']}: " + "t" * (4 * MB), "info": {}}),
               "/step": step}
    model = write_script(tmp_path / "m.yaml", [{"when": "task a:", "reply": "Action: err"}], default="Action: go")
    with Hostile(answers) as server:
        done = run_cli("run", "--benchmark", "remote", "--env-url", server.url, "--model", model, "--num-trials", "1",
                       "--quiet", "--no-cache", "--run-dir", str(tmp_path / "r"), env={"REINAGENT_ENV_RETRY_S": "0"})
    assert done.returncode == 3, done.stderr  # task a's step ended in an error, task b's did not
    for name, bound in (("records.jsonl", MB), ("report.html", 2 * MB)):
        size = (tmp_path / "r" / name).stat().st_size
        assert size < bound, (name, size)  # 4 MB observations and error bodies, twice each
