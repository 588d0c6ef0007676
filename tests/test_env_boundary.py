"""Scores keep their meaning across the environment boundary (issue 27, 3-4 and 6): programming
envs over HTTP and Gymnasium reward the hidden tests, the seed's WebEnvClient gets the task it asks
for by `idx`, another protocol's keys are refused, non-finite rewards never reach a record."""

from __future__ import annotations

import json
import re

import gymnasium
import pytest

import reinagent.service.gym  # noqa: F401 - registers the ids
from reinagent import make
from tests.conftest import run_cli, write_script
from tests.test_env_service import hotpot, server_factory  # noqa: F401 - fixtures

NOT_A_SOLUTION = "x = 1"


# --- 3. programming environments judge with the hidden tests --------------------------------------

def test_programming_over_http_rewards_the_hidden_verdict(server_factory, tmp_path):  # noqa: F811
    server = server_factory("--benchmark", "humaneval")
    task = make("humaneval").all_tasks()[0]
    sid = server.post("/create", {"task_id": task.task_id}).json()["id"]
    server.post("/reset", {"id": sid})
    out = server.post("/step", {"id": sid, "action": NOT_A_SOLUTION}).json()
    # it runs without error (the internal verdict, with no internal tests, is a pass) ...
    assert out["info"]["internal_reward"] == 1.0
    # ... but the hidden tests fail it: reward and success say so, as in-process
    assert out["reward"] == 0.0 and out["info"]["success"] is False and out["done"] is True
    assert out["info"]["hidden_total"] == len(task.hidden_tests) and "hidden_tests" not in out["info"]
    server.post("/reset", {"id": sid})
    good = server.post("/step", {"id": sid, "action": task.header + task.canonical}).json()
    assert good["reward"] == 1.0 and good["info"]["success"] is True
    server.post("/close", {"id": sid})

    # a whole run against the server: `x = 1` solves nothing (it scored 5/5 before)
    model = write_script(tmp_path / "m.yaml", [], default=f"Thought: done.\nAction: {NOT_A_SOLUTION}")
    run_dir = tmp_path / "remote"
    proc = run_cli("run", "--benchmark", "remote", "--env-url", server.url, "--num-envs", "3",
                   "--num-trials", "1", "--model", model, "--run-dir", str(run_dir), "--quiet", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert len(records) == 3 and not any(r["success"] for r in records)


@pytest.mark.parametrize("env_id", ["reinagent/humaneval-v1", "reinagent/mbpp-v1"])
def test_gymnasium_programming_env_rewards_the_hidden_verdict(env_id):
    bench = make(env_id.split("/")[1])
    task = bench.all_tasks()[0]
    env = gymnasium.make(env_id, task_id=task.task_id)
    try:
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step(NOT_A_SOLUTION)
        assert (reward, terminated, info["success"]) == (0.0, True, False)
        env.reset(seed=0)
        _, reward, _, _, info = env.step(task.header + task.canonical)
        assert (reward, info["success"]) == (1.0, True)
    finally:
        env.close()


# --- 4. the seed's WebEnvClient gets the task it asks for ------------------------------------------

def _question_of(server, task_id: str) -> str:
    sid = server.post("/create", {"task_id": task_id}).json()["id"]
    obs = server.post("/reset", {"id": sid}).json()["observation"]
    server.post("/close", {"id": sid})
    return obs


def test_seed_client_idx_picks_the_task_and_its_own_session(hotpot):  # noqa: F811
    tasks = hotpot.http.get("/tasks").json()["tasks"]
    before = hotpot.sessions()
    three = hotpot.post("/reset", {"idx": 3}).json()
    five = hotpot.post("/reset", {"idx": 5}).json()
    assert three["observation"] == _question_of(hotpot, tasks[3]) != five["observation"]
    assert five["observation"] == _question_of(hotpot, tasks[5])
    assert three["id"] != five["id"] and hotpot.sessions() == before + 2
    # each client steps its own session: finishing idx 3 leaves idx 5 mid-episode
    assert hotpot.post("/step", {"action": "Finish[x]", "idx": 3}).json()["done"] is True
    assert hotpot.post("/step", {"action": "Search[x]", "idx": 5}).json()["done"] is False
    # a reset with the same idx replays that task in that client's session
    again = hotpot.post("/reset", {"idx": 3}).json()
    assert again["id"] == three["id"] and again["observation"] == three["observation"]
    # the plain id-less form is a third session, untouched by both
    assert hotpot.post("/step", {"action": "Search[x]"}).status_code == 404
    wrong = hotpot.post("/reset", {"idx": len(tasks)})
    assert wrong.status_code == 404 and f"idx {len(tasks)} is out of range" in wrong.json()["error"]
    both = hotpot.post("/reset", {"idx": 1, "task_id": tasks[1]})
    assert both.status_code == 422 and "not both" in both.json()["error"]
    for sid in (three["id"], five["id"]):
        assert hotpot.post("/close", {"id": sid}).status_code == 200
    assert hotpot.post("/step", {"action": "Search[x]", "idx": 3}).status_code == 404
    assert hotpot.sessions() == before


@pytest.mark.parametrize("key", ["env_idx", "data_idx"])
@pytest.mark.parametrize("path", ["/reset", "/step", "/create"])
def test_another_protocols_task_keys_are_refused(hotpot, key, path):  # noqa: F811
    before = hotpot.sessions()
    body = {"action": "Search[x]", "task_id": hotpot.http.get("/tasks").json()["tasks"][0], key: 0}
    answer = hotpot.post(path, body)
    assert answer.status_code == 422 and f"'{key}'" in answer.json()["error"] and "AgentGym" in answer.json()["error"]
    assert hotpot.sessions() == before  # not silently played on the default session


# --- 6. rewards are finite numbers ----------------------------------------------------------------

def _odd_reward_server(reward_text: str):
    """A loopback env server (stdlib) whose steps answer `"reward": <reward_text>` as written."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _send(self, text: str) -> None:
            data = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send('{"status": "ok", "benchmark": "odd", "sessions": 0}')
            else:
                self._send('{"tasks": ["t0", "t1"]}')

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/create":
                self._send('{"id": "s"}')
            elif self.path == "/reset":
                self._send('{"id": "s", "state": "go", "observation": "go", "info": {}}')
            elif self.path == "/step":
                self._send('{"state": "won", "observation": "won", "reward": %s, "done": true, '
                           '"terminated": true, "truncated": false, "info": {}}' % reward_text)
            else:
                self._send('{"closed": true}')

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("reward_text", ["1e999", "-1e999", "NaN"])
def test_non_finite_rewards_are_refused_at_the_client(tmp_path, reward_text):
    from reinagent.runner import load_run

    server = _odd_reward_server(reward_text)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        model = write_script(tmp_path / "m.yaml", [], default="Thought: go.\nAction: win")
        run_dir = tmp_path / "run"
        proc = run_cli("run", "--benchmark", "remote", "--env-url", url, "--num-envs", "2", "--num-trials", "1",
                       "--model", model, "--run-dir", str(run_dir), "--quiet", "--no-cache")
    finally:
        server.shutdown()
    assert proc.returncode == 4, proc.stderr  # every (task, trial) errored
    _, records = load_run(run_dir)  # readable: nothing written that the reader refuses
    assert len(records) == 2 and not any(r.success for r in records)
    assert all("non-finite reward" in r.error for r in records)
    assert not re.search(r'"reward":\s*null', (run_dir / "records.jsonl").read_text())


def test_every_float_in_a_record_round_trips_and_non_finite_ones_error_the_episode():
    from reinagent.episode import _finite
    from reinagent.records import TrialRecord, Trajectory, first_non_finite

    floats = [0.1, 1 / 3, 1e-300, 2 ** 0.5, 123456789.123456789, -0.0, 5e-324, 1.7976931348623157e308]
    record = TrialRecord(task_id="t", trial=1, reward=0.1, f1=1 / 3, started_at=1764000000.123456,
                         trajectory=Trajectory(extra={"values": floats}), evaluation={"score": 2 ** 0.5})
    back = TrialRecord.model_validate_json(record.model_dump_json())
    assert back == record and back.trajectory.extra["values"] == floats
    assert _finite(record) is record
    bad = record.model_copy(deep=True)
    bad.trajectory.extra["reward"] = float("inf")
    bad.evaluation["nan"] = float("nan")
    fixed = _finite(bad)
    assert "non-finite number at" in fixed.error and not fixed.success
    assert first_non_finite(fixed.model_dump()) is None
    assert TrialRecord.model_validate_json(fixed.model_dump_json()) == fixed
