"""The Rollout interface: one episode of one task, as a strategy runs it, and the lazy registry
(its names live in reinagent/names.py, below config.py, which checks them). What a rollout reads
of the run's settings is `RolloutSettings` (reinagent/settings.py), filled by the plan; the
benchmark's own settings travel in the Episode only to be handed to it (`make_env`, `evaluate`)."""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from reinagent.errors import ConfigError
from reinagent.records import Evaluation
from reinagent.names import ROLLOUT_CLASSES, ROLLOUTS, check_rollout, register_rollout, rollout_names  # noqa: F401 - re-exported
from reinagent.settings import BenchmarkSettings, RolloutSettings  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from reinagent.agents.base import Actor, Agent
    from reinagent.benchmarks.base import Benchmark, Task
    from reinagent.env import Env
    from reinagent.memory import MemoryView
    from reinagent.records import Trajectory
    from reinagent.reflector import Reflector

_REGISTRY = ROLLOUT_CLASSES  # the registry itself lives below config (reinagent/names.py)


@dataclass
class Episode:
    """One (task, trial) as a rollout sees it. `actor.rollout_id` is the episode's id
    (f"{task}/trial{k}"); search rollouts derive every sampled call's id from it."""

    benchmark: Benchmark
    agent: Agent
    task: Task
    memory: MemoryView
    actor: Actor
    task_settings: BenchmarkSettings  # handed to the benchmark (make_env, evaluate); rollouts read `settings`
    settings: RolloutSettings
    reflector: Reflector | None = None  # search rollouts reflect on failed branches (None: the actor's model)
    benchmark_evaluations: int = 0  # how often the benchmark's judge ran in this (task, trial)
    # Reflexion's Evaluator (`--evaluator`): "internal" (the agent's own tests decide; the benchmark
    # judges only a program the loop stops with), "hidden", or None (the benchmark's verdict only)
    evaluator: str | None = None
    last_trial: bool = True  # no trial follows this one: the loop stops with it whatever the verdict

    @property
    def rollout_id(self) -> str:
        return self.actor.rollout_id

    def make_env(self) -> Env:
        """A fresh environment for this task (branches that cannot snapshot replay into one)."""
        return self.benchmark.make_env(self.task, self.task_settings)

    async def evaluate(self, trajectory: Trajectory) -> Evaluation:
        """The benchmark's verdict (hidden tests, gold answer, the game's win), counted: a search
        that asks it for many paths is an oracle pass@k, which its record must say.

        Under `--evaluator internal` the agent's own tests decide first: an attempt that fails them
        while trials are left is not shown to the benchmark at all (no hidden verdict exists, so
        none can steer the loop); one that passes them, or the last trial's, is judged once, and
        that verdict is the task's score (the reference's programming_runs/reflexion.py)."""
        internal = self.benchmark.internal_passed(self.task, trajectory)
        if self.evaluator == "internal" and not internal and not self.last_trial:
            return Evaluation(success=False, reward=0.0, internal_passed=False,
                              detail={"evaluator": "internal", "hidden": "not run: the program failed its own "
                                      "tests and the loop goes on"})
        self.benchmark_evaluations += 1
        evaluation = await self.benchmark.evaluate(self.task, trajectory, self.task_settings)
        if internal is None:
            return evaluation
        detail = {**evaluation.detail, **({"evaluator": self.evaluator} if self.evaluator else {})}
        return evaluation.model_copy(update={"internal_passed": internal, "detail": detail})


class Rollout(abc.ABC):
    """A strategy for one episode. Returns the trajectory the trial keeps (the chosen path in
    steps/messages, the whole search tree in `tree`) and the benchmark's evaluation of it."""

    name: ClassVar[str]

    def __init__(self, settings: RolloutSettings):
        self.settings = settings

    @abc.abstractmethod
    async def run(self, episode: Episode) -> tuple[Trajectory, Evaluation]: ...


def make_rollout(name: str, settings: RolloutSettings) -> Rollout:
    """The rollout called `name`, its module imported now (a ConfigError names the valid ones)."""
    module_name, cls_name = _REGISTRY[check_rollout(name)]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name:
            raise
        raise ConfigError(f"rollout {name!r} is not available in this installation ({module_name} missing)") from None
    return getattr(module, cls_name)(settings)
