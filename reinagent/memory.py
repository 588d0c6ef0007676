"""Episodic memory: the self-reflections one task has gathered over its failed trials."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from reinagent.records import TrialRecord
from reinagent.strategy import ReflexionStrategy, memory_block

DEFAULT_WINDOW = 3


@dataclass
class EpisodicMemory:
    """Reflections of one task in trial order; the actor sees only the most recent `window`."""

    window: int = DEFAULT_WINDOW
    reflections: list[str] = field(default_factory=list)

    def add(self, reflection: str | None) -> None:
        if reflection and reflection.strip():
            self.reflections.append(reflection.strip())

    def recent(self) -> list[str]:
        if self.window <= 0:
            return []
        return self.reflections[-self.window :]


@dataclass(frozen=True)
class MemoryView:
    """What one new trial of a task may know about its earlier trials."""

    trial: int
    strategy: ReflexionStrategy
    reflections: tuple[str, ...] = ()
    last_attempt: str | None = None

    def block(self) -> str:
        """The text to put in the actor's prompt, shaped by the strategy."""
        return memory_block(self.strategy, self.reflections, self.last_attempt)

    @property
    def shown_reflections(self) -> list[str]:
        return list(self.reflections) if self.strategy.uses_reflections else []


def trial_view(trial: int, strategy: ReflexionStrategy, memory: EpisodicMemory, last_attempt: str | None) -> MemoryView:
    """What trial `trial` of a task is shown: the memory's recent reflections and the previous
    attempt (rendered by the agent), as the strategy lets them through. The trial loop
    (episode.py) and RL's reflect method (rl/reflect.py) build the next trial's prompt from it."""
    return MemoryView(trial, strategy, tuple(memory.recent()), last_attempt if strategy.uses_last_attempt else None)


def rebuild_memory(records: Iterable[TrialRecord], window: int) -> dict[str, EpisodicMemory]:
    """Memory per task from the run's records, as a resumed run needs it."""
    memories: dict[str, EpisodicMemory] = {}
    for rec in sorted(records, key=lambda r: r.trial):
        memories.setdefault(rec.task_id, EpisodicMemory(window=window)).add(rec.reflection)
    return memories
