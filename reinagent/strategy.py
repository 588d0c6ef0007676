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


# Rollouts whose retries decode at the run's --temperature (tot and mcts sample their steps at
# --search-temperature; a registered rollout of one's own may do anything: not judged here).
GREEDY_ROLLOUTS = ("react", "multi-turn")


def repeated_retries(strategy: ReflexionStrategy | str | None, temperature: float | None, rollout: str | None,
                     num_trials: int | None) -> str | None:
    """Why the run's retries repeat its first attempts, or None: NONE carries nothing over, so a
    retry's prompt is trial 1's, and a greedy decode (temperature 0) of the same prompt gives the
    same reply (the response cache even answers it without asking the model). A newcomer's NONE
    run at the default temperature answered 24 of 24 retry calls from the cache, and its "NONE
    solved nothing more" measured nothing (issue 54). Said on stderr at start and in the report."""
    if str(getattr(strategy, "value", strategy)) != ReflexionStrategy.NONE.value or (num_trials or 0) < 2:
        return None
    if (rollout or "react") not in GREEDY_ROLLOUTS or (temperature or 0.0) > 0:
        return None
    return ("strategy none retries at temperature 0: a retry's prompt is trial 1's (none carries nothing "
            "over) and a greedy decode of the same prompt repeats its reply, so later trials solve "
            "nothing trial 1 did not; to measure retrying, sample the retries: --temperature 0.7 "
            "--first-trial-temperature 0")
