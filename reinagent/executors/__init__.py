"""Where episodes run: `local` (this process, asyncio) or `ray` (Ray tasks on a cluster).

The schedule (reinagent/schedule.py) decides *when* a (task, trial) runs and stays the single
writer of the run's store; an executor only turns (task, trial, memory, previous record) into a
TrialRecord. A rollout never knows which executor runs it.

    base.py     the Executor interface
    local.py    episodes in this process (reinagent/episode.py's run_episode under asyncio)
    ray.py      one Ray task per (task, trial); check_ray's one-line errors before any work
    ray_model.py  the embedded model on Ray: one actor holding the engine, called by every episode
"""

from __future__ import annotations

from reinagent.errors import ConfigError, choices
from reinagent.executors.base import Executor

EXECUTORS = ("local", "ray")


def check_executor(config) -> None:
    """A one-line ConfigError for an executor that cannot run this config (before any run dir)."""
    if getattr(config, "executor", "local") == "ray":
        from reinagent.executors.ray import check_ray

        check_ray(config)


def make_executor(exp) -> Executor:
    name = getattr(exp.config, "executor", "local") or "local"
    if name == "local":
        from reinagent.executors.local import LocalExecutor

        return LocalExecutor(exp)
    if name == "ray":
        from reinagent.executors.ray import RayExecutor

        return RayExecutor(exp)
    raise ConfigError(f"unknown executor {name!r}; valid: {choices(EXECUTORS)}")


__all__ = ["EXECUTORS", "Executor", "check_executor", "make_executor"]
