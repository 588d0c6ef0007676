"""The Rollout interface: one episode of one task, as a strategy runs it, and the lazy registry
(its names live in reinagent/names.py, below config.py, which checks them). What a rollout reads
of the run's settings is `RolloutSettings`, resolved by `experiment.rollout_settings`; the run's
config travels in the Episode only to be handed to the benchmark (`make_env`, `evaluate`)."""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from reinagent.errors import ConfigError
from reinagent.records import Evaluation
from reinagent.names import ROLLOUT_CLASSES, ROLLOUTS, check_rollout, register_rollout, rollout_names  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from reinagent.agents.base import Actor, Agent
    from reinagent.benchmarks.base import Benchmark, Task
    from reinagent.config import RunConfig
    from reinagent.env import Env
    from reinagent.memory import MemoryView
    from reinagent.records import Trajectory
    from reinagent.reflector import Reflector

_REGISTRY = ROLLOUT_CLASSES  # the registry itself lives below config (reinagent/names.py)


@dataclass(frozen=True)
class RolloutSettings:
    """The run settings rollouts read (the --flags of the same names, as RunConfig validated them)."""

    max_steps: int | None  # the agent's step budget (None: the agent's default)
    seed: int  # sampled value judgements derive their seeds from it
    tot_breadth: int  # tot: next steps sampled per kept path
    tot_keep: int  # tot: best paths kept per depth
    tot_depth: int | None  # tot/mcts: depth limit (None: the step budget)
    value_samples: int  # tot/mcts: LLM value judgements per node
    search_temperature: float  # tot/mcts: sampling temperature of searched steps
    search_judge: str  # tot/mcts: reward or value judges a terminal node inside the search
    search_reflections: int | None  # mcts: reflections one episode writes and shows (None: no bound)
    search_reflect_on: str  # mcts: "ended" (failed paths that ended) or "every_failure" (also failed open nodes)
    mcts_iterations: int | None  # mcts: iterations (None: the benchmark's own, else 10)
    mcts_children: int  # mcts: children sampled per expansion
    mcts_exploration: float  # mcts: the UCT exploration constant
    max_turns: int  # multi-turn: answers per episode
    turn_discount: float  # multi-turn: a right answer on turn t earns reward * d**(t-1)


@dataclass
class Episode:
    """One (task, trial) as a rollout sees it. `actor.rollout_id` is the episode's id
    (f"{task}/trial{k}"); search rollouts derive every sampled call's id from it."""

    benchmark: Benchmark
    agent: Agent
    task: Task
    memory: MemoryView
    actor: Actor
    config: RunConfig  # handed to the benchmark (make_env, evaluate); rollouts read `settings`
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
        return self.benchmark.make_env(self.task, self.config)

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
        evaluation = await self.benchmark.evaluate(self.task, trajectory, self.config)
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
