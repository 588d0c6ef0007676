"""Gymnasium, all of it (issue 27, 5): `check_env` over every registered `reinagent/*` id (the list
comes from the registry, so a new id cannot be missed), step budgets on the specs, and async vector
envs (ALFWorld's spawner thread survives no fork)."""

from __future__ import annotations

import gymnasium
import pytest

from reinagent.env import EpisodeEnded
from reinagent.service.gym import ONE_STEP, STEP_BUDGETS, make_vec
from tests.test_alfworld import HAVE_ALFWORLD
from tests.test_env_service import Server
from tests.test_gym import _check

IDS = sorted(i for i in gymnasium.registry if i.startswith("reinagent/"))


def test_the_registry_holds_every_benchmark():
    from reinagent.benchmarks import REGISTRY

    assert IDS == sorted(f"reinagent/{name}-v1" for name in REGISTRY)


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_passes_for_every_registered_id(env_id):
    if env_id == "reinagent/alfworld-v1" and not HAVE_ALFWORLD:
        pytest.skip("alfworld is not installed: pip install -e .[alfworld]")
    if env_id == "reinagent/remote-v1":  # an env server to talk to: our own, on loopback
        server = Server("--benchmark", "hotpotqa")
        try:
            _check(env_id, url=server.url)
        finally:
            assert server.stop() == 0
        return
    _check(env_id)


@pytest.mark.parametrize("env_id", [i for i in IDS if i != "reinagent/remote-v1"])
def test_specs_carry_the_step_budget(env_id):
    name = env_id.split("/")[1].rsplit("-v", 1)[0]
    # one-implementation episodes end by themselves on step 1: a limit of 1 would also truncate it
    assert gymnasium.spec(env_id).max_episode_steps == (None if name in ONE_STEP else STEP_BUDGETS[name])


@pytest.mark.parametrize("env_id", ["reinagent/humaneval-v1", "reinagent/mbpp-v1"])
def test_a_canonical_solution_terminates_without_truncation(env_id):
    env = gymnasium.make(env_id, task_id="HumanEval/0" if "humaneval" in env_id else "Mbpp/602")
    try:
        task = env.unwrapped._tasks[env.unwrapped.task_id]
        program = task.header + task.canonical  # HumanEval's canonical solution is the body only
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(program)
        assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True), obs
        with pytest.raises(EpisodeEnded):  # the episode is over: a second program is not judged
            env.step(program)
        env.reset(seed=0)  # a reset starts the next one
        assert env.step(program)[1] == 1.0
    finally:
        env.close()


def test_observation_space_admits_every_character():
    env = gymnasium.make("reinagent/hotpotqa-v1")
    try:
        for text in ("emoji 😀 past the basic plane", "a lone surrogate \udc80", "".join(map(chr, range(0x1000)))):
            assert env.observation_space.contains(text) and env.action_space.contains(text)
        assert not env.observation_space.contains("x" * (env.observation_space.max_length + 1))
        assert not env.observation_space.contains(b"bytes")
        env.action_space.seed(3)
        sample = env.action_space.sample()
        assert env.action_space.contains(sample) and sample.encode("utf-8")  # no surrogates drawn
    finally:
        env.close()


def test_a_program_printing_emoji_is_an_observation_of_the_space():
    env = gymnasium.make("reinagent/humaneval-v1", task_id="HumanEval/0")
    try:
        env.reset(seed=0)
        env.unwrapped._env.set_internal_tests(["assert has_close_elements([], 1.0) == '😀'"])
        obs, *_ = env.step("def has_close_elements(numbers, threshold):\n    return '😀'")
        assert "😀" in obs and env.observation_space.contains(obs), obs
    finally:
        env.close()


def test_time_aware_observation_and_truncation_by_the_spec():
    env = gymnasium.make("reinagent/gsm8k-v1", task_id="test/0")
    try:
        env.reset(seed=0)
        results = [env.step("no number here") for _ in range(3)]
        assert [r[3] for r in results] == [False, False, True]  # the budget, 3, truncates
        assert env.spec.max_episode_steps == 3
    finally:
        env.close()
    # TimeAwareObservation reads the budget from the spec (it refuses an env without one)
    wrapped = gymnasium.wrappers.TimeAwareObservation(gymnasium.make("reinagent/arithmetic-v1"), flatten=False)
    try:
        obs, _ = wrapped.reset(seed=0)
        assert obs["obs"].startswith("Question: What is") and obs["time"] == 0
        obs, *_ = wrapped.step("no number")
        assert obs["time"] == 1
    finally:
        wrapped.close()


def test_async_vector_env_of_text_envs():
    envs = make_vec("reinagent/gsm8k-v1", num_envs=2)
    try:
        obs, info = envs.reset(seed=[0, 1])
        assert len(obs) == 2 and all(o.startswith("Question: ") for o in obs)
        _, rewards, terminated, _, _ = envs.step(["Finish[0]", "Finish[0]"])
        assert list(terminated) == [True, True] and all(r in (0.0, 1.0) for r in rewards)
    finally:
        envs.close()


@pytest.mark.alfworld
@pytest.mark.skipif(not HAVE_ALFWORLD, reason="alfworld is not installed: pip install -e .[alfworld]")
@pytest.mark.timeout(600)
def test_alfworld_async_vector_env_after_in_process_use():
    # The parent plays a game first (its spawner thread starts), then forks the vector env's
    # workers: before register_at_fork they waited forever on the dead thread's executor.
    env = gymnasium.make("reinagent/alfworld-v1")
    try:
        obs, _ = env.reset(seed=0)
        assert "You are in the middle of a room" in obs
    finally:
        env.close()
    envs = make_vec("reinagent/alfworld-v1", num_envs=2)
    try:
        obs, _ = envs.reset(seed=[0, 1])
        assert all("You are in the middle of a room" in o for o in obs)
        _, _, terminated, truncated, _ = envs.step(["look", "look"])
        assert not any(terminated) and not any(truncated)
    finally:
        envs.close()


def test_alfworld_spawner_is_forgotten_in_a_forked_child():
    # the unit behind the async test above, without games: a child must not inherit the parent's
    # spawner (its thread did not survive the fork), and must be able to start its own
    import os
    from concurrent.futures import ThreadPoolExecutor

    from reinagent.benchmarks import alfworld_env

    parent = ThreadPoolExecutor(1)
    parent.submit(lambda: None).result()  # its thread is running now
    alfworld_env._SPAWNER = parent
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if the spawner was forgotten and the lock is free
            ok = alfworld_env._SPAWNER is None and alfworld_env._SPAWNER_LOCK.acquire(timeout=5)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert alfworld_env._SPAWNER is parent  # the parent keeps its own
    finally:
        alfworld_env._SPAWNER = None
        parent.shutdown()
