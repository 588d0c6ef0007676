"""Reflexion strategies: what a new trial's prompt carries over from the task's earlier trials."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum


class ReflexionStrategy(str, Enum):
    """The paper's four settings.

    NONE                        nothing from earlier trials (a plain retry)
    LAST_ATTEMPT                the previous trial's trace
    REFLEXION                   the task's self-reflections (episodic memory, most recent N)
    LAST_ATTEMPT_AND_REFLEXION  both
    """

    NONE = "none"
    LAST_ATTEMPT = "last_attempt"
    REFLEXION = "reflexion"
    LAST_ATTEMPT_AND_REFLEXION = "last_attempt_and_reflexion"

    @property
    def uses_reflections(self) -> bool:
        return self in (ReflexionStrategy.REFLEXION, ReflexionStrategy.LAST_ATTEMPT_AND_REFLEXION)

    @property
    def uses_last_attempt(self) -> bool:
        return self in (ReflexionStrategy.LAST_ATTEMPT, ReflexionStrategy.LAST_ATTEMPT_AND_REFLEXION)


LAST_ATTEMPT_HEADER = (
    "You have tried this task before and did not succeed. "
    "Here is your previous attempt, so you can see what went wrong:"
)
REFLECTIONS_HEADER = (
    "You have tried this task before and did not succeed. "
    "Below are the lessons you wrote down after failing. "
    "Follow them so that you do not fail the same way again:"
)


def memory_block(
    strategy: ReflexionStrategy,
    reflections: Sequence[str],
    last_attempt: str | None,
) -> str:
    """The text a strategy adds to the actor's prompt ('' when it adds nothing).

    The caller passes the windowed reflections and the rendered previous attempt; this function
    alone decides which of them the strategy lets through, so every agent shapes memory alike.
    """
    parts: list[str] = []
    if strategy.uses_last_attempt and last_attempt:
        parts.append(f"{LAST_ATTEMPT_HEADER}\n{last_attempt.strip()}\n(END OF PREVIOUS ATTEMPT)")
    if strategy.uses_reflections and reflections:
        lessons = "\n".join(f"- {r.strip()}" for r in reflections)
        parts.append(f"{REFLECTIONS_HEADER}\n{lessons}")
    return "\n\n".join(parts)
