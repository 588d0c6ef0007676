"""Episodic memory: the self-reflections one task has gathered over its failed trials."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reinagent.records import TrialRecord, Trajectory
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
    # the coder's own unit tests, written in the task's first trial and kept for every later one
    # (whatever the strategy; never part of the memory block): None until a trial has written them
    internal_tests: tuple[str, ...] | None = None
    # the trajectory `last_attempt` was rendered from (None when the strategy shows no previous
    # attempt): the coder's retry chat puts its program and test results in turns of their own
    previous: Trajectory | None = None

    def block(self) -> str:
        """The text to put in the actor's prompt, shaped by the strategy."""
        return memory_block(self.strategy, self.reflections, self.last_attempt)

    @property
    def shown_reflections(self) -> list[str]:
        return list(self.reflections) if self.strategy.uses_reflections else []


def memory_before(done: Mapping[tuple[str, int], TrialRecord], task_id: str, trial: int,
                  window: int) -> EpisodicMemory:
    """What trial `trial` of a task may remember: the reflections of its own trials 1..trial-1, in
    order, never one of a later trial (a resume that redoes a lost trial 1 must not show it what
    trial 2 learnt from it). An errored trial was never judged: nothing of it enters memory."""
    memory = EpisodicMemory(window=window)
    for k in range(1, trial):
        rec = done.get((task_id, k))
        if rec is not None and rec.error is None:
            memory.add(rec.reflection)
    return memory


def trial_view(trial: int, strategy: ReflexionStrategy, memory: EpisodicMemory, last_attempt: str | None,
               kept_tests: tuple[str, ...] | None = None, previous: Trajectory | None = None) -> MemoryView:
    """What trial `trial` of a task is shown: the memory's recent reflections and the previous
    attempt (rendered by the agent), as the strategy lets them through, and the internal tests an
    earlier trial wrote (programming). The trial loop (episode.py) and RL's reflect method
    (rl/reflect.py) build the next trial's prompt from it."""
    shown = strategy.uses_last_attempt and last_attempt is not None
    return MemoryView(trial, strategy, tuple(memory.recent()), last_attempt if shown else None,
                      kept_tests, previous if shown else None)
