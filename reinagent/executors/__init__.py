"""Where episodes run: `local` (this process, asyncio) or `ray` (Ray tasks on a cluster).

The schedule (reinagent/schedule.py) decides *when* a (task, trial) runs and stays the single
writer of the run's store; an executor only turns (task, trial, memory, previous record) into a
TrialRecord. A rollout never knows which executor runs it.

    base.py     the Executor interface; EpisodeParts and ExecutorSettings, what the run layer hands it
    local.py    episodes in this process (the run_episode it is handed, under asyncio)
    ray.py      one Ray task per (task, trial); check_ray's one-line errors before any work
    ray_model.py  the embedded model on Ray: one actor holding the engine, called by every episode
"""

from __future__ import annotations

from reinagent.errors import ConfigError, choices
from reinagent.executors.base import EpisodeParts, Executor, ExecutorSettings

EXECUTORS = ("local", "ray")


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
