"""RLAgent against a real `reinagent serve-env` on loopback: an env_name that is not registered
is played over HTTP at env_server_base:env_port (the seed's env-server set-up), and `collect`
writes its episodes to a run directory that `reinagent report` reads."""

from __future__ import annotations

import pytest

from reinagent.rl import RLAgent, RLAgentConfig
from tests.conftest import run_cli, write_script
from tests.test_env_service import HOTPOT_RULES, Server, wait_for


@pytest.fixture(scope="module")
def hotpot_server():
    server = Server("--benchmark", "hotpotqa")
    yield server
    assert server.stop() == 0


def test_run_and_collect_over_a_real_env_server(hotpot_server, tmp_path):
    model = write_script(tmp_path / "m.yaml", HOTPOT_RULES, default="Thought: s.\nAction: Search[Nothing here]")
    config = RLAgentConfig(env_name="hotpot-over-http", env_server_base="http://127.0.0.1",
                           env_port=hotpot_server.port, max_turns=5, output_dir=str(tmp_path / "out"))
    agent = RLAgent(model=model, config=config)
    assert (agent.run_config.benchmark, agent.run_config.env_url) == ("remote", hotpot_server.url)

    task_id = next(t for t in hotpot_server.http.get("/tasks").json()["tasks"])
    result = agent.run(task_description=task_id)
    actions = [s.action for s in result.trajectory.steps]
    assert actions and all(a is not None for a in actions)  # each step went to the server and back
    assert result.reward in (0.0, 1.0)
    wait_for(lambda: hotpot_server.sessions() == 0, "the episode's session is closed")

    run_dir = agent.collect(num_tasks=2)
    report = run_cli("report", str(run_dir), "--format", "json")
    assert report.returncode == 0, report.stderr
    assert '"num_tasks": 2' in report.stdout
    wait_for(lambda: hotpot_server.sessions() == 0, "collect's sessions are closed")
