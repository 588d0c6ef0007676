"""The executor interface: run one episode somewhere and hand its record back to the driver."""

from __future__ import annotations

import abc

from reinagent.benchmarks.base import Task
from reinagent.memory import EpisodicMemory
from reinagent.records import TrialRecord


class Executor(abc.ABC):
    """Runs episodes for one experiment. The driver appends the records it returns; an executor
    never writes to the run's store itself (one writer), and never raises for a failed episode:
    the failure is the record's `error`."""

    def __init__(self, exp):
        self.exp = exp

    async def start(self) -> None:
        """Get ready before the first episode (load a local model, join a cluster)."""

    @abc.abstractmethod
    async def episode(self, task: Task, trial: int, memory: EpisodicMemory,
                      previous: TrialRecord | None) -> TrialRecord:
        """One (task, trial): act, evaluate, reflect on failure."""

    async def aclose(self) -> None:
        """Give back what `start` took."""
