"""AgentGym's protocol both ways on loopback (issue 27, 7): AgentGym-style clients drive
`serve-env --protocol agentgym`, and `run --benchmark remote --env-protocol agentgym` drives an
AgentGym-style server.

AgentGym's own client package (`agentenv`, WooooDyy/AgentGym) is not used: its PyPI release is a
0.0.1 placeholder from 2024 while the repository's is 0.2.0, and the real one pulls torch,
deepspeed and wandb. The client below is written from its clients' conventions (BabyAI's and
TextCraft's `*EnvClient`: `/create` with no body or a settings object, `id` in every body,
`/reset {"data_idx"}`, `/observation?id=`, `/close`, `assert status_code == 200`).
"""

from __future__ import annotations

import json

import httpx
import pytest

from reinagent import make
from tests.conftest import one_line_error, run_cli, write_script
from tests.test_env_service import Server


class AgentGymStyleClient:
    """What BabyAIEnvClient does over HTTP, with httpx for requests."""

    def __init__(self, env_server_base: str, create_body: dict | None = None):
        self.base = env_server_base
        ok = httpx.post(f"{self.base}/create", json=create_body, timeout=60) if create_body is not None \
            else httpx.post(f"{self.base}/create", timeout=60)  # BabyAI's client sends no body at all
        assert ok.status_code == 200, ok.text
        self.env_id = ok.json()["id"]
        self.first_observation = ok.json().get("observation")  # TextCraft's client reads it

    def _post(self, path: str, data: dict) -> dict:
        data["id"] = self.env_id
        res = httpx.post(f"{self.base}/{path}", json=data, timeout=60)
        assert res.status_code == 200, res.text
        return res.json()

    def _get(self, path: str) -> dict:
        res = httpx.get(f"{self.base}/{path}?id={self.env_id}", timeout=60)
        assert res.status_code == 200, res.text
        return res.json()

    def reset(self, data_idx: int = 0) -> dict:
        return self._post("reset", {"data_idx": data_idx})

    def step(self, action: str) -> dict:
        return self._post("step", {"action": action})

    def observe(self) -> dict:
        return self._get("observation")

    def close(self) -> dict:
        return self._post("close", {})


@pytest.fixture(scope="module")
def agentgym_hotpot():
    server = Server("--benchmark", "hotpotqa", "--protocol", "agentgym")
    yield server
    assert server.stop() == 0


def test_agentgym_clients_drive_our_server(agentgym_hotpot):
    url = agentgym_hotpot.url
    assert agentgym_hotpot.first_line.startswith("serving hotpotqa (agentgym protocol) on http://127.0.0.1:")
    tasks = make("hotpotqa").load_tasks("hard100")
    client = AgentGymStyleClient(url)
    assert isinstance(client.env_id, int) and client.first_observation == ""  # the task comes with reset
    other = AgentGymStyleClient(url, create_body={"minecraft_dir": "x", "commands": None, "goal": None})
    assert other.env_id != client.env_id

    first = client.reset(data_idx=3)
    assert first["observation"] == f"Question: {tasks[3].question}"
    assert (first["reward"], first["score"], first["done"]) == (0.0, 0.0, False)
    assert isinstance(first["available_actions"], list)
    other.reset(data_idx=5)  # another client on another task: no crosstalk
    assert client.observe()["observation"] == first["observation"]

    page = client.step("Search[nothing at all]")
    assert page["done"] is False and page["reward"] == 0.0 and "Could not find" in page["observation"]
    assert client.observe() == {"observation": page["observation"], "reward": 0.0, "score": 0.0, "done": False}
    done = client.step(f"Finish[{tasks[3].answer}]")
    assert (done["reward"], done["score"], done["done"]) == (1.0, 1.0, True)
    wrong = other.step("Finish[certainly not this]")
    assert (wrong["reward"], wrong["done"]) == (0.0, True)

    again = client.reset(data_idx=3)  # a new episode: score starts over
    assert again["observation"] == first["observation"] and client.observe()["score"] == 0.0
    assert client.close() == {"closed": True} and other.close() == {"closed": True}
    gone = httpx.post(f"{url}/step", json={"id": client.env_id, "action": "x"}, timeout=60)
    assert gone.status_code == 404 and "unknown env id" in gone.json()["error"]
    eager = AgentGymStyleClient(url)  # a step before any reset plays task 0
    assert eager.step(f"Finish[{tasks[0].answer}]")["reward"] == 1.0
    eager.close()


