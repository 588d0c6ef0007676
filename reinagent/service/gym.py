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

from reinagent.env import Env, EpisodeEnded

MAX_OBSERVATION_CHARS = 1 << 16
MAX_ACTION_CHARS = 1 << 12
_SPACES: tuple[UnicodeText, UnicodeText] | None = None
# Each benchmark's step budget in Gymnasium (the env's own, and the spec's max_episode_steps, so
# TimeLimit and TimeAwareObservation work). Single-answer math gets 3 turns, not a run's 1: a reply
# without a number is an observation, and an env that truncates on its first step is broken in
# Gymnasium's eyes. A benchmark missing here keeps its own default and an open-ended spec.
STEP_BUDGETS = {"hotpotqa": 6, "alfworld": 50, "gsm8k": 3, "arithmetic": 3, "arithmetic20": 3}
# Benchmarks whose episode is one action by construction (one implementation, judged): it always
# terminates on its first step, so no time limit applies. A spec with max_episode_steps=1 would
# also truncate that step (TimeLimit), which Gymnasium's checker rightly calls broken.
ONE_STEP = ("humaneval", "mbpp")


class UnicodeText(spaces.Text):
    """A Text space of every Unicode code point: an observation carries whatever text a benchmark or
    a program prints (accents, CJK, emoji past the basic plane, a lone surrogate from bytes decoded
    with surrogateescape). `contains` needs no table; the 1.1 million-character set Gymnasium's
    masks and flattening index is built only when one of them asks for it. `sample()` draws code
    points outside the surrogate range, so a sampled action is always encodable text."""

    UNICODE = 0x110000

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | None = None):
        super().__init__(max_length, min_length=min_length, charset="a", seed=seed)
        self._full: tuple[frozenset[str], tuple[str, ...], dict[str, Any], str] | None = None

    def _table(self) -> tuple[frozenset[str], tuple[str, ...], dict[str, Any], str]:
        if self._full is None:
            import numpy as np

            chars = tuple(chr(i) for i in range(self.UNICODE))
            self._full = (frozenset(chars), chars, {c: np.int32(i) for i, c in enumerate(chars)}, "".join(chars))
        return self._full

    @property
    def character_set(self) -> frozenset[str]:
        return self._table()[0]

    @property
    def character_list(self) -> tuple[str, ...]:
        return self._table()[1]

    def character_index(self, char: str):
        return self._table()[2][char]

    @property
    def characters(self) -> str:
        return self._table()[3]

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask=None, probability=None) -> str:
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        length = int(self.np_random.integers(self.min_length, self.max_length + 1))
        gap = 0xE000 - 0xD800  # the surrogates, skipped
        points = self.np_random.integers(0, self.UNICODE - gap, size=length)
        return "".join(chr(p + gap if p >= 0xD800 else p) for p in points.tolist())

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object, /) -> bool:
        return (isinstance(other, UnicodeText) and self.min_length == other.min_length
                and self.max_length == other.max_length)

    def __hash__(self) -> int:
        return hash((UnicodeText, self.min_length, self.max_length))


def text_spaces() -> tuple[UnicodeText, UnicodeText]:
    """(observation_space, action_space), shared by every env here."""
    global _SPACES
    if _SPACES is None:
        _SPACES = (UnicodeText(MAX_OBSERVATION_CHARS), UnicodeText(MAX_ACTION_CHARS))
    return _SPACES


class _TextEnv(gymnasium.Env):
    """What both kinds share: spaces, task choice by seed, ansi rendering of the last observation."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # text: fps only quiets the checker

    def __init__(self, task_id: str | None, render_mode: str | None):
        self.observation_space, self.action_space = text_spaces()
        self.task_id, self.render_mode = task_id, render_mode
        self._env: Env | None = None
        self._last = ""
        self._ended: str | None = None  # how the episode ended; a step after it raises EpisodeEnded

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
        self._last, self._ended = obs, None
        return obs, {**info, "task_id": task_id}

    def step(self, action: str):
        if self._env is None:
            raise RuntimeError("step() before reset()")
        if self._ended is not None:  # also for a server that would play it: a step after the end scores nothing
            raise EpisodeEnded(self._ended)
        obs, reward, terminated, truncated, info = self._env.step(action)
        self._last = obs
        self._ended = "terminated" if terminated else "truncated" if truncated else None
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
        from reinagent.service.sessions import env_agent, load_benchmark
        from reinagent.settings import BenchmarkSettings

        super().__init__(task_id, render_mode)
        self.bench = load_benchmark(benchmark)
        self.config = BenchmarkSettings(benchmark=self.bench.name, agent=agent or env_agent(self.bench),
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
