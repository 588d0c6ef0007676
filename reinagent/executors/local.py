"""Episodes in this process, on the driver's event loop (the default)."""

from __future__ import annotations

from reinagent.benchmarks.base import Task
from reinagent.executors import Executor
from reinagent.memory import EpisodicMemory
from reinagent.records import TrialRecord


class LocalExecutor(Executor):
    async def start(self) -> None:
        await self.parts.warm_up_if(self.exp, [True])  # a local model loads on its own lines, before any bar

    async def episode(self, task: Task, trial: int, memory: EpisodicMemory,
                      previous: TrialRecord | None) -> TrialRecord:
        return await self.parts.run_episode(self.exp, task, trial, memory, previous)
