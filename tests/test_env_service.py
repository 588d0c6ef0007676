"""Environments as services: real `reinagent serve-env` processes on loopback, the HTTP client,
runs through a server (identical records), the conformance checker, faults (crash, idle timeout,
session cap, server killed mid-run then resume)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import CLI, ROOT, one_line_error, run_cli, write_script

GUESS = "tests.service_envs:GuessBench"


class Server:
    """A `reinagent serve-env --port 0` process; the URL comes from its first stdout line."""

    def __init__(self, *args: str, env: dict | None = None, port: int = 0):
        self.proc = subprocess.Popen(
            [*CLI, "serve-env", "--port", str(port), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=ROOT, env={**os.environ, **(env or {})},
        )
        self.first_line = self.proc.stdout.readline()
        if not self.first_line.startswith("serving "):
            self.proc.wait(60)
            raise AssertionError(f"server did not start: {self.first_line!r} {self.proc.stderr.read()}")
        self.url = self.first_line.rsplit(" on ", 1)[1].strip()
        self.port = int(self.url.rsplit(":", 1)[1])
        self.http = httpx.Client(base_url=self.url, timeout=120)
        wait_for(lambda: self._healthy(), "the server answers /health")

    def _healthy(self) -> bool:
        try:
            return self.http.get("/health").status_code in (200, 401)
        except httpx.TransportError:
            return False

    def post(self, path: str, body=None, **kw) -> httpx.Response:
        return self.http.post(path, json=body, **kw)

    def sessions(self) -> int:
        return self.http.get("/health").json()["sessions"]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(120)
        self.http.close()
        return rc

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(60)
        self.http.close()


def wait_for(condition, what: str, deadline_s: float = 120.0) -> None:
    """Poll until `condition()` holds; fail naming `what` if the deadline passes."""
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.02)


@pytest.fixture
def server_factory():
    started: list[Server] = []

    def start(*args: str, env: dict | None = None, port: int = 0) -> Server:
        server = Server(*args, env=env, port=port)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.kill()


@pytest.fixture(scope="module")
def hotpot():
    server = Server("--benchmark", "hotpotqa")
    yield server
    assert server.stop() == 0



# --- the server and the protocol -------------------------------------------------------------------

def test_first_line_and_sigterm_closes_sessions(server_factory):
    server = server_factory("--benchmark", "hotpotqa")
    assert re.fullmatch(r"serving hotpotqa on http://127\.0\.0\.1:\d+\n", server.first_line)
    task = server.http.get("/tasks").json()["tasks"][0]
    server.post("/create", {"task_id": task})
    assert server.sessions() == 1
    assert server.stop() == 0  # SIGTERM: sessions closed, exit 0 (not death by signal)


def test_protocol_shapes(hotpot):
    tasks = hotpot.http.get("/tasks").json()["tasks"]
    assert len(tasks) == 100 and all(isinstance(t, str) for t in tasks)
    health = hotpot.http.get("/health").json()
    assert health["status"] == "ok" and health["benchmark"] == "hotpotqa" and isinstance(health["sessions"], int)

    sid = hotpot.post("/create", {"task_id": tasks[0]}).json()["id"]
    reset = hotpot.post("/reset", {"id": sid, "seed": 3}).json()
    assert set(reset) == {"id", "state", "observation", "info"} and reset["id"] == sid
    assert reset["state"] == reset["observation"] and reset["observation"].startswith("Question: ")

    step = hotpot.post("/step", {"id": sid, "action": "Search[VIVA Media]"}).json()
    assert set(step) == {"state", "observation", "reward", "done", "terminated", "truncated", "info"}
    assert step["state"] == step["observation"] and "VIVA Media" in step["observation"]
    assert step["done"] is False and step["reward"] == 0.0

    finish = hotpot.post("/step", {"id": sid, "action": "Finish[Gesellschaft mbH]"}).json()
    assert finish["terminated"] is True and finish["done"] is True and finish["truncated"] is False

    assert hotpot.post("/close", {"id": sid}).json() == {"closed": True}
    for path, body in (("/step", {"id": sid, "action": "Search[x]"}), ("/reset", {"id": sid}), ("/close", {"id": sid})):
        gone = hotpot.post(path, body)
        assert gone.status_code == 404 and "unknown session id" in gone.json()["error"]


def test_error_codes(hotpot):
    unknown_task = hotpot.post("/create", {"task_id": "nope"})
    assert unknown_task.status_code == 404 and "unknown task 'nope'" in unknown_task.json()["error"]
    assert hotpot.post("/step", {"id": "x"}).status_code == 422  # no action
    wrong_type = hotpot.post("/step", {"id": "x", "action": 5})
    assert wrong_type.status_code == 422 and "action" in wrong_type.json()["error"]
    bad_json = hotpot.http.post("/step", content=b"{oops", headers={"Content-Type": "application/json"})
    assert bad_json.status_code == 400 and "invalid JSON" in bad_json.json()["error"]
    not_object = hotpot.post("/create", [1, 2])
    assert not_object.status_code == 422
    bad_option = hotpot.post("/create", {"task_id": hotpot.http.get("/tasks").json()["tasks"][0],
                                         "options": {"agent": "webshop"}})
    assert bad_option.status_code == 422 and "react" in bad_option.json()["error"]
    no_route = hotpot.http.get("/observation")
    assert no_route.status_code == 404 and "/step" in no_route.json()["error"]


def test_seed_style_idless_flow(hotpot):
    """A client written for the seed's {state, reward, done} servers works unchanged."""
    before = hotpot.sessions()
    first = hotpot.post("/reset", {}).json()
    assert first["state"].startswith("Question: ")
    out = hotpot.post("/step", {"action": "Search[something]"}).json()
    assert {"state", "reward", "done"} <= set(out) and out["done"] is False
    other_task = hotpot.http.get("/tasks").json()["tasks"][5]
    switched = hotpot.post("/reset", {"task_id": other_task}).json()
    assert switched["id"] != first["id"] and hotpot.sessions() == before + 1  # the old default closed
    done = hotpot.post("/step", {"action": "Finish[x]"}).json()
    assert done["done"] is True
    hotpot.post("/close", {"id": switched["id"]})
    assert hotpot.post("/step", {"action": "Search[x]"}).status_code == 404  # no default session now
    assert hotpot.sessions() == before


