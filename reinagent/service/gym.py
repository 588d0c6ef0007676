"""Every benchmark's environments as Gymnasium environments, with `gymnasium.spaces.Text` spaces.

    import gymnasium, reinagent.service.gym               # the import registers the ids
    env = gymnasium.make("reinagent/hotpotqa-v1")          # or alfworld-v1, humaneval-v1, mbpp-v1
    env = gymnasium.make("reinagent/remote-v1", url="http://127.0.0.1:8000")
    # without the import: gymnasium.make("reinagent.service.gym:reinagent/hotpotqa-v1")

`reset(seed=...)` picks the episode's task from the split with the env's seeded generator (or
takes `task_id` from the constructor or from `options`), so a seed fixes the task and Gymnasium's
determinism checks hold. `info["task_id"]` says which task an episode plays. The reward and
`info["success"]` are the benchmark's verdict (`Benchmark.make_judged_env`: the hidden tests for
programming). Each spec's `max_episode_steps` is the env's step budget (STEP_BUDGETS).

Gymnasium's async vector env keeps observations in shared memory, which a Text space cannot use
(Gymnasium fails on it): pass `vector_kwargs={"shared_memory": False}`, or use `make_vec` below.
"""

from __future__ import annotations

from typing import Any

import gymnasium
from gymnasium import spaces

from reinagent.env import Env

# Every character of Unicode's basic plane but the surrogates: benchmark text has no-break and
# thin spaces, accents, CJK; a Text space of letters and digits would reject real observations.
TEXT_CHARSET = frozenset(chr(i) for i in range(0x10000) if not 0xD800 <= i <= 0xDFFF)
MAX_OBSERVATION_CHARS = 1 << 16
MAX_ACTION_CHARS = 1 << 12
_SPACES: tuple[spaces.Text, spaces.Text] | None = None
# Each benchmark's step budget in Gymnasium (the env's own, and the spec's max_episode_steps, so
# TimeLimit and TimeAwareObservation work). Single-answer math gets 3 turns, not a run's 1: a reply
# without a number is an observation, and an env that truncates on its first step is broken in
# Gymnasium's eyes. A benchmark missing here keeps its own default and an open-ended spec.
STEP_BUDGETS = {"hotpotqa": 6, "alfworld": 50, "humaneval": 1, "mbpp": 1, "gsm8k": 3, "arithmetic": 3,
                "arithmetic20": 3}


def text_spaces() -> tuple[spaces.Text, spaces.Text]:
    """(observation_space, action_space); built once, the charset is large."""
    global _SPACES
    if _SPACES is None:
        _SPACES = (spaces.Text(MAX_OBSERVATION_CHARS, min_length=0, charset=TEXT_CHARSET),
                   spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=TEXT_CHARSET))
    return _SPACES


class _TextEnv(gymnasium.Env):
    """What both kinds share: spaces, task choice by seed, ansi rendering of the last observation."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # text: fps only quiets the checker

    def __init__(self, task_id: str | None, render_mode: str | None):
        self.observation_space, self.action_space = text_spaces()
        self.task_id, self.render_mode = task_id, render_mode
        self._env: Env | None = None
        self._last = ""

    def _task_ids(self) -> list[str]:
        raise NotImplementedError

    def _make(self, task_id: str) -> Env:
        raise NotImplementedError

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._close_episode()
        task_id = (options or {}).get("task_id") or self.task_id
        if task_id is None:
            ids = self._task_ids()
            task_id = ids[int(self.np_random.integers(len(ids)))]
        self._env = self._make(task_id)
        obs, info = self._env.reset(seed=seed)
        self._last = obs
        return obs, {**info, "task_id": task_id}

    def step(self, action: str):
        if self._env is None:
            raise RuntimeError("step() before reset()")
        obs, reward, terminated, truncated, info = self._env.step(action)
        self._last = obs
        return obs, float(reward), bool(terminated), bool(truncated), info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None

    def _close_episode(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            env.close()


class BenchmarkEnv(_TextEnv):
    """An in-process environment of a registered benchmark (one per episode, like a run's)."""

    def __init__(self, benchmark: str, *, split: str | None = None, task_id: str | None = None,
                 agent: str | None = None, max_steps: int | None = None, render_mode: str | None = None):
        from reinagent.config import RunConfig
        from reinagent.service.sessions import env_agent, load_benchmark

        super().__init__(task_id, render_mode)
        self.bench = load_benchmark(benchmark)
        self.config = RunConfig(benchmark=self.bench.name, agent=agent or env_agent(self.bench),
                                split=split or self.bench.default_split,
                                max_steps=max_steps or STEP_BUDGETS.get(self.bench.name), max_concurrency=1)
        self.bench.check_config(self.config)
        self._tasks = {t.task_id: t for t in self.bench.load_tasks(self.config.split)}

    def _task_ids(self) -> list[str]:
        return list(self._tasks)

    def _make(self, task_id: str) -> Env:
        if task_id not in self._tasks:
            raise ValueError(f"unknown task {task_id!r} in split {self.config.split!r}")
        return self.bench.make_judged_env(self._tasks[task_id], self.config)

    def close(self) -> None:
        self._close_episode()
        self.bench.close()


class RemoteEnv(_TextEnv):
    """An environment on any server of docs/env-protocol.md, through the HTTP client."""

    def __init__(self, url: str, *, task_id: str | None = None, token: str | None = None,
                 render_mode: str | None = None):
        from reinagent.service.client import EnvClient

        super().__init__(task_id, render_mode)
        self.client = EnvClient(url, token=token)
        self._ids: list[str] | None = None

    def _task_ids(self) -> list[str]:
        if self._ids is None:
            self._ids = [str(t) for t in self.client.request("GET", "/tasks")["tasks"]]
        return self._ids

    def _make(self, task_id: str) -> Env:
        from reinagent.service.client import HttpEnv

        return HttpEnv(self.client, task_id)

    def close(self) -> None:
        self._close_episode()
        self.client.close()


def register_envs() -> None:
    from reinagent.benchmarks import REGISTRY

    for name in REGISTRY:
        env_id = f"reinagent/{name}-v1"
        if name == "remote" or env_id in gymnasium.registry:
            continue
        gymnasium.register(env_id, entry_point="reinagent.service.gym:BenchmarkEnv", kwargs={"benchmark": name},
                           max_episode_steps=STEP_BUDGETS.get(name))
    if "reinagent/remote-v1" not in gymnasium.registry:
        gymnasium.register("reinagent/remote-v1", entry_point="reinagent.service.gym:RemoteEnv")


def make_vec(env_id: str, num_envs: int = 1, vectorization_mode: str = "async", **kwargs):
    """`gymnasium.make_vec` with `shared_memory=False` in async mode (Text spaces need it)."""
    vector_kwargs = dict(kwargs.pop("vector_kwargs", None) or {})
    if vectorization_mode == "async":
        vector_kwargs.setdefault("shared_memory", False)
    return gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode=vectorization_mode,
                              vector_kwargs=vector_kwargs, **kwargs)


register_envs()
