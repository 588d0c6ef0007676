"""Gymnasium interop: every benchmark's environment, and the HTTP client, pass Gymnasium's own
`check_env` (warnings are errors here) behind `gymnasium.make("reinagent/...")`."""

from __future__ import annotations

import warnings

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import reinagent.service.gym  # noqa: F401 - registers the ids
from tests.test_alfworld import needs_alfworld
from tests.test_env_service import Server


def _check(env_id: str, **kwargs) -> None:
    """Gymnasium's checker on the env as `gymnasium.make` hands it out (TimeLimit and the other
    wrappers of its spec included), and on the bare env. Every warning fails the test, but the one
    Gymnasium gives for any made env ("different from the unwrapped version")."""
    env = gymnasium.make(env_id, **kwargs)
    try:
        for checked in (env, env.unwrapped):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                warnings.filterwarnings("ignore", message=r".*is different from the unwrapped version")
                check_env(checked)
        assert isinstance(env.observation_space, gymnasium.spaces.Text)
        assert isinstance(env.action_space, gymnasium.spaces.Text)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ["reinagent/hotpotqa-v1", "reinagent/humaneval-v1", "reinagent/mbpp-v1"])
def test_check_env(env_id):
    _check(env_id)


@needs_alfworld
def test_check_env_alfworld():
    _check("reinagent/alfworld-v1")


def test_registered_ids_and_episode():
    ids = {i for i in gymnasium.registry if i.startswith("reinagent/")}
    assert {"reinagent/hotpotqa-v1", "reinagent/alfworld-v1", "reinagent/humaneval-v1", "reinagent/mbpp-v1",
            "reinagent/remote-v1"} <= ids
    env = gymnasium.make("reinagent/hotpotqa-v1", task_id="5a7613c15542994ccc9186bf", render_mode="ansi")
    obs, info = env.reset(seed=0)
    assert obs.startswith("Question: VIVA Media") and info["task_id"] == "5a7613c15542994ccc9186bf"
    obs, reward, terminated, truncated, _ = env.step("Search[VIVA Media]")
    assert "VIVA Media" in obs and env.render() == obs and not terminated
    env.close()
    # a seed fixes the task
    a, b = gymnasium.make("reinagent/hotpotqa-v1"), gymnasium.make("reinagent/hotpotqa-v1")
    assert a.reset(seed=7)[1]["task_id"] == b.reset(seed=7)[1]["task_id"]


def test_check_env_remote():
    server = Server("--benchmark", "hotpotqa")
    try:
        _check("reinagent/remote-v1", url=server.url)
        assert server.sessions() == 0  # close() closed the last episode's session
    finally:
        assert server.stop() == 0
