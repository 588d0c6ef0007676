"""What a benchmark provides: tasks, an environment per task, agents, an evaluator."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar

from reinagent.env import Env
from reinagent.records import Evaluation, Trajectory
from reinagent.task import Task  # re-exported: `reinagent.benchmarks.base.Task` stays a public path

if TYPE_CHECKING:
    from reinagent.agents.base import Agent
    from reinagent.settings import AgentSettings, BenchmarkSettings

__all__ = ["Benchmark", "Task"]


class Benchmark(abc.ABC):
    """A registered benchmark. Subclasses set the class attributes and implement the methods."""

    name: ClassVar[str]
    version: ClassVar[str] = "v1"  # the registry id is f"{name}-{version}"
    description: ClassVar[str] = ""
    agents: ClassVar[tuple[str, ...]]
    #: settings whose default differs for an agent from the framework's (RunConfig names), by
    #: agent: plan.resolve writes them into a run's config where nothing else set them
    agent_defaults: ClassVar[dict[str, dict[str, Any]]] = {}
    default_agent: ClassVar[str]
    splits: ClassVar[tuple[str, ...]]
    default_split: ClassVar[str]
    #: a worked example of a failed attempt and its reflection, for the Reflector's prompt
    reflection_examples: ClassVar[str] = ""
    #: the same per agent where the benchmark's agents fail in different shapes (HotpotQA: ReAct
    #: searches, CoT reads a context). A real model copies its examples almost word for word, so
    #: an example must look like the loop it is shown in, as the reference keeps one set per agent.
    reflection_examples_by_agent: ClassVar[dict[str, str]] = {}
    #: `--evaluator` when none is given: "internal" where the agent writes tests of its own
    #: (programming), None where the benchmark's verdict is the only evaluator (no choice)
    default_evaluator: ClassVar[str | None] = None
    #: the same for `--reflection-prompt plan` (ending "New plan: ..."); "" = reflection_examples
    plan_examples: ClassVar[str] = ""

    @property
    def env_id(self) -> str:
        return f"{self.name}-{self.version}"

    @abc.abstractmethod
    def load_tasks(self, split: str) -> list[Task]:
        """All tasks of a split, in file order."""

    @abc.abstractmethod
    def make_env(self, task: Task, settings: BenchmarkSettings) -> Env:
        """A fresh environment for one episode of `task`."""

    def make_judged_env(self, task: Task, settings: BenchmarkSettings) -> Env:
        """An environment whose reward and `info["success"]` are the benchmark's verdict, as
        `evaluate` gives it: what `serve-env` and Gymnasium hand out, where no evaluator runs after
        the episode. Most environments reward the verdict already; programming ones override."""
        return self.make_env(task, settings)

    @abc.abstractmethod
    def make_agent(self, name: str, settings: AgentSettings) -> Agent:
        """The agent called `name` (one of `agents`)."""

    @abc.abstractmethod
    async def evaluate(self, task: Task, trajectory: Trajectory, settings: BenchmarkSettings) -> Evaluation:
        """Decide success. Runs after the episode; may run hidden tests."""

    def internal_passed(self, task: Task, trajectory: Trajectory) -> bool | None:
        """Whether the attempt passed the agent's own (internal) tests, read from what the episode
        recorded (never the hidden tests); None for a benchmark without internal tests."""
        return None

    def check_config(self, settings: BenchmarkSettings) -> None:  # noqa: B027
        """Raise ConfigError for settings this benchmark cannot run (checked before any work)."""

    def checked_tasks(self, settings: BenchmarkSettings) -> list[Task]:
        """The split's tasks, once the settings are checked: what a run's plan asks a benchmark."""
        self.check_config(settings)
        return self.load_tasks(settings.split)

    def settings(self) -> dict[str, Any]:
        """Facts about the setting worth recording in the run spec (e.g. docstore kind)."""
        return {}

    def close(self) -> None:  # noqa: B027
        """Release shared resources (worker pools)."""