def test_check_env_passes_our_server_and_never_touches_a_live_default_session(hotpot):
    # a seed-style client is mid-episode on the default session: check-env must leave it alone
    live = hotpot.post("/reset", {}).json()
    hotpot.post("/step", {"action": "Search[something]"})
    before = hotpot.sessions()
    proc = run_cli("check-env", hotpot.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout and "PASS close" in proc.stdout
    assert hotpot.sessions() == before  # every session it opened is closed
    again = hotpot.post("/step", {"action": "Lookup[x]"}).json()  # the same session, not reset
    assert "observation" in again and hotpot.post("/close", {"id": live["id"]}).status_code == 200


def test_check_env_catches_a_broken_server():
    proc = subprocess.Popen([sys.executable, "-m", "tests.broken_env_server"], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        url = proc.stdout.readline().rsplit(" on ", 1)[1].strip()
        out = run_cli("check-env", url)
        opened = httpx.get(f"{url}/opened", timeout=30).json()["opened"]
    finally:
        proc.kill()
        proc.wait(60)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    lines = out.stdout.splitlines()
    assert "PASS health" in lines and "PASS tasks" in lines and "PASS create" in lines
    failed = {line.split(":")[0] for line in lines if line.startswith("FAIL ")}
    assert failed == {"FAIL step", "FAIL unknown session id -> 404", "FAIL unknown task -> 404",
                      "FAIL malformed body -> 422/400", "FAIL close"}, out.stdout
    # its unknown-task check got a session (200) where none was due, and closed it: none left open
    assert opened == []
    assert any("done=True but terminated=False, truncated=False" in line for line in lines)


def test_auth(server_factory):
    server = server_factory("--benchmark", "hotpotqa", "--token", "s3cret-token")
    assert server.http.get("/health").status_code == 401
    wrong = server.http.get("/health", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["error"]
    assert server.post("/step", {"action": "x"}).status_code == 401
    assert server.http.get("/health", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
    ok = run_cli("check-env", server.url, env={"REINAGENT_ENV_TOKEN": "s3cret-token"})
    assert ok.returncode == 0 and "PASS no token -> 401" in ok.stdout, ok.stdout
    # a run without the token gets one clear line, not a traceback
    one_line_error(run_cli("run", "--benchmark", "hotpotqa", "--env-url", server.url, "--num-envs", "1",
                            env={"REINAGENT_ENV_TOKEN": ""}), "401", "bearer token")


def test_session_cap_503_with_retry_after(server_factory):
    server = server_factory("--benchmark", GUESS, "--max-sessions", "2")
    ids = [server.post("/create", {"task_id": "t0"}).json()["id"] for _ in range(2)]
    full = server.post("/create", {"task_id": "t1"})
    assert full.status_code == 503 and full.headers["retry-after"] == "1" and "cap" in full.json()["error"]
    assert server.post("/reset", {}).status_code == 503  # the id-less form counts against the cap too
    server.post("/close", {"id": ids[0]})
    assert server.post("/create", {"task_id": "t1"}).status_code == 200


def test_idle_sessions_are_closed(server_factory):
    server = server_factory("--benchmark", GUESS, "--idle-timeout-s", "0.3")
    sid = server.post("/create", {"task_id": "t0"}).json()["id"]
    wait_for(lambda: server.sessions() == 0, "the idle session is closed")
    assert server.post("/step", {"id": sid, "action": "word0"}).status_code == 404


def test_env_crash_closes_only_that_session(server_factory):
    server = server_factory("--benchmark", GUESS)
    crashing = server.post("/create", {"task_id": "t0"}).json()["id"]
    healthy = server.post("/create", {"task_id": "t1"}).json()["id"]
    out = server.post("/step", {"id": crashing, "action": "crash"})
    assert out.status_code == 500
    assert "the guessing engine broke" in out.json()["error"] and "closed" in out.json()["error"]
    assert server.post("/step", {"id": crashing, "action": "word0"}).status_code == 404
    won = server.post("/step", {"id": healthy, "action": "word1"}).json()
    assert won["reward"] == 1.0 and won["info"] == {"success": True}
    assert server.sessions() == 1


@pytest.mark.parametrize("args, needles", [
    (["--benchmark", "webshop"], ["unknown benchmark 'webshop'", "hotpotqa", "alfworld"]),
    (["--benchmark", "remote"], ["unknown benchmark 'remote'", "mbpp"]),
    (["--benchmark", "hotpotqa", "--split", "test"], ["unknown split 'test'", "hard100"]),
    (["--benchmark", "hotpotqa", "--host", "0.0.0.0"], ["needs a token", "--token"]),
    (["--benchmark", "hotpotqa", "--max-sessions", "0"], ["--max-sessions"]),
    (["--benchmark", "hotpotqa", "--port", "70000"], ["--port", "65535"]),
    (["--benchmark", "hotpotqa", "--host", "no-such-host.invalid", "--token", "t0ken-123"], ["cannot listen on"]),
])
def test_bad_server_input(args, needles):
    one_line_error(run_cli("serve-env", "--port", "0", *args, env={"REINAGENT_ENV_TOKEN": ""}), *needles)


def test_port_in_use():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        one_line_error(run_cli("serve-env", "--benchmark", "hotpotqa", "--port", str(port)),
                        f"port {port}", "in use", "--port")


# --- the client --------------------------------------------------------------------------------------

def test_http_env_sync_and_async(hotpot):
    from reinagent.env import aclose, areset, astep
    from reinagent.service.client import EnvClient, HttpEnv

    task = hotpot.http.get("/tasks").json()["tasks"][0]
    client = EnvClient(hotpot.url)
    env = HttpEnv(client, task, options={"agent": "react", "max_steps": 2})
    obs, info = env.reset(seed=0)
    assert obs.startswith("Question: ") and info == {}
    obs, reward, terminated, truncated, _ = env.step("Search[VIVA Media]")
    assert not terminated and not truncated
    assert env.step("Lookup[2004]")[3] is True  # max_steps=2 reached the server's env
    env.close()

    async def episode():
        env = HttpEnv(client, task)
        await areset(env)
        result = await astep(env, "Finish[x]")
        await aclose(env)
        await client.aclose()
        return result

    assert asyncio.run(episode())[2] is True
    client.close()
    assert hotpot.sessions() == 0


def test_no_session_leak_over_create_close_cycles(hotpot):
    from reinagent.service.client import EnvClient, HttpEnv

    task = hotpot.http.get("/tasks").json()["tasks"][0]
    client = EnvClient(hotpot.url)
    for _ in range(100):
        env = HttpEnv(client, task)
        env.step("Search[x]")
        env.close()
    client.close()
    assert hotpot.sessions() == 0


def _counting_client(responses):
    """An EnvClient whose network is `responses` in order (the last repeats), counting requests.
    An item is (status, body) or an exception to raise; both the sync and the async path use it."""
    from reinagent.service.client import EnvClient

    calls = []

    def answer(path):
        calls.append(path)
        item = responses[min(len(calls), len(responses)) - 1]
        if isinstance(item, BaseException):
            raise item
        status, body = item
        return status, ({"retry-after": "0"} if status == 503 else {}), json.dumps(body).encode()

    async def asend(method, path, payload):
        return answer(path)

    client = EnvClient("http://env.test", retry_s=5)
    client._asend = asend
    client._send = lambda method, path, payload: answer(path)
    return client, calls


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_client_retries_503_but_never_4xx(mode):
    from reinagent.service.client import EnvServiceError

    def call(client, *args):
        return client.request(*args) if mode == "sync" else asyncio.run(client.arequest(*args))

    busy = (503, {"error": "session cap reached"})
    client, calls = _counting_client([busy, busy, (200, {"id": "s1"})])
    assert call(client, "POST", "/create", {"task_id": "t"}) == {"id": "s1"} and len(calls) == 3

    for status in (404, 422, 401, 500):
        client, calls = _counting_client([(status, {"error": "no such thing"}), (200, {})])
        with pytest.raises(EnvServiceError, match=f"{status}: no such thing"):
            call(client, "POST", "/step", {"id": "s", "action": "a"})
        assert len(calls) == 1

    client, calls = _counting_client([busy])
    client.retry_s = 0.3
    with pytest.raises(EnvServiceError, match="still busy"):
        call(client, "POST", "/create", {"task_id": "t"})
    assert len(calls) >= 2


def test_client_retries_refused_connections_within_a_bound_but_not_dropped_requests():
    import aiohttp

    from reinagent.service.client import EnvServiceError

    request = httpx.Request("POST", "http://env.test/step")
    refused = httpx.ConnectError("Connection refused", request=request)
    client, calls = _counting_client([refused, refused, (200, {"status": "ok"})])
    assert client.request("GET", "/health") == {"status": "ok"} and len(calls) == 3

    from reinagent.service.client import EnvClient

    with socket.socket() as probe:  # a loopback port nobody listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client, calls = EnvClient(f"http://127.0.0.1:{port}", retry_s=0.3), []
    real_send = client._asend

    async def counted(*args):
        calls.append(args)
        return await real_send(*args)

    client._asend = counted
    with pytest.raises(EnvServiceError, match=r"unreachable .*ClientConnectorError.*; \d+ attempts in [\d.]+ s; retries stop after 0.3 s"):
        asyncio.run(client.arequest("POST", "/step", {"id": "s", "action": "a"}))
    assert len(calls) >= 2  # retried, then stopped by the time bound

    for dropped in (aiohttp.ServerDisconnectedError(), httpx.RemoteProtocolError("disconnected", request=request)):
        client, calls = _counting_client([dropped, (200, {})])
        with pytest.raises(EnvServiceError, match="not retried"):
            if isinstance(dropped, httpx.HTTPError):
                client.request("POST", "/step", {"id": "s", "action": "a"})
            else:
                asyncio.run(client.arequest("POST", "/step", {"id": "s", "action": "a"}))
        assert len(calls) == 1  # a step that may have reached the server is never sent twice


def test_server_socket_sends_small_answers_at_once():
    """TCP_NODELAY on the listening socket (inherited by connections): without it every answer
    waited ~40 ms for the client's delayed ACK (measured: 48 ms per HotpotQA step)."""
    from reinagent.service.server import _bind

    sock = _bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP  # asyncio sets TCP_NODELAY only on sockets that say so
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        sock.close()


# --- runs through a server -----------------------------------------------------------------------------

HOTPOT_RULES = [
    {"when": "Your failed attempt", "reply": "I should search the exact title first."},
    {"when": "Question: VIVA Media", "reply": ["Thought: search.\nAction: Search[VIVA Media]",
                                               "Thought: look.\nAction: Lookup[2004]",
                                               "Thought: done.\nAction: Finish[Gesellschaft]"]},
]


def _records(run_dir: Path) -> list[dict]:
    """Records without what differs between two runs of the same replies (wall times, latencies)."""
    out = []
    for line in (run_dir / "records.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "task_id" not in rec or "trial" not in rec:
            continue  # a marker record, not a trial
        rec.pop("started_at", None), rec.pop("finished_at", None)
        for call in rec["trajectory"]["calls"] + rec["reflection_calls"]:
            call.pop("latency_s", None)
        rec["evaluation"].pop("duration_s", None)  # sandbox wall times (programming)
        (rec["trajectory"]["extra"].get("internal_result") or {}).pop("duration_s", None)
        out.append(rec)
    return sorted(out, key=lambda r: (r["task_id"], r["trial"]))


def test_run_through_server_equals_in_process(hotpot, tmp_path):
    model = write_script(tmp_path / "m.yaml", HOTPOT_RULES, default="Thought: s.\nAction: Search[Nothing here]")
    common = ["run", "--benchmark", "hotpotqa", "--agent", "react", "--model", model, "--num-envs", "3",
              "--num-trials", "2", "--quiet", "--no-cache"]
    local = run_cli(*common, "--run-dir", str(tmp_path / "local"))
    remote = run_cli(*common, "--run-dir", str(tmp_path / "remote"), "--env-url", hotpot.url)
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    a, b = _records(tmp_path / "local"), _records(tmp_path / "remote")
    assert len(a) == 6 and a == b
    assert any(len(r["trajectory"]["steps"]) == 3 for r in b)  # Search, Lookup and Finish all went over HTTP
    spec = json.loads((tmp_path / "remote" / "spec.json").read_text())
    assert spec["config"]["env_url"] == hotpot.url and spec["settings"]["env_url"] == hotpot.url
    assert hotpot.sessions() == 0


def test_run_against_wrong_server_is_one_line(hotpot, tmp_path):
    one_line_error(run_cli("run", "--benchmark", "mbpp", "--env-url", hotpot.url, "--num-envs", "1",
                            "--run-dir", str(tmp_path / "r")), "serves 'hotpotqa'", "--benchmark mbpp")
    one_line_error(run_cli("run", "--benchmark", "hotpotqa", "--split", "dev-first100", "--env-url", hotpot.url,
                            "--num-envs", "1", "--run-dir", str(tmp_path / "r")), "--split dev-first100")
    one_line_error(run_cli("run", "--benchmark", "remote", "--num-envs", "1"), "--env-url")
    assert not (tmp_path / "r").exists()


def test_remote_benchmark_server_killed_mid_run_then_resume(server_factory, tmp_path):
    """Bring-your-own env (`--benchmark remote`); the server dies while a step is in flight: that
    (task, trial) and any other unfinished one end as errors after the bounded retry, the run goes
    on to its end; with the server back, `resume --retry-errors` completes it, nothing lost or doubled."""
    gate = tmp_path / "gate"
    env = {"GUESS_GATE": str(gate), "GUESS_TASKS": "4"}
    server = server_factory("--benchmark", GUESS, env=env)
    rules = [{"when": f"secret word of t{i}", "reply": f"Thought: I know it.\nAction: word{i}"} for i in (0, 1, 3)]
    rules.append({"when": "secret word of t2", "reply": ["Action: wait", "Action: word2"]})
    model = write_script(tmp_path / "m.yaml", rules, default="Action: nothing")
    run_dir = tmp_path / "run"
    run = subprocess.Popen(
        [*CLI, "run", "--benchmark", "remote", "--env-url", server.url, "--model", model, "--num-trials", "1",
         "--max-concurrency", "1", "--quiet", "--no-cache", "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "REINAGENT_ENV_RETRY_S": "1"},
    )
    waiting = Path(str(gate) + ".waiting")
    wait_for(waiting.exists, "task t2's step is in flight on the server")
    server.kill()
    out, err = run.communicate(timeout=300)
    assert run.returncode == 3, err  # some (task, trial)s ended in an error (docs/cli.md "Exit codes")
    assert re.search(r"errors: [12] of 4 \(task, trial\)s ended in an error", err), err

    from reinagent.runner import load_run

    _, first = load_run(run_dir)
    by_task = {r.task_id: r for r in first}
    assert set(by_task) == {"t0", "t1", "t2", "t3"}
    assert by_task["t2"].error and "env server" in by_task["t2"].error
    assert all(r.success for r in first if r.error is None)
    finished_first = {r.task_id: r.started_at for r in first if r.error is None}

    gate.touch()
    server_factory("--benchmark", GUESS, env=env, port=server.port)  # back on the same address
    resumed = run_cli("resume", str(run_dir), "--retry-errors", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    _, final = load_run(run_dir)
    assert sorted(r.task_id for r in final) == ["t0", "t1", "t2", "t3"]  # one record each
    assert all(r.success and r.error is None for r in final)
    for r in final:  # what finished before was kept, not redone
        if r.task_id in finished_first:
            assert r.started_at == finished_first[r.task_id]


def _same_records_both_ways(tmp_path, server: Server, *args: str) -> list[dict]:
    common = ["run", *args, "--quiet", "--no-cache"]
    local = run_cli(*common, "--run-dir", str(tmp_path / "local"))
    remote = run_cli(*common, "--run-dir", str(tmp_path / "remote"), "--env-url", server.url)
    assert local.returncode == 0, local.stderr
    assert remote.returncode == 0, remote.stderr
    a, b = _records(tmp_path / "local"), _records(tmp_path / "remote")
    assert a == b and all(r["error"] is None for r in b)
    assert server.sessions() == 0
    return b


def test_coder_through_server_equals_in_process(server_factory, tmp_path):
    """The coder agent's internal tests travel with the step (a step option) and run on the server."""
    from tests.test_coder import RULES

    server = server_factory("--benchmark", "humaneval")
    model = write_script(tmp_path / "m.yaml", RULES, default="I do not know.")
    records = _same_records_both_ways(tmp_path, server, "--benchmark", "humaneval", "--model", model,
                                      "--num-envs", "3", "--num-trials", "2")
    fixed = [r for r in records if r["task_id"] == "HumanEval/2"]
    assert "# output: 3.0" in fixed[0]["trajectory"]["extra"]["feedback"]  # ran the agent's own tests
    assert fixed[-1]["success"]


def _alfworld(test):
    from tests.test_alfworld import needs_alfworld

    return needs_alfworld(test)


@_alfworld
def test_alfworld_through_server_equals_in_process(server_factory, tmp_path):
    server = server_factory("--benchmark", "alfworld")
    rules = [{"when": "Your failed attempt", "reply": "I should go to the desk first."},
             {"when": "Here is the task", "reply": ["think: I need to find the object.", "go to desk 1",
                                                    "look", "examine desk 1"]}]
    model = write_script(tmp_path / "m.yaml", rules, default="look")
    records = _same_records_both_ways(tmp_path, server, "--benchmark", "alfworld", "--model", model,
                                      "--num-envs", "2", "--num-trials", "2", "--max-steps", "4")
    assert all(r["trajectory"]["extra"]["env_steps"] >= 3 for r in records)
    assert len({r["trajectory"]["steps"][1]["observation"] for r in records}) >= 1
    check = run_cli("check-env", server.url, "--action", "look")
    assert check.returncode == 0, check.stdout


@_alfworld
def test_alfworld_server_releases_workers_when_idle(server_factory):
    """Sessions closed and the idle timeout passed: the pooled worker processes go too, so the
    server returns to its resting memory; the next session starts a new pool."""
    from tests.test_alfworld import _workers_of

    server = server_factory("--benchmark", "alfworld", "--idle-timeout-s", "1")
    task = server.http.get("/tasks").json()["tasks"][0]
    sid = server.post("/create", {"task_id": task}).json()["id"]
    assert "You are in the middle of a room" in server.post("/reset", {"id": sid}).json()["observation"]
    assert _workers_of(server.proc.pid)
    server.post("/close", {"id": sid})
    wait_for(lambda: not _workers_of(server.proc.pid), "the idle server has no worker processes")
    sid = server.post("/create", {"task_id": task}).json()["id"]
    assert server.post("/step", {"id": sid, "action": "look"}).status_code == 200
    assert server.stop() == 0
    assert not _workers_of(server.proc.pid)


def test_an_unreachable_env_url_says_what_was_tried_and_exits_2(tmp_path):
    """The start-up /health check makes one attempt: the message says so (it once said "retried
    for 30 s" after a 2 s attempt), and the exit code is the README's 2 (nothing ran)."""
    model = write_script(tmp_path / "s.yaml", [])
    proc = run_cli("run", "--benchmark", "hotpotqa", "--env-url", "http://127.0.0.1:9", "--num-envs", "1",
                   "--model", model, "--run-dir", str(tmp_path / "r"))
    line = one_line_error(proc, "cannot use env server http://127.0.0.1:9", "unreachable", "one attempt, not retried")
    assert proc.returncode == 2 and "retried for" not in line
    assert not (tmp_path / "r").exists()
    checked = run_cli("check-env", "http://127.0.0.1:9")
    assert checked.returncode == 2  # README: 1 on a violation, 2 when nothing answers at the URL
    assert "FAIL reachable" in checked.stdout + checked.stderr and "nothing answers" in checked.stdout + checked.stderr