@pytest.mark.parametrize(("body", "status", "needle"), [
    ({"id": 10**6, "action": "x"}, 404, "unknown env id"),
    ({"id": "abc", "action": "x"}, 422, "'id' must be the integer"),
    ({"action": "x"}, 422, "'id' must be the integer"),
])
def test_agentgym_bad_requests_are_errors_with_a_reason(agentgym_hotpot, body, status, needle):
    answer = httpx.post(f"{agentgym_hotpot.url}/step", json=body, timeout=60)
    assert answer.status_code == status and needle in answer.json()["error"]


def test_a_searchqa_style_client_is_refused_and_resets_nobody_elses_env(agentgym_hotpot):
    """AgentGym's SearchQA client (the "env_idx" family) sends /reset {"env_idx": ENV, "id": TASK}.
    Was: 200, and our server reset env number TASK, another client's. Now 422 naming the clients
    this server speaks, and the other client's episode goes on."""
    url = agentgym_hotpot.url
    victim = AgentGymStyleClient(url)
    try:
        victim.reset(data_idx=3)
        victim.step("Search[nothing at all]")
        before = victim.observe()
        for path, body in (("reset", {"env_idx": 0, "id": victim.env_id}),
                           ("step", {"env_idx": victim.env_id, "action": "Finish[x]"})):
            answer = httpx.post(f"{url}/{path}", json=body, timeout=60)
            assert answer.status_code == 422, answer.text
            assert "SearchQA" in answer.json()["error"] and "BabyAI" in answer.json()["error"]
        answer = httpx.get(f"{url}/observation?env_idx={victim.env_id}", timeout=60)
        assert answer.status_code == 422 and "SearchQA" in answer.json()["error"]
        assert victim.observe() == before
    finally:
        victim.close()


def test_agentgym_reset_out_of_range_is_404(agentgym_hotpot):
    client = AgentGymStyleClient(agentgym_hotpot.url)
    try:
        answer = httpx.post(f"{agentgym_hotpot.url}/reset", json={"id": client.env_id, "data_idx": 10**6}, timeout=60)
        assert answer.status_code == 404 and "out of range" in answer.json()["error"]
    finally:
        client.close()


def test_reinagent_drives_an_agentgym_server(agentgym_hotpot, tmp_path):
    tasks = make("hotpotqa").load_tasks("hard100")
    rules = [{"when": tasks[0].question[:40], "reply": f"Thought: I know it.\nAction: Finish[{tasks[0].answer}]"},
             {"when": tasks[1].question[:40], "reply": "Thought: a guess.\nAction: Finish[certainly not this]"}]
    model = write_script(tmp_path / "m.yaml", rules, default="Thought: hm.\nAction: Finish[no]")
    run_dir = tmp_path / "run"
    proc = run_cli("run", "--benchmark", "remote", "--env-url", agentgym_hotpot.url, "--env-protocol", "agentgym",
                   "--num-envs", "2", "--num-trials", "1", "--model", model, "--run-dir", str(run_dir),
                   "--quiet", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    records = {r["task_id"]: r for r in map(json.loads, (run_dir / "records.jsonl").read_text().splitlines())}
    assert set(records) == {"0", "1"} and records["0"]["success"] and not records["1"]["success"]
    assert records["0"]["trajectory"]["steps"][0]["observation"].startswith("Episode finished")
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["config"]["env_protocol"] == "agentgym"
    # every env the run created is closed again: the next id's /observation of ids 0.. answer 404
    probe = AgentGymStyleClient(agentgym_hotpot.url)
    try:
        for env_id in range(probe.env_id):
            assert httpx.get(f"{agentgym_hotpot.url}/observation?id={env_id}", timeout=60).status_code == 404
    finally:
        probe.close()


def test_env_protocol_agentgym_needs_remote_and_num_envs(tmp_path):
    one_line_error(run_cli("run", "--benchmark", "remote", "--env-url", "http://127.0.0.1:9", "--env-protocol",
                           "agentgym", "--run-dir", str(tmp_path / "a")), "--num-envs")
    one_line_error(run_cli("run", "--benchmark", "gsm8k", "--env-url", "http://127.0.0.1:9", "--env-protocol",
                           "agentgym", "--run-dir", str(tmp_path / "b")), "--benchmark remote only")
    one_line_error(run_cli("run", "--benchmark", "remote", "--env-url", "http://127.0.0.1:9", "--env-protocol",
                           "gym", "--run-dir", str(tmp_path / "c")), "gym", "agentgym")
