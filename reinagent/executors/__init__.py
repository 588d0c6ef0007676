"""Where episodes run: `local` (this process, asyncio) or `ray` (Ray tasks on a cluster).

The schedule (reinagent/schedule.py) decides *when* a (task, trial) runs and stays the single
writer of the run's store; an executor only turns (task, trial, memory, previous record) into a
TrialRecord. A rollout never knows which executor runs it.

    __init__.py the Executor interface; EpisodeParts and ExecutorSettings, what the run layer hands it
    local.py    episodes in this process (the run_episode it is handed, under asyncio)
    ray.py      one Ray task per (task, trial); check_ray's one-line errors before any work
    ray_model.py  the embedded model on Ray: one actor holding the engine, called by every episode
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from reinagent.errors import ConfigError, choices
from reinagent.memory import EpisodicMemory
from reinagent.records import TrialRecord
from reinagent.task import Task

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class EpisodeParts:
    """What the run layer hands an executor, so that executors never import the layer above them
    (plan.py, episode.py). Module-level functions: Ray ships them to its workers by name."""

    run_episode: Callable[..., Awaitable[TrialRecord]]  # (exp, task, trial, memory, previous)
    warm_up_if: Callable[[Any, list], Awaitable[None]]  # (exp, work): load local models if work exists
    # On a Ray worker: (config JSON, run key, log store, adapt_models or None) -> the experiment
    rebuild: Callable[..., Any]


@dataclass(frozen=True)
class ExecutorSettings:
    """The run settings an executor reads (the --flags of the same names), resolved by the layer
    above (plan.resolve): an executor never reads the run's config."""

    name: str = "local"  # --executor: local or ray
    ray_address: str | None = None  # --executor ray: a running cluster; None: start a local one
    models: tuple[str, ...] = ()  # the actor's and the reflector's model strings (ray: one actor per embedded one)
    base_url: str | None = None  # where the models are served (which of them are embedded)
    precision: str | None = None  # the embedded engine's, for its Ray actor
    deterministic: bool = False  # the embedded engine decodes one sequence at a time (its Ray actor too)
    local_engine: str = "openvino"  # which engine the Ray actor holds for a `local` model
    max_concurrency: int | None = None  # episodes in flight: sizes the actor's engine batch as the local one's
    run_settings: str = "{}"  # the run's settings as JSON (no keys): opaque here, handed to `rebuild` on a worker

    def engine(self) -> dict:
        """make_llm's keywords for an embedded model, as the local executor's model stack passes them."""
        return dict(precision=self.precision, deterministic=self.deterministic, local_engine=self.local_engine,
                    max_concurrency=self.max_concurrency)


class Executor(abc.ABC):
    """Runs episodes for one experiment. The driver appends the records it returns; an executor
    never writes to the run's store itself (one writer), and never raises for a failed episode:
    the failure is the record's `error`."""

    def __init__(self, exp, parts: EpisodeParts, settings: ExecutorSettings):
        self.exp = exp
        self.parts = parts
        self.settings = settings

    async def start(self) -> None:
        """Get ready before the first episode (load a local model, join a cluster)."""

    @abc.abstractmethod
    async def episode(self, task: Task, trial: int, memory: EpisodicMemory,
                      previous: TrialRecord | None) -> TrialRecord:
        """One (task, trial): act, evaluate, reflect on failure."""

    async def aclose(self) -> None:
        """Give back what `start` took."""


def check_executor(name: str, ray_address: str | None = None) -> None:
    """A one-line ConfigError for an executor that cannot run (before any run dir)."""
    if name == "ray":
        from reinagent.executors.ray import check_ray

        check_ray(ray_address)


def make_executor(exp, parts: EpisodeParts, settings: ExecutorSettings) -> Executor:
    """The executor `settings.name` names, handed the episode function and the experiment factory
    from above (`parts`)."""
    name = settings.name or "local"
    if name == "local":
        from reinagent.executors.local import LocalExecutor

        return LocalExecutor(exp, parts, settings)
    if name == "ray":
        from reinagent.executors.ray import RayExecutor

        return RayExecutor(exp, parts, settings)
    raise ConfigError(f"unknown executor {name!r}; valid: {choices(EXECUTORS)}")


__all__ = ["EXECUTORS", "EpisodeParts", "Executor", "ExecutorSettings", "check_executor", "make_executor"]
