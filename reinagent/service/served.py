"""`reinagent run --benchmark NAME --env-url URL`: the benchmark's environments on a server.

Tasks, agents and the evaluator stay local (so scoring, hidden tests and records are exactly the
in-process run's); only `make_env` changes, to an HttpEnv that asks the server for the same
environment (`agent`, `max_steps`, `timeout_s` go with /create).
"""

from __future__ import annotations

from typing import Any

from reinagent.benchmarks.base import Benchmark, Task
from reinagent.env import Env
from reinagent.errors import ConfigError
from reinagent.records import Evaluation, Trajectory
from reinagent.service.client import EnvClient, EnvServiceError, HttpEnv


def env_options(settings) -> dict[str, Any]:
    return {"agent": settings.agent, "max_steps": settings.max_steps, "timeout_s": settings.timeout_s}


def server_facts(client: EnvClient) -> dict[str, Any]:
    """/health of the server, or a ConfigError that says why it cannot be used."""
    try:
        health = client.request("GET", "/health", retry=False)  # at start-up: fail at once, clearly
    except EnvServiceError as err:
        raise ConfigError(f"cannot use env server {client.url}: {err}") from None
    if health.get("status") != "ok" or not isinstance(health.get("benchmark"), str):
        raise ConfigError(f"env server {client.url} answered /health without status ok and a benchmark: {health}")
    return health


class ServedBenchmark(Benchmark):
    """Delegates everything to the local benchmark except where its environments live."""

    def __init__(self, inner: Benchmark, env_url: str):
        self.inner = inner
        self.client = EnvClient(env_url)
        for attr in ("name", "version", "description", "agents", "default_agent", "splits", "default_split",
                     "reflection_examples", "reflection_examples_by_agent", "default_evaluator"):
            setattr(self, attr, getattr(inner, attr))
        self._health: dict[str, Any] | None = None

    def check_config(self, settings) -> None:
        self.inner.check_config(settings)
        self._health = server_facts(self.client)
        if self._health["benchmark"] != self.inner.name:
            raise ConfigError(f"env server {self.client.url} serves {self._health['benchmark']!r}, "
                              f"not {self.inner.name!r}; start it with --benchmark {self.inner.name}")

    def load_tasks(self, split: str) -> list[Task]:
        tasks = self.inner.load_tasks(split)
        try:
            served = set(self.client.request("GET", "/tasks")["tasks"])
        except (EnvServiceError, KeyError, TypeError) as err:
            raise ConfigError(f"cannot list the tasks of env server {self.client.url}: {err}") from None
        missing = [t.task_id for t in tasks if t.task_id not in served]
        if missing:
            raise ConfigError(f"env server {self.client.url} does not serve task {missing[0]!r} of split {split!r} "
                              f"({len(missing)} missing); start it with --split {split}")
        return tasks

    def make_env(self, task: Task, settings) -> Env:
        return HttpEnv(self.client, task.task_id, options=env_options(settings))

    def make_agent(self, name: str, settings):
        return self.inner.make_agent(name, settings)

    async def evaluate(self, task: Task, trajectory: Trajectory, settings) -> Evaluation:
        return await self.inner.evaluate(task, trajectory, settings)

    def internal_passed(self, task: Task, trajectory: Trajectory) -> bool | None:
        # the server's env returned the internal tests' result in `info`, as a local one does
        return self.inner.internal_passed(task, trajectory)

    def settings(self) -> dict[str, Any]:
        return {**self.inner.settings(), "env_url": self.client.url}

    async def aclose(self) -> None:
        await self.client.aclose()  # the runner awaits this on the run's loop, before close()

    def close(self) -> None:
        self.inner.close()
        self.client.close()


def served(bench: Benchmark, settings) -> Benchmark:
    """The benchmark with its environments on `settings.env_url` (unchanged when none is set)."""
    if getattr(settings, "env_protocol", "reinagent") != "reinagent" and bench.name != "remote":
        raise ConfigError(f"--env-protocol {settings.env_protocol} works with --benchmark remote only "
                          f"(--benchmark {bench.name} --env-url needs a `reinagent serve-env` server)")
    if not settings.env_url or bench.name == "remote":
        return bench
    return ServedBenchmark(bench, settings.env_url)  # checked with its tasks (Benchmark.checked_tasks)
