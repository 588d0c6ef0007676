"""Episodic memory: the self-reflections one task has gathered over its failed trials."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from reinagent.records import TrialRecord
from reinagent.strategy import ReflexionStrategy, memory_block

DEFAULT_WINDOW = 3


@dataclass
class EpisodicMemory:
    """Reflections of one task in trial order; the actor sees only the most recent `window`
    (None: every one, as the reference's HotpotQA REFLEXION shows them)."""

    window: int | None = DEFAULT_WINDOW
    reflections: list[str] = field(default_factory=list)

    def add(self, reflection: str | None) -> None:
        if reflection and reflection.strip():
            self.reflections.append(reflection.strip())

    def recent(self) -> list[str]:
        return self.last(self.window)

    def last(self, n: int | None) -> list[str]:
        """The `n` most recent reflections (None: all of them)."""
        if n is None:
            return list(self.reflections)
        return self.reflections[-n:] if n > 0 else []


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


def rebuild_memory(records: Iterable[TrialRecord], window: int | None) -> dict[str, EpisodicMemory]:
    """Memory per task from the run's records, as a resumed run needs it."""
    memories: dict[str, EpisodicMemory] = {}
    for rec in sorted(records, key=lambda r: r.trial):
        memories.setdefault(rec.task_id, EpisodicMemory(window=window)).add(rec.reflection)
    return memories
